/**
 * The one git discovery (src/sandbox/git/discover.ts, issue 38) driven by a generator of repository layouts: work
 * trees at any depth, bare repositories inside the project, `.git` files naming a git dir elsewhere, `commondir`
 * chains, linked worktrees, submodule git dirs behind gitlinks, symlinked `hooks/`, folders renamed into place and
 * thousands of plain folders. On every layout three readers must agree about each git dir's control files:
 * - the bubblewrap plan's read-only binds (src/sandbox/linux/bwrap.ts `bwrapMounts`, the argv the kernel gets);
 * - the boundary's model of that sandbox (src/sandbox/writable.ts `writableView`: read-only exactly where bound);
 * - the git guard (src/sandbox/git/guard.ts): under Landlock it records them; under bubblewrap it leaves alone
 *   what the kernel keeps read-only.
 * Pure: files in a temporary folder, no sandbox is run.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { discoverGitDirs, resetDiscovery, setDiscoveryBounds } from "../../src/sandbox/git/discover.ts";
import { noteWritable } from "../../src/sandbox/git/taint.ts";
import { GitGuard } from "../../src/sandbox/git/guard.ts";
import { bwrapMounts } from "../../src/sandbox/linux/bwrap.ts";
import { releaseBwrapPlan } from "../../src/sandbox/linux/mount-points.ts";
import { planSandboxPolicy } from "../../src/sandbox/filesystem-plan.ts";
import { isUnder } from "../../src/sandbox/paths.ts";
import { parseSandboxPolicy } from "../../src/sandbox/policy.ts";
import { canWrite, writableView } from "../../src/sandbox/writable.ts";
import { rng } from "../helpers/rng.ts";

const base = realpathSync(mkdtempSync(join(CONF_BASE, "git-discover-")));
afterAll(() => rmSync(base, { recursive: true, force: true }), 60_000);

/** A git dir at `g` as git lays one out (HEAD, objects/, refs/, config, hooks/ with a hook, info/). */
function makeGitDir(g: string, opts: { hooks?: "dir" | "none" | { link: string } } = {}): void {
  mkdirSync(join(g, "objects"), { recursive: true });
  mkdirSync(join(g, "refs", "heads"), { recursive: true });
  writeFileSync(join(g, "HEAD"), "ref: refs/heads/main\n");
  writeFileSync(join(g, "config"), "[core]\n\tbare = false\n");
  mkdirSync(join(g, "info"));
  writeFileSync(join(g, "info", "exclude"), "");
  const h = opts.hooks ?? "dir";
  if (h === "dir") {
    mkdirSync(join(g, "hooks"));
    writeFileSync(join(g, "hooks", "pre-commit.sample"), "#!/bin/sh\n", { mode: 0o755 });
  } else if (typeof h === "object") symlinkSync(h.link, join(g, "hooks"));
}

/** One generated layout: the root and the git dirs it holds (`whole`: a work tree's `.git` folder, bound whole). */
interface Layout {
  root: string;
  gitDirs: { path: string; whole: boolean; hooksLink?: string }[];
}

/** The folder at a random depth (0–`max` levels) below `from`, made. */
function deepFolder(r: () => number, from: string, max: number): string {
  let d = from;
  const n = Math.floor(r() * (max + 1));
  for (let i = 0; i < n; i++) d = join(d, `l${i}-${Math.floor(r() * 3)}`);
  mkdirSync(d, { recursive: true });
  return d;
}

const FEATURES = ["worktree", "bare", "gitfile", "linked", "commondir", "submodule", "hooksLink", "renamed", "flood"] as const;

