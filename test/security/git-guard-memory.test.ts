/**
 * The git guard's memory does not grow with what a sandboxed command writes (from the issue 34/30 attack review, hole
 * 3; it failed on the build it was written against, 3c78816). Through the compiled `serve`, the server's peak RSS
 * read on the host.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { closeAll, peakRssMiB, requirePrograms, withDeadline } from "../helpers/attack.ts";
import { repoSession, type Backend, type Client } from "../helpers/git-attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

describe.skipIf(skipWithout("git guard memory", shellsMissing()))("the git guard's memory is bounded", () => {
  requirePrograms("git", "bwrap");

  /*
   * HOLE 3 (git guard memory is unbounded): every file under `hooks/` and `info/` of every git dir found (200 git dirs,
   * 256 entries per folder, 4 levels of sub-folders) is read whole (up to 1 MiB each) and kept in memory, by the
   * snapshot, by the check, and in the per-server file cache. A call makes nested repositories whose hooks folders hold
   * sparse 1 MiB files (no disk used, ~1 s to make); the next call's snapshot makes the server hold all of them. Here
   * 4 repositories x 250 files = 1000 MiB (the bounds allow ~50 GiB: 200 git dirs x 256 x 1 MiB, more with sub-folders),
   * enough to take the server (and its host) down with the OOM killer. The guard's memory must not scale with what
   * the sandbox writes.
   */
  for (const [backend, client] of [
    ["landlock", "codex"],
    ["bwrap", "plain"],
  ] as [Backend, Client][])
    test(`${backend}, ${client}: sparse files in nested hooks/ folders do not make the server's memory grow by their size (review hole 3)`, async () => {
      const { s, run } = await repoSession(backend, client);
      const make = [
        "for r in 1 2 3 4; do mkdir -p n$r/.git/hooks n$r/.git/objects n$r/.git/refs && echo 'ref: refs/heads/main' > n$r/.git/HEAD",
        "  for i in $(seq 1 250); do truncate -s 1048576 n$r/.git/hooks/h$i; done; done; echo made",
      ].join("\n");
      expect((await run(make, 60_000)).output).toContain("made");
      const before = peakRssMiB(s.pid);
      const r = await withDeadline(run("echo next", 60_000), 90_000, "the call after");
      expect(r.output).toContain("next");
      const grown = peakRssMiB(s.pid) - before;
      expect({ grownMiB: Math.round(grown), boundedBelow: grown < 300 }).toEqual({ grownMiB: Math.round(grown), boundedBelow: true });
    }, 180_000);
});
