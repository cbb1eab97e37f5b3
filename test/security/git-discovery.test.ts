/**
 * Issue 38, items 3–5, through the compiled binary and a real MCP client, judged by what a later host `git` runs:
 * - 3: under bubblewrap a bare repository kept in the workspace (the user's local backup remote) was not a
 *   repository: a session wrote its `hooks/pre-receive` and stayed open, and the user's `git push` ran it;
 * - 4: a flood of folders made the searches stop before a nested repository (2,000 folders for the binds, 3,000 for
 *   the guard): the next call planted its pre-commit hook, and the user's `git commit` ran it (both backends);
 * - 5: a symlink named `.codex` or `.git` at the top of a shared temporary folder refused every later call under
 *   bubblewrap ("crosses writable symlink"). The shared folder is the test's own `$TMPDIR` given to the server.
 * One git-control discovery (src/sandbox/git/discover.ts) decides all of it; the unit layouts are in
 * test/unit/git-discover.test.ts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  closeAll,
  confDir,
  isolatedGit,
  isolatedRepo,
  ISOLATED_GIT_ENV,
  requirePrograms,
  serveWithPid,
  type AttackSession,
} from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const made: string[] = [];
afterAll(async () => {
  await closeAll();
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

function dir(prefix: string): string {
  const d = confDir(prefix);
  made.push(d);
  return d;
}

/** A hook that leaves `mark` behind when it runs (on the host: the sandbox cannot write there). */
const hook = (mark: string) => `#!/bin/sh\\ntouch ${mark}\\n`;

/** Start an `exec_command` session running `cmd` (it stays open): the first output, after `yield_time_ms`. */
async function session(s: AttackSession, cmd: string, workdir: string): Promise<string> {
  const r = await s.client.callTool({ name: "exec_command", arguments: { cmd, workdir, login: false, yield_time_ms: 3_000 } });
  return (r.content as { text: string }[]).map((c) => c.text).join("\n");
}

async function shell(s: AttackSession, command: string, workdir: string): Promise<string> {
  const r = await s.shell({ command, workdir, login: false, timeout_ms: 60_000 });
  return r.out.output;
}

/** Run git on the host without the user's config (hooks and `core.*` of the repository itself still apply). */
function hostGit(cwd: string, ...args: string[]): { code: number; err: string } {
  const r = Bun.spawnSync(["git", "-c", "user.name=t", "-c", "user.email=t@t", ...args], {
    cwd,
    env: ISOLATED_GIT_ENV,
    stderr: "pipe",
    stdout: "pipe",
  });
  return { code: r.exitCode, err: r.stderr.toString() };
}

