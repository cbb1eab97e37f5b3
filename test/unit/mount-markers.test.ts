/**
 * The sweep of src/sandbox/linux/mount-markers.ts against crafted markers on the real filesystem: it removes only
 * what a dead holder's marker names and only while that is still an empty real folder where it was made (or a deny
 * folder holding nothing but its one empty file); never through a link, never a filled folder, never a path a live
 * holder names; a marker of an earlier boot is dead; the dead markers go, the live one stays. A mount point another
 * process's sandbox stands on (a `flock` on the folder, src/sandbox/linux/mount-locks.ts) is left while it is locked,
 * still recorded, and removed by a later try once the lock is gone.
 */
import { afterAll, describe, expect, test } from "bun:test";
import {
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { flock, LOCK } from "../../ffi/libc.ts";
import { retryPendingRemovals, sweepMountMarkers } from "../../src/sandbox/linux/mount-markers.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const base = mkdtempSync(join(CONF_BASE, "mount-markers-"));
const home = join(base, "home");
const markers = join(home, "sandbox-mounts");
const w = (p: string) => join(base, "w", p);
const sleeper = Bun.spawn(["sleep", "60"], { stdio: ["ignore", "ignore", "ignore"] });
afterAll(() => {
  sleeper.kill(9);
  rmSync(base, { recursive: true, force: true });
});

const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
const pidns = readlinkSync("/proc/self/ns/pid");
const startOf = (pid: number) => {
  const s = readFileSync(`/proc/${pid}/stat`, "utf8");
  return s.slice(s.lastIndexOf(")") + 2).split(" ")[19]!;
};
const entry = (kind: "mount-point" | "deny-dir", path: string, parent = join(path, "..")) => ({ kind, path, parent });

function marker(pid: number, start: string, entries: ReturnType<typeof entry>[], bootId = boot): void {
  writeFileSync(join(markers, `${pid}-${start}-0.json`), JSON.stringify({ v: 1, pid, start, boot: bootId, pidns, entries }), {
    mode: 0o600,
  });
}

describe("mount markers: the sweep", () => {
  test("removes only empty real folders a dead holder made, never through a link, never what a live holder names", () => {
    mkdirSync(markers, { recursive: true, mode: 0o700 });
    mkdirSync(w(""), { recursive: true });
    for (const d of ["empty/.codex", "filled/.codex", "elsewhere/.codex", "real/.codex", "shared/.git", "old-boot/.codex"])
      mkdirSync(w(d), { recursive: true });
    writeFileSync(w("filled/.codex/mine.toml"), "");
    symlinkSync(w("elsewhere/.codex"), w("link-to-empty")); // the marker names a link: not followed
    symlinkSync(w("real"), w("moved")); // `moved/.codex` was made when `moved` was a real folder
    const denyOk = w("shellmcp-deny-ok");
    const denyExtra = w("shellmcp-deny-extra");
    const denyFull = w("shellmcp-deny-full");
    for (const d of [denyOk, denyExtra, denyFull]) mkdirSync(d);
    writeFileSync(join(denyOk, "denied"), "");
    writeFileSync(join(denyExtra, "denied"), "");
    writeFileSync(join(denyExtra, "planted"), "");
    writeFileSync(join(denyFull, "denied"), "not empty");

    const DEAD = 4194305; // above any pid_max: never running
    marker(DEAD, "123", [
      entry("mount-point", w("empty/.codex")),
      entry("mount-point", w("filled/.codex")),
      entry("mount-point", w("link-to-empty")),
      entry("mount-point", w("moved/.codex"), w("")), // recorded parent: base/w/moved was base/w's child, real
      entry("mount-point", w("shared/.git")),
      entry("deny-dir", denyOk),
      entry("deny-dir", denyExtra),
      entry("deny-dir", denyFull),
    ]);
    // The recorded parent of moved/.codex was the real folder base/w/moved: fix it up to say so.
    const f = join(markers, `${DEAD}-123-0.json`);
    const m = JSON.parse(readFileSync(f, "utf8"));
    m.entries[3].parent = w("moved");
    writeFileSync(f, JSON.stringify(m));
    marker(sleeper.pid, startOf(sleeper.pid), [entry("mount-point", w("shared/.git"))]); // alive
    marker(DEAD + 1, "5", [entry("mount-point", w("old-boot/.codex"))], "another-boot");

    const r = sweepMountMarkers({ CODEX_HOME: home });
    expect(existsSync(w("empty/.codex"))).toBe(false);
    expect(existsSync(w("old-boot/.codex"))).toBe(false);
    expect(existsSync(denyOk)).toBe(false);
    expect(existsSync(w("filled/.codex/mine.toml"))).toBe(true);
    expect(existsSync(w("link-to-empty"))).toBe(true);
    expect(existsSync(w("elsewhere/.codex"))).toBe(true);
    expect(existsSync(w("real/.codex"))).toBe(true); // reached only through the link `moved`
    expect(existsSync(w("shared/.git"))).toBe(true); // a live holder names it
    expect(existsSync(join(denyExtra, "planted"))).toBe(true);
    expect(readFileSync(join(denyFull, "denied"), "utf8")).toBe("not empty");
    expect(r.removed.sort()).toEqual([denyOk, w("empty/.codex"), w("old-boot/.codex")].sort());
    expect(readdirSync(markers)).toEqual([`${sleeper.pid}-${startOf(sleeper.pid)}-0.json`]);
  });

  test("a marker folder others can reach is not read", () => {
    const h2 = join(base, "home2");
    mkdirSync(join(h2, "sandbox-mounts"), { recursive: true, mode: 0o755 });
    Bun.spawnSync(["chmod", "0755", join(h2, "sandbox-mounts")]);
    mkdirSync(w("loose/.codex"), { recursive: true });
    writeFileSync(
      join(h2, "sandbox-mounts", "4194305-1-0.json"),
      JSON.stringify({ v: 1, pid: 4194305, start: "1", boot, pidns, entries: [entry("mount-point", w("loose/.codex"))] }),
    );
    expect(sweepMountMarkers({ CODEX_HOME: h2 })).toEqual({ removed: [], left: [] });
    expect(existsSync(w("loose/.codex"))).toBe(true);
  });

  test("a mount point another process's sandbox stands on (locked) is left, still recorded, and removed once free", () => {
    mkdirSync(markers, { recursive: true, mode: 0o700 });
    mkdirSync(w("locked/.codex"), { recursive: true });
    // What a server of another CODEX_HOME holds while its sandbox runs: a shared lock on its own fd of the folder.
    const fd = openSync(w("locked/.codex"), constants.O_RDONLY | constants.O_DIRECTORY);
    flock(fd, LOCK.SH);
    marker(4194305, "9", [entry("mount-point", w("locked/.codex"))]);
    let r: ReturnType<typeof sweepMountMarkers>;
    try {
      r = sweepMountMarkers({ CODEX_HOME: home });
      expect(r).toEqual({ removed: [], left: [w("locked/.codex")] });
      expect(existsSync(w("locked/.codex"))).toBe(true);
      // Still named by a marker (the dead one rewritten, or this process's own): a later try removes it.
      const named = readdirSync(markers)
        .filter((n) => n.endsWith(".json"))
        .some((n) => readFileSync(join(markers, n), "utf8").includes(w("locked/.codex")));
      expect(named).toBe(true);
      retryPendingRemovals();
      expect(existsSync(w("locked/.codex"))).toBe(true); // still locked
    } finally {
      closeSync(fd);
    }
    retryPendingRemovals();
    r = sweepMountMarkers({ CODEX_HOME: home });
    expect(existsSync(w("locked/.codex"))).toBe(false);
    expect(readdirSync(markers).filter((n) => n.includes("4194305"))).toEqual([]);
  });
});
