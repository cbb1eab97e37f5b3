/**
 * Kept rooms (src/sandbox/linux/room-launcher.ts): the escalated programs of one call share one room of the same
 * walls, started once, with the room launcher inside. Driven through the compiled `serve` and a real MCP client,
 * under bubblewrap and under Landlock, and judged on the host:
 * - two programs of one call run under the same launcher (same parent; under bubblewrap the same pid namespace),
 *   another call gets another room, and the call's own sandbox is not the room;
 * - what an escalated program leaves running is killed as soon as it ends, while the call still runs (a room of its
 *   own used to die with its program: the kept room must keep that promise);
 * - nothing of a room is left once the call has ended;
 * - a program of a room that cannot be built runs in the call's sandbox (the room suite covers the walls).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { closeAll, confDir, pidsWith, serveWithPid, token } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

/** The parent pid (field 4) of each `cat /proc/self/stat` line in `out`. */
function parents(out: string): number[] {
  return [...out.matchAll(/^\d+ \(cat\) \S+ (\d+) /gm)].map((m) => Number(m[1]));
}

const RULES =
  [
    'prefix_rule(pattern=["cat"], decision="allow")',
    'prefix_rule(pattern=["readlink"], decision="allow")',
    'prefix_rule(pattern=["python3"], decision="allow")',
  ].join("\n") + "\n";

