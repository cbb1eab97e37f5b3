/**
 * One rule for suites that need something the machine may lack (the vendored vectors, the patched shells,
 * bubblewrap, the reference binaries from the npm dev dependencies, python3, git, gcc…): on a developer's
 * machine the suite skips with a warning; under `CI=true` (or `CI=1`) the skip becomes a failing test that names
 * what is missing, so a CI run can never pass green with part of the suite silently left out.
 *
 *   describe.skipIf(skipWithout("patched-shell suite", shellsMissing()))("patched bash", () => { … });
 *   test.skipIf(skipWithout("sandbox vector x", hasPython ? undefined : "python3 not installed"))("x", …);
 */
import { test } from "bun:test";
import { existsSync } from "node:fs";

/** True when skips are failures: the environment variable CI is `true` or `1` (as CI services set it). */
export const STRICT_PREREQS = process.env.CI === "true" || process.env.CI === "1";

/**
 * Decide whether a suite or test must skip for a missing prerequisite.
 * @param what  the suite or test, for the message (e.g. "execpolicy vectors")
 * @param missing  why it cannot run (e.g. "bwrap not installed"), or undefined when everything is present
 * @returns true when the caller should skip. Under CI=true a missing prerequisite also registers a failing
 *   test `<what>: prerequisite missing: <missing>` at the point of the call (so call it where a test may be
 *   declared: at a file's top level or inside a describe callback); otherwise it prints `SKIP <what>: <missing>`.
 */
export function skipWithout(what: string, missing: string | undefined): boolean {
  if (missing === undefined) return false;
  if (STRICT_PREREQS) {
    test(`${what}: prerequisite missing: ${missing}`, () => {
      throw new Error(`${what} cannot run: ${missing} (CI=true turns every skipped suite into a failure)`);
    });
  } else {
    console.warn(`SKIP ${what}: ${missing}`);
  }
  return true;
}

/** "TOOL not installed" when TOOL is not on PATH, else undefined (for skipWithout). */
export function toolMissing(...tools: string[]): string | undefined {
  for (const t of tools) if (Bun.which(t) === null) return `${t} not installed`;
  return undefined;
}

/**
 * Why a Landlock call whose writable folder holds HOME is refused for the user running the tests, or undefined when
 * it is not: a user other than root without /run/user/<uid> keeps the programs the executable runs outside the
 * sandbox in ~/.cache/shellmcp (src/carried/portable-shells.ts), which Landlock cannot keep read-only inside a
 * writable folder (test/security/carried-programs.test.ts checks that refusal). For {@link skipWithout}.
 */
export const LANDLOCK_HOME_REFUSED: string | undefined =
  process.getuid === undefined || process.getuid() === 0 || existsSync(`/run/user/${process.getuid()}`)
    ? undefined
    : `Landlock refuses a writable HOME for a user without /run/user/${process.getuid()} (the carried programs are in ~/.cache/shellmcp)`;
