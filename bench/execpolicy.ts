/**
 * Exec policy speed: 10,000 argv checked against a 200-rule policy.
 *
 * `codex execpolicy check` evaluates one command per process, so there is no batch mode to compare with; we
 * report (1) the per-invocation cost of the CLI, ours vs Codex's, over the same 200-rule file and a sample of
 * the argv, and (2) our in-process cost per check over all 10,000 (what `serve` pays per intercepted exec), and
 * the load time of the 200-rule file.
 *
 *   bun bench/execpolicy.ts [cli-invocations]
 */
import { writeFileSync } from "node:fs";

import { join } from "node:path";
import { policyFromSources } from "../src/execpolicy/load.ts";
import { referenceCodex } from "../test/helpers/reference.ts";
import { benchDir, median, ROOT } from "./lib.ts";

const CLI_RUNS = Number(process.argv[2] ?? 100);
const PROGRAMS = ["git", "npm", "cargo", "docker", "kubectl", "rm", "ls", "python3", "node", "make"];
const WORDS = [
  "status",
  "push",
  "pull",
  "install",
  "run",
  "build",
  "test",
  "--force",
  "-rf",
  "log",
  "diff",
  "apply",
  "exec",
  "publish",
  "deploy",
];

let seed = 42;
const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)]!;

const lines: string[] = [];
for (let i = 0; i < 200; i++) {
  const tail = Array.from({ length: 1 + Math.floor(rnd() * 2) }, () =>
    rnd() < 0.3 ? `[${JSON.stringify(pick(WORDS))}, ${JSON.stringify(pick(WORDS))}]` : JSON.stringify(pick(WORDS)),
  );
  lines.push(
    `prefix_rule(pattern = [${JSON.stringify(pick(PROGRAMS))}, ${tail.join(", ")}], decision = ${JSON.stringify(pick(["allow", "prompt", "forbidden"]))})`,
  );
}
const rules = lines.join("\n") + "\n";
const argvs = Array.from({ length: 10_000 }, () => [pick(PROGRAMS), ...Array.from({ length: Math.floor(rnd() * 4) }, () => pick(WORDS))]);

// In-process.
let t0 = Bun.nanoseconds();
const policy = policyFromSources([{ path: "bench.rules", text: rules }]);
const loadMs = (Bun.nanoseconds() - t0) / 1e6;
const rounds: number[] = [];
let matched = 0;
for (let r = 0; r < 5; r++) {
  t0 = Bun.nanoseconds();
  for (const a of argvs) if (policy.check(a).decision !== undefined) matched++;
  rounds.push((Bun.nanoseconds() - t0) / 1e3 / argvs.length);
}
console.log(
  `200-rule policy: load ${loadMs.toFixed(2)} ms; in-process check ${median(rounds).toFixed(2)} µs per argv (10,000 argv, ${matched / 5} matched)`,
);

// CLI, one process per check.
const dir = benchDir("shellmcp-bench-ep-");
writeFileSync(join(dir, "bench.rules"), rules);
function cli(exe: string): number {
  const per: number[] = [];
  for (let i = 0; i < CLI_RUNS; i++) {
    const a = argvs[i]!;
    const s = Bun.nanoseconds();
    const p = Bun.spawnSync([exe, "execpolicy", "check", "--rules", "bench.rules", "--", ...a], {
      cwd: dir,
      stdout: "pipe",
      stderr: "pipe",
    });
    per.push((Bun.nanoseconds() - s) / 1e6);
    if (p.exitCode !== 0) throw new Error(`${exe} failed: ${p.stderr}`);
  }
  return median(per);
}
const ours = cli(join(ROOT, "dist", "shellmcp"));
console.log(`shellmcp execpolicy check: ${ours.toFixed(2)} ms per invocation (median of ${CLI_RUNS})`);
const codex = referenceCodex();
if (codex === undefined) console.log("codex CLI not installed (npm i): skipped");
else {
  const theirs = cli(codex);
  console.log(`codex execpolicy check:    ${theirs.toFixed(2)} ms per invocation`);
  console.log(`ours / codex (CLI): ${(ours / theirs).toFixed(2)}×`);
}