function generate(seed: number): Layout {
  const r = rng(seed);
  const root = join(base, `layout-${seed}`);
  mkdirSync(root);
  const gitDirs: Layout["gitDirs"] = [];
  const on = FEATURES.filter(() => r() < 0.6);
  for (const f of on) {
    const at = deepFolder(r, join(root, f), 7);
    switch (f) {
      case "worktree": {
        makeGitDir(join(at, "repo", ".git"));
        gitDirs.push({ path: join(at, "repo", ".git"), whole: true });
        break;
      }
      case "bare": {
        makeGitDir(join(at, "backup.git"), { hooks: r() < 0.3 ? "none" : "dir" });
        gitDirs.push({ path: join(at, "backup.git"), whole: false });
        break;
      }
      case "gitfile": {
        // `git init --separate-git-dir`: the work tree's .git file names a git dir elsewhere in the root.
        const store = join(root, "store", `sep-${seed}.git`);
        makeGitDir(store);
        mkdirSync(join(at, "wt"), { recursive: true });
        writeFileSync(join(at, "wt", ".git"), `gitdir: ${relative(join(at, "wt"), store)}\n`);
        gitDirs.push({ path: store, whole: true });
        break;
      }
      case "linked": {
        // `git worktree add`: main/.git/worktrees/w (HEAD, commondir, gitdir) and w/.git naming it.
        const main = join(at, "main");
        makeGitDir(join(main, ".git"));
        const admin = join(main, ".git", "worktrees", "w");
        mkdirSync(admin, { recursive: true });
        const w = join(at, "w");
        mkdirSync(w);
        writeFileSync(join(admin, "HEAD"), "ref: refs/heads/w\n");
        writeFileSync(join(admin, "commondir"), "../..\n");
        writeFileSync(join(admin, "gitdir"), `${join(w, ".git")}\n`);
        writeFileSync(join(w, ".git"), `gitdir: ${admin}\n`);
        gitDirs.push({ path: join(main, ".git"), whole: true }, { path: admin, whole: true });
        break;
      }
      case "commondir": {
        // An admin folder outside any .git whose commondir names a bare repository: a chain of two git dirs.
        const common = join(at, "common.git");
        makeGitDir(common);
        const admin = join(at, "admin");
        mkdirSync(admin);
        writeFileSync(join(admin, "HEAD"), "ref: refs/heads/x\n");
        writeFileSync(join(admin, "commondir"), "../common.git\n");
        writeFileSync(join(admin, "config.worktree"), "");
        gitDirs.push({ path: common, whole: false }, { path: admin, whole: false });
        break;
      }
      case "submodule": {
        const sup = join(at, "super");
        makeGitDir(join(sup, ".git"));
        makeGitDir(join(sup, ".git", "modules", "libs", "sub"));
        mkdirSync(join(sup, "libs", "sub"), { recursive: true });
        writeFileSync(join(sup, "libs", "sub", ".git"), "gitdir: ../../.git/modules/libs/sub\n");
        gitDirs.push({ path: join(sup, ".git"), whole: true }, { path: join(sup, ".git", "modules", "libs", "sub"), whole: true });
        break;
      }
      case "hooksLink": {
        const common = join(at, "common-hooks");
        mkdirSync(common);
        writeFileSync(join(common, "pre-receive"), "#!/bin/sh\n", { mode: 0o755 });
        makeGitDir(join(at, "linked-hooks.git"), { hooks: { link: "../common-hooks" } });
        gitDirs.push({ path: join(at, "linked-hooks.git"), whole: false, hooksLink: common });
        break;
      }
      case "renamed": {
        // Made elsewhere in the root, then renamed into place (before the server sees it).
        const tmp = join(root, `tmp-${seed}`);
        makeGitDir(join(tmp, ".git"));
        renameSync(tmp, join(at, "moved"));
        gitDirs.push({ path: join(at, "moved", ".git"), whole: true });
        break;
      }
      case "flood": {
        for (let i = 0; i < 300; i++) mkdirSync(join(at, `f${i}`)); // the 3,100-folder flood runs through the binary (test/security/git-discovery.test.ts)
        makeGitDir(join(at, "zz", "after-flood", ".git"));
        gitDirs.push({ path: join(at, "zz", "after-flood", ".git"), whole: true });
        break;
      }
    }
  }
  return { root, gitDirs };
}