describe.skipIf(skipWithout("git discovery suite", shellsMissing()))(
  "issue 38: every git dir, no bound the sandbox fills, no shared-folder denial",
  () => {
    requirePrograms("bwrap", "git");

    test("item 3 (bwrap): a session cannot plant a hook or fsmonitor in a bare repository kept in the workspace", async () => {
      const ws = dir("gd-bare");
      const outside = dir("gd-bare-mark");
      const src = join(outside, "src");
      isolatedRepo(src);
      isolatedGit(ws, "init", "-q", "--bare", "backup.git");
      isolatedGit(src, "remote", "add", "backup", join(ws, "backup.git"));
      const mark = join(outside, "hook-ran");
      const mon = join(outside, "fsmonitor-ran");
      const s = await serveWithPid({ cwd: ws, args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"] });
      const out = await session(
        s,
        `printf '${hook(mark)}' > backup.git/hooks/pre-receive; chmod +x backup.git/hooks/pre-receive; ` +
          `printf '[core]\\n\\tfsmonitor = touch ${mon}\\n' >> backup.git/config; ` +
          `mkdir -p backup.git/info; echo '* filter=x' > backup.git/info/attributes; echo PLANTED; sleep 30`,
        ws,
      );
      expect(out).toContain("PLANTED");
      // The user pushes to the backup while the session is still open: nothing of the sandbox's runs.
      const push = hostGit(src, "push", "-q", "backup", "HEAD:refs/heads/main");
      expect(push.err).not.toContain("fatal");
      hostGit(join(ws, "backup.git"), "status");
      expect(existsSync(mark)).toBe(false);
      expect(existsSync(mon)).toBe(false);
      // The repository itself stays usable from the sandbox: objects and refs are written.
      const src2 = join(ws, "src2");
      isolatedRepo(src2);
      const r = await shell(s, `cd src2 && git push -q ../backup.git HEAD:refs/heads/other && echo PUSHED`, ws);
      expect(r).toContain("PUSHED");
    }, 90_000);

    test("item 3 (bwrap): a session cannot create a bare repository's missing commondir naming a git dir it made", async () => {
      const ws = dir("gd-commondir");
      const outside = dir("gd-commondir-mark");
      const src = join(outside, "src");
      isolatedRepo(src);
      isolatedGit(ws, "init", "-q", "--bare", "backup.git");
      isolatedGit(src, "remote", "add", "backup", join(ws, "backup.git"));
      isolatedGit(src, "push", "-q", "backup", "HEAD:refs/heads/main");
      const mark = join(outside, "hook-ran");
      const s = await serveWithPid({ cwd: ws, args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"] });
      // A git dir of the session's own, with hooks for every way a push or fetch ends, named by a new commondir
      // (and config.worktree, gitdir) at the top of the user's backup repository; then the session stays open.
      const hooks = ["pre-receive", "update", "post-receive", "post-update", "reference-transaction"];
      const out = await session(
        s,
        `git init -q --bare evil.git; ` +
          hooks.map((h) => `printf '${hook(mark)}' > evil.git/hooks/${h}; chmod +x evil.git/hooks/${h}; `).join("") +
          `echo ../evil.git > backup.git/commondir; echo "top: $?"; ` +
          `printf '[core]\\n\\thooksPath = ${join(ws, "evil.git", "hooks")}\\n' > backup.git/config.worktree; ` +
          `ls backup.git; echo PLANTED; sleep 30`,
        ws,
      );
      expect(out).toContain("PLANTED");
      // While the session is still open, the user pushes to the backup and fetches into it on the host.
      const push = hostGit(src, "push", "-q", "backup", "HEAD:refs/heads/after");
      expect(push.err).not.toContain("fatal");
      expect(push.code).toBe(0);
      hostGit(join(ws, "backup.git"), "fetch", "-q", src, "HEAD:refs/heads/fetched");
      hostGit(join(ws, "backup.git"), "log", "-1");
      expect(existsSync(mark)).toBe(false);
      expect(existsSync(join(ws, "backup.git", "commondir"))).toBe(false);
      await s.close();
    }, 90_000);

    for (const backend of ["bwrap", "landlock"] as const) {
      test(`item 4 (${backend}): a flood of 3,100 folders does not switch off a nested repository's protection`, async () => {
        const ws = dir(`gd-flood-${backend}`);
        const outside = dir(`gd-flood-mark-${backend}`);
        const nested = join(ws, "libs", "vendored");
        isolatedRepo(nested);
        // Deeper than any depth bound: protected too.
        const deep = join(ws, "a", "b", "c", "d", "e", "f", "deep");
        isolatedRepo(deep);
        const mark = join(outside, "hook-ran");
        const s = await serveWithPid({ cwd: ws, args: ["--sandbox", "workspace-write", "--sandbox-backend", backend] });
        expect(await shell(s, `seq 1 3100 | sed 's/^/flood/' | xargs mkdir && echo FLOODED`, ws)).toContain("FLOODED");
        await Bun.sleep(1_200);
        const plant = (repo: string) => `printf '${hook(mark)}' > ${repo}/.git/hooks/pre-commit; chmod +x ${repo}/.git/hooks/pre-commit; `;
        await shell(s, `${plant(nested)}${plant(deep)} rm -rf flood*; echo DONE`, ws);
        for (const repo of [nested, deep]) {
          const c = hostGit(repo, "commit", "-q", "--allow-empty", "-m", "x");
          expect(c.code).toBe(0);
        }
        expect(existsSync(mark)).toBe(false);
      }, 120_000);
    }

    for (const backend of ["bwrap", "landlock"] as const)
      for (const client of ["plain", "codex"] as const)
        test(`item 5 (${backend}, ${client} client): symlinks named .codex and .git at the top of a shared temporary folder refuse nothing`, async () => {
          const ws = dir(`gd-tmp-${backend}`);
          isolatedRepo(ws);
          const shared = dir(`gd-shared-${backend}`);
          const outside = dir(`gd-tmp-mark-${backend}`);
          const mark = join(outside, "hook-ran");
          // Another local user's link, made before the server starts, and one made by a call.
          symlinkSync("/usr", join(shared, ".git"));
          // A plain client: the pinned workspace of `--sandbox workspace-write`; a Codex-style one: its sandbox state.
          const s = await serveWithPid({
            cwd: ws,
            env: { TMPDIR: shared },
            args: [...(client === "plain" ? ["--sandbox", "workspace-write"] : []), "--sandbox-backend", backend],
          });
          if (client === "codex") expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
          expect(await shell(s, `ln -s /var "$TMPDIR/.codex" && echo LINKED`, ws)).toContain("LINKED");
          mkdirSync(join(shared, ".agents-dir"));
          const r = await shell(
            s,
            `echo hi; printf '${hook(mark)}' > .git/hooks/pre-commit 2>/dev/null; chmod +x .git/hooks/pre-commit 2>/dev/null; echo DONE`,
            ws,
          );
          expect(r).toContain("hi\n");
          expect(r).toContain("DONE");
          expect(r).not.toContain("symlink");
          expect(hostGit(ws, "commit", "-q", "--allow-empty", "-m", "x").code).toBe(0);
          expect(existsSync(mark)).toBe(false);
        }, 90_000);

    test("item 5 (bwrap): another user's .git file at a shared folder's top naming the workspace does not make it read-only", async () => {
      const ws = dir("gd-ptr");
      isolatedRepo(ws);
      const shared = dir("gd-ptr-shared");
      writeFileSync(join(shared, ".git"), `gitdir: ${ws}\n`);
      const s = await serveWithPid({
        cwd: ws,
        env: { TMPDIR: shared },
        args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"],
      });
      expect(await shell(s, "echo two > f && echo WROTE", ws)).toContain("WROTE");
      expect(readFileSync(join(ws, "f"), "utf8")).toBe("two\n");
    }, 60_000);
  },
);
