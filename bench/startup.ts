/**
 * Start-up time of the exec wrapper role, the project's hottest path (the patched shell execs it for every
 * program). The binary is invoked as `codex-execve-wrapper` with no arguments, so it exits at once with its
 * usage error; compared with `/bin/true` and with the Rust reference wrapper (0.97.0) doing the same.
 *
 *   bun bench/startup.ts [runs]
 */
import { symlinkSync } from "node:fs";

import { join } from "node:path";
import { benchDir, referenceShellToolDir, ROOT, row, timeSpawns } from "./lib.ts";

const runs = Number(process.argv[2] ?? 200);
const dir = benchDir("shellmcp-bench-");
const wrapper = join(dir, "codex-execve-wrapper");
symlinkSync(join(ROOT, "dist", "shellmcp"), wrapper);

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
