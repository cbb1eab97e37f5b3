/**
 * Test harness: the compiled `shellmcp exec-server`, an optional websocket proxy in front of it (to cut the
 * connection mid-command), and the real Codex 0.169 (`codex exec`) pointed at it with `CODEX_EXEC_SERVER_URL` and
 * the stand-in model of ./responses-mock.ts.
 */
import type { Server, ServerWebSocket, Subprocess } from "bun";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { CONF_BASE, RUN_TMP } from "../helpers/cleanup.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { referenceCodex } from "../helpers/reference.ts";
import { registerToken, tokenFor } from "./client.ts";
import { ResponsesMock, type ModelStep } from "./responses-mock.ts";

/** The Codex 0.169 linux build from the dev dependency, or undefined when it is not installed. */
export const CODEX: string | undefined = referenceCodex();

/** A started `shellmcp exec-server` (or the reference with `argv`). */
export interface StartedServer {
  url: string;
  /** The capability token shellmcp generated at start (default authentication), when it did. */
  token?: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  stop(): Promise<void>;
}

/**
 * `env` with a CODEX_HOME of its own (a new folder under CONF_BASE) when it names none and its HOME is the test
 * run's: the exec-server makes its CODEX_HOME at start (docs/exec-server.md), and a `~/.codex` made in the run's
 * HOME would be a leftover. Any other `env` as it is.
 */
export function withCodexHome(env: Record<string, string | undefined> = process.env): Record<string, string | undefined> {
  if (env.CODEX_HOME !== undefined || (env.HOME !== undefined && env.HOME !== homedir())) return env;
  return { ...env, CODEX_HOME: mkdtempSync(join(CONF_BASE, "exec-codex-home-")) };
}

/**
 * Start `argv` (default `dist/shellmcp exec-server`) and read its `ws://` line ({@link withCodexHome} applied to
 * `env`). A shellmcp websocket server started
 * without `--ws-auth` authenticates with a token it generates (issue 30): `--ws-token-out` is added, the token read
 * once the URL is printed and registered for the URL (./client.ts `registerToken`), so ExecClient and
 * {@link runCodex} (through `auth_bearer_token`) present it.
 */
export async function startServer(
  argv: string[] = [ensureBinary(), "exec-server"],
  env: Record<string, string | undefined> = process.env,
  cwd?: string,
): Promise<StartedServer> {
  const i = argv.indexOf("exec-server");
  const li = argv.indexOf("--listen");
  const generated =
    i > 0 &&
    argv[0] !== CODEX &&
    !argv.some((a) => a === "--ws-auth" || a === "--ws-token-out") &&
    !(li >= 0 && (argv[li + 1] === "stdio" || argv[li + 1] === "stdio://"));
  const tokenOut = generated ? join(mkdtempSync(join(RUN_TMP, "exec-token-")), "token") : undefined;
  if (tokenOut !== undefined) argv = [...argv, "--ws-token-out", tokenOut];
  if (i > 0 && argv[0] !== CODEX) env = withCodexHome(env);
  const proc = Bun.spawn(argv, { cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe", env: env as Record<string, string> });
  const reader = proc.stdout.getReader();
  let buf = "";
  const dec = new TextDecoder();
  while (!buf.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`exec-server exited before printing its URL: ${await new Response(proc.stderr).text()}`);
    buf += dec.decode(value);
  }
  reader.releaseLock();
  const url = buf.split("\n")[0]!.trim();
  const token = tokenOut === undefined ? undefined : readFileSync(tokenOut, "utf8").trim();
  if (token !== undefined) registerToken(url, token);
  return {
    url,
    token,
    proc,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      if (tokenOut !== undefined) rmSync(dirname(tokenOut), { recursive: true, force: true });
    },
  };
}

/** A websocket proxy; `cut()` drops every connection abruptly (both sides), new ones are accepted again. */
export class WsProxy {
  private readonly server: Server<{ upstream?: WebSocket; pending: (string | Buffer)[]; held?: boolean; authorization?: string }>;
  private readonly clients = new Set<
    ServerWebSocket<{ upstream?: WebSocket; pending: (string | Buffer)[]; held?: boolean; authorization?: string }>
  >();
  connections = 0;
  /** Every frame, with its direction and arrival time (ms, performance.now()). */
  readonly frames: { dir: "c2s" | "s2c"; at: number; msg: Record<string, unknown> }[] = [];
  private record(dir: "c2s" | "s2c", data: unknown): void {
    try {
      this.frames.push({
        dir,
        at: performance.now(),
        msg: JSON.parse(typeof data === "string" ? data : new TextDecoder().decode(data as Uint8Array)) as Record<string, unknown>,
      });
    } catch {
      // not JSON
    }
  }

