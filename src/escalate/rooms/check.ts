/**
 * Checking a room once its program has ended (and before every later decision): the git control files that did
 * not exist when the room was planned and must not appear (`mustNotAppear`, ./plan.ts: a `commondir` or
 * `config.worktree` a room program wrote would send later git runs, on the host too, to another config) are
 * removed, and what building the room made on the host is given back. Only `lstat`, `unlink` and `rename` run on
 * the caller's thread: nothing here can block on what the sandbox made.
 */
import { existsSync, lstatSync, renameSync, unlinkSync } from "node:fs";
import { rm } from "node:fs/promises";
import { log } from "../../log.ts";

/** What a room leaves to check: its release (mount points, temporary folders) and its `mustNotAppear` paths. */
export interface RoomToSettle {
  release: () => void;
  mustNotAppear: readonly string[];
}

/**
 * Remove a git control path that a room program created (`mustNotAppear`) without blocking this thread on what it
 * made: a file or link is unlinked; a folder (of any size) is first renamed aside, at once, and then removed in the
 * background. Logs, never throws.
 */
function removeAppeared(p: string): void {
  try {
    if (!lstatSync(p).isDirectory()) return unlinkSync(p);
    const aside = `${p}.shellmcp-removed-${process.pid}-${Date.now()}`;
    renameSync(p, aside);
    void rm(aside, { recursive: true, force: true }).catch((e) =>
      log.warn("could not remove a folder set aside", { path: aside, error: String(e) }),
    );
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    log.warn("could not remove a git control path an escalated program created", { path: p, error: (e as Error).message });
  }
}

/** Whether `p` is a symbolic link (`existsSync` follows links: a dangling one reads as absent). */
function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Remove each of `paths` (absolute) that exists now, a dangling link included, and log it. Never throws. */
export function removeAppearedControlFiles(paths: readonly string[]): void {
  for (const p of paths) {
    if (!existsSync(p) && !isLink(p)) continue;
    removeAppeared(p);
    log.warn("removed a git control file an escalated program created", { path: p });
  }
}

/**
 * A room's program (or a kept room) has ended: give back what building the room made on the host, and remove any
 * git control file that appeared where none existed. Never throws (a failed release is logged).
 */
export function settleRoom(r: RoomToSettle): void {
  try {
    r.release();
  } catch (e) {
    log.warn("could not release an escalation room", { error: (e as Error).message });
  }
  removeAppearedControlFiles(r.mustNotAppear);
}
