/**
 * Issue 34, item 8: nothing outlives the server. A `serve` that dies by SIGKILL (or the OOM killer: the same
 * signal, with no handler of ours run) must take with it every process it started: the calls' sandboxed shells and
 * what they left in the background (a `setsid` child included), every kept room (bubblewrap, its pid-namespace init,
 * the room launcher; or the Landlock helper and the launcher) and every program running in a room.
 *
 * Driven through the compiled `serve` and a real MCP client, on both backends: a call runs an allowed `python3`
 * (escalated into a kept room) that sleeps, plus plain and `setsid` sleeps of its own; once every one of them runs
 * (and a room launcher with them), the server is SIGKILLed. Every process is then found by a unique marker: in its
 * argv (the sleeps' durations, the workspace path in the room's bwrap argv and the Landlock helper's policy) or by
 * its working folder (the call's workspace, unique to the test). Survivors are listed and killed. Run as this user
 * and, when that is root, again as `nobody` (no cgroups there: only the lifeline holds).
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { chownSync, readdirSync, readFileSync } from "node:fs";
import { ensureBinary } from "../helpers/binary.ts";
import { closeAll, confDir, describePids, pidsWith, serveWithPid, waitFor } from "../helpers/attack.ts";
import { killMarked, marked } from "../helpers/marked.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** How many descendants of `pid` (through every thread's children) are room launchers. */
function roomLaunchers(pid: number): number {
  let n = 0;
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift()!;
    try {
      for (const t of readdirSync(`/proc/${p}/task`))
        for (const k of readFileSync(`/proc/${p}/task/${t}/children`, "utf8").split(" ").filter(Boolean).map(Number)) {
          queue.push(k);
          try {
            if (readFileSync(`/proc/${k}/cmdline`, "utf8").includes("room-launcher")) n++;
          } catch {
            // gone
          }
        }
    } catch {
      // gone
    }
  }
  return n;
}

const RULES = 'prefix_rule(pattern=["python3"], decision="allow")\n';

const isRoot = process.getuid?.() === 0;
/** uid and gid of `nobody`. */
const NOBODY = 65534;
/** `dir`, handed to nobody (its `rules/` folder is written by the test, as root, and stays readable). */
function ownedByNobody(dir: string): string {
  chownSync(dir, NOBODY, NOBODY);
  return dir;
}

describe.skipIf(skipWithout("server death suite", shellsMissing() ?? toolMissing("bwrap", "python3", "setsid")))(
  "item 8: a SIGKILLed server leaves nothing running",
  () => {
    for (const backend of ["bwrap", "landlock"] as const)
      for (const user of ["this user", "nobody"] as const) {
        test.skipIf(user === "nobody" && !isRoot)(
          `${backend}, as ${user}: a kept room with a running program, a running call and its setsid child all end`,
          async () => {
            // As nobody (from root: setpriv): a HOME and a workspace of its own; no cgroups (not delegated to it).
            const nobody = user === "nobody" ? { home: ownedByNobody(confDir("death-home")) } : undefined;
            const ws = nobody !== undefined ? ownedByNobody(confDir("death-ws")) : confDir("death-ws");
            const s = await serveWithPid({
              rules: RULES,
              args: ["--sandbox-backend", backend],
              // Started in the workspace: `serve` refuses a working folder (its default --cd) its user cannot enter,
              // as this process's is when the checkout lies in a folder closed to others (under /root, in a
              // `mktemp -d` folder). The executable itself needs no copy: setpriv execs it before it drops root's
              // capabilities, and the server re-executes itself through /proc/self/exe.
              cwd: ws,
              ...(nobody !== undefined
                ? {
                    command: ["/usr/bin/setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", ensureBinary()],
                    codexHome: nobody.home,
                  }
                : {}),
            });
            const n = `${process.pid}${Math.floor(Math.random() * 1e6)}`;
            const marks = [`3001.${n}`, `3002.${n}`, `3003.${n}`, ws];
            cleanups.push(() => killMarked(marks, ws));
            // python3 (allowed: escalated into a kept room) sleeps; the call's own shell sleeps, one child in a new session.
            const cmd =
              `python3 -c 'import time; time.sleep(3001.${n})' & ` +
              `sleep 3002.${n} >/dev/null 2>&1 </dev/null & setsid sleep 3003.${n} >/dev/null 2>&1 </dev/null & wait`;
            const call = s.shell({ command: cmd, workdir: ws, login: false, timeout_ms: 600_000 }).catch(() => undefined);
            const running = () =>
              [`time.sleep(3001.${n})`, `sleep\x003002.${n}`, `sleep\x003003.${n}`].every((m) => pidsWith(m).length > 0) &&
              roomLaunchers(s.pid) > 0;
            expect(await waitFor(running, 20_000), `not all running; the server said: ${s.stderr()}`).toBe(true);
            const before = marked(marks, ws);
            process.kill(s.pid, "SIGKILL");
            await call;
            // The kernel delivers the deaths asynchronously: wait for them (generous: a loaded CI machine), then judge.
            await waitFor(() => marked(marks, ws).length === 0, 15_000);
            const left = marked(marks, ws);
            if (left.length > 0) console.log(`before:\n${describePids(before)}\nsurvivors:\n${describePids(left)}`);
            expect(left).toEqual([]);
          },
          60_000,
        );
      }
  },
);

