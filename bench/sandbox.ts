/**
 * Cost of running `/bin/true` under the sandbox, as a person would: `shellmcp sandbox linux` per backend
 * (read-only policy), against `codex sandbox -- /bin/true` (0.169, bubblewrap), plain bwrap with a comparable
 * argv, bare exec and `shellmcp --version` (the floor: one Bun start). N interleaved rounds; ratios are medians of
 * per-round ratios, against Codex (read-only) and plain bwrap (workspace-write).
 *
 *   bun bench/sandbox.ts [runs]
 */
import { mkdirSync } from "node:fs";

import { join } from "node:path";
import { referenceCodex } from "../test/helpers/reference.ts";
import { benchDir, median, pairedRatio, ROOT } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 40);
const ours = join(ROOT, "dist", "shellmcp");

/** One run of `argv` (stdio ignored, stderr kept for the error), in ms; throws when it fails. */
function once(argv: string[], env: Record<string, string | undefined>, cwd?: string): number {
  const t0 = Bun.nanoseconds();
  const r = Bun.spawnSync(argv, { cwd, stdin: "ignore", stdout: "ignore", stderr: "pipe", env: env as Record<string, string> });
  const ms = (Bun.nanoseconds() - t0) / 1e6;
  if (r.exitCode !== 0) throw new Error(`${argv.join(" ")} failed: ${r.stderr}`);
  return ms;
}

/** A measured command: its argv, environment and working directory. */
interface Variant {
  argv: string[];
  env?: Record<string, string | undefined>;
  cwd?: string;
}

const variants: Record<string, Variant> = {};
variants.bare = { argv: ["/bin/true"] };
variants.version = { argv: [ours, "--version"] };
/**
 * The baseline: bubblewrap run by hand with the namespaces our plans use, read-only `/`, a private `/dev` and
 * `/proc`, plus `mounts` (binds after the root), then `/bin/true`. Written out here rather than taken from
 * src/sandbox/linux/bwrap.ts, so that the baseline does not move when our plans do.
 */
function plainBwrap(mounts: string[], tail: string[] = []): string[] {
  const ns = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--proc", "/proc"];
  return [
    "bwrap",
    "--new-session",
    "--die-with-parent",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    ...mounts,
    ...ns,
    ...tail,
    "--",
    "/bin/true",
  ];
}
variants.bwrap = { argv: plainBwrap([]) };
variants.landlock = { argv: [ours, "sandbox", "linux", "--backend", "landlock", "--", "/bin/true"] };
variants.ourBwrap = { argv: [ours, "sandbox", "linux", "--backend", "bwrap", "--", "/bin/true"] };
// workspace-write through bwrap (issue 13's target: ≤ 2× plain bwrap with the same mounts).
const proj = benchDir("shellmcp-bench-ww-");
Bun.spawnSync(["git", "init", "-q", proj]);
variants.plainWW = {
  cwd: proj,
  argv: plainBwrap(
    ["--bind", "/tmp", "/tmp", "--bind", proj, proj, "--ro-bind", join(proj, ".git"), join(proj, ".git")],
    ["--cap-drop", "ALL"],
  ),
};
variants.oursWW = { cwd: proj, argv: [ours, "sandbox", "linux", "--sandbox", "workspace-write", "--backend", "bwrap", "--", "/bin/true"] };
variants.oursWWauto = { cwd: proj, argv: [ours, "sandbox", "linux", "--sandbox", "workspace-write", "--", "/bin/true"] };
const codex = referenceCodex();
mkdirSync(process.env.HOME + "/.codex-bench", { recursive: true });
if (codex !== undefined)
  variants.codex = { argv: [codex, "sandbox", "--", "/bin/true"], env: { ...process.env, CODEX_HOME: process.env.HOME + "/.codex-bench" } };

// Interleaved: each round runs every variant once, so a drift in the VM's speed hits all of them alike.
const times: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (let r = 0; r < RUNS; r++) {
  for (const [k, v] of Object.entries(variants)) times[k]!.push(once(v.argv, v.env ?? process.env, v.cwd));
}
const m = (k: string) => median(times[k]!);
/** One row: the median and the median of per-round ratios against `base`. */
function line(name: string, k: string, base?: string): void {
  const ratio = base === undefined || times[base] === undefined ? "" : `  ${pairedRatio(times[k]!, times[base]!).toFixed(2)}×`;
  console.log(`${name.padEnd(48)} ${m(k).toFixed(3).padStart(9)} ms${ratio}`);
}
const theirs = codex === undefined ? undefined : "codex";

console.log(`/bin/true under a read-only sandbox, median of ${RUNS} interleaved rounds (ratios: median of per-round ratios)`);
line("bare exec", "bare", theirs);
line("shellmcp --version (Bun start + CLI)", "version", theirs);
line("plain bwrap", "bwrap", theirs);
line("shellmcp sandbox linux --backend landlock", "landlock", theirs);
line("shellmcp sandbox linux --backend bwrap", "ourBwrap", theirs);
if (theirs !== undefined) line("codex sandbox (0.169, bwrap)", "codex", theirs);
else console.log("codex not installed (npm i): no ratios");
console.log("(ratios are against codex sandbox)");
console.log(`\nworkspace-write, /bin/true, bwrap`);
line("plain bwrap, same mounts", "plainWW", "plainWW");
line("shellmcp --version (Bun start + CLI)", "version", "plainWW");
line("shellmcp sandbox linux --backend bwrap", "oursWW", "plainWW");
line("shellmcp sandbox linux (auto: + bwrap preflight)", "oursWWauto", "plainWW");
console.log("(ratios are against plain bwrap; target ≤ 2×)");
