/**
 * Processes started by the exec-server end when the server ends, however it ends — SIGKILL included.
 *
 * Every process already runs in a cgroup of its own under this server's `<own cgroup>/shellmcp-<pid>` (see
 * src/shell/cgroup.ts), which nothing inside can leave (not with `setsid`, not by double-forking). The guardian
 * is a `/bin/sh` started once per server, in a session of its own and deaf to INT/TERM/HUP/QUIT, whose stdin is a
 * pipe only the server holds open. When the server dies for any reason the kernel closes that pipe, `read` sees
 * EOF, and the guardian writes `cgroup.kill` on the server's cgroup folder (killing every process of every call
 * and of its sub-cgroups) until the folders can be removed. On a clean shutdown the server has already emptied
 * and removed them, and the guardian finds nothing to do.
 *
 * Chosen over the alternatives (measured, see docs/exec-server.md "Lifetime of processes"): a parent-death signal
 * needs a `setpriv` exec per process (Bun.spawn cannot set it; +3.8 ms) and reaches only the direct child (a
 * `setsid` grandchild survives, checked from Bun); a pid namespace per process costs +8.9 ms per `process/start`
 * and makes the command its namespace's pid 1; a namespace around the whole server makes Bun pid 1 (orphans it
 * never reaps). The guardian costs one `sh` per server, started with the first `process/start`, and nothing per
 * process.
 */
import type { Subprocess } from "bun";
import { log } from "../log.ts";

const SCRIPT = [
  "trap '' INT TERM HUP QUIT",
  "while read -r _; do :; done",
  "i=0",
  'while [ -d "$0" ] && [ "$i" -lt 400 ]; do',
  '  echo 1 > "$0/cgroup.kill" 2>/dev/null',
  '  for d in "$0"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done',
  '  rmdir "$0" 2>/dev/null && exit 0',
  "  sleep 0.05",
  "  i=$((i + 1))",
  "done",
].join("\n");

/** A running guardian; {@link Guardian.stop} ends it without killing anything (clean shutdown already did). */
export interface Guardian {
  pid: number;
  stop(): void;
}

/**
 * Start the guardian of the cgroup folder `cgroupBase` (absolute). Returns undefined (logged) when it cannot be
 * started; the server then runs on, and a SIGKILLed server leaves its processes behind as before.
 */
export function startGuardian(cgroupBase: string): Guardian | undefined {
  let proc: Subprocess<"pipe", "ignore", "ignore">;
  try {
    proc = Bun.spawn(["/bin/sh", "-c", SCRIPT, cgroupBase], {
      stdin: "pipe",
      stdout: "ignore",
      stderr: "ignore",
      detached: true,
      env: { PATH: "/usr/bin:/bin" },
    });
  } catch (e) {
    log.warn("exec-server: cannot start the guardian; processes may outlive a killed server", { error: String(e) });
    return undefined;
  }
  proc.unref();
  return {
    pid: proc.pid,
    stop() {
      try {
        void proc.stdin.end();
      } catch {
        // already gone
      }
    },
  };
}
