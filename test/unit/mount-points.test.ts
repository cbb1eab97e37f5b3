/**
 * The empty mount points bubblewrap plans make for missing protected paths (src/sandbox/linux/bwrap.ts
 * `holdMountPoint`): a folder that vanished since the plan's search found it (another process renamed or removed
 * it: seen when a concurrent run removed a nested repository under a shared /tmp) is left out, not a failed plan.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { holdMountPoint, releaseBwrapPlan } from "../../src/sandbox/linux/mount-points.ts";

const base = mkdtempSync(join(tmpdir(), "mount-points-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

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

  test("an existing folder: not ours, nothing recorded", () => {
    const created: string[] = [];
    const p = join(base, "real");
    mkdirSync(p);
    expect(holdMountPoint(p, created)).toBe(true);
    expect(created).toEqual([]);
  });

  test("a path whose folder vanished: false, nothing made, no throw", () => {
    const created: string[] = [];
    const p = join(base, "gone", "proj", ".git");
    expect(holdMountPoint(p, created)).toBe(false);
    expect(existsSync(join(base, "gone"))).toBe(false);
    expect(created).toEqual([]);
  });
});
