/**
 * The host side of bubblewrap's plans (./bwrap.ts `planBwrap`): the empty mount points made for missing protected
 * paths, counted per process and shared with other processes through ./mount-markers.ts (the last holder removes
 * one), and the private folders holding the empty file bound over denied files. Made before a sandbox starts, given
 * back once it has ended ({@link releaseBwrapPlan}).
 */
import { existsSync, lstatSync, mkdirSync, opendirSync, rmdirSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { log } from "../../log.ts";
import type { BwrapPlan } from "./bwrap.ts";
import { adoptedMountPoint, DENY_DIR_PREFIX, mayRemoveMountPoint, recordGone, recordMade, withMountLock } from "./mount-markers.ts";

/**
 * Mount points this process made for missing protected paths, and how many running sandboxes use each:
 * concurrent calls of one server share them, and the last one out removes it (one call's cleanup must not pull
 * the mount point from under another's plan).
 */
const syntheticMountPoints = new Map<string, number>();

/**
 * Hold an empty mount point at `p` (made here unless it exists) for a protected path, counted in
 * {@link syntheticMountPoints}. False when `p`'s folder no longer exists (a folder another process removed since the
 * plan's search found it): there is nothing to protect, and a bind of it would fail the whole sandbox, so the caller
 * leaves the path out (what a command may create there later is new, like any folder it makes); also false when this
 * user may not create it there (EACCES, EPERM, EROFS: nor can the sandbox, which writes as this user). A folder made
 * there meanwhile (EEXIST: another server sharing the workspace held the same mount point first) is bound as it
 * is and left to its maker. Other errors throw.
 */
export function holdMountPoint(p: string, created: string[]): boolean {
  const n = syntheticMountPoints.get(p);
  if (n !== undefined) {
    syntheticMountPoints.set(p, n + 1);
    created.push(p);
    return true;
  }
  if (existsSync(p) && !emptyFolder(p)) return true; // a real folder (or file): not ours
  // Missing, or an empty folder that may be another process's mount point: decided under the lock every process
  // sharing this CODEX_HOME takes to make, share and remove them (./mount-markers.ts).
  const held = withMountLock(() => {
    if (existsSync(p)) return adoptedMountPoint(p); // another server's (or helper's): held by both, removed by the last
    recordMade("mount-point", p); // on disk before it exists: a crash from here on leaves it to the next start
    try {
      mkdirSync(p);
      return true;
    } catch (e) {
      recordGone("mount-point", p);
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return undefined;
      // Made meanwhile by a process recording no marker (the user, a server with another CODEX_HOME): a real
      // folder, not ours to remove.
      if (code === "EEXIST") return false;
      // A folder this user cannot write (another user's bare repository in /tmp without `hooks/`): the sandbox,
      // which writes as this user, cannot create the path either, so there is nothing to hold — and refusing would
      // let another user's folder stop every call.
      if (code === "EACCES" || code === "EPERM" || code === "EROFS") return undefined;
      throw e;
    }
  });
  if (held === undefined) return false;
  if (!held) return true;
  syntheticMountPoints.set(p, 1);
  created.push(p);
  return true;
}

/** Whether `p` is a real folder with nothing in it (what a mount point looks like). */
function emptyFolder(p: string): boolean {
  try {
    if (!lstatSync(p).isDirectory()) return false;
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
 * A new private folder `$TMPDIR/shellmcp-deny-<random>` (mode 0700) for the empty file bound over denied files,
 * recorded on disk before it is made (./mount-markers.ts). Throws the `mkdir` error.
 */
export function denyDir(): string {
  const dir = join(tmpdir(), `${DENY_DIR_PREFIX}${randomBytes(6).toString("hex")}`);
  recordMade("deny-dir", dir);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    recordGone("deny-dir", dir);
    throw e;
  }
  return dir;
}

/** Give back what ./bwrap.ts `planBwrap` made on the host (`plan.created`, `plan.tempDirs`), once the sandbox has ended. */
export function releaseBwrapPlan(plan: BwrapPlan): void {
  for (const d of plan.tempDirs ?? []) {
    rmSync(d, { recursive: true, force: true });
    recordGone("deny-dir", d);
  }
  for (const p of [...plan.created].reverse()) {
    const n = (syntheticMountPoints.get(p) ?? 1) - 1;
    if (n > 0) {
      syntheticMountPoints.set(p, n);
      continue;
    }
    syntheticMountPoints.delete(p);
    try {
      withMountLock(() => {
        // Another process's sandbox may still stand on it (./mount-markers.ts): then the last holder removes it.
        if (mayRemoveMountPoint(p)) {
          try {
            rmdirSync(p); // only if still empty
          } catch {
            // something was put there from outside the sandbox: leave it
          }
        }
        recordGone("mount-point", p);
      });
    } catch (e) {
      // The lock was not had: leave the folder and its record to the sweep at the next start (fail closed).
      log.warn("a bubblewrap mount point was left to the next start", { path: p, error: (e as Error).message });
    }
  }
}
