/**
 * What the real-client suites (claude-real, gemini-real) share: a scripted plan of MCP tool calls the stand-in model
 * makes one after the other, a fresh project with a git repository and a private CODEX_HOME for `shellmcp serve`,
 * the `.rules` and network configurations of the scenarios, and running a client with a deadline.
 *
 * Everything lives under the run's CONF_BASE (outside /tmp and $TMPDIR, which workspace-write sandboxes write, and
 * where `serve` refuses a CODEX_HOME).
 */
import { CONF_BASE, RUN_TMP } from "../helpers/cleanup.ts";
import { hostGit } from "../helpers/attack.ts";
import { processesWith } from "../helpers/marked.ts";
import { agentNetworkConfig } from "../helpers/network.ts";
import { toolMissing } from "../helpers/prereq.ts";
import { expect } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** One MCP tool call of the stand-in model: the tool's name as shellmcp lists it, and its arguments. */
export interface PlannedCall {
  tool: "shell" | "exec_command" | "write_stdin" | "list_sessions";
  args: Record<string, unknown>;
}

/**
 * The model's plan: given the text of every tool result it has received so far (in order), its next call, or
 * undefined to end the turn. A plan sees earlier results, so a later call can use a session ID an earlier one got.
 */
export type Plan = (results: string[]) => PlannedCall | undefined;

/** A plan of fixed calls made in order. */
export function calls(...list: PlannedCall[]): Plan {
  return (results) => list[results.length];
}

/** A fresh scenario folder: `proj` (a git repository with a committed README), `home` (the client's HOME, which
 * `serve` inherits), `codexHome` (`home/.codex`: shellmcp's default CODEX_HOME, with `rules/`), and `outside`. */
export interface Place {
  base: string;
  proj: string;
  home: string;
  codexHome: string;
  outside: string;
}

/**
 * Make a scenario's folders; `rules` goes to CODEX_HOME/rules/test.rules and `config` to CODEX_HOME/config.toml.
 * @param client  a short name for the folder (e.g. "claude")
 */
export function place(client: string, o: { rules?: string; config?: string } = {}): Place {
  const base = join(CONF_BASE, `${client}-real-${Math.random().toString(36).slice(2)}`);
  const p: Place = {
    base,
    proj: join(base, "proj"),
    home: join(base, "home"),
    codexHome: join(base, "home", ".codex"),
    outside: join(base, "outside"),
  };
  for (const d of [p.proj, p.home, p.outside, join(p.codexHome, "rules")]) mkdirSync(d, { recursive: true });
  writeFileSync(join(p.proj, "README"), "hello\n");
  hostGit(p.proj, "init", "-q", "-b", "main");
  hostGit(p.proj, "add", "-A");
  hostGit(p.proj, "commit", "-qm", "initial");
  if (o.rules !== undefined) writeFileSync(join(p.codexHome, "rules", "test.rules"), o.rules);
  if (o.config !== undefined) writeFileSync(join(p.codexHome, "config.toml"), o.config);
  return p;
}

/** The scenarios' rules: `rm` is forbidden, `touch ask-me` asks a human. */
export const RULES = `
prefix_rule(pattern = ["rm"], decision = "forbidden", justification = "no deleting in this test")
prefix_rule(pattern = ["touch", "ask-me"], decision = "prompt")
`;

/** The config that gives a client without sandbox state the full network (docs/sessions.md): a profile with the
 * network on and no proxy, named by `default_permissions`. */
export const NETWORK_ON_CONFIG = `default_permissions = "dev"
[permissions.dev]
extends = ":workspace"
[permissions.dev.network]
enabled = true
`;

/**
 * Names the network scenario resolves to loopback: `serve` runs under an outer bubblewrap whose /etc/hosts maps
 * them to 127.0.0.1 (as test/network/serve-proxy-plain.test.ts), so no real name is looked up.
 */
export function hostsFile(): string {
  const hosts = join(RUN_TMP, `hosts.clients-${Math.random().toString(36).slice(2)}`);
  writeFileSync(hosts, "127.0.0.1 localhost\n127.0.0.1 allowed.test\n127.0.0.1 other.test\n");
  return hosts;
}

/** The outer bubblewrap that gives `serve` the hosts file (prefix of the server's command line). */
export function withHosts(hosts: string): string[] {
  return ["bwrap", "--dev-bind", "/", "/", "--bind", hosts, "/etc/hosts", "--"];
}

/** A loopback HTTP server answering `hello <Host header>`, standing in for the allowed and the refused domains. */
export function upstream(): ReturnType<typeof Bun.serve> {
  return Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`hello ${req.headers.get("host")}\n`) });
}

