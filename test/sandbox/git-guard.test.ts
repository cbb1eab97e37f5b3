/**
 * src/sandbox/git/guard.ts in process: snapshot, change as a sandboxed command would, check. The end-to-end attacks
 * (through the compiled `serve`) are in test/security/git-guard.test.ts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nestedRepoWritable } from "../../src/sandbox/git/control-entries.ts";
import { GitGuard } from "../../src/sandbox/git/guard.ts";
import { setKeptAsideBoundForTest } from "../../src/sandbox/git/kept-aside.ts";
import type { WritableView } from "../../src/sandbox/writable.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-C", cwd, "-c", "user.name=t", "-c", "user.email=t@e", ...args], { encoding: "utf8" });
}

/** A root folder with a repository `ws` (one commit) in it; the view writes the whole root (Landlock's). */
function tree(): { root: string; ws: string; view: WritableView } {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "git-guard-")));
  dirs.push(root);
  const ws = join(root, "ws");
  mkdirSync(ws);
  git(ws, "init", "-q");
  git(ws, "commit", "-q", "--allow-empty", "-m", "a");
  return { root, ws, view: { full: false, roots: [root], readOnly: [] } };
}

describe("git guard", () => {
  test("a FIFO at config and a new hook: config written back as a regular file, hook removed, both reported", () => {
    const { ws, view } = tree();
    const guard = new GitGuard();
    const config = readFileSync(join(ws, ".git", "config"));
    const snap = guard.snapshot(view)!;
    expect(snap.gitDirs).toBe(1);
    rmSync(join(ws, ".git", "config"));
    execFileSync("mkfifo", [join(ws, ".git", "config")]);
    writeFileSync(join(ws, ".git", "hooks", "pre-commit"), "#!/bin/sh\n", { mode: 0o755 });
    const r = guard.check(snap, view);
    expect(lstatSync(join(ws, ".git", "config")).isFile()).toBe(true);
    expect(readFileSync(join(ws, ".git", "config"))).toEqual(config);
    expect(existsSync(join(ws, ".git", "hooks", "pre-commit"))).toBe(false);
    expect(r.failed).toEqual([]);
    expect(r.undone.join("\n")).toContain("ws/.git/config: a file was replaced by a FIFO");
    expect(r.undone.join("\n")).toContain("ws/.git/hooks/pre-commit: created by the command");
  });

  test("a .git replaced by a symlink: nothing is written through it, and the result says what was not undone", () => {
    const { root, ws, view } = tree();
    const elsewhere = join(root, "elsewhere");
    mkdirSync(join(elsewhere, "hooks"), { recursive: true });
    const guard = new GitGuard();
    const snap = guard.snapshot(view)!;
    execFileSync("mv", [join(ws, ".git"), join(ws, "moved")]);
    symlinkSync(elsewhere, join(ws, ".git"));
    const r = guard.check(snap, view);
    expect(r.failed.length).toBeGreaterThan(0);
    expect(r.failed.join("\n")).toContain("it was replaced by a symbolic link");
    expect(existsSync(join(elsewhere, "config"))).toBe(false);
    expect(existsSync(join(elsewhere, "hooks", "pre-commit.sample"))).toBe(false);
  });

  test("nestedRepoWritable: a gitlink's .git file pointing into a read-only git dir is not the sandbox's; one in a writable place is", () => {
    const { ws, view } = tree();
    const modules = join(ws, ".git", "modules", "sub");
    mkdirSync(modules, { recursive: true });
    mkdirSync(join(ws, "sub"));
    writeFileSync(join(ws, "sub", ".git"), "gitdir: ../.git/modules/sub\n");
    const bwrapLike: WritableView = { ...view, readOnly: [join(ws, ".git")] };
    expect(nestedRepoWritable(ws, "sub", bwrapLike)).toBe(false);
    expect(nestedRepoWritable(ws, "sub", view)).toBe(true);
    // No .git yet, but the sandbox could create one: writable. A path leaving the work tree: fail closed.
    expect(nestedRepoWritable(ws, "other", bwrapLike)).toBe(true);
    expect(nestedRepoWritable(ws, "../x", bwrapLike)).toBe(true);
    // A FIFO for a .git: fail closed, and nothing blocks.
    mkdirSync(join(ws, "fifo"));
    execFileSync("mkfifo", [join(ws, "fifo", ".git")]);
    expect(nestedRepoWritable(ws, "fifo", bwrapLike)).toBe(true);
  });

  test("a folder with no repository costs only the search; an unsandboxed view is not guarded", () => {
    const root = realpathSync(mkdtempSync(join(tmpdir(), "git-guard-")));
    dirs.push(root);
    mkdirSync(join(root, "a", "b"), { recursive: true });
    const guard = new GitGuard();
    const snap = guard.snapshot({ full: false, roots: [root], readOnly: [] })!;
    expect(snap.entries).toEqual([]);
    expect(snap.gitDirs).toBe(0);
    expect(guard.snapshot({ full: true, roots: [], readOnly: [] })).toBeUndefined();
  });

  test("issue 38 item 2: a change made while no sandbox ran is the user's and kept; one made while a sandbox that could write it ran is undone and kept aside", () => {
    const { root, ws, view } = tree();
    const kept = join(root, "kept");
    const guard = new GitGuard({ keptDir: kept });
    const config = join(ws, ".git", "config");
    // A call, then the user edits between calls: kept, not reported.
    guard.check(guard.snapshot(view)!, view);
    writeFileSync(config, readFileSync(config, "utf8") + "[user]\n\tname = me\n");
    const userVersion = readFileSync(config, "utf8");
    const b = guard.snapshot(view)!;
    const rb = guard.check(b, view);
    expect([...b.undone, ...b.failed, ...rb.undone, ...rb.failed]).toEqual([]);
    expect(readFileSync(config, "utf8")).toBe(userVersion);
    // A session (a snapshot without its check yet) that could write the config: an edit now may be its own.
    const session = guard.snapshot(view)!;
    writeFileSync(config, userVersion + "[core]\n\tfsmonitor = x\n");
    const c = guard.snapshot(view)!;
    expect(c.undone.length).toBe(1);
    expect(c.undone[0]).toContain("while another call or session of this server was running");
    const at = /kept aside at (\S+)/.exec(c.undone[0]!)![1]!;
    expect(at.startsWith(kept + "/")).toBe(true);
    expect(readFileSync(at, "utf8")).toContain("fsmonitor = x");
    expect(lstatSync(at).mode & 0o777).toBe(0o600);
    expect(readFileSync(config, "utf8")).toBe(userVersion);
    guard.check(c, view);
    guard.check(session, view);
    // A running sandbox that cannot write the repository (another root) does not make the user's edit its own.
    const other = realpathSync(mkdtempSync(join(tmpdir(), "git-guard-")));
    dirs.push(other);
    const elsewhere = guard.snapshot({ full: false, roots: [other], readOnly: [] })!;
    writeFileSync(config, userVersion + "[alias]\n\tst = status\n");
    const d = guard.snapshot(view)!;
    expect([...d.undone, ...d.failed]).toEqual([]);
    expect(readFileSync(config, "utf8")).toContain("st = status");
    guard.check(d, view);
    guard.check(elsewhere, { full: false, roots: [other], readOnly: [] });
  });

  test("issue 38: what is kept aside is bounded (a sandbox rewriting large hooks cannot fill the disk); past it the change is still undone and the report says no copy was kept", () => {
    const { root, ws, view } = tree();
    const kept = join(root, "kept");
    const guard = new GitGuard({ keptDir: kept });
    const before = setKeptAsideBoundForTest(4096);
    try {
      const hook = join(ws, ".git", "hooks", "pre-commit");
      const session = guard.snapshot(view)!;
      writeFileSync(hook, "#!/bin/sh\n# small\n", { mode: 0o755 });
      const a = guard.snapshot(view)!;
      expect(a.undone.join("\n")).toContain("kept aside at");
      guard.check(a, view);
      writeFileSync(hook, "#!/bin/sh\n" + "#".repeat(8192) + "\n", { mode: 0o755 });
      const b = guard.snapshot(view)!;
      expect(existsSync(hook)).toBe(false);
      expect(b.undone.join("\n")).toContain("no copy of the changed version was kept");
      guard.check(b, view);
      guard.check(session, view);
    } finally {
      setKeptAsideBoundForTest(before);
    }
  });

  test("issue 38: hooks/ swapped for a link while a session runs is made a folder again at the next snapshot, and that call's own hook is then removed from the new folder", () => {
    const { root, ws, view } = tree();
    const outside = join(root, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, "keep"), "k");
    const guard = new GitGuard({ keptDir: join(root, "kept") });
    const hooks = join(ws, ".git", "hooks");
    const session = guard.snapshot(view)!;
    execFileSync("mv", [hooks, join(ws, "hooks-moved")]);
    symlinkSync(outside, hooks);
    const call = guard.snapshot(view)!;
    expect(call.failed).toEqual([]);
    expect(lstatSync(hooks).isDirectory()).toBe(true);
    // With the hooks it had (git init's samples here).
    expect(existsSync(join(hooks, "pre-commit.sample"))).toBe(true);
    writeFileSync(join(hooks, "pre-commit"), "#!/bin/sh\n");
    const r = guard.check(call, view);
    expect(r.failed).toEqual([]);
    expect(existsSync(join(hooks, "pre-commit"))).toBe(false);
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("k");
    guard.check(session, view);
  });
});
