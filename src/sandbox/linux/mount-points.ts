/**
 * The host side of bubblewrap's plans (./bwrap.ts `planBwrap`): the empty mount points made for missing protected
 * paths, counted per process and shared with other processes through ./mount-markers.ts (the last holder removes
 * one), the folder locks that keep any process from removing a folder another's sandbox stands on
 * (./mount-locks.ts), and the private folders holding the empty file bound over denied files. Made before a sandbox
 * starts, given back once it has ended ({@link releaseBwrapPlan}).
 */
import { carriedBases } from "../../carried/portable-shells.ts";
import { lstatSync, mkdirSync, opendirSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ShellmcpError } from "../../errors.ts";
import { log } from "../../log.ts";
import type { BwrapPlan } from "./bwrap.ts";
import { lockShared, unlock, type FolderLock } from "./mount-locks.ts";
import {
  adoptedMountPoint,
  DENY_DIR_PREFIX,
  giveBackMountPoint,
  recordGone,
  recordMade,
  retryPendingRemovals,
  takePending,
  withMountLock,
} from "./mount-markers.ts";

/** A folder this thread's running sandboxes stand on: how many plans hold it, whether it is ours to remove, its lock. */
interface Hold {
  refs: number;
  /** A mount point this thread made or adopted (removed by the last holder); false: a folder found there. */
  ours: boolean;
  /** The shared folder lock (./mount-locks.ts); absent for a folder no process can lock. */
  lock?: FolderLock;
}

/**
 * Folders this thread's plans bind over protected paths, and how many running sandboxes use each: concurrent calls
 * of one server share them (and their lock), and the last one out gives it back (one call's cleanup must not pull a
 * mount point from under another's plan).
 */
const holds = new Map<string, Hold>();

/** How many times {@link holdMountPoint} decides again when the folder changes under it before it refuses. */
const HOLD_TRIES = 5;

/**
 * Hold the folder at protected path `p` for a plan, appending `p` to `created` when held (give it back with
 * {@link releaseBwrapPlan}): an existing folder (empty or not) is locked shared for as long as the sandbox runs
 * (./mount-locks.ts), and a missing one gets an empty mount point made here and locked. An empty folder another live
 * process of this CODEX_HOME made is held by both and removed by the last; one no marker names (the user's, or a
 * server's with another CODEX_HOME) is locked and never removed here. An existing file (or a folder no process can
 * lock) is bound as it is: true, nothing appended.
 *
 * @returns true when `p` is bound; false when it must be left out: its folder no longer exists (another process
 *   removed it since the plan's search found it: nothing to protect, and a bind of it would fail the whole sandbox; what
 *   a command may create there later is new, like any folder it makes), or this user may not create it there (EACCES,
 *   EPERM, EROFS: nor can the sandbox, which writes as this user).
 * @throws ShellmcpError `SANDBOX_UNAVAILABLE` when the folder stays locked exclusively by another process
 *   (./mount-locks.ts `FOLDER_LOCK_WAIT_MS`), keeps changing, or the CODEX_HOME lock is not had; other `mkdir` errors.
 */
export function holdMountPoint(p: string, created: string[]): boolean {
  const h = holds.get(p);
  if (h !== undefined) {
    h.refs++;
    created.push(p);
    return true;
  }
  for (let i = 0; i < HOLD_TRIES; i++) {
    const r = holdOnce(p);
    if (r === "changed") continue;
    if (typeof r === "boolean") return r;
    holds.set(p, r);
    created.push(p);
    return true;
  }
  throw new ShellmcpError("SANDBOX_UNAVAILABLE", `the folder ${p} kept being removed or replaced while it was being held; try again`, {
    path: p,
  });
}

/** One attempt of {@link holdMountPoint}: the hold, true/false as it returns without one, or "changed" (try again). */
function holdOnce(p: string): Hold | boolean | "changed" {
  let isDir: boolean | undefined;
  try {
    isDir = lstatSync(p).isDirectory();
  } catch {
    isDir = undefined;
  }
  if (isDir === false) return true; // a file (or a link, refused by the plan): bound as it is
  if (isDir === true && !emptyFolder(p)) {
    // A real folder with something in it: not ours, but locked all the same (what is in it may be taken out, and
    // it must not then be removed from under this sandbox).
    const lock = lockShared(p);
    return lock === "unlockable" ? true : lock === "changed" ? "changed" : { refs: 1, ours: false, lock };
  }
  // Missing, or an empty folder that may be another process's mount point: decided under the lock every process
  // sharing this CODEX_HOME takes to make, share and remove them (./mount-markers.ts).
  return withMountLock(() => (isDir === true ? holdFound(p) : holdMade(p)));
}

