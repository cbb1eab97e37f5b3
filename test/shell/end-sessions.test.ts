/**
 * Ending the running calls when the client goes (src/shell/sessions.ts `endSessions`, used by `serve`'s shutdown and
 * by an HTTP client's end): a call's lifeline guard is the subreaper of what the call's shell detached with `setsid`,
 * so it must be asked to end (and end it) before anything SIGKILLs it. Without a per-call cgroup (a user other than
 * root without a delegated one, or `SHELLMCP_NO_CGROUP=1`) nothing else catches such a process: SIGKILLed first, the
 * guard left it running under init (seen in test/security/survivors.test.ts, "client disconnect" of
 * danger-full-access, as a non-root user under load).
 *
 * Real parts: the guard binary (the room launcher's `--guard` mode) started as a call's shell is, leading a session
 * of its own, with this process's lifeline; `sh` detaches a tagged `sleep`; the host's /proc is searched for it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { lifelineProblem } from "../../src/sandbox/linux/lifeline.ts";
import { endSessions, killSessions, trackSession } from "../../src/shell/sessions.ts";
import { guardedStart } from "../../src/shell/spawn-plan.ts";
import { noProcessLeft } from "../helpers/events.ts";
import { killWith, pidsWith, waitFor } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";

const skip = skipWithout("ending guarded sessions", process.platform !== "linux" ? "not Linux" : lifelineProblem());

let serial = 0;
const tags: string[] = [];
afterEach(() => {
  for (const t of tags.splice(0)) killWith(`sleep\0${t}`);
});

/**
 * The processes that run `sleep TAG` itself: `pidsWith` would also find setsid(1) still holding `setsid sleep TAG`
 * before its own setsid() (it is then still in the call's session, so the session's SIGKILL takes it).
 */
function sleepers(tag: string): number[] {
  return pidsWith(`sleep\0${tag}`).filter((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8") === `sleep\0${tag}\0`;
    } catch {
      return false; // gone
    }
  });
}

/**
 * A guarded call as `serve` starts one: the guard leads a new session and runs `sh`, which detaches `sleep TAG` with
 * `setsid` and then waits. Tracked in `sids` while it runs (as src/serve/call.ts does). Resolves once the detached
 * sleep runs (its argv is `sleep TAG`: setsid(1) made its session before the exec); `tag` is unique to this process.
 */
async function guardedCall(sids: Set<number>): Promise<{ tag: string; exited: Promise<number> }> {
  const tag = `300.${process.pid}${String(++serial).padStart(3, "0")}`;
  tags.push(tag);
  const stdio: (number | "ignore" | "pipe")[] = ["ignore", "ignore", "ignore"];
  const g = guardedStart(["/bin/sh", "-c", `setsid sleep ${tag} >/dev/null 2>&1 </dev/null & exec sleep 60`], undefined, stdio);
  const proc = Bun.spawn(g.argv, { stdio: stdio as never, detached: true, argv0: g.argv0 });
  trackSession(sids, proc.pid, true);
  const exited = proc.exited.then((code) => {
    trackSession(sids, proc.pid, false);
    return code;
  });
  expect(await waitFor(() => sleepers(tag).length === 1, 10_000, 10)).toBe(true);
  return { tag, exited };
}

describe.skipIf(skip)("ending the sessions of running calls", () => {
  test("a guarded call's detached process ends with it: the guard is asked first, then SIGKILL takes what is left", async () => {
    const sids = new Set<number>();
    const a = await guardedCall(sids);
    const b = await guardedCall(sids);
    expect(sids.size).toBe(2);
    await endSessions(sids, true);
    await Promise.all([a.exited, b.exited]);
    expect(await noProcessLeft(`sleep ${a.tag}`)).toEqual([]);
    expect(await noProcessLeft(`sleep ${b.tag}`)).toEqual([]);
    expect(sids.size).toBe(0);
  });

  test("control: SIGKILL to the session alone (what the server did) leaves the detached process running", async () => {
    const sids = new Set<number>();
    const a = await guardedCall(sids);
    expect(killSessions(sids)).toBeGreaterThan(0);
    await a.exited;
    expect(sleepers(a.tag).length).toBe(1); // its guard is gone and reaped: nothing will end it now
  });
});
