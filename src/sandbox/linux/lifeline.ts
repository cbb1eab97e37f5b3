/**
 * Nothing outlives the server (issue 34, item 8): every process the server starts — a call's shell (or the sandbox
 * that runs it), an escalated program, a kept room — is started through the lifeline guard (the room launcher's
 * `--guard` mode, patches/room-launcher.c), which holds the read end of this process's lifeline pipe.
 *
 * The write end of the pipe is held by this process only (close-on-exec, never passed to a child): whatever ends the
 * server — SIGKILL, the OOM killer, a crash, a normal exit — the kernel closes it, every guard sees EOF, and each
 * kills every process below it (the guard is their subreaper, so a process that called `setsid` or double-forked is
 * still below it) and exits. This does not depend on which thread started a process (PR_SET_PDEATHSIG fires when
 * the *thread* that forked the child exits, and is cleared in grandchildren), nor on a cgroup (which needs root or a
 * delegated subtree, and someone alive to write `cgroup.kill`), nor on a pid namespace (bubblewrap only).
 *
 * The guard also ends what its program left behind when the program ends, and ends the way its program did (exit
 * status or signal), in the program's session and process group: to the server it is the program.
 *
 * Where there is no guard binary (not Linux, a build that carries none), processes are started directly and
 * {@link lifelineProblem} says what is lost; `serve` reports it at start-up.
 */
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { launcherBinary } from "./room-launcher.ts";
import { isSelfExe, openSelfExe } from "../../self.ts";

/** The fd number the lifeline's read end has in a guard started by `Bun.spawn` (after the call's fds 0–6). */
export const LIFELINE_FD = 7;
/**
 * The signal that asks a guard, from its parent only, to end: it kills and reaps every process below it, then dies
 * of SIGKILL (SIGUSR1). A SIGKILL to the guard would leave what its program detached running.
 */
export const GUARD_END_SIGNAL = 10;

/** argv[0] of every guard: how it shows in `ps` (its binary is the room launcher's). */
export const GUARD_ARGV0 = "shellmcp-guard";
/** The fd number of the executable a guard started by `Bun.spawn` execs (`--exec-fd`), when it is this one. */
export const EXEC_FD = 8;

let pipe: { read: number; write: number } | undefined;

/**
 * The read end of this thread's lifeline pipe (created on first use; both ends close-on-exec and kept for the life
 * of the process). Each thread (the main one and the escalation worker) has its own pipe; either closes when the
 * process dies. Throws when the pipe cannot be created (out of fds).
 */
export function lifelineReadFd(): number {
  pipe ??= (() => {
    const [read, write] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
    return { read, write };
  })();
  return pipe.read;
}

/**
 * Shutdown: close this thread's write end now, so every guard it started kills what runs below it and exits (as if
 * the server had died). A guard started afterwards ends at once, its program killed. Idempotent.
 */
export function endLifeline(): void {
  if (pipe === undefined || pipe.write < 0) return;
  libc.closeQuiet(pipe.write);
  pipe.write = -1;
}

/**
 * Close both ends of this thread's lifeline pipe (the next {@link lifelineReadFd} makes a new one): for a thread that
 * ends while the process lives on (the escalation worker when it parks), and only when no guard it started runs —
 * each would see EOF and kill what runs below it. Idempotent.
 */
export function closeLifeline(): void {
  if (pipe === undefined) return;
  libc.closeQuiet(pipe.read);
  if (pipe.write >= 0) libc.closeQuiet(pipe.write);
  pipe = undefined;
}

/**
 * Why processes cannot be guarded here (undefined when they can): the guard binary is missing. Then a process the
 * server started can outlive a server killed by a signal.
 */
export function lifelineProblem(): string | undefined {
  const b = launcherBinary();
  return "error" in b ? b.error : undefined;
}

/**
 * `path` run with `argv` (argv[0] exactly) through the lifeline guard, which finds the lifeline's read end at fd
 * `fd` of its own: the program to start instead and its argv (argv[0] {@link GUARD_ARGV0}). `path` must be absolute
 * (the guard does not search PATH). With `opts.execFd` (the server's own executable, {@link isSelfExe} paths: the
 * guard cannot reach it by a path) the guard execs the file open at that fd of its own instead, `path` only names
 * it. With `opts.joinCgroup` (a call's `cgroup.procs`) the guard moves itself into that cgroup before it starts
 * anything (exit 126, nothing run, when it cannot). With `opts.statusFd` (the exec-server: Codex lets a process's
 * leftovers run on after it ends) the guard writes the program's wait status (4 bytes, native order) to that fd of
 * its own when the program ends, lets what it left behind run on below it, and ends once they have. With
 * `opts.ctty` (the exec-server's terminal processes; the guard leads a new session) the terminal open at that fd of
 * its own becomes the guard's controlling terminal before the program starts (exit 127, nothing run, when it
 * cannot). Returns undefined when there is no guard binary ({@link lifelineProblem}).
 */
export function guardedArgv(
  path: string,
  argv: readonly string[],
  fd: number,
  opts: { execFd?: number; joinCgroup?: string; statusFd?: number; ctty?: number } = {},
): { path: string; argv: string[] } | undefined {
  const b = launcherBinary();
  if ("error" in b) return undefined;
  return {
    path: b.path,
    argv: [
      GUARD_ARGV0,
      "--guard",
      String(fd),
      ...(opts.execFd !== undefined ? ["--exec-fd", String(opts.execFd)] : []),
      ...(opts.joinCgroup !== undefined ? ["--join-cgroup", opts.joinCgroup] : []),
      ...(opts.statusFd !== undefined ? ["--status-fd", String(opts.statusFd)] : []),
      ...(opts.ctty !== undefined ? ["--ctty", String(opts.ctty)] : []),
      "--",
      path,
      ...argv,
    ],
  };
}

/**
 * A read-only fd of this process's own executable for a guard's `--exec-fd` when `path` is {@link isSelfExe}
 * (undefined otherwise). Throws `SANDBOX_UNAVAILABLE` when it cannot be opened (the helper must not run from a path).
 */
export function selfExecFd(path: string): number | undefined {
  if (!isSelfExe(path)) return undefined;
  const fd = openSelfExe();
  if (fd === undefined)
    throw new ShellmcpError("SANDBOX_UNAVAILABLE", "cannot open this executable (/proc/self/exe) to start the sandbox helper");
  return fd;
}