/** Under the CODEX_HOME lock: hold the empty folder found at `p` (ours again, another process's we adopt, or not ours). */
function holdFound(p: string): Hold | boolean | "changed" {
  const lock = lockShared(p);
  if (lock === "changed") return "changed";
  // A mount point of ours given back while another's sandbox stood on it; another live process's (or helper's):
  // held by both, removed by the last; else a folder found there, not ours to remove.
  const ours = takePending(p) || adoptedMountPoint(p);
  if (lock === "unlockable") return ours ? { refs: 1, ours } : true;
  return { refs: 1, ours, lock };
}

/** Under the CODEX_HOME lock: make the missing mount point `p` (recorded first) and lock it. */
function holdMade(p: string): Hold | boolean | "changed" {
  recordMade("mount-point", p); // on disk before it exists: a crash from here on leaves it to the next start
  try {
    mkdirSync(p);
  } catch (e) {
    recordGone("mount-point", p);
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return false;
    // Made meanwhile by a process recording no marker here (the user, a server with another CODEX_HOME): found.
    if (code === "EEXIST") return "changed";
    // A folder this user cannot write (another user's bare repository in /tmp without `hooks/`): the sandbox,
    // which writes as this user, cannot create the path either, so there is nothing to hold — and refusing would
    // let another user's folder stop every call.
    if (code === "EACCES" || code === "EPERM" || code === "EROFS") return false;
    throw e;
  }
  const lock = lockShared(p);
  if (lock === "changed") {
    recordGone("mount-point", p); // removed or replaced at once by another process: decide again
    return "changed";
  }
  return lock === "unlockable" ? { refs: 1, ours: true } : { refs: 1, ours: true, lock };
}

/** Whether the folder `p` (a real folder a moment ago) has nothing in it (what a mount point looks like). */
function emptyFolder(p: string): boolean {
  try {
    const d = opendirSync(p);
    try {
      return d.readSync() === null;
    } finally {
      d.closeSync();
    }
  } catch {
    return false;
  }
}

/**
 * A new private folder `<base>/shellmcp-deny-<random>` (mode 0700) for the empty file bound over denied files,
 * recorded on disk before it is made (./mount-markers.ts). Throws the `mkdir` error.
 *
 * `<base>` is the carried programs' folder (../../carried/portable-shells.ts `carriedBases`), which no sandbox can
 * write (read-only in every bubblewrap sandbox, a refusal under Landlock). Not `$TMPDIR`: the folder would be the
 * user's in a writable root of every workspace-write sandbox, and a sandboxed command running beside the call
 * replaced the empty file with a symbolic link to the denied file, which bubblewrap then bound over the denied file
 * (test/security/deny-file-swap.test.ts: 1 and 7 of 40 calls read it). A run from source carries nothing: `$TMPDIR`.
 */
export function denyDir(): string {
  const base = carriedBases()[0] ?? tmpdir();
  const dir = join(base, `${DENY_DIR_PREFIX}${randomBytes(6).toString("hex")}`);
  recordMade("deny-dir", dir);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    recordGone("deny-dir", dir);
    throw e;
  }
  return dir;
}

/**
 * Give back what ./bwrap.ts `planBwrap` made and held on the host (`plan.tempDirs` removed; each of `plan.created`
 * released once its last plan has ended: its folder lock given back, and a mount point of ours removed unless another
 * process still holds it — ./mount-markers.ts `giveBackMountPoint`), once the sandbox has ended; then retry the
 * removals earlier give-backs left pending. Never throws (what cannot be given back is logged and left to a later
 * give-back or the next start's sweep: closed).
 */
export function releaseBwrapPlan(plan: BwrapPlan): void {
  for (const d of plan.tempDirs ?? []) {
    rmSync(d, { recursive: true, force: true });
    recordGone("deny-dir", d);
  }
  for (const p of [...plan.created].reverse()) {
    const h = holds.get(p);
    if (h === undefined || --h.refs > 0) continue;
    holds.delete(p);
    if (!h.ours) {
      unlock(h.lock);
      continue;
    }
    const e = giveBackMountPoint(p, h.lock);
    // The lock was not had: the folder and its record are left to the sweep at the next start (fail closed).
    if (e !== undefined) log.warn("a bubblewrap mount point was left to the next start", { path: p, error: e.message });
  }
  retryPendingRemovals();
}