/** A TCP port that is probably free (for a dev server started in a session). */
export function freePort(): number {
  const s = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
  const port = s.port!;
  void s.stop(true);
  return port;
}

/** What a client run printed and how it ended. */
export interface ClientRun {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Run a client to its end (killed after `deadlineMs`), with stdin closed. */
export async function runClient(argv: string[], o: { cwd: string; env: Record<string, string>; deadlineMs?: number }): Promise<ClientRun> {
  const proc = Bun.spawn(argv, { cwd: o.cwd, env: o.env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill(9), o.deadlineMs ?? 90_000);
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { exitCode, stdout, stderr };
}

/**
 * The session ID in an `exec_command` result as the model received it, or undefined: Codex's text (`Process running
 * with session ID N`), or the `structuredContent` as JSON (`"session_id":N`), which is what Claude Code passes on.
 */
export function sessionId(result: string | undefined): number | undefined {
  const m = /Process running with session ID (\d+)|"session_id":\s*(\d+)/.exec(result ?? "");
  return m === null ? undefined : Number(m[1] ?? m[2]);
}

/** A plan of one `shell` call of `command` in the project (no login shell), with `extra` arguments. */
export function shellCall(p: Place, command: string, extra: Record<string, unknown> = {}): Plan {
  return calls({ tool: "shell", args: { command, workdir: p.proj, login: false, ...extra } });
}

/** The workspace-write probe: one `shell` call that writes the project, then outside it, then its `.git`. */
export function writeProbe(p: Place): Plan {
  return shellCall(
    p,
    `touch inside && echo INSIDE_OK; touch ${p.outside}/x || echo OUTSIDE_REFUSED; touch .git/x || echo GIT_RO; echo END`,
  );
}

/** What {@link writeProbe} must show: the project written, outside it and `.git` refused, in `result` and on disk. */
export function expectWriteProbe(p: Place, result: string | undefined): void {
  expect(result).toContain("INSIDE_OK");
  expect(result).toContain("OUTSIDE_REFUSED");
  expect(result).toContain("GIT_RO");
  expect(result).toContain("END");
  // Issue 41: the model is told why, with the layer and the path (docs/blocked-actions.md).
  expect(result).toContain(`shellmcp: blocked (sandbox-write) ${join(p.outside, "x")}: `);
  expect(result).toContain(`shellmcp: blocked (protected-path) ${join(p.proj, ".git", "x")}: `);
  expect(existsSync(join(p.proj, "inside"))).toBe(true);
  expect(existsSync(join(p.outside, "x"))).toBe(false);
  expect(existsSync(join(p.proj, ".git", "x"))).toBe(false);
}

/**
 * The session scenario: `exec_command` starts a dev server (`python3 -m http.server <port>`), a later `shell` call
 * reaches it with curl, then `list_sessions`.
 */
export function devServerPlan(p: Place, port: number): Plan {
  return (results) => {
    if (results.length === 0)
      return {
        tool: "exec_command",
        args: { cmd: `python3 -m http.server ${port} --bind 127.0.0.1`, workdir: p.proj, login: false, yield_time_ms: 1500 },
      };
    if (results.length === 1)
      return {
        tool: "shell",
        args: {
          command: `for i in 1 2 3 4 5; do curl -sS http://127.0.0.1:${port}/README && break; sleep 0.5; done`,
          workdir: p.proj,
          login: false,
        },
      };
    if (results.length === 2) return { tool: "list_sessions", args: {} };
    return undefined;
  };
}

/**
 * What {@link devServerPlan} must show once the client has exited: a session ID in the first result, the page in
 * the second, the session listed in the third, and no dev server left (the client stopped `serve` when it exited).
 */
export async function expectDevServerSession(results: string[], port: number): Promise<void> {
  const id = sessionId(results[0]);
  expect(id).toBeNumber();
  expect(results[1]).toContain("hello");
  expect(results[2]).toContain(String(id));
  expect(results[2]).toContain("http.server");
  await Bun.sleep(500);
  expect(processesWith(`http.server ${port}`)).toEqual([]);
}

/** A client run as a real-client suite's `run` gives it back, with the stand-in model `mock` that it talked to. */
export interface ClientOutcome<M> extends ClientRun {
  /** The text of every shell tool result the model received, in order. */
  results: string[];
  mock: M;
}

/** A real-client suite's `run`: set `serve` up in the client (behind `prefix`), then run it with the model following `plan`. */
export type RunClient = (p: Place, plan: Plan, o?: { prefix?: string[] }) => Promise<ClientOutcome<unknown>>;

/** The forbidden-rule scenario with `client`: `rm` under {@link RULES} is denied and never runs. */
export async function forbiddenRuleScenario(client: string, run: RunClient): Promise<void> {
  const p = place(client, { rules: RULES });
  const o = await run(p, shellCall(p, "rm README; echo rc=$?"));
  expect(o.results[0]).toContain("Execution denied: Execution forbidden by policy");
  expect(o.results[0]).toContain("rc=1");
  expect(existsSync(join(p.proj, "README"))).toBe(true);
}

/**
 * The network-by-domain scenario with `client`: `serve` (under {@link withHosts}) with a profile that allows
 * allowed.test only; the allowed name is answered through the proxy, other.test is refused with a 403.
 */
export async function domainNetworkScenario(client: string, run: RunClient): Promise<void> {
  const up = upstream();
  try {
    const port = up.port!;
    const p = place(client, { config: agentNetworkConfig({ allowLocalBinding: true, domains: { "allowed.test": "allow" } }) });
    const o = await run(
      p,
      shellCall(p, `curl -sS http://allowed.test:${port}/; curl -sS -o /dev/null -w '%{http_code}\\n' http://other.test:${port}/`, {
        timeout_ms: 60_000,
      }),
      { prefix: withHosts(hostsFile()) },
    );
    expect(o.results[0]).toContain(`hello allowed.test:${port}`);
    expect(o.results[0]).toContain("403");
    expect(o.results[0]).toContain(`shellmcp: network access refused: other.test:${port} (http): not_allowed`);
  } finally {
    void up.stop(true);
  }
}

/**
 * Issue 41: `shellmcp init <client> --yes` (`client` empty: the starter policy only) run in the project with the place's HOME (CODEX_HOME its default,
 * `~/.codex`): the starter policy and the client's configuration. Returns what it printed; fails unless it ends
 * with the undo commands.
 */
export function initClient(binary: string, client: string, p: Place, env: Record<string, string> = {}): string {
  const r = Bun.spawnSync([binary, "init", ...(client === "" ? [] : [client]), "--yes"], {
    cwd: p.proj,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: p.home, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = r.stdout.toString() + r.stderr.toString();
  expect(r.exitCode, out).toBe(0);
  expect(out).toContain("done. To undo it:");
  return out;
}

/** The commit scenario's call: write a file and commit it, which the starter rules escalate (`.git` is read-only in the sandbox). */
export const COMMIT_COMMAND = "echo hi > hello.txt && git add hello.txt && git commit -qm 'from the agent' && echo COMMITTED; echo END";

/** What the commit scenario must show: the call's output, and the commit in the host's repository. */
export function expectCommitted(p: Place, result: string | undefined): void {
  expect(result).toContain("COMMITTED");
  expect(hostGit(p.proj, "log", "--format=%s", "-1")).toBe("from the agent");
  expect(hostGit(p.proj, "show", "--format=", "--name-only", "HEAD")).toBe("hello.txt");
}

/**
 * The package registry of the npm scenario: an HTTP server (python3) answering a packument at `/NAME` and the tarball
 * at `/NAME/-/NAME-1.0.0.tgz`, logging every request (`METHOD PATH HOST`). It dies with its parent (`PR_SET_PDEATHSIG`).
 * argv: address, port, packument file, tarball file, log file, ready file.
 */
const REGISTRY = `
import ctypes, http.server, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGKILL)
addr, port, packument, tarball, log, ready = sys.argv[1:7]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f: f.write(f"GET {self.path} {self.headers.get('host', '')}\\n")
        path = tarball if self.path.endswith(".tgz") else packument
        body = open(path, "rb").read()
        self.send_response(200)
        self.send_header("content-type", "application/octet-stream" if path == tarball else "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer((addr, int(port)), H)
open(ready, "w").close()
s.serve_forever()
`;

/**
 * The address the npm scenario gives `registry.npmjs.org`: a public one (the proxy refuses local ones), added to the
 * loopback link of `serve`'s own network namespace (no dummy links in containers).
 */
const REGISTRY_ADDRESS = "93.184.216.34";

/**
 * Issue 41's "installs npm packages through its room", with the starter policy as `shellmcp init` writes it
 * (`npm install` allowed into a room; `[shellmcp.room_network] npm = ["registry.npmjs.org"]`,
 * `[shellmcp.room_writable] npm = ["~/.npm"]`). The real registry is not reachable from the test machines, so
 * `serve` runs in a network namespace of its own (`unshare --net --mount`, root only) where `registry.npmjs.org`
 * resolves (a bound /etc/hosts) to a public address on that namespace's loopback link, served by {@link REGISTRY}; the project's
 * `.npmrc` names it over http. Returns the `serve` prefix, the package's name and the registry's log.
 */
export function npmRegistry(p: Place): { prefix: string[]; name: string; log: () => string } {
  const name = `shellmcp-probe-${Math.random().toString(36).slice(2, 8)}`;
  const dir = join(p.base, "registry");
  mkdirSync(join(dir, "package"), { recursive: true });
  writeFileSync(join(dir, "package", "package.json"), JSON.stringify({ name, version: "1.0.0", main: "index.js" }));
  writeFileSync(join(dir, "package", "index.js"), `module.exports = "PACKAGE ${name} LOADED";\n`);
  const tgz = join(dir, "pkg.tgz");
  const tar = Bun.spawnSync(["tar", "czf", tgz, "-C", dir, "package"], { stdout: "pipe", stderr: "pipe" });
  if (tar.exitCode !== 0) throw new Error(`tar: ${tar.stderr.toString()}`);
  const bytes = readFileSync(tgz);
  const dist = {
    tarball: `http://registry.npmjs.org/${name}/-/${name}-1.0.0.tgz`,
    integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
    shasum: createHash("sha1").update(bytes).digest("hex"),
  };
  const packument = { name, "dist-tags": { latest: "1.0.0" }, versions: { "1.0.0": { name, version: "1.0.0", main: "index.js", dist } } };
  writeFileSync(join(dir, "packument.json"), JSON.stringify(packument));
  writeFileSync(join(dir, "registry.py"), REGISTRY);
  const hosts = join(dir, "hosts");
  writeFileSync(hosts, `127.0.0.1 localhost\n${REGISTRY_ADDRESS} registry.npmjs.org\n`);
  writeFileSync(join(p.proj, ".npmrc"), "registry=http://registry.npmjs.org/\n");
  const log = join(dir, "requests.log");
  const ready = join(dir, "ready");
  const ip = Bun.which("ip", { PATH: `${process.env.PATH ?? ""}:/usr/sbin:/sbin` }) ?? "ip";
  const setup = [
    "set -e",
    `mount --bind ${hosts} /etc/hosts`,
    `${ip} link set lo up`,
    `${ip} addr add ${REGISTRY_ADDRESS}/32 dev lo`,
    `python3 ${join(dir, "registry.py")} ${REGISTRY_ADDRESS} 80 ${join(dir, "packument.json")} ${tgz} ${log} ${ready} &`,
    `i=0; while [ ! -e ${ready} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done`,
    'exec "$@"',
  ].join("\n");
  return {
    prefix: ["unshare", "--net", "--mount", "--", "sh", "-c", setup, "sh"],
    name,
    log: () => (existsSync(log) ? readFileSync(log, "utf8") : ""),
  };
}

/** Why the npm scenario cannot run here (it makes a network namespace: root, `unshare`, `ip`), or undefined. */
export function npmScenarioMissing(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root (a network namespace of its own for serve)";
  if (Bun.which("ip", { PATH: `${process.env.PATH ?? ""}:/usr/sbin:/sbin` }) === null) return "ip (iproute2) not installed";
  return toolMissing("npm", "node", "unshare", "tar", "python3");
}

/**
 * The npm scenario with `client` (issue 41): `shellmcp init --yes` (the starter policy only; the client is set up by
 * `run`), then one `shell` call that installs a package from {@link npmRegistry} and loads it; see
 * {@link expectNpmInstalled}.
 */
export async function npmInstallScenario(client: string, run: RunClient, binary: string): Promise<void> {
  const p = place(client);
  initClient(binary, "", p);
  const reg = npmRegistry(p);
  const o = await run(p, shellCall(p, npmInstallCommand(reg.name), { timeout_ms: 90_000 }), { prefix: reg.prefix });
  expectNpmInstalled(p, reg, o.results[0]);
}

/** The npm scenario's call: install the registry's package into the project, then load it with node in the sandbox. */
export function npmInstallCommand(name: string): string {
  return `npm install --no-audit --no-fund ${name} 2>&1 | tail -5; node -e 'console.log(require("${name}"))'; echo END`;
}

/** What the npm scenario must show: the package loaded, on the host's disk, fetched from the registry, cached in ~/.npm. */
export function expectNpmInstalled(p: Place, reg: ReturnType<typeof npmRegistry>, result: string | undefined): void {
  expect(result).toContain(`PACKAGE ${reg.name} LOADED`);
  expect(existsSync(join(p.proj, "node_modules", reg.name, "index.js"))).toBe(true);
  expect(reg.log()).toContain(`GET /${reg.name}/-/${reg.name}-1.0.0.tgz`);
  expect(existsSync(join(p.home, ".npm", "_cacache"))).toBe(true);
}
