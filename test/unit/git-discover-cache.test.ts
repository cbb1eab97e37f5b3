/**
 * The later search's listing cache (src/sandbox/git/discover.ts, issue 40 "per-call work proportional to what
 * changed"): a call lists again only the folders whose identity or ctime changed since the previous call's search,
 * and the cache never hides a repository the uncached search would find — made in a listed folder, in a folder whose
 * mtime was then set back, or in a folder put in place of another by a rename. Pure: files in a temporary folder.
 */
import { afterAll, expect, test } from "bun:test";
import { lstatSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { discoverGitDirs, laterSearchCounts, setDiscoveryBounds } from "../../src/sandbox/git/discover.ts";
import { noteWritable } from "../../src/sandbox/git/taint.ts";

const base = realpathSync(mkdtempSync(join(CONF_BASE, "git-discover-cache-")));
afterAll(() => rmSync(base, { recursive: true, force: true }));

function makeGitDir(g: string): void {
  mkdirSync(join(g, "objects"), { recursive: true });
  mkdirSync(join(g, "refs", "heads"), { recursive: true });
  writeFileSync(join(g, "HEAD"), "ref: refs/heads/main\n");
  writeFileSync(join(g, "config"), "[core]\n");
}

/** One call's discovery of `root` (a sandbox handed out before it, as each call does), and what it listed. */
function callOnce(root: string): { gitDirs: string[]; listed: number; reused: number } {
  noteWritable({ full: false, roots: [root] });
  const c0 = laterSearchCounts();
  const gitDirs = discoverGitDirs([root]).repos.flatMap((e) => (e.gitDir === undefined ? [] : [e.gitDir]));
  const c1 = laterSearchCounts();
  return { gitDirs, listed: c1.listed - c0.listed, reused: c1.reused - c0.reused };
}

/**
 * Waits until the kernel's file clock has passed `p`'s ctime (a file written now gets a later ctime), so that a
 * change made to `p` from now on gives it a ctime different from the one the cache recorded.
 */
function untilClockPasses(p: string): void {
  const was = lstatSync(p, { bigint: true }).ctimeNs;
  const probe = join(base, "clock-probe");
  for (;;) {
    writeFileSync(probe, "");
    if (lstatSync(probe, { bigint: true }).ctimeNs > was) return;
  }
}

test("a later search lists again only what changed; a repository made in a listed folder is still found, even with its folder's mtime set back or the folder renamed into place", () => {
  const root = join(base, "ws");
  for (let i = 0; i < 60; i++) mkdirSync(join(root, `f${i}`, "sub"), { recursive: true });
  makeGitDir(join(root, "f1", ".git"));
  // Remember every listing whatever its age (in use, only folders unchanged for LISTING_MIN_AGE_MS are).
  const before = setDiscoveryBounds({ listingMinAgeMs: -3_600_000 });
  try {
    expect(callOnce(root).gitDirs).toEqual([join(root, "f1", ".git")]); // the complete search
    const first = callOnce(root); // the first later search lists everything
    expect(first.listed).toBeGreaterThan(100);
    const again = callOnce(root); // nothing changed: nothing listed again
    expect(again.listed).toBe(0);
    expect(again.reused).toBe(first.listed);

    // A repository made two levels down: the folders on its way are listed again, the rest is not.
    untilClockPasses(join(root, "f7", "sub"));
    makeGitDir(join(root, "f7", "sub", "new", ".git"));
    const made = callOnce(root);
    expect(made.gitDirs).toContain(join(root, "f7", "sub", "new", ".git"));
    expect(made.listed).toBeLessThan(6);

    // mtime set back after the change: ctime still moved, the folder is listed again.
    const f9 = lstatSync(join(root, "f9", "sub"));
    untilClockPasses(join(root, "f9", "sub"));
    makeGitDir(join(root, "f9", "sub", ".git"));
    utimesSync(join(root, "f9", "sub"), f9.atime, f9.mtime);
    expect(callOnce(root).gitDirs).toContain(join(root, "f9", "sub", ".git"));

    // A folder renamed in place of another (same path, another inode, its own old ctime): listed.
    mkdirSync(join(base, "elsewhere", "sub", "r", ".git"), { recursive: true });
    rmSync(join(base, "elsewhere", "sub", "r", ".git"), { recursive: true });
    makeGitDir(join(base, "elsewhere", "sub", "r", ".git"));
    rmSync(join(root, "f20"), { recursive: true });
    renameSync(join(base, "elsewhere"), join(root, "f20"));
    expect(callOnce(root).gitDirs).toContain(join(root, "f20", "sub", "r", ".git"));
  } finally {
    setDiscoveryBounds(before);
  }
});
