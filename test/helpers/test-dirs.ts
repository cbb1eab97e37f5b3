/**
 * Where a test run puts its files, chosen from what this machine really has rather than assumed (issue 20):
 *
 * - {@link RUN_TMP}: `<tmpdir>/shellmcp-run-<pid>`, made this process's `TMPDIR`, so every `mkdtemp(tmpdir())` of
 *   the suites and of the programs they start lands in it. It stays under the temporary folder, so tests about
 *   paths under `/tmp` and `$TMPDIR` keep their meaning.
 * - {@link CONF_BASE}: folders that must lie *outside every writable root* of the sandboxes under test (`/tmp`,
 *   `$TMPDIR`, the run's `TMPDIR`, `/dev/shm`): workspaces, homes, "outside" marker folders. The first candidate
 *   that lies outside all of them wins: `$SHELLMCP_TEST_OUTSIDE`, `/var/tmp` (never a writable root in Codex's
 *   policies, world-writable on every Linux and macOS), `~/.cache`, the checkout's `.cache/`. So a HOME under
 *   `/tmp` or a TMPDIR anywhere cannot put an "outside" folder inside the sandbox. Loading this module fails with a
 *   clear error when no candidate qualifies.
 *
 * No `bun:test` import: scripts outside `bun test` (test/security/reference-table.ts) use it too. Removal and the
 * leftover check live in the preload, cleanup.ts.
 */
import { mkdirSync, realpathSync, rmdirSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join, normalize, resolve, sep } from "node:path";

/** Repository root. */
export const ROOT = resolve(import.meta.dir, "..", "..");

/** `TMPDIR` as this process found it (before {@link RUN_TMP} replaced it); `/tmp` when unset. */
export const ORIGINAL_TMPDIR: string = canonical(tmpdir());

/** Canonical path of `p`, or of its nearest existing ancestor with the rest appended. */
export function canonical(p: string): string {
  const abs = normalize(resolve(p));
  try {
    return realpathSync(abs);
  } catch {
    const parent = dirname(abs);
    return parent === abs ? abs : join(canonical(parent), abs.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
  }
}

/** Whether `path` is `root` or lies below it (component-wise, both canonical). */
export function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** This test run's temporary folder (created on load; `process.env.TMPDIR` points at it). */
export const RUN_TMP = join(ORIGINAL_TMPDIR, `shellmcp-run-${process.pid}`);
mkdirSync(RUN_TMP, { recursive: true });
process.env.TMPDIR = RUN_TMP;

/**
 * Folders a sandbox under test may be given write access to by default (Codex's `slash_tmp` and `tmpdir`, plus
 * `/dev/shm`): nothing a test calls "outside" may lie in one of them.
 */
export const DEFAULT_WRITABLE_ROOTS: readonly string[] = [...new Set(["/tmp", "/dev/shm", ORIGINAL_TMPDIR, RUN_TMP].map(canonical))];

/** Where {@link CONF_BASE} was taken from, and the candidates refused with why (for the error message). */
function chooseOutsideBase(): string {
  const candidates = [process.env.SHELLMCP_TEST_OUTSIDE, "/var/tmp", join(homedir(), ".cache"), join(ROOT, ".cache")];
  const refused: string[] = [];
  for (const c of candidates) {
    if (c === undefined || c === "") continue;
    const real = canonical(c);
    const inside = DEFAULT_WRITABLE_ROOTS.find((r) => isInside(real, r));
    if (inside !== undefined) {
      refused.push(`${c} (lies in ${inside})`);
      continue;
    }
    const dir = join(real, `shellmcp-test-${process.pid}`);
    try {
      mkdirSync(dir, { recursive: true });
    } catch (e) {
      refused.push(`${c} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
      continue;
    }
    return dir;
  }
  throw new Error(
    `test-dirs: no folder outside every default writable root (${DEFAULT_WRITABLE_ROOTS.join(", ")}) to put the tests' ` +
      `"outside" folders in; refused: ${refused.join("; ")}. Set SHELLMCP_TEST_OUTSIDE to a writable folder elsewhere.`,
  );
}

/** This test run's folder outside every default writable root (created on load; removed by the preload). */
export const CONF_BASE: string = chooseOutsideBase();

// A process that loads this module without the test preload (a bench script, a stand-in server a test starts as
// its own process) removes its two folders when it exits, if it left them empty; a non-empty one stays for the
// leftover check to report.
process.on("exit", () => {
  for (const dir of [CONF_BASE, RUN_TMP]) {
    try {
      rmdirSync(dir);
    } catch {
      // not empty, or already removed by the preload
    }
  }
});

/** Throw unless `path` lies outside every default writable root: tests assert this of their "outside" folders. */
export function assertOutside(path: string): string {
  const real = canonical(path);
  const inside = DEFAULT_WRITABLE_ROOTS.find((r) => isInside(real, r));
  if (inside !== undefined) throw new Error(`test-dirs: ${path} was meant to lie outside every writable root but is in ${inside}`);
  return path;
}
