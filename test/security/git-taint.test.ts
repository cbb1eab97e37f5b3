/**
 * "A `.git` written in one call is trusted in later calls" (review of h7): the escalation boundary asked only whether
 * *this* call's sandbox can write git's control files. Under bubblewrap every existing nested `.git` (and the one of
 * the call's working folder, at any depth) is bound read-only at call start, so a repository whose config an earlier
 * call wrote — `git init` plus a `core.fsmonitor` command, or the config of a repository deeper than the git guard's
 * search — counted as safe, and the next call's allowed `git status` ran the planted command outside the sandbox:
 * on the host (`escalation = "host"`) or in the escalation room with the room's grants.
 *
 * Now a repository whose control files changed (inode change time) while this server ran, in a place one of its
 * sandboxes or rooms could write, and not by the git guard's own restore, is not trusted: git runs inside the call's
 * sandbox and the result says why. Everything here goes through the compiled binary.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, oneCommitRepo, requirePrograms, serveWithPid, type AttackSession } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const dirs: string[] = [];
afterAll(async () => {
  await closeAll();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const RULES = 'prefix_rule(pattern=["git","status"], decision="allow")\n';

function dir(prefix: string): string {
  const d = confDir(prefix);
  dirs.push(d);
  return d;
}

/** A server whose workspace is `ws` (a writable root), bubblewrap, the given escalation mode. */
function serve(ws: string, escalation: "host" | "room"): Promise<AttackSession> {
  return serveWithPid({
    rules: RULES,
    cwd: ws,
    args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap", "--escalation", escalation],
  });
}

async function call(s: AttackSession, command: string, workdir: string): Promise<string> {
  return (await s.shell({ command, workdir, login: false, timeout_ms: 30_000 })).out.output;
}

/**
 * A command appending a `core.fsmonitor` hook that runs `hook` to the config of the repository at `repo`. `hook`
 * holds no `/`: the boundary takes such a value for a command name on PATH (a value with a `/` names a file, which
 * it checks), and git runs it through the shell in the work tree's top folder.
 */
const plant = (repo: string, hook: string) => `printf '[core]\\n\\tfsmonitor = "%s"\\n' '${hook}' >> ${repo}/.git/config && echo PLANTED`;

/** Let the inode change times of files made now fall before a server started after this (its margin is 20 ms). */
const settle = () => Bun.sleep(200);

