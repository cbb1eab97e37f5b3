/**
 * Kill every process of a session. Each shell runs as the leader of a new session (`setsid`); its background
 * jobs stay in that session even after the shell exits (and even if they change process group), so a session id
 * names exactly "everything this call started". Used when the client disconnects: nothing is left behind.
 */
import { readdirSync, readFileSync } from "node:fs";
import * as libc from "../../ffi/libc.ts";

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
