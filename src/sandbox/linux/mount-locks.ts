/**
 * Folder locks on what bubblewrap binds over a writable root's protected paths (docs/sandbox.md, "Mount points: crash
 * safety"): every process whose sandbox stands on such a folder — an empty mount point it made, one it adopted, or a
 * folder it found there (empty or not) — holds a shared `flock` on an fd of that folder for as long as the sandbox
 * runs ({@link lockShared}); a process removes a mount point only under an exclusive one, taken without waiting
 * ({@link removeUnheld}). The lock is on the folder itself, so processes with different CODEX_HOMEs (which do not
 * see each other's markers, ./mount-markers.ts) see each other's sandboxes: none pulls a folder from under another's
 * running sandbox (the kernel would detach the bind there, and the sandbox could then create the protected path on the
 * host).
 *
 * A sandboxed command can open a folder bound read-only and lock it too. A shared lock of its own only keeps the
 * folder from being removed (an empty folder left behind: closed, never a path opened on the host); an exclusive one
 * is refused while its own server holds the shared one, and otherwise (a Landlock sandbox reaching the folder on the
 * host between calls) can only make a later call that needs the folder fail ({@link FOLDER_LOCK_WAIT_MS}): no server
 * ever waits without bound on a lock a sandbox holds, and none removes a folder it could not lock.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, realpathSync, rmdirSync } from "node:fs";
import { dirname } from "node:path";
import { flock, LOCK } from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { log } from "../../log.ts";

/** A shared (or, while removing, exclusive) `flock` held on an open folder: its fd (close-on-exec) and identity. */
export interface FolderLock {
  fd: number;
  dev: number;
  ino: number;
}

/**
 * How long taking a shared folder lock waits out an exclusive one, ms: a removal in progress holds it for
 * microseconds; the wait is synchronous on the server's thread, so anything longer (another server's Landlock sandbox
 * holding it) refuses the call rather than stalling every call of this server.
 */
export const FOLDER_LOCK_WAIT_MS = 100;

/** What a wait between two tries sleeps on (Atomics.wait: a synchronous nap of a few ms). */
const NAP = new Int32Array(new SharedArrayBuffer(4));

/** Open flags: read-only, a folder, no link followed (Node and Bun add O_CLOEXEC: no sandbox inherits the fd). */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** The errno name of a failed `flock` (../../../ffi/libc.ts `sysError`), or undefined. */
function errname(e: unknown): unknown {
  return e instanceof ShellmcpError ? e.data.errname : undefined;
}

/** Whether `e` says the lock is held by another open file (flock's EWOULDBLOCK, which is EAGAIN on Linux). */
const held = (e: unknown) => errname(e) === "EAGAIN" || errname(e) === "EWOULDBLOCK";

/** The errors of opening a folder that mean no process of this user can open (so lock) it: a link, a file, no right. */
const NEVER_OPENS = new Set(["ELOOP", "ENOTDIR", "EACCES", "EPERM"]);

/**
 * Open `p` as a folder without following a link: the fd; "missing" (ENOENT); "unopenable" (a link, a file, no read
 * right: {@link NEVER_OPENS}); "failed" for anything else (out of fds or memory: this process cannot tell now).
 */
