/**
 * Cost of running `/bin/true` under the sandbox, as a person would: `shellmcp sandbox linux` per backend
 * (read-only policy), against `codex sandbox -- /bin/true` (0.169, bubblewrap), plain bwrap with a comparable
 * argv, and bare exec. Median of N runs each; ratios against Codex.
 *
 *   bun bench/sandbox.ts [runs]
 */
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { referenceCodex } from "../test/helpers/reference.ts";
import { median, ROOT, row } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 40);
const ours = join(ROOT, "dist", "shellmcp");

function time(argv: string[], env: Record<string, string | undefined> = process.env, opts: { cwd?: string } = {}): number {
  const per: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = Bun.nanoseconds();
    const r = Bun.spawnSync(argv, { cwd: opts.cwd, stdin: "ignore", stdout: "ignore", stderr: "pipe", env: env as Record<string, string> });
    per.push((Bun.nanoseconds() - t0) / 1e6);
    if (r.exitCode !== 0) throw new Error(`${argv.join(" ")} failed: ${r.stderr}`);
  }
  return median(per);
}

const bare = time(["/bin/true"]);
const bwrap = time([
  "bwrap",
  "--new-session",
  "--die-with-parent",
  "--ro-bind",
  "/",
  "/",
  "--dev",
  "/dev",
  "--unshare-user",
  "--unshare-pid",
  "--unshare-ipc",
  "--unshare-net",
  "--proc",
  "/proc",
  "--",
  "/bin/true",
]);
const landlock = time([ours, "sandbox", "linux", "--backend", "landlock", "--", "/bin/true"]);
const ourBwrap = time([ours, "sandbox", "linux", "--backend", "bwrap", "--", "/bin/true"]);
// workspace-write through bwrap (issue 13's target: ≤ 2× plain bwrap with the same mounts).
const proj = mkdtempSync(join(tmpdir(), "shellmcp-bench-ww-"));
Bun.spawnSync(["git", "init", "-q", proj]);
const inProj = { cwd: proj };
const plainWW = time(
  [
    "bwrap",
    "--new-session",
    "--die-with-parent",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--bind",
    "/tmp",
    "/tmp",
    "--bind",
    proj,
    proj,
    "--ro-bind",
    join(proj, ".git"),
    join(proj, ".git"),
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-net",
    "--proc",
    "/proc",
    "--cap-drop",
    "ALL",
    "--",
    "/bin/true",
  ],
  process.env,
  inProj,
);
const oursWW = time(
  [ours, "sandbox", "linux", "--sandbox", "workspace-write", "--backend", "bwrap", "--", "/bin/true"],
  process.env,
  inProj,
);
const oursWWauto = time([ours, "sandbox", "linux", "--sandbox", "workspace-write", "--", "/bin/true"], process.env, inProj);
const codex = referenceCodex();
mkdirSync(process.env.HOME + "/.codex-bench", { recursive: true });
const theirs =
  codex === undefined
    ? undefined
    : time([codex, "sandbox", "--", "/bin/true"], { ...process.env, CODEX_HOME: process.env.HOME + "/.codex-bench" });

console.log(`/bin/true under a read-only sandbox, median of ${RUNS}`);
row("bare exec", bare, theirs);
row("plain bwrap", bwrap, theirs);
row("shellmcp sandbox linux --backend landlock", landlock, theirs);
row("shellmcp sandbox linux --backend bwrap", ourBwrap, theirs);
if (theirs !== undefined) row("codex sandbox (0.169, bwrap)", theirs, theirs);
else console.log("codex not installed (npm i): no ratios");
console.log("(ratios are against codex sandbox)");
console.log(`\nworkspace-write, /bin/true, bwrap, median of ${RUNS}`);
row("plain bwrap, same mounts", plainWW, plainWW);
row("shellmcp sandbox linux --backend bwrap", oursWW, plainWW);
row("shellmcp sandbox linux (auto: + bwrap preflight)", oursWWauto, plainWW);
console.log("(ratios are against plain bwrap; target ≤ 2×)");
