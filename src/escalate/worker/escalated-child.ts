/**
 * Escalated children of the escalation worker (./worker.ts): how one is started — `posix_spawn` with the fds
 * the wrapper sent on the numbers it asked for, /dev/null for any of 0/1/2 it did not send, every other fd
 * closed, signals reset, its own process group, through a bash trampoline into its call's cgroup when it has
 * one — how it is signalled, and how its exit is read. The session bookkeeping around it is in
 * ./sessions.ts.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { failIfInjected } from "../../fault-injection.ts";
import type { EscalateSpawn } from "../rooms/keep.ts";
import { isSelfExe } from "../../self.ts";
import { GUARD_END_SIGNAL, guardedArgv, lifelineReadFd, selfExecFd } from "../../sandbox/linux/lifeline.ts";

/** The host's bash, used as a trampoline into a call's cgroup (it can exec with a chosen argv[0]). */
const TRAMPOLINE_BASH = "/bin/bash";

/**
 * argv for `/bin/bash` that joins the cgroup (`procs`) first and then execs `spec.path` with `spec.argv` exactly
 * (argv[0] included): the escalated program is in its call's cgroup before its first instruction, so nothing it
 * forks can start outside. `--norc --noprofile -p` and a fixed script: nothing from the environment is run (the
 * environment is the sandboxed requester's: without `-p` a `-c` bash sources `BASH_ENV`, imports `BASH_FUNC_*%%`
 * functions that override `echo` and `exec`, and takes `SHELLOPTS`, on the host). The program still gets the
 * environment as sent. A failed write stops it (exit 126) rather than running it unaccounted.
 */
export function trampolineArgv(procs: string, spec: EscalateSpawn): string[] {
  return [
    TRAMPOLINE_BASH,
    "--norc",
    "--noprofile",
    "-p",
    "-c",
    'echo $$ > "$0" || exit 126; exec -a "$1" "$2" "${@:3}"',
    procs,
    spec.argv[0]!,
    spec.path,
    ...spec.argv.slice(1),
  ];
}

/**
 * Start `spec` with the fds received from the wrapper (`received`) on the fd numbers of its SuperExecMessage
 * (`dests`, same order). With `procs` (the call's `cgroup.procs`) the child goes through the bash trampoline
 * when the host has one, and is then in the cgroup before it runs; `viaTrampoline: false` with `procs` set
 * means the caller must still move `pid` into the cgroup. `guarded`: `pid` is the lifeline guard (src/sandbox/linux/lifeline.ts)
 * and the program its only child, in the guard's process group. Every received fd (and every duplicate made here)
 * is closed before this returns or throws. Throws `PROTOCOL` when the counts differ; spawn failures
 * (`ShellmcpError` from `libc.spawn`) propagate.
 */
