/**
 * A started process's tree as /proc shows it (./process.ts): its descendants (`process/terminate` signals those that
 * left its process group too), and the foreground process group of its controlling terminal. /proc is kernel-made:
 * read directly.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Every descendant pid of `root` (from /proc), deepest last. */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(pid);
      children.set(ppid, list);
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(root);
  return out;
}

/** `kill(pid, sig)`, ignoring a process that is already gone (ESRCH). */
export function killQuiet(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * The foreground process group of `pid`'s controlling terminal (`tpgid` in `/proc/<pid>/stat`), or undefined when it
 * has none or is gone.
 */
export function foregroundGroup(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const tpgid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[5]);
    return Number.isInteger(tpgid) && tpgid > 0 ? tpgid : undefined;
  } catch {
    return undefined;
  }
}
