/**
 * Start-up figures:
 * 1. The exec wrapper role, the project's hottest path (the patched shell execs it for every program): the binary
 *    invoked as `codex-execve-wrapper` with no arguments exits at once with its usage error; compared with
 *    `/bin/true` and with the Rust reference wrapper (0.97.0) doing the same.
 * 2. `serve` (issue 33: `initialize` within 2× the Rust reference, idle RSS ≤ 45 MiB): from spawn to the first
 *    byte of the `initialize` answer, median of N alternating starts, for shellmcp, Codex 0.97.0's
 *    `codex-exec-mcp-server` and Bun's floor (a compiled Bun program that answers the first line with a constant
 *    and does nothing else); then the idle RSS of each, after start-up and after 8 calls, each IDLE_MS after the
 *    last activity, with shellmcp's split from /proc/PID/smaps (its executable's code, its other mappings,
 *    anonymous memory) — with and without the release of code pages (`SHELLMCP_KEEP_CODE_PAGES=1`).
 *
 *   bun bench/startup.ts [runs] [serve-runs]
 */
import { readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startLineRpc } from "../test/helpers/reference.ts";
import { benchDir, benchHome, initializeOnce, median, pairedRatio, referenceShellToolDir, ROOT, row, timeSpawns } from "./lib.ts";

const runs = Number(process.argv[2] ?? 200);
const serveRuns = Number(process.argv[3] ?? 31);
const dir = benchDir("shellmcp-bench-");
const OURS = process.env.SHELLMCP_BENCH_BINARY ?? join(ROOT, "dist", "shellmcp");
/** How long after the last activity the idle RSS is read (shellmcp gives back its code pages 3 s after). */
const IDLE_MS = 4500;

// 1. The exec wrapper.
const wrapper = join(dir, "codex-execve-wrapper");
symlinkSync(OURS, wrapper);
const tTrue = timeSpawns(["/bin/true"], runs);
const tOurs = timeSpawns([wrapper], runs);
console.log(`exec wrapper start-up, median of 5 rounds × ${runs} starts`);
row("/bin/true", tTrue);
row("shellmcp as codex-execve-wrapper", tOurs, tTrue);
const ref = referenceShellToolDir();
if (ref !== undefined) {
  const tRef = timeSpawns([join(ref, "codex-execve-wrapper")], runs);
  row("reference codex-execve-wrapper 0.97.0 (Rust)", tRef, tTrue);
  console.log(`ours / reference: ${(tOurs / tRef).toFixed(2)}×`);
} else {
  console.log("reference wrapper not installed (npm i): skipped");
}

