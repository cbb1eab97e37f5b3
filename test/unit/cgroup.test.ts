/**
 * The per-call cgroups (src/shell/cgroup.ts) against the real cgroup v2 hierarchy: shutdown kills every member,
 * waits for the kernel to empty each cgroup and removes the folders (a server that exits leaves no
 * `shellmcp-<pid>` behind), and a new manager removes the empty folders of servers that no longer run while
 * leaving populated ones alone.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { CgroupManager } from "../../src/shell/cgroup.ts";
import { skipWithout } from "../helpers/prereq.ts";

/** rmdir a cgroup folder that another server's start-up sweep may have removed already. */
function rmdirQuiet(p: string): void {
  try {
    rmdirSync(p);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}

const probe = CgroupManager.detect();
const missing = probe instanceof CgroupManager ? undefined : `no writable cgroup v2: ${probe.error}`;
/** The folder every manager of this process puts its `shellmcp-<pid>` base in. */
const parent = probe instanceof CgroupManager ? dirname(probe.base) : "";
if (probe instanceof CgroupManager) await probe.shutdown();

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) {
    try {
      c();
    } catch {}
  }
});

/**
 * Pids above the kernel's largest pid_max (2^22), so `/proc/<pid>` can never exist; this process's own three (from
 * its pid), so two test runs on one machine never make the same folders in the shared cgroup parent.
 */
const DEAD = [0, 1, 2].map((i) => 4194305 + 3 * process.pid + i);

describe.skipIf(skipWithout("cgroup suite", missing))("per-call cgroups", () => {
  test("shutdown kills setsid'd members of every call and removes the call folders and the base", async () => {
    const m = CgroupManager.detect() as CgroupManager;
    const procs = [m.create(), m.create()].map((cg) => {
      const p = Bun.spawn(["setsid", "sleep", "300"], { stdio: ["ignore", "ignore", "ignore"] });
      cleanups.push(() => p.kill(9));
      cg.add(p.pid);
      return { cg, p };
    });
    expect(procs.map(({ cg }) => cg.members().length)).toEqual([1, 1]);
    await m.shutdown();
    // Every member was killed (the exit is observed by its parent, this process) and nothing is left on disk.
    expect(await Promise.all(procs.map(({ p }) => p.exited))).toEqual([137, 137]);
    expect(procs.map(({ cg }) => existsSync(cg.dir))).toEqual([false, false]);
    expect(existsSync(m.base)).toBe(false);
  });

  test("the next call's cgroup is made ahead, off the call's path; one removed meanwhile is replaced; shutdown leaves none (nor makes one later)", async () => {
    const m = CgroupManager.detect() as CgroupManager;
    const first = m.create();
    expect(first.dir).toBe(join(m.base, "call-1"));
    await new Promise((r) => setImmediate(r));
    // Made ahead while the first call runs.
    expect(existsSync(join(m.base, "call-2"))).toBe(true);
    const second = m.create();
    expect(second.dir).toBe(join(m.base, "call-2"));
    await new Promise((r) => setImmediate(r));
    // The one made ahead disappears (as if swept): the next call gets a new one all the same.
    rmdirSync(join(m.base, "call-3"));
    const third = m.create();
    expect(existsSync(third.procs)).toBe(true);
    expect(third.dir).toBe(join(m.base, "call-4"));
    // Shutdown right after a create (whose cgroup-ahead is still to be made): nothing is left, now or a turn later.
    await m.shutdown();
    await new Promise((r) => setImmediate(r));
    expect(existsSync(m.base)).toBe(false);
    for (const c of [first, second, third]) expect(existsSync(c.dir)).toBe(false);
  });

  test("dispose of a populated call cgroup kills its members, then removes it; of an empty one, removes it", async () => {
    const m = CgroupManager.detect() as CgroupManager;
    cleanups.push(() => void m.shutdown());
    const busy = m.create();
    const p = Bun.spawn(["setsid", "sleep", "300"], { stdio: ["ignore", "ignore", "ignore"] });
    cleanups.push(() => p.kill(9));
    busy.add(p.pid);
    const empty = m.create();
    await Promise.all([busy.dispose(), empty.dispose()]);
    expect(await p.exited).toBe(137);
    expect([existsSync(busy.dir), existsSync(empty.dir)]).toEqual([false, false]);
  });

  test("a new manager removes empty folders of servers that are gone, and leaves populated ones", () => {
    const [emptyBase, busyBase, noCalls] = DEAD.map((pid) => join(parent, `shellmcp-${pid}`));
    for (const d of [emptyBase!, busyBase!, noCalls!]) {
      mkdirSync(d);
      cleanups.push(() => existsSync(d) && rmdirSync(d));
    }
    mkdirSync(join(emptyBase!, "call-1"));
    mkdirSync(join(emptyBase!, "call-2"));
    const busyCall = join(busyBase!, "call-1");
    mkdirSync(busyCall);
    cleanups.push(() => existsSync(busyCall) && rmdirSync(busyCall));
    const sleeper = Bun.spawn(["sleep", "300"], { stdio: ["ignore", "ignore", "ignore"] });
    cleanups.push(() => sleeper.kill(9));
    writeFileSync(join(busyCall, "cgroup.procs"), String(sleeper.pid));
    cleanups.push(() => writeFileSync(join(parent, "cgroup.procs"), String(sleeper.pid))); // back out before rmdir

    const m = CgroupManager.detect() as CgroupManager;
    cleanups.push(() => void m.shutdown());
    expect(existsSync(emptyBase!)).toBe(false);
    expect(existsSync(noCalls!)).toBe(false);
    expect(existsSync(busyCall)).toBe(true); // a populated cgroup is never removed
    expect(readFileSync(join(busyCall, "cgroup.procs"), "utf8").trim()).toBe(String(sleeper.pid));
    expect(existsSync(m.base)).toBe(true); // its own base is fresh
  });

  test("a dead server's empty folder is removed even when its pid now belongs to a process started later", async () => {
    // The folder of server N, then a new process given pid N (ns_last_pid: root only; retried when another
    // process takes the pid first). The old sweep took that process for the server and left the folder for good.
    let pid = 0;
    let folder = "";
    for (let attempt = 0; attempt < 5 && pid === 0; attempt++) {
      const max = Number(readFileSync("/proc/sys/kernel/pid_max", "utf8"));
      const want = 1000 + Math.floor(Math.random() * (max - 2000));
      folder = join(parent, `shellmcp-${want}`);
      mkdirSync(folder);
      mkdirSync(join(folder, "call-1"));
      cleanups.push(() => {
        rmdirQuiet(join(folder, "call-1"));
        rmdirQuiet(folder);
      });
      await Bun.sleep(1500); // the process starts after the folder last changed (the boot time has whole seconds)
      try {
        writeFileSync("/proc/sys/kernel/ns_last_pid", String(want - 1));
      } catch {
        break; // not root, or pid_max too low: cannot be set up here
      }
      const p = Bun.spawn(["sleep", "30"], { stdio: ["ignore", "ignore", "ignore"] });
      cleanups.push(() => p.kill(9));
      if (p.pid === want) pid = want;
      else {
        // Another server starting meanwhile may have swept the (dead) folder already: that is no failure here.
        rmdirQuiet(join(folder, "call-1"));
        rmdirQuiet(folder);
      }
    }
    if (pid === 0) return console.warn("SKIP pid reuse: cannot give a new process a chosen pid here");
    expect(existsSync(`/proc/${pid}`)).toBe(true);
    const m = CgroupManager.detect() as CgroupManager;
    cleanups.push(() => void m.shutdown());
    expect(existsSync(folder)).toBe(false);
  });
});
