/**
 * Golden room plans (issue 33): today's escalation rooms, pinned byte for byte, so that refactoring the room
 * planner and builders (src/escalate/rooms/: plan.ts `planRoom` and `prepareRoom`, build.ts `buildRoom`) cannot
 * change a wall unnoticed. ./fixtures/golden-rooms/print.ts prints the matrix — bubblewrap, Landlock and Seatbelt;
 * no repository, a repository, a linked worktree, a submodule, its superproject, a clone with a local remote, a
 * workspace at HOME; the call's network off, on, in proxy mode; network grants `"call"`, `"host"`, domains (with
 * and without their proxy); readable grants; credential stores (folders, files, a symlinked store) — in a process of
 * its own (Bun reads HOME once, at start, and the planner reads the credential stores under HOME).
 *
 * The expected output is ./fixtures/golden-rooms/expected.txt. Regenerate it only on purpose, when a room is meant
 * to change: `GOLDEN_ROOMS_UPDATE=1 bun test test/unit/golden-rooms.test.ts`, and review the diff.
 */
import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { assertOutside, CONF_BASE } from "../helpers/test-dirs.ts";

const FIXTURES = join(import.meta.dir, "fixtures", "golden-rooms");
const EXPECTED = join(FIXTURES, "expected.txt");

/**
 * The printer's output for a fresh fixture (made and removed here), outside every default writable root (CONF_BASE,
 * ../helpers/test-dirs.ts): under `/tmp` or `$TMPDIR` the git guard of any shellmcp server on the machine whose call
 * may write `/tmp` (Codex's default) searches the fixture, and a snapshot taken while `git init` was making a git
 * dir (no `config` yet) makes its check remove the `config` that then appeared as "created by the command": the
 * plan listed `<FIX>/repo/.git/config` under `mustNotAppear` (a flake of the fast tier).
 */
function printRooms(): string {
  const root = assertOutside(mkdtempSync(join(CONF_BASE, "golden-rooms-")));
  try {
    mkdirSync(join(root, "home"));
    const env: Record<string, string | undefined> = { ...process.env, HOME: join(root, "home") };
    delete env.XDG_CONFIG_HOME;
    const r = Bun.spawnSync([process.execPath, join(FIXTURES, "print.ts"), root], { env, stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(`print.ts failed (${r.exitCode}): ${r.stderr.toString()}`);
    return r.stdout.toString();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test("room plans and launches are byte-identical to the pinned ones", () => {
  const got = printRooms();
  if (process.env.GOLDEN_ROOMS_UPDATE === "1") writeFileSync(EXPECTED, got);
  const want = readFileSync(EXPECTED, "utf8");
  // Line by line first: a failure names the case instead of dumping 200 KB.
  const g = got.split("\n");
  const w = want.split("\n");
  let section = "";
  for (let i = 0; i < Math.max(g.length, w.length); i++) {
    if (w[i]?.startsWith("### ")) section = w[i]!;
    if (g[i] !== w[i]) expect({ section, line: i + 1, got: g[i] }).toEqual({ section, line: i + 1, got: w[i] });
  }
  expect(got).toBe(want);
});

test("the pinned matrix covers every backend, layout and grant it claims to", () => {
  const want = readFileSync(EXPECTED, "utf8");
  const sections = want.split("\n").filter((l) => l.startsWith("### ") && !l.startsWith("### seatbelt policy"));
  expect(sections.length).toBe(60);
  for (const b of ["bwrap", "landlock", "seatbelt"]) expect(sections.filter((s) => s.endsWith(` on ${b}`)).length).toBe(20);
  // Each layout gives its own git dirs: the submodule's under the superproject's modules/, the worktree's admin folder.
  expect(want).toContain('"gitDirs":["<FIX>/super/.git/modules/sub"]');
  expect(want).toContain('"gitDirs":["<FIX>/repo/.git/worktrees/wt","<FIX>/repo/.git"]');
  // Credential stores are hidden (the symlinked one at its target), and a readable grant un-hides one.
  expect(want).toContain(
    '"hiddenCredentials":["<FIX>/home/.ssh","<FIX>/home/.aws","<FIX>/home/real-gh","<FIX>/home/.netrc","<FIX>/home/.npmrc"]',
  );
  expect(want).toContain('"hiddenCredentials":["<FIX>/home/.aws","<FIX>/home/real-gh","<FIX>/home/.netrc","<FIX>/home/.npmrc"]');
  // Seatbelt rooms: a policy text is pinned for each.
  expect(want).toContain("### seatbelt policy ");
});
