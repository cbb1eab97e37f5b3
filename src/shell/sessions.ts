/**
 * Kill every process of a session. Each shell runs as the leader of a new session (`setsid`); its background
 * jobs stay in that session even after the shell exits (and even if they change process group), so a session id
 * names exactly "everything this call started". Used when the client disconnects: nothing is left behind.
 *
 * A session id is its leader's pid: once the session is empty the kernel may give that number to any new process,
 * which may lead a session of its own (serving as root: any user's). So the set holds a call's session only while its
 * shell runs ({@link trackSession}): the shell is this server's unreaped child until then, so its id cannot have been
 * reused.
 */
import { readdirSync, readFileSync } from "node:fs";
import * as libc from "../../ffi/libc.ts";
import { HOST_PLATFORM } from "../sandbox/host-platform.ts";

/** Session id of process `pid` from /proc (field 6 of stat), or undefined if it is gone. */
function sessionOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // state ppid pgrp session …
    return Number(rest[3]);
  } catch {
    return undefined;
  }
}

/**
 * Keep `sids` to the sessions of running shells: `running` true adds `sid` (the shell has just been started, it
 * leads session `sid`), false removes it (the shell has exited: its id may be reused from now on).
 */
export function trackSession(sids: Set<number>, sid: number, running: boolean): void {
  if (running) sids.add(sid);
  else sids.delete(sid);
}

/** SIGKILL every process whose session id is in `sids`. Returns how many were signalled. */
export function killSessions(sids: ReadonlySet<number>): number {
  if (sids.size === 0) return 0;
  let n = 0;
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    const sid = sessionOf(pid);
    if (sid !== undefined && sids.has(sid)) {
      libc.kill(pid, 9);
      n++;
    }
  }
  return n;
}

/** How long {@link endSessions} waits for the calls' lifeline guards to end what runs below them, ms. */
export const GUARD_END_WAIT_MS = 2000;

/**
 * End every process of the sessions `sids` ({@link trackSession}): when the client disconnects (the server shuts
 * down, or one HTTP client goes). Where calls run under lifeline guards (`guarded`: the guard binary is there, see
 * src/sandbox/linux/lifeline.ts), each session's leader is its call's guard, the subreaper of everything the call
 * started: each guard is asked to end (the platform's `endSignal`, as a timeout does, src/shell/call-control.ts) and
 * kills everything below it — processes that called `setsid` and left the session too — then dies; they get up to
 * `waitMs` to be gone from `sids` (a call stops tracking its guard once reaped). Only then is every process still in
 * one of those sessions SIGKILLed: the calls without a guard, or a guard that did not finish. A guard SIGKILLed first
 * (as this server did) leaves what its shell detached from the session running, re-parented to init, where nothing
 * catches it unless a per-call cgroup does (root, or a delegated cgroup: not a user without one). Resolves with how
 * many processes the last step signalled. Never throws.
 */
export async function endSessions(sids: ReadonlySet<number>, guarded: boolean, waitMs: number = GUARD_END_WAIT_MS): Promise<number> {
  if (guarded && sids.size > 0) {
    for (const sid of sids)
      try {
        libc.kill(sid, HOST_PLATFORM.lifeline.endSignal);
      } catch {
        // not ours to signal (EPERM): the last step tries with SIGKILL
      }
    const deadline = Date.now() + waitMs;
    while (sids.size > 0 && Date.now() < deadline) await Bun.sleep(5);
  }
  try {
    return killSessions(sids);
  } catch {
    return 0;
  }
}
