/**
 * The reference programs from the npm dev dependencies (`@openai/codex-shell-tool-mcp@0.97.0`,
 * `@openai/codex`), and a minimal newline-delimited JSON-RPC driver for the reference MCP server.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { ROOT, tempDir } from "./binary.ts";

const TRIPLE = process.arch === "arm64" ? "aarch64-unknown-linux-musl" : "x86_64-unknown-linux-musl";

/** Directory of the 0.97.0 shell-tool MCP binaries, or undefined. */
export function referenceShellToolDir(): string | undefined {
  const dir = join(ROOT, "node_modules", "@openai", "codex-shell-tool-mcp", "vendor", TRIPLE);
  return existsSync(join(dir, "codex-exec-mcp-server")) ? dir : undefined;
}

/** A JSON-RPC peer over a child's stdio, one JSON object per line. */
export class LineRpc {
  private buf = "";
  private nextId = 1;
  private readonly waiting = new Map<number, (msg: Record<string, unknown>) => void>();
  /** Server→client requests (e.g. elicitation) are answered by this. */
  onRequest?: (msg: Record<string, unknown>) => unknown;

  constructor(readonly proc: Subprocess<"pipe", "pipe", "pipe">) {
    void this.pump();
  }

  private async pump(): Promise<void> {
    const dec = new TextDecoder();
    for await (const chunk of this.proc.stdout) {
      this.buf += dec.decode(chunk, { stream: true });
      for (let nl = this.buf.indexOf("\n"); nl >= 0; nl = this.buf.indexOf("\n")) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        if (line.trim() === "") continue;
        const msg = JSON.parse(line) as Record<string, unknown>;
        if ("method" in msg && "id" in msg) {
          const result = this.onRequest?.(msg) ?? {};
          this.send({ jsonrpc: "2.0", id: msg.id, result });
        } else if ("id" in msg) {
          this.waiting.get(msg.id as number)?.(msg);
        }
      }
    }
  }

  send(msg: unknown): void {
    void this.proc.stdin.write(JSON.stringify(msg) + "\n");
    void this.proc.stdin.flush();
  }

  request(method: string, params: unknown): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const p = new Promise<Record<string, unknown>>((res) => this.waiting.set(id, res));
    this.send({ jsonrpc: "2.0", id, method, params });
    return p;
  }

  notify(method: string, params?: unknown): void {
    this.send({ jsonrpc: "2.0", method, ...(params === undefined ? {} : { params }) });
  }

  async close(): Promise<void> {
    await this.proc.stdin.end();
    await this.proc.exited;
  }
}

/** Start and initialise an MCP server over stdio with the given argv and env. */
export async function startLineRpc(argv: string[], env: Record<string, string>): Promise<LineRpc> {
  const proc = Bun.spawn(argv, { env, stdin: "pipe", stdout: "pipe", stderr: "pipe" }) as Subprocess<"pipe", "pipe", "pipe">;
  const rpc = new LineRpc(proc);
  await rpc.request("initialize", {
    protocolVersion: "2025-06-18",
    capabilities: { elicitation: {} },
    clientInfo: { name: "shellmcp-test", version: "0" },
  });
  rpc.notify("notifications/initialized");
  return rpc;
}

/** The `codex` CLI from `@openai/codex` (linux-x64 or linux-arm64 build), or undefined. */
export function referenceCodex(): string | undefined {
  const pkg = process.arch === "arm64" ? "codex-linux-arm64" : "codex-linux-x64";
  const p = join(ROOT, "node_modules", "@openai", pkg, "vendor", TRIPLE, "bin", "codex");
  return existsSync(p) ? p : undefined;
}

/** A running reference server (`codex-exec-mcp-server` 0.97) with its sandbox state set. */
export interface ReferenceServer {
  rpc: LineRpc;
  pid: number;
  /** The workspace (sandbox cwd) every call runs in. */
  ws: string;
  /** Its CODEX_HOME and HOME. */
  home: string;
  stderr: () => string;
  /** Call `shell` in `ws`: the parsed result text, or `error` for a JSON-RPC error. */
  shell(command: string, timeout_ms?: number): Promise<{ exit_code: number; output: string; timed_out?: boolean; error?: string }>;
  close(): Promise<void>;
}

/**
 * Start the Rust reference server 0.97 (its own patched bash and exec wrapper) with `rules`, and send its sandbox
 * state (`codex/sandbox-state/update`, as Codex 0.97 does): `policy` (default danger-full-access), cwd `o.ws`, and
 * `helper` as `codexLinuxSandboxExe` (Codex 0.97's binary, arg0 codex-linux-sandbox); HOME and CODEX_HOME are
 * `o.home` (default: a new temporary folder). Throws when the reference
 * is not installed, refuses the rules, or does not answer within 10 s.
 */
export async function startReference(
  helper: string,
  o: { rules?: string; env?: Record<string, string>; policy?: Record<string, unknown>; bwrap?: boolean; ws: string; home?: string },
): Promise<ReferenceServer> {
  const ref = referenceShellToolDir();
  if (ref === undefined) throw new Error("reference @openai/codex-shell-tool-mcp not installed");
  const home = o.home ?? tempDir("shellmcp-refhome-");
  mkdirSync(join(home, "rules"));
  await Bun.write(join(home, "rules", "default.rules"), o.rules ?? "");
  const argv = [
    join(ref, "codex-exec-mcp-server"),
    "--bash",
    join(ref, "bash", "debian-12", "bash"),
    "--execve",
    join(ref, "codex-execve-wrapper"),
  ];
  const env = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: home, CODEX_HOME: home, LC_ALL: "C", ...o.env };
  // A server that refuses its rules exits before answering initialize: say why instead of waiting.
  const probe = Bun.spawnSync(argv, { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const refused = probe.stderr.toString().match(/failed to parse rules file[^\n]*\n[^\n]*/)?.[0];
  if (refused)
    throw new Error(`the reference refuses the rules: ${refused.replace(/\s+/g, " ").replace(/\S*default\.rules/, "default.rules")}`);
  const rpc = await deadline(startLineRpc(argv, env), 10000, "initialize");
  let err = "";
  void (async () => {
    for await (const c of rpc.proc.stderr) err += new TextDecoder().decode(c);
  })();
  await deadline(
    rpc.request("codex/sandbox-state/update", {
      sandboxPolicy: o.policy ?? { type: "danger-full-access" },
      sandboxCwd: o.ws,
      codexLinuxSandboxExe: helper,
      useLinuxSandboxBwrap: o.bwrap ?? false,
    }),
    10000,
    "sandbox-state",
  );
  return {
    rpc,
    pid: rpc.proc.pid,
    ws: o.ws,
    home,
    stderr: () => err,
    async shell(command, timeout_ms = 30000) {
      const res = await deadline(
        rpc.request("tools/call", { name: "shell", arguments: { command, workdir: o.ws, login: false, timeout_ms } }),
        Math.min(timeout_ms, 120000) + 10000,
        "tools/call",
      );
      if (res.error) return { exit_code: -1, output: "", error: JSON.stringify(res.error) };
      return JSON.parse((res.result as { content: { text: string }[] }).content[0]!.text);
    },
    async close() {
      await rpc.proc.stdin.end();
      await deadline(rpc.proc.exited, 5000, "close").catch(() => rpc.proc.kill(9));
    },
  };
}

function deadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: Timer;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<T>((_, rej) => {
      t = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]);
}
