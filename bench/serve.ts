/**
 * `shellmcp serve` vs Codex 0.97.0's `codex-exec-mcp-server`, over the same newline JSON-RPC driver:
 * - `initialize` latency: from spawn to the answer's first byte, median of N starts (what decides whether
 *   Codex 0.169 offers the tool at all when the server is not `required`; target ≤ 20 ms);
 * - trivial call latency (`true`), median of N;
 * - a call with 200 intercepted execs (`for i in $(seq 200); do /bin/true; done`);
 * - server RSS idle and during 8 parallel calls.
 * Both run with danger-full-access (the reference needs Codex's own sandbox helper otherwise); ours is also
 * measured under its default read-only sandbox. Ratios: ours / reference.
 *
 *   bun bench/serve.ts [runs]
 */
import { mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startLineRpc, type LineRpc } from "../test/helpers/reference.ts";
import { median, referenceShellToolDir, ROOT } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 30);
const dir = mkdtempSync(join(tmpdir(), "shellmcp-bench-serve-"));
const work = join(dir, "work");
mkdirSync(work);

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function measure(name: string, rpc: LineRpc): Promise<{ trivial: number; execs: number; idle: number; busy: number }> {
  const call = async (command: string) => {
    const t0 = Bun.nanoseconds();
    const r = await rpc.request("tools/call", { name: "shell", arguments: { command, workdir: work, login: false, timeout_ms: 120000 } });
    if (r.error !== undefined) throw new Error(`${name}: ${JSON.stringify(r.error)}`);
    return (Bun.nanoseconds() - t0) / 1e6;
  };
  for (let i = 0; i < 3; i++) await call("true");
  const trivial: number[] = [];
  for (let i = 0; i < RUNS; i++) trivial.push(await call("true"));
  const execs: number[] = [];
  for (let i = 0; i < 5; i++) execs.push(await call("for i in $(seq 200); do /bin/true; done"));
  await Bun.sleep(300);
  const idle = rssMiB(rpc.proc.pid);
  const parallel = Promise.all(Array.from({ length: 8 }, () => call("sleep 1.5")));
  await Bun.sleep(800);
  const busy = rssMiB(rpc.proc.pid);
  await parallel;
  return { trivial: median(trivial), execs: median(execs), idle, busy };
}

const home = join(dir, "home");
mkdirSync(home);
const env = { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home };

/** Median ms from spawn to the first byte of the `initialize` answer, over `runs` starts. */
async function initializeLatency(argv: string[], runs = RUNS): Promise<number> {
  const line =
    JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: { elicitation: {} }, clientInfo: { name: "bench", version: "0" } },
    }) + "\n";
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = Bun.nanoseconds();
    const p = Bun.spawn(argv, { env, stdin: "pipe", stdout: "pipe", stderr: "ignore" });
    p.stdin.write(line);
    p.stdin.flush();
    const reader = p.stdout.getReader();
    await reader.read();
    ms.push((Bun.nanoseconds() - t0) / 1e6);
    p.stdin.end();
    p.kill();
    await p.exited;
  }
  return median(ms);
}
const oursInit = await initializeLatency([join(ROOT, "dist", "shellmcp"), "serve"]);
const ours = await startLineRpc([join(ROOT, "dist", "shellmcp"), "serve", "--sandbox", "danger-full-access"], env);
const o = await measure("shellmcp", ours);
await ours.close();
const oursRo = await startLineRpc([join(ROOT, "dist", "shellmcp"), "serve"], env);
const oRo = await measure("shellmcp read-only", oursRo);
await oursRo.close();

const fmt = (x: number) => x.toFixed(1).padStart(8);
console.log(`shell tool over stdio, median (trivial: ${RUNS} calls; 200 execs: 5 calls)`);
console.log(`${"".padEnd(38)} trivial ms  200-exec ms  RSS idle MiB  RSS 8 calls MiB`);
console.log(`${"shellmcp, danger-full-access".padEnd(38)}${fmt(o.trivial)}   ${fmt(o.execs)}     ${fmt(o.idle)}       ${fmt(o.busy)}`);
console.log(
  `${"shellmcp, read-only (bwrap)".padEnd(38)}${fmt(oRo.trivial)}   ${fmt(oRo.execs)}     ${fmt(oRo.idle)}       ${fmt(oRo.busy)}`,
);
const ref = referenceShellToolDir();
if (ref === undefined) console.log(`initialize: shellmcp ${oursInit.toFixed(1)} ms (reference not installed (npm i): no ratios)`);
else {
  const refArgv = [
    join(ref, "codex-exec-mcp-server"),
    "--bash",
    join(ref, "bash", "debian-12", "bash"),
    "--execve",
    join(ref, "codex-execve-wrapper"),
  ];
  const theirsInit = await initializeLatency(refArgv);
  console.log(
    `initialize (spawn → answer), median of ${RUNS}: shellmcp ${oursInit.toFixed(1)} ms, Codex 0.97.0 ${theirsInit.toFixed(1)} ms, ratio ${(oursInit / theirsInit).toFixed(1)}× (target ≤ 20 ms)`,
  );
  const theirs = await startLineRpc(
    [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")],
    env,
  );
  await theirs.request("codex/sandbox-state/update", { sandboxPolicy: { type: "danger-full-access" }, sandboxCwd: work });
  const t = await measure("reference", theirs);
  await theirs.close();
  console.log(
    `${"Codex 0.97.0, danger-full-access".padEnd(38)}${fmt(t.trivial)}   ${fmt(t.execs)}     ${fmt(t.idle)}       ${fmt(t.busy)}`,
  );
  console.log(
    `ratios ours/reference (danger-full-access): trivial ${(o.trivial / t.trivial).toFixed(2)}×, 200 execs ${(o.execs / t.execs).toFixed(2)}×, RSS idle ${(o.idle / t.idle).toFixed(1)}×, RSS busy ${(o.busy / t.busy).toFixed(1)}×`,
  );
}