/** The control paths of a git dir the readers must agree on. */
function controlPaths(g: string): string[] {
  return ["config", "config.worktree", "commondir", "gitdir", "hooks", join("hooks", "pre-commit"), "info", join("info", "attributes")].map(
    (n) => join(g, n),
  );
}

describe("one discovery, three readers that agree (issue 38)", () => {
  const policy = parseSandboxPolicy({ type: "workspace-write", exclude_slash_tmp: true, exclude_tmpdir_env_var: true });
  for (let seed = 1; seed <= 16; seed++) {
    test(`layout ${seed}`, () => {
      resetDiscovery();
      const { root, gitDirs } = generate(seed);
      // Discovery finds every git dir, at any depth.
      const found = new Set(discoverGitDirs([root]).repos.flatMap((e) => (e.gitDir === undefined ? [] : [e.gitDir])));
      for (const g of gitDirs) expect(found).toContain(g.path);

      const bwrap = writableView(policy, root, "bwrap", {}, root, true);
      const landlock = writableView(policy, root, "landlock", {});
      // The kernel's binds: what bwrapMounts gives bubblewrap read-only inside the root.
      const plan = planSandboxPolicy(policy, root, {}, { workdir: root });
      const created: string[] = [];
      const temp: string[] = [];
      const argv = bwrapMounts(plan, created, temp);
      releaseBwrapPlan({ argv, created, tempDirs: temp, direct: false });
      const roBinds = argv.flatMap((a, i) =>
        (a === "--ro-bind" || a === "--ro-bind-try") && isUnder(argv[i + 1]!, root) && argv[i + 1] !== root ? [argv[i + 1]!] : [],
      );
      // The model says read-only exactly where the kernel binds read-only.
      expect([...bwrap.readOnly].sort()).toEqual([...new Set(roBinds)].sort());
      const bound = (p: string) => roBinds.some((b) => isUnder(p, b));

      const guardBwrap = new GitGuard().snapshot(bwrap)!;
      const guardLandlock = new GitGuard().snapshot(landlock)!;
      const recordedLandlock = new Set(guardLandlock.entries.map((e) => e.path));
      const recordedBwrap = new Set(guardBwrap.entries.map((e) => e.path));
      for (const g of gitDirs) {
        for (const p of controlPaths(g.path)) {
          const rel = relative(root, p);
          // The model says what the kernel binds, path by path.
          expect({ rel, write: canWrite(bwrap, p) }).toEqual({ rel, write: !bound(p) });
          // bubblewrap: what exists, and hooks/ and info/ (held when missing), are bound read-only; a missing file
          // of a git dir not bound whole (commondir, config.worktree, gitdir) cannot be held by a mount point on the
          // host (git would read it there): the guard records it instead.
          const held = g.whole || /\/(hooks|info)(\/|$)/.test(p.slice(g.path.length)) || existsSync(p);
          if (held) expect({ rel, bound: bound(p) }).toEqual({ rel, bound: true });
          else expect({ rel, recorded: bound(p) || recordedBwrap.has(p) }).toEqual({ rel, recorded: true });
          // Landlock: writable, so the guard records it (or the folder holding it, with all it holds).
          expect(canWrite(landlock, p)).toBe(true);
        }
        for (const n of ["config", "hooks", "info"])
          expect({ g: relative(root, g.path), n, recorded: recordedLandlock.has(join(g.path, n)) }).toEqual({
            g: relative(root, g.path),
            n,
            recorded: true,
          });
        // A symlinked hooks/: its target inside the root is read-only too under bubblewrap.
        if (g.hooksLink !== undefined) expect(canWrite(bwrap, join(g.hooksLink, "pre-receive"))).toBe(false);
        // The work tree next to a git dir stays writable.
        expect(canWrite(bwrap, join(dirname(g.path), "new-file"))).toBe(
          !isUnder(dirname(g.path), g.path) && !bound(join(dirname(g.path), "new-file")),
        );
      }
      // Under bubblewrap the guard leaves alone everything the kernel keeps read-only.
      for (const e of guardBwrap.entries)
        expect({ p: relative(root, e.path), write: canWrite(bwrap, e.path) }).toEqual({ p: relative(root, e.path), write: true });
      expect(guardBwrap.truncated).toEqual([]);
      rmSync(root, { recursive: true, force: true });
    });
  }

  test("a root the complete search cannot finish: what it did not read is read-only under bubblewrap (too many: refused); Landlock refuses", () => {
    const root = join(base, "frontier");
    for (let i = 0; i < 60; i++) mkdirSync(join(root, `d${i}`), { recursive: true });
    const deep = join(root, "d7", "x", "repo", ".git");
    makeGitDir(deep);
    const before = setDiscoveryBounds({ firstMaxDirs: 20 });
    try {
      const found = discoverGitDirs([root]);
      expect(found.frontier.length).toBeGreaterThan(30);
      const bwrap = writableView(policy, root, "bwrap", {}, root, true);
      for (const f of found.frontier) expect(canWrite(bwrap, join(f, "x", "repo", ".git", "config"))).toBe(false);
      expect(canWrite(bwrap, join(deep, "config"))).toBe(false);
      expect(new GitGuard().snapshot(bwrap)).toBeDefined();
      expect(() => new GitGuard().snapshot(writableView(policy, root, "landlock", {}))).toThrow(/could not search all of it/);
      // Too many to bind one by one: the model says they are writable, and the guard refuses the call.
      setDiscoveryBounds({ firstMaxDirs: 20, frontierBinds: 10 });
      const all = writableView(policy, root, "bwrap", {}, root, true);
      expect(canWrite(all, join(found.frontier[0]!, "x"))).toBe(true);
      expect(() => new GitGuard().snapshot(all)).toThrow(/could not search all of it/);
      // A helper process planning its own mounts (no guard there) refuses as well.
      expect(() => bwrapMounts(planSandboxPolicy(policy, root, {}, { workdir: root }), [], [])).toThrow(/not searched/);
    } finally {
      setDiscoveryBounds(before);
    }
  });

  test("the registry: an original moved away is searched for again; a flood after the first search hides nothing", () => {
    const root = join(base, "registry");
    const g = join(root, "a", "repo", ".git");
    makeGitDir(g);
    const before = setDiscoveryBounds({ firstMaxDirs: 5_000, laterMaxDirs: 100 });
    try {
      expect(discoverGitDirs([root]).repos.some((e) => e.gitDir === g && e.original)).toBe(true);
      // A flood larger than every later search: the recorded original is still there.
      for (let i = 0; i < 300; i++) mkdirSync(join(root, `f${i}`));
      noteWritable({ full: false, roots: [root] });
      expect(discoverGitDirs([root]).repos.some((e) => e.gitDir === g && e.original)).toBe(true);
      // Moved (the host user, or a Landlock sandbox): searched again, found where it is now, still original.
      renameSync(join(root, "a"), join(root, "f5", "b"));
      noteWritable({ full: false, roots: [root] });
      const moved = join(root, "f5", "b", "repo", ".git");
      const again = discoverGitDirs([root]);
      expect(again.repos.some((e) => e.gitDir === moved && e.original)).toBe(true);
      // A repository made since is found (best effort, within the later search's bound), not original.
      rmSync(join(root, "f5"), { recursive: true });
      for (let i = 0; i < 300; i++) rmSync(join(root, `f${i}`), { recursive: true, force: true });
      makeGitDir(join(root, "new", ".git"));
      noteWritable({ full: false, roots: [root] });
      expect(discoverGitDirs([root]).repos.find((e) => e.gitDir === join(root, "new", ".git"))?.original).toBe(false);
    } finally {
      setDiscoveryBounds(before);
    }
  });
});
