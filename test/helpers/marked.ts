/**
 * Processes found on the host by a unique marker, for the survivor tests (test/security/server-death.test.ts,
 * unsupervised.test.ts): a marker in their argv, or a working folder inside a folder unique to the test (a call's
 * workspace: the shell, its children and a room's processes all start there).
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/** Pids (not this process) whose argv contains any of `marks`, or whose working folder is `dir` or lies in it. */
export function marked(marks: readonly string[], dir: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${e}/cmdline`, "utf8");
      let cwd = "";
      try {
        cwd = readlinkSync(`/proc/${e}/cwd`);
      } catch {
        // a kernel thread, or not ours to read
      }
      if (marks.some((m) => argv.includes(m)) || cwd === dir || cwd.startsWith(`${dir}/`)) out.push(Number(e));
    } catch {
      // gone
    }
  }
  return out;
}

/** SIGKILL every process {@link marked} finds (a failing test leaves nothing behind). */
export function killMarked(marks: readonly string[], dir: string): void {
  for (const p of marked(marks, dir))
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // gone
    }
}

/** Command lines (`<pid>: <argv, spaces for NULs>`) of running processes, this one included, that contain `marker`. */
export function processesWith(marker: string): string[] {
  const out: string[] = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      if (cmd.includes(marker)) out.push(`${pid}: ${cmd}`);
    } catch {
      // gone
    }
  }
  return out;
}
