/**
 * The changed versions the git guard undoes, kept aside (./guard.ts, `GitGuardOptions.keptDir`): before a
 * changed control file is put back, its changed version is copied into a folder of the comparison under the
 * server's `$CODEX_HOME/shellmcp/git-kept`, so that a user whose own edit was undone can take it back. Bounded per
 * process ({@link MAX_KEPT_ASIDE_BYTES}, {@link MAX_KEPT_ASIDE_FILES}).
 */
import { closeSync, constants, fchmodSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import type { EntryState } from "./entry-state.ts";

/**
 * The kept-aside folder of one comparison: `dir`, the folder's path (under ./guard.ts `GitGuardOptions.keptDir`;
 * undefined: nothing is kept), and whether it was `made` yet (it is made on first use).
 */
export interface AsideFolder {
  dir: string | undefined;
  made: boolean;
}

/**
 * Bytes and files this process keeps aside at most (all comparisons together). A sandbox that rewrites large hooks
 * call after call would otherwise fill the disk under CODEX_HOME; past the bound a change is still undone, only not
 * copied (the report then says no copy was kept).
 */
export const MAX_KEPT_ASIDE_BYTES = 64 << 20;
export const MAX_KEPT_ASIDE_FILES = 10_000;
const keptAside = { bytes: 0, files: 0, maxBytes: MAX_KEPT_ASIDE_BYTES };

/** Tests: set the bytes this process may still keep aside (`maxBytes`, counting from 0 again); returns the old bound. */
export function setKeptAsideBoundForTest(maxBytes: number): number {
  const before = keptAside.maxBytes;
  Object.assign(keptAside, { bytes: 0, files: 0, maxBytes });
  return before;
}

/**
 * Copy the changed version `now` of an entry labelled `label` into the comparison's kept-aside folder (made on
 * first use, mode 0700; files 0600, never executable): its path, or undefined when there is nothing to keep (not a
 * file) or no folder. Never throws.
 */
export function keepAside(aside: AsideFolder | undefined, label: string, now: EntryState): string | undefined {
  if (aside?.dir === undefined || now.kind !== "file") return undefined;
  if (keptAside.bytes + now.data.length > keptAside.maxBytes || keptAside.files >= MAX_KEPT_ASIDE_FILES) return undefined;
  const parts = label.split("/").filter((c) => c !== "" && c !== "." && c !== "..");
  if (parts.length === 0) return undefined;
  const target = join(aside.dir, ...parts);
  try {
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    aside.made = true;
    const fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      for (let off = 0; off < now.data.length;) off += writeSync(fd, now.data, off, now.data.length - off);
      fchmodSync(fd, 0o600);
    } finally {
      closeSync(fd);
    }
    keptAside.bytes += now.data.length;
    keptAside.files++;
    return target;
  } catch {
    return undefined;
  }
}