describe.skipIf(skipWithout("git taint suite", shellsMissing()))("a .git written during the server's life is not trusted", () => {
  requirePrograms("bwrap", "git");

  test("host mode: git init + fsmonitor in call 1; call 2's allowed git status stays in the sandbox", async () => {
    const ws = dir("taint-host");
    const s = await serve(ws, "host");
    // HOME is outside every writable root: only the host can write there.
    const marker = join(s.codexHome, "pwned-host");
    expect(await call(s, `git init -q . && ${plant(ws, "touch ran; cd; touch pwned-host")}`, ws)).toContain("PLANTED");
    const o = await call(s, "git status --short >/dev/null 2>&1; echo STATUS-DONE", ws);
    expect(o).toContain("STATUS-DONE");
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(ws, "ran"))).toBe(true); // it ran, inside the sandbox
    expect(o).toContain("changed while shellmcp ran");
    expect(s.stderr()).toMatch(/not escalated: runs inside the sandbox instead/);
  }, 60_000);

  test("room mode: the planted fsmonitor runs in the call's sandbox, not in the room (whose .git is writable)", async () => {
    const ws = dir("taint-room");
    const s = await serve(ws, "room");
    // The room writes git's .git; the call's sandbox cannot (bubblewrap binds it read-only from call 2 on).
    const hook = "touch ran; cd .git; touch room-marker";
    expect(await call(s, `git init -q . && ${plant(ws, hook)}`, ws)).toContain("PLANTED");
    const o = await call(s, "git status --short >/dev/null 2>&1; echo STATUS-DONE", ws);
    expect(o).toContain("STATUS-DONE");
    expect(existsSync(join(ws, "ran"))).toBe(true);
    expect(existsSync(join(ws, ".git", "room-marker"))).toBe(false);
    expect(o).toContain("changed while shellmcp ran");
  }, 60_000);

  for (const backend of ["bwrap", "landlock"] as const) {
    test(`${backend}: planted in a workspace-write call, trusted by a later read-only call (the policy changed between them)`, async () => {
      const ws = dir(`taint-policy-${backend}`);
      const s = await serveWithPid({ rules: RULES, cwd: ws, args: ["--sandbox-backend", backend, "--escalation", "host"] });
      const marker = join(s.codexHome, "pwned-policy");
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
      const init = `git init -q . && rm -r .git/hooks && ${plant(ws, "cd; touch pwned-policy")}`;
      expect(await call(s, init, ws)).toContain("PLANTED");
      // Now nothing is writable: this call's sandbox cannot write .git/config, on either backend.
      expect(await s.sandboxState({ type: "read-only" }, ws)).toEqual({});
      const o = await call(s, "git status --short >/dev/null 2>&1; echo STATUS-DONE", ws);
      expect(o).toContain("STATUS-DONE");
      expect(existsSync(marker)).toBe(false);
      expect(o).toContain("changed while shellmcp ran");
    }, 60_000);
  }

  test("deep variant: a repository beyond the guard's search, its config written from another folder", async () => {
    const ws = dir("taint-deep");
    const deep = join(ws, "a", "b", "c", "d", "e", "f", "deep");
    oneCommitRepo(deep);
    await settle();
    const s = await serve(ws, "host");
    const marker = join(s.codexHome, "pwned-deep");
    // Issue 38: every repository below a root is found, at any depth, and its .git is read-only under bubblewrap.
    const planted = await call(s, plant(deep, "cd; touch pwned-deep"), ws);
    expect(planted).not.toContain("PLANTED");
    expect(planted).toContain("Read-only file system");
    const o = await call(s, "git status --short >/dev/null 2>&1; echo STATUS-DONE", deep);
    expect(o).toContain("STATUS-DONE");
    expect(existsSync(marker)).toBe(false);
  }, 60_000);

  test("a hooks folder renamed into a deep repository's .git (its hooks keep their old ctimes) is not trusted", async () => {
    const ws = dir("taint-hooks");
    const deep = join(ws, "a", "b", "c", "d", "e", "f", "deep");
    oneCommitRepo(deep);
    // A folder of hooks that predates the server (a project's own files, say), outside any .git.
    mkdirSync(join(ws, "fixture-hooks"));
    writeFileSync(join(ws, "fixture-hooks", "pre-commit"), "#!/bin/sh\ncd; touch pwned-hooks\n", { mode: 0o755 });
    await settle();
    const s = await serveWithPid({
      rules: 'prefix_rule(pattern=["git","commit"], decision="allow")\n',
      cwd: ws,
      args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap", "--escalation", "host"],
    });
    const marker = join(s.codexHome, "pwned-hooks");
    const swap = `mv ${deep}/.git/hooks ${deep}/.git/hooks-old && mv ${ws}/fixture-hooks ${deep}/.git/hooks && echo SWAPPED`;
    // Issue 38: the deep repository is found (no depth limit) and its .git is read-only: the swap is refused.
    expect(await call(s, swap, ws)).not.toContain("SWAPPED");
    const o = await call(s, "git commit -q --allow-empty -m two >/dev/null 2>&1; echo COMMIT-DONE", deep);
    expect(o).toContain("COMMIT-DONE");
    expect(existsSync(marker)).toBe(false);
  }, 60_000);

  test("a folder of old git files renamed into place as a .git (a project's fixture) is not trusted", async () => {
    const ws = dir("taint-moved");
    // Made before the server started: a git dir (a fixture the project ships, say) with a core.fsmonitor command.
    const scratch = join(ws, "scratch");
    oneCommitRepo(scratch);
    Bun.spawnSync(["mv", join(scratch, ".git"), join(ws, "fixture-git")]);
    Bun.spawnSync(["git", "--git-dir", join(ws, "fixture-git"), "config", "core.fsmonitor", "cd; touch pwned-moved"]);
    await settle();
    const s = await serve(ws, "host");
    const marker = join(s.codexHome, "pwned-moved");
    // Issue 38: the fixture is a git dir found by the discovery; its folder is pinned (a mount point) and its
    // control files read-only, so it cannot be moved into place.
    expect(await call(s, "mv fixture-git scratch/.git && echo MOVED", ws)).not.toContain("MOVED");
    const o = await call(s, "git status --short >/dev/null 2>&1; echo STATUS-DONE", scratch);
    expect(o).toContain("STATUS-DONE");
    expect(existsSync(marker)).toBe(false);
  }, 60_000);

  test("a project's folder of old git-looking files made a linked worktree's common dir by a new .git file is not trusted", async () => {
    const ws = dir("taint-pointer");
    oneCommitRepo(ws);
    // Project files, made before the server started (old ctimes): a folder shaped like a git dir whose config has a
    // core.fsmonitor command, with a linked worktree's admin folder whose pointers name `w/.git` (relative) back.
    const evil = join(ws, "fixtures", "evil");
    for (const d of ["objects/info", "refs/heads", "worktrees/x"]) mkdirSync(join(evil, d), { recursive: true });
    writeFileSync(join(evil, "HEAD"), "ref: refs/heads/main\n");
    writeFileSync(join(evil, "config"), '[core]\n\tbare = false\n\tfsmonitor = "touch ran; cd; touch pwned-pointer; false"\n');
    writeFileSync(join(evil, "worktrees/x/commondir"), "../..\n");
    writeFileSync(join(evil, "worktrees/x/gitdir"), "../../../../w/.git\n");
    writeFileSync(join(evil, "worktrees/x/HEAD"), "ref: refs/heads/main\n");
    await settle();
    const s = await serve(ws, "host");
    const marker = join(s.codexHome, "pwned-pointer");
    // The sandbox writes one pointer file in the work tree; every file git executes from keeps its old ctime.
    expect(await call(s, `mkdir w && printf 'gitdir: %s\\n' ${join(evil, "worktrees", "x")} > w/.git && echo WIRED`, ws)).toContain(
      "WIRED",
    );
    // A workspace-write call (the guard's search meets the new worktree), then one whose sandbox cannot write it.
    expect(await call(s, "git status --short >/dev/null 2>&1; echo S1", join(ws, "w"))).toContain("S1");
    expect(await s.sandboxState({ type: "read-only" }, ws)).toEqual({});
    const o = await call(s, "git status --short >/dev/null 2>&1; echo STATUS-DONE", join(ws, "w"));
    expect(o).toContain("STATUS-DONE");
    expect(existsSync(marker)).toBe(false);
    expect(o).toContain("a pointer to");
  }, 60_000);

  test("a bare repository embedded in the project (old files, no sandbox write): an allowed git there stays in the sandbox", async () => {
    const ws = dir("taint-bare");
    const src = dir("taint-bare-src");
    oneCommitRepo(src);
    // Project files made before the server started: a bare repository whose reference-transaction hook (run by any
    // ref update, e.g. `git branch`) reaches the host's HOME. Git's own safe.bareRepository=explicit refuses it.
    const bare = join(ws, "fixtures", "evil.git");
    expect(Bun.spawnSync(["git", "clone", "-q", "--bare", src, bare]).exitCode).toBe(0);
    writeFileSync(join(bare, "hooks", "reference-transaction"), "#!/bin/sh\ntouch ran-bare; cd; touch pwned-bare\n", { mode: 0o755 });
    await settle();
    const s = await serveWithPid({
      rules: 'prefix_rule(pattern=["git","branch"], decision="allow")\n',
      cwd: ws,
      args: ["--sandbox", "read-only", "--sandbox-backend", "bwrap", "--escalation", "host"],
    });
    const marker = join(s.codexHome, "pwned-bare");
    const o = await call(s, "git branch zz 2>&1; echo BRANCH-DONE", bare);
    expect(o).toContain("BRANCH-DONE");
    expect(existsSync(marker)).toBe(false);
    expect(o).toContain("bare repository");
    expect(o).toContain("not escalated");
  }, 60_000);

  test("no false positive: a repository made before the server started still escalates", async () => {
    const ws = dir("taint-before");
    oneCommitRepo(ws);
    await settle();
    const s = await serve(ws, "host");
    const o = await call(s, "git status --short; echo STATUS-DONE", ws);
    expect(o).toContain("STATUS-DONE");
    expect(o).not.toContain("not escalated");
    expect(s.stderr()).toMatch(/escalated \{"file":"[^"]*git","argv":\["git","status","--short"\],"room":"host"/);
  }, 60_000);

  test("no false positive: escalated commits one after another in a deep repository (git's own writes to its .git)", async () => {
    const ws = dir("taint-commits");
    const deep = join(ws, "a", "b", "c", "d", "e", "f", "deep"); // beyond the guard's search
    oneCommitRepo(deep);
    await settle();
    const s = await serveWithPid({
      rules: 'prefix_rule(pattern=["git","commit"], decision="allow")\n',
      cwd: ws,
      args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap", "--escalation", "host"],
    });
    for (const m of ["two", "three", "four"]) {
      const o = await call(s, `git commit -q --allow-empty -m ${m}; echo COMMIT-DONE`, deep);
      expect(o).toContain("COMMIT-DONE");
      expect(o).not.toContain("not escalated");
    }
    const log = Bun.spawnSync(["git", "-C", deep, "log", "--format=%s"]).stdout.toString().trim().split("\n");
    expect(log).toEqual(["four", "three", "two", "first"]);
  }, 60_000);

  test("a config the git guard put back is trusted: git status there still escalates", async () => {
    const ws = dir("taint-guard");
    // 4 levels down: below bubblewrap's nested-.git depth (so writable from ws), within the guard's search.
    const repo = join(ws, "a", "b", "c", "proj");
    oneCommitRepo(repo);
    const before = readFileSync(join(repo, ".git", "config"), "utf8");
    await settle();
    const s = await serve(ws, "host");
    const o1 = await call(s, plant(repo, "cd; touch pwned-guard"), ws);
    // Issue 38: refused by the kernel now (the repository is found at any depth); nothing to put back.
    expect(o1).not.toContain("PLANTED");
    expect(readFileSync(join(repo, ".git", "config"), "utf8")).toBe(before);
    const o = await call(s, "git status --short; echo STATUS-DONE", repo);
    expect(o).toContain("STATUS-DONE");
    expect(o).not.toContain("not escalated");
    expect(s.stderr()).toMatch(/escalated \{"file":"[^"]*git","argv":\["git","status","--short"\],"room":"host"/);
  }, 60_000);

  test("the guard never launders: a planted config it puts back (after another call changed it) stays untrusted", async () => {
    const ws = dir("taint-launder");
    const repo = join(ws, "a", "b", "c", "proj"); // within the guard's search, writable from ws under bubblewrap
    const s = await serve(ws, "host");
    const marker = join(s.codexHome, "pwned-launder");
    // No hooks folder: the config alone decides (git init's sample hooks would count as written too).
    const init = `mkdir -p ${repo} && git init -q ${repo} && rm -r ${repo}/.git/hooks && ${plant(repo, "cd; touch pwned-launder")}`;
    expect(await call(s, init, ws)).toContain("PLANTED");
    // Call 2 finds the repository call 1 made and keeps its .git read-only (issue 38): the config stays planted.
    expect(await call(s, `echo >> ${repo}/.git/config && echo TOUCHED`, ws)).not.toContain("TOUCHED");
    const o = await call(s, "git status --short >/dev/null 2>&1; echo STATUS-DONE", repo);
    expect(o).toContain("STATUS-DONE");
    expect(existsSync(marker)).toBe(false);
    expect(o).toContain("changed while shellmcp ran");
  }, 60_000);

  test("core.hooksPath into the work tree (husky's .husky/): git is not escalated", async () => {
    const ws = dir("taint-husky");
    oneCommitRepo(ws);
    mkdirSync(join(ws, ".husky"));
    Bun.spawnSync(["git", "-C", ws, "config", "core.hooksPath", ".husky"]);
    await settle();
    const s = await serve(ws, "host");
    const o = await call(s, "git status --short; echo STATUS-DONE", ws);
    expect(o).toContain("STATUS-DONE");
    expect(o).toContain("core.hooksPath");
    expect(o).toContain("not escalated");
  }, 60_000);
});
