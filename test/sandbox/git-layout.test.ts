/**
 * Issue 34, item 2: src/sandbox/git/layout.ts follows a repository's pointer files only where they have git's own
 * shape. Real layouts made by git (a linked worktree, a submodule, a nested submodule, a worktree of a submodule)
 * are found; pointers a sandboxed command or a room program could forge are refused.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { discoverRepository } from "../../src/sandbox/git/layout.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function git(cwd: string, ...args: string[]): void {
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@e", "-c", "protocol.file.allow=always", ...args], { cwd, stdio: "pipe" });
}

function base(): string {
  const d = realpathSync(mkdtempSync(join(tmpdir(), "layout-")));
  dirs.push(d);
  return d;
}

function repoAt(d: string): string {
  mkdirSync(d, { recursive: true });
  git(d, "init", "-q", "-b", "main");
  git(d, "commit", "-q", "--allow-empty", "-m", "one");
  return d;
}

describe("git layout", () => {
  test("a plain repository", () => {
    const ws = repoAt(join(base(), "ws"));
    mkdirSync(join(ws, "a", "b"), { recursive: true });
    expect(discoverRepository(join(ws, "a", "b"))).toEqual({
      kind: "repository",
      repository: { workTree: ws, gitDirs: [join(ws, ".git")] },
    });
  });

  test("a linked worktree (git worktree add): its admin folder and the main git dir", () => {
    const b = base();
    const ws = repoAt(join(b, "ws"));
    git(ws, "worktree", "add", "-q", join(b, "wt"));
    expect(discoverRepository(join(b, "wt"))).toEqual({
      kind: "repository",
      repository: { workTree: join(b, "wt"), gitDirs: [join(ws, ".git", "worktrees", "wt"), join(ws, ".git")] },
    });
  });

  test("a submodule, and a submodule of a submodule", () => {
    const b = base();
    const inner = repoAt(join(b, "inner"));
    const lib = repoAt(join(b, "lib"));
    git(lib, "submodule", "add", "-q", inner, "deps/inner");
    git(lib, "commit", "-q", "-m", "sub");
    const ws = repoAt(join(b, "ws"));
    git(ws, "submodule", "add", "-q", lib, "lib");
    git(ws, "submodule", "update", "-q", "--init", "--recursive");
    expect(discoverRepository(join(ws, "lib"))).toEqual({
      kind: "repository",
      repository: { workTree: join(ws, "lib"), gitDirs: [join(ws, ".git", "modules", "lib")] },
    });
    expect(discoverRepository(join(ws, "lib", "deps", "inner"))).toEqual({
      kind: "repository",
      repository: { workTree: join(ws, "lib", "deps", "inner"), gitDirs: [join(ws, ".git", "modules", "lib", "modules", "deps", "inner")] },
    });
  });

  test("a commondir naming another folder is refused", () => {
    const b = base();
    const ws = repoAt(join(b, "ws"));
    const other = repoAt(join(b, "other"));
    writeFileSync(join(ws, ".git", "commondir"), join(other, ".git"));
    const d = discoverRepository(ws);
    expect(d.kind).toBe("untrusted");
  });

  test("a forged worktree admin folder (commondir ../.. elsewhere) is refused", () => {
    const b = base();
    const ws = repoAt(join(b, "ws"));
    // worktrees/<name> inside a folder that is not a git dir: commondir "../.." names a plain folder.
    const fake = join(b, "plain", "worktrees", "x");
    mkdirSync(fake, { recursive: true });
    writeFileSync(join(fake, "HEAD"), "ref: refs/heads/main\n");
    writeFileSync(join(fake, "commondir"), "../..\n");
    writeFileSync(join(fake, "gitdir"), join(ws, "sub", ".git") + "\n");
    mkdirSync(join(ws, "sub"));
    writeFileSync(join(ws, "sub", ".git"), `gitdir: ${fake}\n`);
    expect(discoverRepository(join(ws, "sub")).kind).toBe("untrusted");
  });

  test("a .git file naming another repository's git dir (no back-pointer, not a submodule) is refused", () => {
    const b = base();
    const ws = repoAt(join(b, "ws"));
    const other = repoAt(join(b, "other"));
    mkdirSync(join(ws, "sub"));
    writeFileSync(join(ws, "sub", ".git"), `gitdir: ${join(other, ".git")}\n`);
    expect(discoverRepository(join(ws, "sub")).kind).toBe("untrusted");
    // …and pretending to be another repository's linked worktree: its gitdir file names the real worktree.
    git(other, "worktree", "add", "-q", join(b, "real-wt"));
    writeFileSync(join(ws, "sub", ".git"), `gitdir: ${join(other, ".git", "worktrees", "real-wt")}\n`);
    expect(discoverRepository(join(ws, "sub")).kind).toBe("untrusted");
  });

  test("a FIFO at .git (file position) or at commondir is refused without blocking", () => {
    const b = base();
    const ws = repoAt(join(b, "ws"));
    execFileSync("mkfifo", [join(ws, ".git", "commondir")]);
    expect(discoverRepository(ws).kind).toBe("untrusted");
    mkdirSync(join(b, "p"));
    execFileSync("mkfifo", [join(b, "p", ".git")]);
    expect(discoverRepository(join(b, "p")).kind).toBe("untrusted");
  });
});
