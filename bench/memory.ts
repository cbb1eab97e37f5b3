/**
 * Memory of `shellmcp serve` over many calls (issue 40, "Memory that does not grow with calls"): the server's RSS
 * and its anonymous part (`RssAnon` of /proc/PID/status: heap and stacks, not the executable's pages) idle after
 * `initialize`, then after 100 and 1,000 trivial `shell` calls (`true`, `login: false`, workspace-write, the
 * workspace outside /tmp), on each backend, beside Codex 0.97.0's `codex-exec-mcp-server` with Codex 0.97's helper
 * under the same state. RSS is read {@link SOON_MS} after the last call (as bench/serve.ts reads it), then RSS and
 * RssAnon once the server has been idle for {@link IDLE_MS} (after its idle release of memory, src/serve.ts). Calls go to all servers in rotating order, so the load of the machine hits all alike.
 * `SHELLMCP_BENCH_OLD=<binary>`: also another build of shellmcp (before/after in one run). `SHELLMCP_BENCH_IDLE_MS=<ms>`:
 * another idle time than issue 40's 5 s. JavaScriptCore's JIT compiler threads hold what they allocated until they
 * end, ~10 s after their last compile (its helper threads ~20 s): a reading at 25 s shows the server without them,
 * 1–5 MiB of RssAnon lower after calls (2026-11-29, Bun 1.4.5).
 *
 *   bun bench/memory.ts [calls=1000]
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startLineRpc, type LineRpc } from "../test/helpers/reference.ts";
import { benchHome, codex097Exe, referenceShellToolDir, ROOT } from "./lib.ts";

const CALLS = Number(process.argv[2] ?? 1000);
const CHECKPOINTS = [0, 100, CALLS].filter((n, i, a) => n <= CALLS && a.indexOf(n) === i);
/** Idle time before each reading, ms. */
const IDLE_MS = Number(process.env.SHELLMCP_BENCH_IDLE_MS ?? 5000);
/** When the first reading is taken (as bench/serve.ts does: before the idle release), ms after the last call. */
const SOON_MS = 300;
const OURS = process.env.SHELLMCP_BENCH_BINARY ?? join(ROOT, "dist", "shellmcp");
const OLD = process.env.SHELLMCP_BENCH_OLD;
const home = benchHome("shellmcp-bench-memory-home-");
// Outside /tmp and $TMPDIR, which workspace-write can write.
const ww = benchHome("shellmcp-bench-memory-ws-");
const WW_POLICY = { type: "workspace-write", network_access: false, exclude_tmpdir_env_var: true, exclude_slash_tmp: true };
const helper = codex097Exe() ?? join(ROOT, "dist", "codex-linux-sandbox");

interface Server {
  name: string;
  rpc: LineRpc;
  ws: string;
  rss: number[];
  anon: number[];
  /** RSS {@link SOON_MS} after the last call. */
  soon: number[];
}

/** VmRSS and RssAnon of `pid`, MiB. */
function memOf(pid: number): { rss: number; anon: number } {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(s)?.[1] ?? NaN) / 1024;
  return { rss: kb("VmRSS"), anon: kb("RssAnon") };
}

async function start(name: string, argv: string[]): Promise<Server> {
  const ws = join(ww, name);
  mkdirSync(ws);
  const rpc = await startLineRpc(argv, { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home });
  // The server's stderr is a pipe nobody else reads: drain it, so a chatty server cannot block on it.
  void (async () => {
    for await (const _ of rpc.proc.stderr) void _;
  })();
  const upd = await rpc.request("codex/sandbox-state/update", {
    sandboxPolicy: WW_POLICY,
    codexLinuxSandboxExe: helper,
    sandboxCwd: ws,
    useLinuxSandboxBwrap: false,
  });
  if (upd.error !== undefined) throw new Error(`${name} refused the sandbox state: ${JSON.stringify(upd.error)}`);
  return { name, rpc, ws, rss: [], anon: [], soon: [] };
}

async function call(s: Server): Promise<void> {
  const r = await s.rpc.request("tools/call", {
    name: "shell",
    arguments: { command: "true", workdir: s.ws, login: false, timeout_ms: 30000 },
  });
  const res = r.result as { isError?: boolean } | undefined;
  if (r.error !== undefined || res?.isError === true) throw new Error(`${s.name}: ${JSON.stringify(r.error ?? res)}`.slice(0, 400));
}

const servers: Server[] = [
  await start("bwrap", [OURS, "serve"]),
  await start("landlock", [OURS, "serve", "--sandbox-backend", "landlock"]),
];
if (OLD !== undefined) {
  servers.push(await start("old-bwrap", [OLD, "serve"]));
  servers.push(await start("old-landlock", [OLD, "serve", "--sandbox-backend", "landlock"]));
}
const ref = referenceShellToolDir();
if (ref !== undefined && codex097Exe() !== undefined)
  servers.push(
    await start("reference", [
      join(ref, "codex-exec-mcp-server"),
      "--bash",
      join(ref, "bash", "debian-12", "bash"),
      "--execve",
      join(ref, "codex-execve-wrapper"),
    ]),
  );

let done = 0;
for (const n of CHECKPOINTS) {
  for (; done < n; done++) for (let k = 0; k < servers.length; k++) await call(servers[(done + k) % servers.length]!);
  await Bun.sleep(SOON_MS);
  for (const s of servers) s.soon.push(memOf(s.rpc.proc.pid).rss);
  await Bun.sleep(IDLE_MS - SOON_MS);
  for (const s of servers) {
    const m = memOf(s.rpc.proc.pid);
    s.rss.push(m.rss);
    s.anon.push(m.anon);
  }
}
for (const s of servers) await s.rpc.close();

const f = (x: number) => x.toFixed(1).padStart(9);
console.log(
  `server memory, MiB, after N trivial workspace-write calls: RSS ${SOON_MS} ms after the last call, then RSS and RssAnon after ${IDLE_MS} ms idle`,
);
const head = (what: string) => CHECKPOINTS.map((n) => `${what}@${n}`.padStart(9)).join("");
console.log(`${"".padEnd(14)}${head("soon")}${head("RSS")}${head("anon")}`);
for (const s of servers) console.log(`${s.name.padEnd(14)}${s.soon.map(f).join("")}${s.rss.map(f).join("")}${s.anon.map(f).join("")}`);
