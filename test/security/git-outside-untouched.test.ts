/**
 * A repository outside every writable root stays as it was, whatever a sandboxed command builds inside its own (from
 * the issue 34/30 attack review, holes 1 and 2; each failed on the build it was written against, 3c78816): the git
 * guard never restores through a folder the sandbox swapped for a symlink, and a `.git` symlink the sandbox made
 * gives an escalated git no other repository's git dir. Through the compiled `serve` and a real MCP client, judged on
 * the host.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, exists, hostGit, requirePrograms, token } from "../helpers/attack.ts";
import { CONFIGS, repoSession, victimRepo } from "../helpers/git-attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

describe.skipIf(skipWithout("repositories outside the writable roots", shellsMissing()))("a repository outside stays as it was", () => {
  requirePrograms("git", "bwrap");

  /*
   * HOLE 1 (git-guard restores through a symlinked ancestor): the guard checks with lstat only the folders from a git
   * dir down to the entry (`unsafeParents(base, …)`), never the folders between the writable root and the git dir.
   * Call 1 makes a nested repository `a/proj/.git` with the attacker's config (core.fsmonitor) and post-commit hook
   * (new repositories are not guarded). Call 2 (its snapshot records them as "before") swaps `a` for a symlink to a
   * folder outside every writable root holding the user's repository `proj`. The check then sees "changed" entries
   * and "restores" them through the link: the user's `.git/config` and hooks outside every writable root are
   * replaced by the attacker's, and the user's next `git status` runs the fsmonitor on the host.
   */
  for (const [backend, client] of CONFIGS)
    test(`${backend}, ${client}: the git guard restores nothing through a parent the sandbox swapped for a symlink (review hole 1)`, async () => {
      const { outside, run } = await repoSession(backend, client);
      const marker = join(outside, `ran-${token()}`);
      const victim = victimRepo(outside);
      const configBefore = readFileSync(join(victim, ".git", "config"));
      const r1 = await run(
        [
          "mkdir -p a/proj/.git/hooks a/proj/.git/objects a/proj/.git/refs/heads",
          "echo 'ref: refs/heads/main' > a/proj/.git/HEAD",
          `printf '[core]\\n\\tfsmonitor = touch ${marker}.fsmonitor; false\\n' > a/proj/.git/config`,
          `printf '#!/bin/sh\\ntouch ${marker}.hook\\n' > a/proj/.git/hooks/post-commit && chmod +x a/proj/.git/hooks/post-commit`,
          "echo made",
        ].join(" && "),
      );
      expect(r1.output).toContain("made");
      const r2 = await run(`mv a a.old && ln -s ${outside} a && echo swapped`);
      // Under bubblewrap call 2 finds the repository call 1 made and pins the folders above it (issue 38): the
      // swap is refused there; under Landlock it happens, and the guard must not follow it.
      expect(r2.output).toMatch(backend === "bwrap" ? /swapped|Device or resource busy/ : /swapped/);
      // Judged on the host: the user's repository outside every writable root is as it was.
      expect(readFileSync(join(victim, ".git", "config")).toString()).toBe(configBefore.toString());
      expect(readFileSync(join(victim, ".git", "hooks", "post-commit"), "utf8")).toBe("#!/bin/sh\n: the user's own hook\n");
      writeFileSync(join(victim, "f.txt"), "two\n");
      hostGit(victim, "status", "--short");
      hostGit(victim, "commit", "-qam", "second");
      expect({ fsmonitor: exists(`${marker}.fsmonitor`), hook: exists(`${marker}.hook`) }).toEqual({ fsmonitor: false, hook: false });
    }, 90_000);

  /*
   * HOLE 2 (git-layout follows a `.git` symlink the sandbox made): `discoverRepository` takes a `.git` *symlink* to a
   * folder as a plain git dir (only `.git` *files* are checked for git's shape), and the boundary judges it by where it
   * leads (`canWrite` canonicalises): a folder the sandbox cannot write, so git escalates. The room is planned with
   * that git dir writable: a sandboxed `ln -s /elsewhere/proj/.git x/.git && cd x && git branch …` (the starter
   * policy allows git branch/commit/reset/tag) writes refs of a repository outside every writable root.
   * Note: `cd /elsewhere/proj && git branch …` reaches the same repository by design (a room writes the repository its
   * program runs in, wherever it is: DESIGN.md "the room"); the symlink only hides where git will write, and breaks
   * docs/escalation.md's "pointers only in git's own shape". The design point itself is in the review's report.
   */
  for (const [backend, client] of CONFIGS)
    test(`${backend}, ${client}: a .git symlink the sandbox made gives an escalated git no other repository's git dir (review hole 2)`, async () => {
      const rules = `prefix_rule(pattern = ["git", ["branch", "tag", "commit"]], decision = "allow")\n`;
      const { outside, run } = await repoSession(backend, client, rules);
      const victim = victimRepo(outside);
      const r = await run(
        `mkdir x && ln -s ${victim}/.git x/.git && cd x && git branch planted-${backend}; git tag t-${backend}; echo done`,
      );
      expect(r.output).toContain("done");
      expect(existsSync(join(victim, ".git", "refs", "heads", `planted-${backend}`))).toBe(false);
      expect(existsSync(join(victim, ".git", "refs", "tags", `t-${backend}`))).toBe(false);
    }, 90_000);
});