// 2. serve.
const home = benchHome("shellmcp-bench-startup-home-");
const env = { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home };
const floorSrc = join(dir, "floor.ts");
writeFileSync(
  floorSrc,
  `import { readSync, writeSync } from "node:fs";
const b = Buffer.alloc(65536);
readSync(0, b);
writeSync(1, "{}\\n");
try { while (readSync(0, b) > 0) {} } catch {}
process.exit(0);
`,
);
const floor = join(dir, "floor");
const built = Bun.spawnSync([process.execPath, "build", "--compile", "--bytecode", floorSrc, `--outfile=${floor}`], { stdout: "ignore" });
if (built.exitCode !== 0) throw new Error(`cannot build Bun's floor program: ${built.stderr}`);
const refArgv =
  ref === undefined
    ? undefined
    : [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")];

/** `SHELLMCP_BENCH_BEFORE`: another build (e.g. the one before a change), measured alternately with the others. */
const BEFORE = process.env.SHELLMCP_BENCH_BEFORE;
const argvs: [string, string[]][] = [
  ["shellmcp serve", [OURS, "serve"]],
  ["Bun's floor (answer one line, nothing else)", [floor]],
  ...(refArgv === undefined ? [] : ([["Codex 0.97.0 codex-exec-mcp-server", refArgv]] as [string, string[]][])),
  ...(BEFORE === undefined ? [] : ([[`before: ${BEFORE} serve`, [BEFORE, "serve"]]] as [string, string[]][])),
];
const lat = argvs.map(() => [] as number[]);
for (let i = 0; i < serveRuns; i++) for (let j = 0; j < argvs.length; j++) lat[j]!.push(await initializeOnce(argvs[j]![1], env));
console.log(`\ninitialize, spawn → first byte of the answer, median of ${serveRuns} alternating starts`);
for (let j = 0; j < argvs.length; j++) row(argvs[j]![0], median(lat[j]!));
if (refArgv !== undefined)
  console.log(
    `shellmcp / reference: ${pairedRatio(lat[0]!, lat[2]!).toFixed(2)}× (target ≤ 2×); Bun's floor / reference: ${pairedRatio(lat[1]!, lat[2]!).toFixed(2)}×`,
  );
console.log(`shellmcp / Bun's floor: ${pairedRatio(lat[0]!, lat[1]!).toFixed(2)}×`);
if (BEFORE !== undefined) console.log(`before / Bun's floor: ${pairedRatio(lat[lat.length - 1]!, lat[1]!).toFixed(2)}×`);

/** RSS and its split, MiB, of `pid`: its executable's code (r-xp), its other mappings of it, anonymous, the rest. */
function memory(pid: number, exe: string): { rss: number; code: number; exeOther: number; anon: number } {
  const smaps = readFileSync(`/proc/${pid}/smaps`, "utf8");
  let rss = 0;
  let code = 0;
  let exeOther = 0;
  let anon = 0;
  for (const block of smaps.split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
    const head = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \d+\s*(.*)$/m.exec(block);
    const kb = Number(/^Rss:\s+(\d+) kB/m.exec(block)?.[1] ?? 0);
    const anonKb = Number(/^Anonymous:\s+(\d+) kB/m.exec(block)?.[1] ?? 0);
    rss += kb;
    anon += anonKb;
    if (head?.[2] === exe) {
      if (head[1] === "r-xp") code += kb;
      else exeOther += kb - anonKb;
    }
  }
  return { rss: rss / 1024, code: code / 1024, exeOther: exeOther / 1024, anon: anon / 1024 };
}

const fmt = (m: ReturnType<typeof memory>) =>
  `${m.rss.toFixed(1).padStart(5)} MiB (its code ${m.code.toFixed(1)}, rest of its file ${m.exeOther.toFixed(1)}, anonymous ${m.anon.toFixed(1)})`;
console.log(`\nidle RSS, ${IDLE_MS} ms after start-up, then ${IDLE_MS} ms after 8 calls (danger-full-access, \`true\`)`);
for (const [name, argv, extra] of [
  ["shellmcp serve", [OURS, "serve", "--sandbox", "danger-full-access"], {}],
  ["shellmcp serve, SHELLMCP_KEEP_CODE_PAGES=1", [OURS, "serve", "--sandbox", "danger-full-access"], { SHELLMCP_KEEP_CODE_PAGES: "1" }],
  ...(refArgv === undefined ? [] : [["Codex 0.97.0 codex-exec-mcp-server", refArgv, {}]]),
] as [string, string[], Record<string, string>][]) {
  const rpc = await startLineRpc(argv, { ...env, ...extra });
  if (argv === refArgv)
    await rpc.request("codex/sandbox-state/update", { sandboxPolicy: { type: "danger-full-access" }, sandboxCwd: home });
  const exePath = realpathSync(`/proc/${rpc.proc.pid}/exe`);
  await Bun.sleep(IDLE_MS);
  const afterStart = memory(rpc.proc.pid, exePath);
  for (let i = 0; i < 8; i++) {
    const r = await rpc.request("tools/call", { name: "shell", arguments: { command: "true", workdir: home, login: false } });
    if (r.error !== undefined) throw new Error(`${name}: ${JSON.stringify(r.error)}`);
  }
  await Bun.sleep(IDLE_MS);
  const afterCalls = memory(rpc.proc.pid, exePath);
  console.log(`${name}\n  after start-up ${fmt(afterStart)}\n  after 8 calls  ${fmt(afterCalls)}`);
  await rpc.close();
}
{
  const p = Bun.spawn([floor], { stdin: "pipe", stdout: "pipe", stderr: "ignore" });
  await p.stdin.write("\n");
  await p.stdin.flush();
  await p.stdout.getReader().read();
  await Bun.sleep(500);
  console.log(`Bun's floor\n  idle           ${fmt(memory(p.pid, realpathSync(floor)))}`);
  await p.stdin.end();
  await p.exited;
}
