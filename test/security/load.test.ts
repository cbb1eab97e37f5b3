/**
 * Issue 11, "Done when": a load test. 50 concurrent calls × 50 intercepted execs each on one server, while one
 * attacker session of each kind runs on the same server at the same time (wedge, memory flood, idle sessions,
 * loader injection, a sandbox-written program, git fsmonitor, secrets through an allowed program, setsid
 * survivors, timeout_ms overflow). Every ordinary call is answered correctly, no attack has an effect on the host,
 * and the server's RSS and fd count return to their idle values afterwards.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import {
  buildPreload,
  closeAll,
  confDir,
  exists,
  fdCount,
  floodProgram,
  idleProgram,
  killWith,
  pidsWith,
  py,
  requirePrograms,
  rssMiB,
  SERVER_PROC_HIDDEN,
  serveWithPid,
  token,
  waitFor,
  wedgeProgram,
  withDeadline,
} from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";

requirePrograms("cc", "git", "setsid", "/usr/bin/python3");
afterAll(closeAll);

/** The server's fds are counted only where this process may list them (root); elsewhere that check is skipped, said. */
const fdsHidden = skipWithout("load test: the server's fd count", SERVER_PROC_HIDDEN);
/** The server's fd count, or 0 where it cannot be counted (the comparisons with it then hold trivially). */
const fds = (pid: number) => (fdsHidden ? 0 : fdCount(pid));

const CALLS = 50;
const EXECS = 50;

describe("load: 50 calls × 50 execs plus one attacker of each kind", () => {
  test("every ordinary call answers correctly; no attack has an effect; RSS and fds return to idle", async () => {
    const secret = `sk-secret-marker-${token()}`;
    const s = await serveWithPid({
      rules:
        [
          'prefix_rule(pattern=["id"], decision="allow")',
          'prefix_rule(pattern=["git", "status"], decision="allow")',
          'prefix_rule(pattern=["cat"], decision="allow")',
        ].join("\n") + "\n",
      env: { OPENAI_API_KEY: secret },
    });
    const ws = confDir("ws");
    const outside = confDir("outside");
    expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
    const call = (command: string, timeout_ms = 120_000, signal?: AbortSignal) =>
      s.shell({ command, workdir: ws, login: false, timeout_ms }, { signal });
    // Warm up, then take the idle figures.
    expect((await call("/bin/true; echo warm")).out.output).toBe("warm\n");
    await Bun.sleep(500);
    const idleRss = rssMiB(s.pid);
    const idleFds = fds(s.pid);

    const mark = (name: string) => join(outside, name);
    buildPreload(mark("preload"), join(ws, "evil.so"));
    const sleepTag = `300.${process.pid}777`;
    const ready = join(ws, "idle-ready");
    const stop = join(ws, "idle-stop");
    const t0 = Date.now();
    const attackers = Promise.allSettled([
      call(py(wedgeProgram(150)), 200_000), // holds until the server closes its session (or 150 s)
      call(py(floodProgram(16, 15)), 90_000),
      call(py(idleProgram(5000, ready, stop, 40)), 90_000),
      call("LD_PRELOAD=$PWD/evil.so id"),
      call(
        `mkdir -p evil && printf '#!/bin/sh\\ntouch ${mark("fake-id")}\\n' > evil/id && chmod +x evil/id && ./evil/id; PATH=$PWD/evil:$PATH id`,
      ),
      call(`mkdir -p r && cd r && git init -q && git config core.fsmonitor "touch ${mark("fsmonitor")}; false" && git status`),
      call("cat /proc/self/environ; cat /proc/$PPID/environ"),
      call(`setsid sleep ${sleepTag} >/dev/null 2>&1 </dev/null & sleep 30`, 2000),
      call("sleep 1; echo big-timeout", 2 ** 31),
    ]);
    const victims = await Promise.allSettled(
      Array.from({ length: CALLS }, (_, k) =>
        withDeadline(call(`for i in $(seq ${EXECS}); do /bin/true; done; echo done-${k}`), 120_000, `call ${k}`),
      ),
    );
    const victimSecs = (Date.now() - t0) / 1000;
    const failed = victims.flatMap((v, k) =>
      v.status === "fulfilled" && v.value.out.output === `done-${k}\n` && v.value.out.exit_code === 0
        ? []
        : [`${k}: ${v.status === "fulfilled" ? JSON.stringify(v.value.out.output.slice(0, 200)) : String(v.reason)}`],
    );
    await waitFor(() => exists(ready), 30_000);
    await Bun.write(stop, "");
    const results = await withDeadline(attackers, 240_000, "attackers");
    const outputs = results.map((r) => (r.status === "fulfilled" ? r.value.out.output : String(r.reason)));
    console.log(`load: ${CALLS}×${EXECS} execs answered in ${victimSecs.toFixed(1)} s; ${failed.length} failed`);
    killWith(`sleep\0${sleepTag}`); // never leave it behind, whatever the verdict
    expect(failed).toEqual([]);
    // No attack had an effect on the host.
    for (const m of ["preload", "fake-id", "fsmonitor"]) expect(exists(mark(m))).toBe(false);
    expect(outputs.join("\n")).not.toContain(secret);
    expect(outputs[8]).toMatch(/big-timeout|timeout_ms/); // clamped (runs) or refused with a clear error
    // And after all of it, the server is back at idle.
    const back = await waitFor(() => fds(s.pid) <= idleFds + 8 && rssMiB(s.pid) < idleRss + 64, 15_000, 250);
    const fdNote = (n: number) => (fdsHidden ? "" : ` / ${n} fds`);
    console.log(`load: idle ${idleRss.toFixed(0)} MiB${fdNote(idleFds)}; after ${rssMiB(s.pid).toFixed(0)} MiB${fdNote(fds(s.pid))}`);
    expect({ back, survivors: pidsWith(`sleep\0${sleepTag}`).length }).toEqual({ back: true, survivors: 0 });
    const { tools } = await withDeadline(s.client.listTools(), 20_000, "tools/list");
    expect(tools.map((t) => t.name)).toContain("shell");
  }, 300_000);
});
