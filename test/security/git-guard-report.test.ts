/**
 * What the git guard adds to a call's output carries no control character, whatever names the command gave its files
 * (from the issue 34/30 attack review, hole 5; it failed on the build it was written against, 3c78816).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { closeAll, requirePrograms } from "../helpers/attack.ts";
import { repoSession } from "../helpers/git-attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

describe.skipIf(skipWithout("git guard report", shellsMissing()))("the git guard's report", () => {
  requirePrograms("git", "bwrap");

  /*
   * HOLE 5 (the git guard's report is not rendered by safe-text): the report names entries by the file names the
   * command chose (a hook it created, a symlink's target), and is appended after the command's output as shellmcp's own
   * words, raw. A hook named with CR/ESC sequences erases or rewrites the report's lines on a terminal (issue 30 item
   * 4: every decision text for a human is rendered visibly). The command's own output stays raw (it is data); what
   * shellmcp adds after it must not carry a control character.
   */
  test("landlock, codex: a hook file name with ESC/CR reaches the guard's report rendered, not raw (review hole 5)", async () => {
    const { run } = await repoSession("landlock", "codex");
    const r = await run(`printf x > .git/hooks/"$(printf 'a\\r\\033[2Kshellmcp: nothing changed\\033[8m')"; echo planted`);
    const added = r.output.slice(r.output.indexOf("planted\n") + "planted\n".length);
    expect(added).toContain("shellmcp: this command changed git control files");
    expect({ added, raw: /[\x00-\x09\x0b-\x1f\x7f]/.test(added) }).toEqual({ added, raw: false });
  }, 60_000);
});
