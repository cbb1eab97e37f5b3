/**
 * Cost of unified exec sessions (issue 31) beside a `shell` call, on one `shellmcp serve` (workspace-write, the
 * default backend), over the newline JSON-RPC driver:
 * - `shell` `true`: a whole call (launch, run, collect, git guard);
 * - `exec_command` `true`: the same command through a session that ends within its yield time (returns at its end);
 * - session start: `exec_command` of a command that keeps running (`cat` on a terminal) with the minimum yield time
 *   (250 ms), minus that yield: what starting a session costs beyond the wait the model asked for;
 * - `write_stdin` poll: a write of one line to that terminal session with the minimum yield time, minus the yield.
 * Medians of N rounds, the variants interleaved in each round. Figures only; nothing is asserted.
 *
 * `SHELLMCP_BENCH_BINARY=<binary>`: another build; `SHELLMCP_BENCH_BACKEND=bwrap|landlock`: that backend, not the default.
 *
 *   bun bench/sessions.ts [runs]
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { startLineRpc, type LineRpc } from "../test/helpers/reference.ts";
import { benchDir, benchHome, median, ROOT } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 20);
const OURS = process.env.SHELLMCP_BENCH_BINARY ?? join(ROOT, "dist", "shellmcp");
const dir = benchDir("shellmcp-bench-sessions-");
const work = join(dir, "work");
// CODEX_HOME outside /tmp and $TMPDIR (serve refuses one a sandbox could write).
const home = benchHome("shellmcp-bench-sessions-home-");
mkdirSync(work);
const YIELD_MS = 250;

async function timed(rpc: LineRpc, name: string, args: Record<string, unknown>): Promise<{ ms: number; text: string }> {
  const t0 = Bun.nanoseconds();
  const r = await rpc.request("tools/call", { name, arguments: args });
  const ms = (Bun.nanoseconds() - t0) / 1e6;
  if (r.error !== undefined) throw new Error(`${name}: ${JSON.stringify(r.error)}`);
  const result = r.result as { content: { text: string }[]; isError?: boolean };
  if (result.isError === true) throw new Error(`${name}: ${result.content[0]!.text}`);
  return { ms, text: result.content[0]!.text };
}

const BACKEND = process.env.SHELLMCP_BENCH_BACKEND;
const rpc = await startLineRpc(
  [
    OURS,
    "serve",
    "--sandbox",
    "workspace-write",
    "--cd",
    work,
    "--max-sessions",
    "64",
    ...(BACKEND !== undefined ? ["--sandbox-backend", BACKEND] : []),
  ],
  {
    PATH: "/usr/bin:/bin",
    HOME: home,
    CODEX_HOME: home,
  },
);
const shellTrue = () => timed(rpc, "shell", { command: "true", workdir: work, login: false });
const execTrue = () => timed(rpc, "exec_command", { cmd: "true", workdir: work, login: false });
const sessionIds: number[] = [];
const startSession = async () => {
  const r = await timed(rpc, "exec_command", { cmd: "cat", workdir: work, login: false, tty: true, yield_time_ms: YIELD_MS });
  const id = /Process running with session ID (\d+)/.exec(r.text);
  if (id === null) throw new Error(`no session: ${r.text}`);
  sessionIds.push(Number(id[1]));
  return { ms: r.ms - YIELD_MS, text: r.text };
};
const poll = () =>
  timed(rpc, "write_stdin", { session_id: sessionIds[0], chars: "x\n", yield_time_ms: YIELD_MS }).then((r) => ({
    ...r,
    ms: r.ms - YIELD_MS,
  }));
const endSessions = async () => {
  for (const id of sessionIds.splice(1)) await timed(rpc, "write_stdin", { session_id: id, chars: "\u0004" });
};

// Warm-up, then interleaved rounds.
await shellTrue();
await execTrue();
await startSession();
await poll();
const samples: Record<string, number[]> = { shell: [], exec: [], start: [], poll: [] };
for (let i = 0; i < RUNS; i++) {
  samples.shell!.push((await shellTrue()).ms);
  samples.exec!.push((await execTrue()).ms);
  samples.start!.push((await startSession()).ms);
  samples.poll!.push((await poll()).ms);
  await endSessions();
}
const row = (name: string, xs: number[]) => console.log(`${name.padEnd(58)} ${median(xs).toFixed(1).padStart(8)} ms`);
console.log(`shellmcp serve, workspace-write, ${RUNS} rounds (medians)`);
row("shell `true` (whole call)", samples.shell!);
row("exec_command `true` (ends within its yield time)", samples.exec!);
row(`session start: exec_command \`cat\`, tty, minus ${YIELD_MS} ms yield`, samples.start!);
row(`write_stdin of one line to it, minus ${YIELD_MS} ms yield`, samples.poll!);
await rpc.proc.stdin.end();
await rpc.proc.exited;
