/**
 * The empty mount points bubblewrap plans make for missing protected paths (src/sandbox/linux/bwrap.ts
 * `holdMountPoint`): a folder that vanished since the plan's search found it (another process renamed or removed
 * it: seen when a concurrent run removed a nested repository under a shared /tmp) is left out, not a failed plan.
 * Every folder a plan binds is locked shared while it is held (src/sandbox/linux/mount-locks.ts): a mount point that
 * another process still locks is not removed on release but later, once free; a folder another process locks
 * exclusively (all the while) refuses the plan rather than binding an unguarded folder.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { flock, LOCK } from "../../ffi/libc.ts";
import { retryPendingRemovals } from "../../src/sandbox/linux/mount-markers.ts";
import { holdMountPoint, releaseBwrapPlan } from "../../src/sandbox/linux/mount-points.ts";

const base = mkdtempSync(join(tmpdir(), "mount-points-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** Another process's view of folder `p`: an fd of its own (a separate open file, as flock sees another process). */
const openFolder = (p: string) => openSync(p, constants.O_RDONLY | constants.O_DIRECTORY);

/** Whether an exclusive lock on `p` can be taken now (nobody holds one): taken and dropped at once. */
function free(p: string): boolean {
  const fd = openFolder(p);
  try {
    flock(fd, LOCK.EX | LOCK.NB);
    return true;
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

describe("holdMountPoint", () => {
  test("a missing path in an existing folder: made, held, removed on release", () => {
    const created: string[] = [];
    const p = join(base, ".codex");
    expect(holdMountPoint(p, created)).toBe(true);
    expect(existsSync(p)).toBe(true);
    expect(created).toEqual([p]);
    releaseBwrapPlan({ argv: [], created, direct: false });
    expect(existsSync(p)).toBe(false);
  });

  test("an existing folder: held and locked while the plan runs, never removed", () => {
    const created: string[] = [];
    const p = join(base, "real");
    mkdirSync(p);
    expect(holdMountPoint(p, created)).toBe(true);
    expect(created).toEqual([p]);
    expect(free(p)).toBe(false);
    releaseBwrapPlan({ argv: [], created, direct: false });
    expect(free(p)).toBe(true);
    expect(existsSync(p)).toBe(true);
  });

  test("a mount point another process still stands on: left on release, removed by a later try once free", () => {
    const created: string[] = [];
    const p = join(base, "shared", ".codex");
    mkdirSync(join(base, "shared"));
    expect(holdMountPoint(p, created)).toBe(true);
    const other = openFolder(p);
    flock(other, LOCK.SH);
    try {
      releaseBwrapPlan({ argv: [], created, direct: false });
      expect(existsSync(p)).toBe(true);
    } finally {
      closeSync(other);
    }
    retryPendingRemovals();
    expect(existsSync(p)).toBe(false);
  });

  test("a folder another process locks exclusively all the while: the plan is refused, nothing held", () => {
    const created: string[] = [];
    const p = join(base, "taken");
    mkdirSync(p);
    const other = openFolder(p);
    flock(other, LOCK.EX);
    try {
      expect(() => holdMountPoint(p, created)).toThrow(/exclusive lock/);
      expect(created).toEqual([]);
    } finally {
      closeSync(other);
    }
    expect(holdMountPoint(p, created)).toBe(true);
    releaseBwrapPlan({ argv: [], created, direct: false });
    expect(existsSync(p)).toBe(true);
  });

  test("a path whose folder vanished: false, nothing made, no throw", () => {
    const created: string[] = [];
    const p = join(base, "gone", "proj", ".git");
    expect(holdMountPoint(p, created)).toBe(false);
    expect(existsSync(join(base, "gone"))).toBe(false);
    expect(created).toEqual([]);
  });
});