function openFolder(p: string): number | "missing" | "unopenable" | "failed" {
  try {
    return openSync(p, OPEN_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? "";
    return code === "ENOENT" ? "missing" : NEVER_OPENS.has(code) ? "unopenable" : "failed";
  }
}

/** The identity of the folder `fd` is open on when `p` (lstat, no link followed) is that folder; else undefined. */
function samePath(p: string, fd: number): { dev: number; ino: number } | undefined {
  try {
    const now = lstatSync(p);
    const st = fstatSync(fd);
    return now.isDirectory() && now.dev === st.dev && now.ino === st.ino ? { dev: st.dev, ino: st.ino } : undefined;
  } catch {
    return undefined;
  }
}

/** `flock(fd, op | LOCK_NB)`: true when taken, false when another open file holds a conflicting lock; other errors throw. */
function tryLock(fd: number, op: number): boolean {
  try {
    flock(fd, op | LOCK.NB);
    return true;
  } catch (e) {
    if (held(e)) return false;
    throw e;
  }
}

/**
 * Take a shared lock on folder `p` for as long as a sandbox stands on it (give it back with {@link unlock}). Never
 * blocks: an exclusive lock (a remover mid-removal, or a sandbox) is retried without waiting for up to
 * {@link FOLDER_LOCK_WAIT_MS}; once taken, `p` must still be the locked folder (same dev/ino, not a link).
 *
 * @returns the lock; "changed" when `p` is missing, or is no longer the folder opened (removed or replaced meanwhile:
 *   the caller decides again); "unlockable" when `p` is not a folder this process can open and lock (a link, a file,
 *   no read permission, a filesystem without `flock`): no process of this user can lock it, so none removes it, and
 *   it is bound as it is.
 * @throws ShellmcpError `SANDBOX_UNAVAILABLE` (with `path`) when another process held it exclusively all that time,
 *   or it could not be opened for another reason (out of fds or memory: bound unlocked, it could be removed).
 */
export function lockShared(p: string): FolderLock | "changed" | "unlockable" {
  const fd = openFolder(p);
  if (fd === "missing") return "changed";
  if (fd === "unopenable") return "unlockable";
  if (fd === "failed") throw new ShellmcpError("SANDBOX_UNAVAILABLE", `cannot open ${p} to lock it while the sandbox runs`, { path: p });
  let end: number | undefined;
  try {
    while (!tryLock(fd, LOCK.SH)) {
      end ??= performance.now() + FOLDER_LOCK_WAIT_MS;
      if (performance.now() > end)
        throw new ShellmcpError(
          "SANDBOX_UNAVAILABLE",
          `another process has held an exclusive lock on ${p} for over ${FOLDER_LOCK_WAIT_MS} ms; try again`,
          { path: p },
        );
      Atomics.wait(NAP, 0, 0, 2);
    }
  } catch (e) {
    closeSync(fd);
    if (e instanceof ShellmcpError && e.code === "SANDBOX_UNAVAILABLE") throw e;
    return "unlockable"; // flock refused outright (not EWOULDBLOCK): nor can a remover take it
  }
  const id = samePath(p, fd);
  if (id === undefined) {
    closeSync(fd);
    return "changed";
  }
  return { fd, ...id };
}

/** Give back a lock from {@link lockShared} (closing its fd). Never throws; `undefined` is a no-op. */
export function unlock(lock: FolderLock | undefined): void {
  if (lock === undefined) return;
  try {
    closeSync(lock.fd);
  } catch {
    // already closed
  }
}

/** What {@link removeUnheld} did. */
export type RemoveResult =
  /** removed */
  | "removed"
  /** nothing there any more, or another folder now */
  | "gone"
  /** another process's sandbox (or lock) still stands on it: left, to be tried again */
  | "busy"
  /** filled, moved, a link, or never lockable: left for good */
  | "kept";

/**
 * Remove the empty mount point `p` (made where `parent`, a canonical path, was) unless any other process holds a lock
 * on it: takes `LOCK_EX | LOCK_NB` on `lock`'s fd (converting this process's shared lock) or on a fresh fd of `p`, and
 * removes it only when that succeeds, `p` is still that folder (same dev/ino, not a link), its parent still resolves
 * to `parent`, and it is empty (`rmdir`). The fd is closed whatever the outcome (the caller's lock is given back).
 * Never blocks, never throws; a folder on a filesystem that refuses `flock` outright is kept (and logged): no lock
 * could say that no sandbox stands on it.
 */
export function removeUnheld(p: string, parent: string, lock?: FolderLock): RemoveResult {
  let fd: number;
  if (lock !== undefined) fd = lock.fd;
  else {
    const opened = openFolder(p);
    if (opened === "missing") return "gone";
    if (opened === "unopenable") return "kept";
    if (opened === "failed") return "busy"; // cannot tell now: tried again later
    fd = opened;
  }
  try {
    try {
      if (!tryLock(fd, LOCK.EX)) return "busy";
    } catch (e) {
      // A filesystem without flock on folders: nobody can tell whether a sandbox stands on it, so it stays.
      log.warn("a bubblewrap mount point cannot be locked, so it is left in place", { path: p, error: (e as Error).message });
      return "kept";
    }
    if (samePath(p, fd) === undefined) return "gone";
    if (realpathSync(dirname(p)) !== parent) return "kept";
    rmdirSync(p); // refuses a folder that is not empty: what was put there from outside a sandbox stays
    return "removed";
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT" ? "gone" : "kept";
  } finally {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
  }
}
