/**
 * Cost of the git guard (src/sandbox/git/guard.ts, issue 34) per call, beside a trivial call's time:
 * - in process: `snapshot` + `check` (nothing changed) over a realistic workspace — a clone of this repository (its
 *   work tree, ~150 folders), a `node_modules` of 2,000 folders (skipped by name), three nested repositories (one a
 *   submodule with its git dir in `.git/modules`) — alone, and with this machine's `/tmp` as a second writable root
 *   (as workspace-write has it); and over a workspace with no repository (the cost when there is nothing to guard);
 * - end to end: a trivial call (`true`) in that workspace, workspace-write, under bubblewrap and under Landlock, on
 *   the build with the guard and on
 *   `SHELLMCP_BENCH_BINARY_BEFORE` (the build before it), alternating, median of per-round ratios.
 *
 *   bun bench/git-guard.ts [runs]
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { GitGuard } from "../src/sandbox/git/guard.ts";
import { canonicalPath, type WritableView } from "../src/sandbox/writable.ts";
import { startServe, type Session } from "../test/helpers/mcp.ts";
import { benchDir, median, pairedRatio, ROOT } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 30);
const BEFORE = process.env.SHELLMCP_BENCH_BINARY_BEFORE;
const dir = benchDir("shellmcp-bench-git-guard-");

function git(cwd: string, ...args: string[]): void {
  const r = Bun.spawnSync(["git", "-C", cwd, "-c", "user.name=b", "-c", "user.email=b@e", "-c", "protocol.file.allow=always", ...args]);
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
}

const ws = join(dir, "ws");
git(dir, "clone", "-q", ROOT, ws);
for (let i = 0; i < 2000; i++) mkdirSync(join(ws, "node_modules", `p${Math.floor(i / 20)}`, `d${i}`), { recursive: true });
for (const n of ["vendor/a", "tools/b"]) {
  mkdirSync(join(ws, n), { recursive: true });
  git(join(ws, n), "init", "-q");
}
const sub = join(dir, "sub");
mkdirSync(sub);
git(sub, "init", "-q");
git(sub, "commit", "-q", "--allow-empty", "-m", "s");
git(ws, "submodule", "add", "-q", sub, "mods/sub");
const empty = join(dir, "empty");
mkdirSync(join(empty, "src", "a"), { recursive: true });
writeFileSync(join(empty, "src", "a", "f.txt"), "x\n");

const view = (...roots: string[]): WritableView => ({ full: false, roots: roots.map((r) => canonicalPath(r)), readOnly: [] });

function inProcess(name: string, v: WritableView): void {
  const guard = new GitGuard();
  const snaps: number[] = [];
  const checks: number[] = [];
  let gitDirs = 0;
  for (let i = 0; i < RUNS; i++) {
    const s = guard.snapshot(v)!;
    const r = guard.check(s, v);
    if (r.undone.length + r.failed.length > 0) throw new Error(`${name}: the check found changes: ${JSON.stringify(r)}`);
    snaps.push(s.tookMs);
    checks.push(r.tookMs);
    gitDirs = s.gitDirs;
  }
  console.log(`${name}: snapshot ${median(snaps).toFixed(2)} ms + check ${median(checks).toFixed(2)} ms (${gitDirs} git dirs)`);
}

inProcess("workspace (clone + node_modules + 3 nested repositories)", view(ws));
inProcess("workspace + this machine's /tmp", view(ws, "/tmp"));
inProcess("a workspace with no repository", view(empty));

async function trivial(s: Session): Promise<number> {
  const t0 = Bun.nanoseconds();
  await s.shell({ command: "true", workdir: ws, login: false });
  return (Bun.nanoseconds() - t0) / 1e6;
}

for (const backend of ["bwrap", "landlock"]) {
  const args = ["--sandbox", "workspace-write", "--cd", ws, "--sandbox-backend", backend];
  const after = await startServe({ args });
  const before = BEFORE === undefined ? undefined : await startServe({ command: [BEFORE], args });
  try {
    await trivial(after);
    if (before !== undefined) await trivial(before);
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      a.push(await trivial(after));
      if (before !== undefined) b.push(await trivial(before));
    }
    console.log(`trivial call in that workspace (workspace-write, ${backend}): ${median(a).toFixed(2)} ms with the guard`);
    if (before !== undefined)
      console.log(`  before the guard: ${median(b).toFixed(2)} ms; ratio (median of per-round ratios) ${pairedRatio(a, b).toFixed(2)}×`);
  } finally {
    await after.close();
    await before?.close();
  }
}
rmSync(dir, { recursive: true, force: true });
