/**
 * Issue 11, item 7: a call's processes all end with the call — after a timeout, a cancel, a client disconnect
 * and a normal exit — on every backend (Landlock, bwrap, danger-full-access), including processes that called
 * `setsid`, double-forked, or were started by an escalated program in a new session. Each process carries a unique
 * tag in its argv (`sleep 300.<n>`), and the host's /proc is searched for it afterwards.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import {
  closeAll,
  confDir,
  describePids,
  escalations,
  killWith,
  pidsWith,
  py,
  requirePrograms,
  serveWithPid,
  waitFor,
} from "../helpers/attack.ts";

requirePrograms("setsid", "nohup", "bwrap", "/usr/bin/python3");
afterAll(closeAll);

let serial = 0;
const tags: string[] = [];
/** A unique `sleep` duration (its argv is the tag): 300.<pid><serial>. */
function tag(): string {
  const t = `300.${process.pid}${String(++serial).padStart(3, "0")}`;
  tags.push(t);
  return t;
}
afterEach(() => {
  for (const t of tags.splice(0)) killWith(`sleep\0${t}`);
});

/** Three ways to leave the process group, each tagged; output goes to /dev/null so the call can end. */
function escapes(): { command: string; tags: string[] } {
  const [a, b, c] = [tag(), tag(), tag()];
  return {
    command: `setsid sleep ${a} >/dev/null 2>&1 < /dev/null & ( ( sleep ${b} >/dev/null 2>&1 < /dev/null & ) & ) ; nohup setsid sleep ${c} >/dev/null 2>&1 < /dev/null & sleep 0.3; echo started`,
    tags: [a, b, c],
  };
}

const left = (ts: string[]) => ts.flatMap((t) => pidsWith(`sleep\0${t}`));
/** `left(ts)`, logging each survivor's state, parent, session and cgroup first when there are any. */
function survivors(ts: string[]): number[] {
  const pids = left(ts);
  if (pids.length > 0) console.log(`survivors:\n${describePids(pids)}`);
  return pids;
}

const BACKENDS = [
  ["landlock", ["--sandbox-backend", "landlock"], { type: "workspace-write", network_access: false }],
  ["bwrap", ["--sandbox-backend", "bwrap"], { type: "workspace-write", network_access: false }],
  ["danger-full-access", [], { type: "danger-full-access" }],
] as const;

for (const [name, args, policy] of BACKENDS) {
  describe(`item 7 (${name}): nothing outlives the call`, () => {
    test("timeout, cancel and normal exit: setsid, double fork and nohup+setsid children all end", async () => {
      const s = await serveWithPid({ args: [...args] });
      const ws = confDir("ws");
      expect(await s.sandboxState(policy, ws)).toEqual({});
      const timedOut = escapes();
      const cancelled = escapes();
      const finished = escapes();
      const ac = new AbortController();
      const [t, c, f] = await Promise.allSettled([
        s.shell({ command: `${timedOut.command}; sleep 60`, workdir: ws, login: false, timeout_ms: 2000 }),
        s.shell({ command: `${cancelled.command}; sleep 60`, workdir: ws, login: false, timeout_ms: 60000 }, { signal: ac.signal }),
        s.shell({ command: finished.command, workdir: ws, login: false, timeout_ms: 20000 }),
        Bun.sleep(2000).then(() => ac.abort()),
      ]);
      expect(t.status === "fulfilled" && t.value.out.timed_out).toBe(true);
      expect(c.status).toBe("rejected");
      expect(f.status === "fulfilled" && f.value.out.output).toBe("started\n");
      // Give the server a moment to finish killing, then look for survivors on the host.
      await waitFor(() => left([...timedOut.tags, ...cancelled.tags, ...finished.tags]).length === 0, 10_000); // generous: a loaded CI machine; passing runs take milliseconds
      survivors([...timedOut.tags, ...cancelled.tags, ...finished.tags]);
      expect({ timeout: left(timedOut.tags).length, cancel: left(cancelled.tags).length, exit: left(finished.tags).length }).toEqual({
        timeout: 0,
        cancel: 0,
        exit: 0,
      });
    }, 60_000);

    test("client disconnect: setsid, double fork and nohup+setsid children all end", async () => {
      const s = await serveWithPid({ args: [...args] });
      const ws = confDir("ws");
      expect(await s.sandboxState(policy, ws)).toEqual({});
      const e = escapes();
      const call = s.shell({ command: `${e.command}; sleep 60`, workdir: ws, login: false, timeout_ms: 60000 }).catch(() => undefined);
      expect(await waitFor(() => left(e.tags).length === 3, 10_000)).toBe(true); // all three started
      await s.close();
      await call;
      await waitFor(() => left(e.tags).length === 0, 10_000); // generous: a loaded CI machine; passing runs take milliseconds
      expect(survivors(e.tags).length).toBe(0);
    }, 60_000);
  });
}

describe("item 7 (escalated): a new-session grandchild of an escalated program ends with the call", () => {
  test("an allowed python3 that starts `sleep` with start_new_session and double-forks: nothing remains", async () => {
    const s = await serveWithPid({
      rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
      args: ["--sandbox-backend", "landlock"],
    });
    const ws = confDir("ws");
    const [a, b] = [tag(), tag()];
    const prog = `import os, subprocess\nsubprocess.Popen(["sleep", "${a}"], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        fd = os.open("/dev/null", os.O_RDWR)\n        for i in (0, 1, 2): os.dup2(fd, i)\n        os.execvp("sleep", ["sleep", "${b}"])\n    os._exit(0)\nprint("spawned", flush=True)`;
    const cmd = py(prog).replace("/usr/bin/python3", "python3"); // named `python3`, so the allow rule matches
    // Normal exit of the call, then a timeout.
    const r = await s.shell({ command: cmd, workdir: ws, login: false, timeout_ms: 20000 });
    expect(r.out.output).toContain("spawned");
    // The program really was escalated (into a Landlock room), not run inside the call's sandbox.
    expect(escalations(s.stderr()).filter((e) => e.argv[0] === "python3")).toMatchObject([{ room: "landlock" }]);
    await waitFor(() => left([a, b]).length === 0, 10_000); // generous: a loaded CI machine; passing runs take milliseconds
    expect(survivors([a, b]).length).toBe(0);
    const [c, d] = [tag(), tag()];
    const r2 = await s.shell({
      command: `${py(prog.replace(a, c).replace(b, d)).replace("/usr/bin/python3", "python3")}; sleep 60`,
      workdir: ws,
      login: false,
      timeout_ms: 2000,
    });
    expect(r2.out.timed_out).toBe(true);
    expect(escalations(s.stderr()).filter((e) => e.argv[0] === "python3")).toMatchObject([{ room: "landlock" }, { room: "landlock" }]);
    await waitFor(() => left([c, d]).length === 0, 10_000); // generous: a loaded CI machine; passing runs take milliseconds
    expect(survivors([c, d]).length).toBe(0);
  }, 60_000);
});