  /**
   * A proxy in front of `upstreamUrl`. The client's `Authorization` header is passed upstream (Codex presents its
   * `auth_bearer_token` to the proxy); the upstream's registered token is registered for the proxy's URL too.
   */
  constructor(upstreamUrl: string) {
    this.server = Bun.serve<{ upstream?: WebSocket; pending: (string | Buffer)[]; held?: boolean; authorization?: string }>({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req, srv) =>
        srv.upgrade(req, { data: { pending: [], authorization: req.headers.get("authorization") ?? undefined } })
          ? undefined
          : new Response("no", { status: 400 }),
      websocket: {
        open: (ws) => {
          this.connections++;
          this.clients.add(ws);
          const auth = ws.data.authorization;
          const up = new WebSocket(
            upstreamUrl,
            auth === undefined ? undefined : ({ headers: { authorization: auth } } as unknown as string[]),
          );
          up.binaryType = "arraybuffer";
          ws.data.upstream = up;
          up.onopen = () => {
            for (const m of ws.data.pending.splice(0)) up.send(m);
          };
          up.onmessage = (ev) => {
            const data = typeof ev.data === "string" ? ev.data : new Uint8Array(ev.data as ArrayBuffer);
            this.record("s2c", data);
            ws.send(data);
          };
          up.onclose = () => ws.terminate();
        },
        message: (ws, msg) => {
          this.record("c2s", msg);
          const up = ws.data.upstream!;
          if (up.readyState === WebSocket.OPEN) up.send(msg);
          else ws.data.pending.push(msg);
        },
        close: (ws) => {
          this.clients.delete(ws);
          if (!ws.data.held) ws.data.upstream?.close();
        },
      },
    });
    const token = tokenFor(upstreamUrl);
    if (token !== undefined) registerToken(this.url, token);
  }

  get url(): string {
    return `ws://127.0.0.1:${this.server.port}`;
  }

  /**
   * Drop every live client connection without a close handshake. The upstream side is closed at once, or after
   * `holdUpstreamMs` (the server then still sees the old connection attached when the client resumes).
   */
  cut(holdUpstreamMs = 0): void {
    for (const c of this.clients) {
      const up = c.data.upstream;
      if (up !== undefined) {
        up.onclose = null;
        c.data.held = true;
        if (holdUpstreamMs > 0) setTimeout(() => up.close(), holdUpstreamMs);
        else up.close();
      }
      c.terminate();
    }
  }

  stop(): void {
    void this.server.stop(true);
  }
}

/** What a `codex exec` run gave. */
export interface CodexRun {
  proj: string;
  outside: string;
  mock: ResponsesMock;
  exitCode: number;
  stderr: string;
}

/** A fresh project (with AGENTS.md, a victim file and a git repo) and an outside folder, under the run's CONF_BASE. */
export function makeWorkspace(): { base: string; proj: string; outside: string; home: string } {
  const base = join(CONF_BASE, `exec-server-codex-${Math.random().toString(36).slice(2)}`);
  const proj = join(base, "proj");
  const outside = join(base, "outside");
  const home = join(base, "codex-home");
  for (const d of [proj, outside, home]) mkdirSync(d, { recursive: true });
  writeFileSync(join(proj, "AGENTS.md"), "Project rule: the secret word is PELICAN.\n");
  writeFileSync(join(proj, "victim.txt"), "delete me\n");
  Bun.spawnSync(["git", "init", "-q", proj]);
  return { base, proj, outside, home };
}

/**
 * Run one `codex exec` turn whose model plays `steps` (built from the workspace paths) against `serverUrl`.
 * `during` runs while Codex runs (e.g. to cut the connection).
 */
export async function runCodex(o: {
  serverUrl: string;
  sandbox: "workspace-write" | "danger-full-access" | "read-only";
  steps: (w: { proj: string; outside: string }) => ModelStep[];
  during?: (mock: ResponsesMock) => Promise<void>;
  timeoutMs?: number;
  /**
   * Name the server in `$CODEX_HOME/environments.toml` instead of `CODEX_EXEC_SERVER_URL` (the only way the 0.169
   * client presents a token, `auth_bearer_token`, or spawns a stdio server, `program`/`args`): the file's text,
   * given the workspace; `serverUrl` is then unused.
   */
  environmentsToml?: (w: { proj: string; home: string }) => string;
  /** Run Codex as this user (its workspace is chowned to it; `setpriv --reuid/--regid --clear-groups`). */
  asUser?: { uid: number; gid: number };
}): Promise<CodexRun> {
  const w = makeWorkspace();
  const mock = new ResponsesMock(o.steps(w));
  writeFileSync(
    join(w.home, "config.toml"),
    `model = "gpt-5.5"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "${o.sandbox}"

[model_providers.mock]
name = "mock"
base_url = "${mock.url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`,
  );
  // A server with a registered token (default authentication): Codex presents it as auth_bearer_token, which
  // only environments.toml can carry (CODEX_EXEC_SERVER_URL cannot).
  const token = tokenFor(o.serverUrl);
  const environmentsToml =
    o.environmentsToml ??
    (token === undefined
      ? undefined
      : () =>
          `default = "box"\ninclude_local = false\n\n[[environments]]\nid = "box"\nurl = "${o.serverUrl}"\nauth_bearer_token = "${token}"\n`);
  if (environmentsToml !== undefined) writeFileSync(join(w.home, "environments.toml"), environmentsToml(w));
  const prefix: string[] = [];
  if (o.asUser !== undefined) {
    Bun.spawnSync(["chown", "-R", `${o.asUser.uid}:${o.asUser.gid}`, w.base]);
    prefix.push("setpriv", `--reuid=${o.asUser.uid}`, `--regid=${o.asUser.gid}`, "--clear-groups", "--");
  }
  const proc = Bun.spawn([...prefix, CODEX!, "exec", "--skip-git-repo-check", "-C", w.proj, "do the task"], {
    cwd: w.proj,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: w.base,
      CODEX_HOME: w.home,
      ...(environmentsToml === undefined ? { CODEX_EXEC_SERVER_URL: o.serverUrl } : {}),
      RUST_LOG: "error",
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill(9), o.timeoutMs ?? 90_000);
  const during = o.during?.(mock);
  const [, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  await during;
  clearTimeout(timer);
  mock.stop();
  return { proj: w.proj, outside: w.outside, mock, exitCode, stderr };
}