describe.skipIf(skipWithout("kept room suite", shellsMissing()))("kept rooms: one room per call and set of walls", () => {
  for (const backend of ["bwrap", "landlock"] as const) {
    describe(backend, () => {
      test("the escalated programs of one call share one launcher; another call gets another; the call's sandbox is not the room", async () => {
        const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", backend] });
        const ws = confDir("kept-ws");
        const cmd =
          "cat /proc/self/stat; cat /proc/self/stat; readlink /proc/self/ns/pid; readlink /proc/self/ns/pid; /bin/readlink /proc/self/ns/user";
        // The two calls overlap (each waits at its end while its room stands): a namespace's inode number and a
        // launcher's pid are reused once freed (a CI run saw the second call's room get the first's number), so
        // "another room" is judged while both exist.
        const calls = await Promise.all([1, 2].map(() => s.shell({ command: `${cmd}; sleep 1.5`, workdir: ws, login: false })));
        const one = calls[0]!.out.output;
        const two = calls[1]!.out.output;
        const p1 = parents(one);
        const p2 = parents(two);
        expect({ p1, one }).toEqual({ p1: [p1[0]!, p1[0]!], one });
        expect(p2).toHaveLength(2);
        expect(p2[0]).toBe(p2[1]!);
        const ns = (out: string) => [...out.matchAll(/^pid:\[(\d+)\]$/gm)].map((m) => m[1]);
        expect(ns(one)).toHaveLength(2);
        expect(ns(one)[0]).toBe(ns(one)[1]!);
        if (backend === "bwrap") {
          // Its own pid namespace per call: the launcher is pid 2 (bwrap's init is 1), and the calls' rooms differ.
          expect(p1[0]).toBe(2);
          expect(ns(two)[0]).not.toBe(ns(one)[0]);
        } else {
          // Landlock rooms share the host's pid namespace: the launchers are two host processes.
          expect(p2[0]).not.toBe(p1[0]!);
        }
      }, 60_000);

      test("a process an escalated program left behind is killed when it ends, while the call still runs", async () => {
        const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", backend] });
        const ws = confDir("kept-left");
        const marker = `33${Math.floor(Math.random() * 1e6)}`;
        const py = `import subprocess, time; subprocess.Popen(["sleep", "${marker}"], start_new_session=True); time.sleep(1.5)`;
        const call = s.shell({
          command: `python3 -c '${py}'; echo py=$?; sleep 4; echo end`,
          workdir: ws,
          login: false,
          timeout_ms: 30_000,
        });
        let done = false;
        void call.then(() => (done = true));
        // It runs while the program runs (the test could see it) …
        let seen = false;
        for (let i = 0; i < 60 && !seen; i++) {
          seen = pidsWith(`sleep\0${marker}`).length > 0;
          if (!seen) await Bun.sleep(50);
        }
        expect(seen).toBe(true);
        // … and is gone soon after the program ended, long before the call ends.
        let gone = false;
        for (let i = 0; i < 50 && !gone; i++) {
          await Bun.sleep(50);
          gone = pidsWith(`sleep\0${marker}`).length === 0;
        }
        expect({ gone, done }).toEqual({ gone: true, done: false });
        const out = (await call).out.output;
        expect(out).toContain("py=0");
        expect(out).toContain("end");
      }, 60_000);

      test("a call's timeout ends what runs in its room, a setsid'd descendant included", async () => {
        const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", backend] });
        const ws = confDir("kept-timeout");
        const marker = `34${Math.floor(Math.random() * 1e6)}`;
        // It ignores SIGTERM: only the end of the room (after the grace period) can stop it.
        const py = `import signal, subprocess, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); subprocess.Popen(["sleep", "${marker}"], start_new_session=True); time.sleep(${marker})`;
        const r = await s.shell({ command: `python3 -c '${py}'`, workdir: ws, login: false, timeout_ms: 1500 });
        expect(JSON.stringify(r.out)).toMatch(/timed out|timeout|124|exit_code/i);
        let left: number[] = [];
        for (let i = 0; i < 80; i++) {
          left = [...pidsWith(`sleep\0${marker}`), ...pidsWith(`time.sleep(${marker})`)];
          if (left.length === 0) break;
          await Bun.sleep(50);
        }
        expect(left).toEqual([]);
      }, 60_000);

      test("the room lives while its call runs, and nothing of it is left once the call has ended", async () => {
        const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", backend] });
        const ws = confDir("kept-end");
        const tag = token();
        const call = s.shell({ command: `cat /proc/self/stat >/dev/null; echo ${tag}; sleep 3`, workdir: ws, login: false });
        const isRoom = (c: string) => c.includes("room-launcher");
        let during: string[] = [];
        for (let i = 0; i < 50 && during.length === 0; i++) {
          await Bun.sleep(50);
          during = descendants(s.pid).filter(isRoom);
        }
        expect(during.length).toBeGreaterThan(0); // bwrap, its init and the launcher name it
        expect((await call).out.output).toContain(tag);
        let left: string[] = [];
        for (let i = 0; i < 40; i++) {
          left = descendants(s.pid).filter(isRoom);
          if (left.length === 0) break;
          await Bun.sleep(50);
        }
        expect(left).toEqual([]);
      }, 60_000);
    });
  }

  const isRoot = process.getuid?.() === 0;
  test.skipIf(skipWithout("kept rooms below Landlock ABI 6 (run as root)", isRoot ? undefined : "Landlock below ABI 6 needs root"))(
    "landlock below ABI 6 (no signal scope): no kept room, each program gets a room of its own",
    async () => {
      const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", "landlock"], env: { SHELLMCP_SIMULATE_LANDLOCK_ABI: "5" } });
      const ws = confDir("kept-abi5");
      const call = s.shell({ command: "cat /proc/self/stat; sleep 2; echo end", workdir: ws, login: false });
      let launchers = 0;
      for (let i = 0; i < 20; i++) {
        await Bun.sleep(50);
        launchers += descendants(s.pid).filter((c) => c.includes("room-launcher")).length;
      }
      const out = (await call).out.output;
      expect(out).toContain("(cat)");
      expect(out).toContain("end");
      expect(launchers).toBe(0);
    },
    30_000,
  );
});

/** Command lines of every descendant of `pid` (through /proc/<pid>/task/<tid>/children of every thread). */
function descendants(pid: number): string[] {
  const out: string[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift()!;
    const kids: number[] = [];
    try {
      for (const t of readdirSync(`/proc/${p}/task`))
        kids.push(...readFileSync(`/proc/${p}/task/${t}/children`, "utf8").split(" ").filter(Boolean).map(Number));
    } catch {
      continue;
    }
    for (const k of kids) {
      queue.push(k);
      try {
        out.push(readFileSync(`/proc/${k}/cmdline`, "utf8").replaceAll("\0", " "));
      } catch {
        // gone
      }
    }
  }
  return out;
}