export function spawnEscalated(
  received: number[],
  dests: number[],
  spec: EscalateSpawn,
  procs: string | undefined,
  outputFd?: number,
): { pid: number; viaTrampoline: boolean; guarded: boolean } {
  if (received.length !== dests.length) {
    received.forEach(libc.closeQuiet);
    throw new ShellmcpError(
      "PROTOCOL",
      `mismatched number of fds in SuperExecMessage: ${dests.length} in the message, ${received.length} from the control message`,
    );
  }
  // A received fd whose number is also a destination would be overwritten by an earlier dup2 in the child:
  // move such fds above every destination first (Codex 0.97 rejected this case; later versions handle it).
  const extraDests = (spec.extraFds ?? []).map(([, d]) => d);
  const top = Math.max(2, ...dests, ...extraDests) + 1;
  const sources = received.map((fd) => (dests.includes(fd) ? libc.fcntl(fd, libc.SOCK.F_DUPFD_CLOEXEC, top) : fd));
  // The room passes no terminal (a pager or editor would read keystrokes from it, on the host side of the sandbox):
  // stdin becomes /dev/null, stdout/stderr the call's output pipe (a copy of it, closed below like the rest).
  const map: (readonly [number, number])[] = [];
  sources.forEach((src, i) => {
    const dest = dests[i]!;
    if (spec.noTerminals === true && dest <= 2 && libc.isatty(src)) {
      if (dest > 0 && outputFd !== undefined) {
        const copy = libc.fcntl(outputFd, libc.SOCK.F_DUPFD_CLOEXEC, top);
        sources.push(copy);
        map.push([copy, dest]);
      }
      return; // not mapped: /dev/null
    }
    map.push([src, dest]);
  });
  for (const [src, dest] of spec.extraFds ?? []) {
    const copy = libc.fcntl(src, libc.SOCK.F_DUPFD_CLOEXEC, top);
    sources.push(copy);
    map.push([copy, dest]);
  }
  // Through the lifeline guard (src/sandbox/linux/lifeline.ts), so that it dies with the server however the server dies: the
  // guard finds the lifeline at fd `top` (a copy above every source and destination, mapped last, kept by closeFrom)
  // and joins the call's cgroup itself before it starts anything. This executable (a Landlock room's helper) is
  // exec'd by the guard from an fd at `top + 1`.
  const self = selfExecFd(spec.path) !== undefined;
  const guarded = guardedArgv(spec.path, spec.argv, top, {
    ...(self ? { execFd: top + 1 } : {}),
    ...(procs !== undefined ? { joinCgroup: procs } : {}),
  });
  // Without a guard: our own helper (/proc/self/exe, argv [exe, --codex-run-as-linux-sandbox, …]) is spawned directly
  // (bash would exec itself) and joins the cgroup itself, first thing (`--join-cgroup`); other programs but
  // bubblewrap go through the bash trampoline.
  const unguarded = guarded === undefined && procs !== undefined && spec.contained !== true;
  const selfJoins = unguarded && isSelfExe(spec.path);
  const viaTrampoline = unguarded && !selfJoins && existsSync(TRAMPOLINE_BASH);
  let target = viaTrampoline
    ? { path: TRAMPOLINE_BASH, argv: trampolineArgv(procs!, spec) }
    : { path: spec.path, argv: selfJoins ? [...spec.argv.slice(0, 2), "--join-cgroup", procs!, ...spec.argv.slice(2)] : spec.argv };
  let closeFrom = top;
  if (guarded !== undefined) {
    // Copies above both destinations: dup2(fd, fd) would keep CLOEXEC.
    const life = libc.fcntl(lifelineReadFd(), libc.SOCK.F_DUPFD_CLOEXEC, top + 2);
    sources.push(life);
    map.push([life, top]);
    if (self) {
      const exe = libc.fcntl(selfExecFd(spec.path)!, libc.SOCK.F_DUPFD_CLOEXEC, top + 2);
      sources.push(exe);
      map.push([exe, top + 1]);
    }
    closeFrom = self ? top + 2 : top + 1;
    target = guarded;
  }
  let pid: number;
  try {
    pid = libc.spawn({
      ...target,
      env: spec.env,
      cwd: spec.cwd,
      fdMap: map,
      devNullStdio: true,
      closeFrom,
      ...(spec.setsid === true ? { setsid: true } : { pgroup: 0 }),
    });
  } finally {
    new Set([...received, ...sources]).forEach(libc.closeQuiet);
  }
  // Guarded, through the trampoline or joining itself: in the cgroup before it runs anything.
  return {
    pid,
    viaTrampoline: (guarded !== undefined && procs !== undefined) || viaTrampoline || selfJoins,
    guarded: guarded !== undefined,
  };
}

/**
 * The fds a program of a kept room gets (src/escalate/worker/kept-rooms.ts), from the fds the wrapper sent (`received`,
 * owned from here on) for `dests`: as for every room program, a terminal on 0–2 is never passed — stdin becomes
 * /dev/null (left out: the launcher opens it), stdout/stderr a copy of the call's output pipe (`outputFd`), or
 * /dev/null once that is released. Returns the fds to send (owned by the caller) and their numbers in the program.
 */
export function roomProgramFds(received: number[], dests: number[], outputFd: number | undefined): { fds: number[]; dests: number[] } {
  if (received.length !== dests.length) {
    received.forEach(libc.closeQuiet);
    throw new ShellmcpError(
      "PROTOCOL",
      `mismatched number of fds in SuperExecMessage: ${dests.length} in the message, ${received.length} from the control message`,
    );
  }
  const out: { fds: number[]; dests: number[] } = { fds: [], dests: [] };
  received.forEach((fd, i) => {
    const dest = dests[i]!;
    if (dest <= 2 && libc.isatty(fd)) {
      libc.closeQuiet(fd);
      if (dest === 0 || outputFd === undefined) return;
      fd = libc.fcntl(outputFd, libc.SOCK.F_DUPFD_CLOEXEC, 3);
    }
    out.fds.push(fd);
    out.dests.push(dest);
  });
  return out;
}