describe.skipIf(skipWithout("server death, host escalation", shellsMissing() ?? toolMissing("bwrap", "python3")))(
  "item 8 with `--escalation host`: an escalated program on the host ends with a SIGKILLed server",
  () => {
    test("bwrap call, python3 escalated to the host, server SIGKILLed: the program and the call end", async () => {
      const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", "bwrap", "--escalation", "host"] });
      const ws = confDir("death-host-ws");
      const n = `${process.pid}${Math.floor(Math.random() * 1e6)}`;
      const marks = [`3021.${n}`, `3022.${n}`, ws];
      cleanups.push(() => killMarked(marks, ws));
      const cmd = `python3 -c 'import time; time.sleep(3021.${n})' & sleep 3022.${n} >/dev/null 2>&1 </dev/null & wait`;
      const call = s.shell({ command: cmd, workdir: ws, login: false, timeout_ms: 600_000 }).catch(() => undefined);
      expect(await waitFor(() => [`time.sleep(3021.${n})`, `sleep\x003022.${n}`].every((m) => pidsWith(m).length > 0), 20_000)).toBe(true);
      const before = marked(marks, ws);
      process.kill(s.pid, "SIGKILL");
      await call;
      await waitFor(() => marked(marks, ws).length === 0, 15_000); // generous: a loaded CI machine
      const left = marked(marks, ws);
      if (left.length > 0) console.log(`before:\n${describePids(before)}\nsurvivors:\n${describePids(left)}`);
      expect(left).toEqual([]);
    }, 60_000);
  },
);

describe.skipIf(skipWithout("lifeline without cgroups", shellsMissing() ?? toolMissing("bwrap", "setsid")))(
  "the lifeline guard without cgroups: a call's end, timeout and cancel take its setsid children",
  () => {
    for (const backend of ["landlock", "danger-full-access"] as const)
      test(`${backend}, SHELLMCP_NO_CGROUP=1`, async () => {
        const s = await serveWithPid({
          args: backend === "landlock" ? ["--sandbox-backend", "landlock"] : [],
          env: { SHELLMCP_NO_CGROUP: "1" },
        });
        const ws = confDir("lifeline-ws");
        expect(
          await s.sandboxState(
            backend === "landlock" ? { type: "workspace-write", network_access: false } : { type: "danger-full-access" },
            ws,
          ),
        ).toEqual({});
        const n = `${process.pid}${Math.floor(Math.random() * 1e6)}`;
        const marks = [`3011.${n}`, `3012.${n}`, `3013.${n}`];
        cleanups.push(() => killMarked(marks, ws));
        const bg = (m: string) => `setsid sleep ${m} >/dev/null 2>&1 </dev/null &`;
        const ended = await s.shell({ command: `${bg(marks[0]!)} sleep 0.3; echo started`, workdir: ws, login: false, timeout_ms: 20_000 });
        const timedOut = await s.shell({ command: `${bg(marks[1]!)} sleep 60`, workdir: ws, login: false, timeout_ms: 1500 });
        const ac = new AbortController();
        const cancelled = s
          .shell({ command: `${bg(marks[2]!)} sleep 60`, workdir: ws, login: false, timeout_ms: 60_000 }, { signal: ac.signal })
          .catch(() => "cancelled");
        await waitFor(() => pidsWith(`sleep\x00${marks[2]}`).length > 0, 10_000);
        ac.abort();
        expect({
          ended: ended.out.output.split("\n")[0] /* a notice about the backend may follow */,
          timedOut: timedOut.out.timed_out,
          cancelled: await cancelled,
        }).toEqual({
          ended: "started",
          timedOut: true,
          cancelled: "cancelled",
        });
        await waitFor(() => marked(marks, "\0none").length === 0, 10_000); // generous: a loaded CI machine
        const left = marked(marks, "\0none");
        if (left.length > 0) console.log(`survivors:\n${describePids(left)}`);
        expect(left).toEqual([]);
      }, 60_000);
  },
);

describe.skipIf(skipWithout("lifeline without cgroups, escalated", shellsMissing() ?? toolMissing("python3")))(
  "the lifeline guard without cgroups: an escalated program's setsid child ends with its call",
  () => {
    test("danger-full-access (host escalation), SHELLMCP_NO_CGROUP=1, timeout: the program ignores SIGTERM", async () => {
      const s = await serveWithPid({ rules: RULES, env: { SHELLMCP_NO_CGROUP: "1" } });
      const ws = confDir("lifeline-esc-ws");
      expect(await s.sandboxState({ type: "danger-full-access" }, ws)).toEqual({});
      const n = `3031.${process.pid}${Math.floor(Math.random() * 1e6)}`;
      cleanups.push(() => killMarked([n], "\0none"));
      const py = `import signal, subprocess, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); subprocess.Popen(["sleep", "${n}"], start_new_session=True); time.sleep(${n})`;
      const r = await s.shell({ command: `python3 -c '${py}'`, workdir: ws, login: false, timeout_ms: 1500 });
      expect(r.out.timed_out).toBe(true);
      await waitFor(() => marked([n], "\0none").length === 0, 10_000); // generous: a loaded CI machine
      const left = marked([n], "\0none");
      if (left.length > 0) console.log(`survivors:\n${describePids(left)}`);
      expect(left).toEqual([]);
    }, 60_000);
  },
);