/** How often, and how far apart (ms), {@link superviseChild} looks for the end of a child it killed. */
const KILLED_REAP_TRIES = 200;
const KILLED_REAP_STEP_MS = 5;

/**
 * The pidfd of `pid`, a child this thread has just started and not reaped (an escalated program, a kept room, or
 * their guard), through which it is supervised: polled for its end, signalled without a pid race. When the pidfd
 * cannot be opened (out of fds, an injected `pidfd_open` fault), the child must not run on unsupervised (nothing
 * would reap, signal or time it out): it and its process group get SIGKILL — its pid cannot have been reused, it is
 * unreaped — it is reaped (waiting at most ~1 s for the kernel to end it), and `ESCALATION_UNAVAILABLE` is thrown
 * saying so.
 */
export function superviseChild(pid: number): number {
  try {
    failIfInjected("pidfd_open");
    return libc.pidfdOpen(pid);
  } catch (e) {
    try {
      libc.kill(-pid, 9);
      libc.kill(pid, 9);
    } catch {
      // already gone
    }
    for (let i = 0; i < KILLED_REAP_TRIES; i++) {
      try {
        if (libc.waitpidNoHang(pid) !== undefined) break;
      } catch {
        break; // not ours to reap any more (ECHILD)
      }
      Bun.sleepSync(KILLED_REAP_STEP_MS);
    }
    throw new ShellmcpError(
      "ESCALATION_UNAVAILABLE",
      `cannot supervise the escalated program (pidfd_open: ${(e as Error).message}); it was stopped before it could run on unsupervised`,
      {},
      { cause: e },
    );
  }
}

/**
 * Signal an escalated child's process group, only while the child is unreaped (so its pid, and so its group
 * id, cannot have been reused); the child itself through its pidfd. A `guarded` child (its lifeline guard,
 * src/sandbox/linux/lifeline.ts) asked to die (SIGKILL) gets {@link GUARD_END_SIGNAL} instead. Does nothing when `pid` or
 * `pidfd` is undefined; errors (the child already gone) are ignored.
 */
export function signalChild(pid: number | undefined, pidfd: number | undefined, signal: number, guarded = false): void {
  if (pid === undefined || pidfd === undefined) return;
  try {
    if (guarded && signal === 9) {
      // The lifeline guard ends everything below it (setsid'd and double-forked processes included, cgroup or
      // not) and then dies of SIGKILL; a SIGKILL to it and its group would leave those running.
      libc.pidfdSendSignal(pidfd, GUARD_END_SIGNAL);
      return;
    }
    libc.pidfdSendSignal(pidfd, signal);
    libc.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/**
 * Send `signal` to every descendant of `pid` at depth `fromDepth` (1: its children) or deeper, never `pid` itself,
 * found through `/proc/<pid>/task/<tid>/children` (a snapshot: a process forked meanwhile is caught by the SIGKILL
 * that follows the grace period). Used for a room's programs: bwrap's pid-namespace init ignores signals it has no
 * handler for, the program gets it; below a lifeline guard, bwrap itself (depth 1) is left out, as it would die of
 * it and take the program down with no grace period.
 */
export function signalDescendants(pid: number, signal: number, fromDepth = 1): void {
  const seen = new Set<number>([pid]);
  const queue: [number, number][] = [[pid, 0]];
  while (queue.length > 0) {
    const [p, depth] = queue.shift()!;
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      let children: string;
      try {
        children = readFileSync(`/proc/${p}/task/${t}/children`, "utf8");
      } catch {
        continue;
      }
      for (const c of children.split(" ").filter(Boolean).map(Number)) {
        if (seen.has(c)) continue;
        seen.add(c);
        queue.push([c, depth + 1]);
        if (depth + 1 < fromDepth) continue;
        try {
          libc.kill(c, signal);
        } catch {
          // already gone
        }
      }
    }
  }
}

/**
 * Reap `pid` if it has exited (non-blocking): its exit code, 128 + signal for a signal death as a shell reports
 * it (Codex 0.97 said 127); undefined while it still runs.
 */
export function reapExitCode(pid: number): number | undefined {
  const st = libc.waitpidNoHang(pid);
  if (st === undefined) return undefined;
  return st.signal !== undefined ? 128 + st.signal : st.code;
}
