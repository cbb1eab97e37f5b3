/**
 * Run a command under a {@link SandboxPolicy} on Linux: the one place that chooses a backend and applies it.
 *
 * - `landlock`: in this process, on the main thread, right before execve (./in-process.ts `applyInProcess`): the
 *   Landlock ruleset, every capability dropped, PR_SET_NO_NEW_PRIVS and the seccomp filter, signal dispositions and
 *   mask reset, then execve in place (serve's calls do the same in sandbox-exec, ./sandbox-exec.ts).
 * - `bwrap`: bubblewrap builds the mount view (read-only `/`, writable roots bound read-write, `.git`/`.codex`/
 *   `.agents` re-bound read-only, private `/dev`, `--unshare-net` when the network is off, new user/pid/ipc
 *   namespaces, `/proc` with Codex's retry-without-/proc); inside it this binary runs again as the inner stage
 *   (`--apply-seccomp-then-exec`) to install the seccomp filter (and Landlock read rules for restricted reads)
 *   and exec the command.
 * - `auto`: bwrap when its preflight passes (it protects `.git`/`.codex` inside writable roots, which Landlock
 *   cannot), else Landlock with a one-line warning, else fail closed.
 * Nothing ever runs with less protection than asked for: every failure to apply a layer is an error.
 *
 * This file holds the launching: choosing the backend and running bubblewrap. What a run is and how it is
 * applied in this process (Landlock, seccomp, exec in place, the inner stage) is in ./in-process.ts; probing
 * bubblewrap and building its argv in ./bwrap.ts. Both are re-exported here.
 */
import { closeSync, openSync, readdirSync } from "node:fs";
import { constants as osConstants } from "node:os";
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { writeStderr } from "../../stderr.ts";
import type { SandboxPolicy } from "../policy.ts";
import { planBwrap, probeBwrap, selfHelperArgv, type BwrapProbe } from "./bwrap.ts";
import { openSelfExe } from "../../self.ts";
import { bytesPipe } from "../bytes-pipe.ts";
import { releaseBwrapPlan } from "./mount-points.ts";
import { applyInProcess, execCommand, planOf, runInNewSession, waitForNamespaceInit, type SandboxRun } from "./in-process.ts";
import { landlockAbi } from "./landlock.ts";

/** fds this process inherited from its parent (not CLOEXEC): the command must get them too (e.g. the escalation socket). */
function inheritedFds(): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc/self/fd")) {
    const fd = Number(name);
    if (fd < 3) continue;
    try {
      if (!libc.getCloexec(fd)) out.push(fd);
    } catch {
      // the fd of the directory listing itself, gone by now
    }
  }
  return out.sort((a, b) => a - b);
}

async function runBwrap(bwrap: string, run: SandboxRun): Promise<number> {
  const fds = inheritedFds();
  const seccompFd = Math.max(2, ...fds) + 1;
  const self = openSelfExe();
  const plan = planBwrap(bwrap, run, { seccompFd, ...(self !== undefined ? { selfFd: seccompFd + 1 } : {}) });
  // The plan's host mount points are given back however this ends: bwrap's exit, or a failure to start it.
  let child: ReturnType<typeof Bun.spawn>;
  let code: number;
  try {
    const stdio: (number | "inherit" | "ignore")[] = ["inherit", "inherit", "inherit"];
    for (let fd = 3; fd <= (fds[fds.length - 1] ?? 2); fd++) stdio.push(fds.includes(fd) ? fd : "ignore");
    const bpf = plan.seccomp === undefined ? undefined : bytesPipe(plan.seccomp);
    stdio.push(bpf ?? "ignore"); // at seccompFd
    if (self !== undefined) stdio.push(self); // at seccompFd + 1
    try {
      child = Bun.spawn(plan.argv, { stdio: stdio as ["inherit", "inherit", "inherit"], env: process.env });
    } finally {
      if (bpf !== undefined) libc.closeQuiet(bpf);
    }
    const c = child;
    const forward = (sig: NodeJS.Signals) => () => c.kill(sig);
    for (const s of ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"] as const) process.on(s, forward(s));
    code = await child.exited;
  } finally {
    releaseBwrapPlan(plan);
  }
  const sig = child.signalCode;
  if (sig !== null && sig !== undefined) {
    return 128 + (osConstants.signals[sig as NodeJS.Signals] ?? 0);
  }
  return code;
}

/**
 * Run `run.command` under the policy. Landlock path: never returns (execs). bwrap path: resolves with the
 * command's exit status (128+N for a signal). Throws `SANDBOX_UNAVAILABLE` when protection cannot be applied.
 */
export async function runSandboxed(run: SandboxRun): Promise<number> {
  if (run.command.length === 0) throw new ShellmcpError("USAGE", "No command specified to execute.");
  const plan = planOf(run);
  if (!plan.sandboxed && run.networkProxy !== undefined)
    throw new ShellmcpError("SANDBOX_UNAVAILABLE", "network proxy mode needs a sandboxed policy (this one is unrestricted)");
  if (!plan.sandboxed) return execCommand(run.command);
  // Proxy mode with a bridge fd is bubblewrap's (a private network namespace), whatever the filesystem needs.
  const bridged = run.networkProxy?.fd !== undefined;
  if (bridged && run.backend === "landlock")
    throw new ShellmcpError("SANDBOX_UNAVAILABLE", "network proxy mode: a bridge fd was given to the Landlock backend");
  const needsFs = bridged || !plan.fullWrite || !plan.fullRead || plan.deniedPaths.length > 0;
  let backend = run.backend;
  let probe: BwrapProbe | undefined;
  if (backend !== "landlock" && needsFs) {
    probe = probeBwrap(plan.network !== "enabled" || bridged);
    if (!probe.ok) {
      if (backend === "bwrap" || bridged) throw new ShellmcpError("SANDBOX_UNAVAILABLE", probe.reason!);
      writeStderr(`shellmcp: ${probe.reason}; using Landlock instead, which does not protect .git/.codex inside writable roots\n`);
      backend = "landlock";
    } else backend = "bwrap";
  } else if (backend === "auto") backend = "landlock";

  if (backend === "bwrap" && needsFs) return runBwrap(probe!.path!, { ...run, noProc: run.noProc || probe!.noProc });
  // Landlock (or seccomp only, for external-sandbox).
  if (needsFs && needsOwnPidNamespace(run)) return runInOwnPidNamespace(run);
  applyInProcess(
    run.policy,
    run.policyCwd,
    { landlockWrites: true, proxied: run.networkProxy !== undefined, proxyPorts: run.networkProxy?.ports },
    run.profile,
  );
  if (run.newSession === true) return runInNewSession(run.command);
  return execCommand(run.command);
}

/**
 * Whether a Landlock run needs a pid namespace of its own to keep the command from signalling processes outside it
 * (issue 22, item 2): Landlock scopes signals from ABI 6 (Linux 6.12) only. ABI 0 is left to applyLandlock's own
 * error; `--inherit-pid-namespace` keeps the caller's namespace as asked (and marks the run already inside one).
 */
function needsOwnPidNamespace(run: SandboxRun): boolean {
  const abi = landlockAbi();
  return abi >= 1 && abi < 6 && run.inheritPidNamespace !== true;
}

/**
 * Run `run` under Landlock as pid 1 of a new pid namespace, where the pids of processes outside it mean nothing
 * (`kill`, `prlimit`… cannot name them). This process unshares the namespace for its thread's next child, starts
 * this binary's helper role again in it (`--inherit-pid-namespace`: that child applies Landlock, seccomp and the
 * capability drop to itself and execs the command, which so becomes the namespace's init), then joins its own
 * namespace again at once: a Bun thread whose children would land in another pid namespace cannot create threads
 * (clone with CLONE_THREAD fails with EINVAL, and Bun aborts), so nothing but the posix_spawn runs in between.
 * Needs CAP_SYS_ADMIN (root); otherwise throws `SANDBOX_UNAVAILABLE` with what to do rather than run with unscoped
 * signals. Resolves with the command's status ({@link waitForNamespaceInit}).
 */
async function runInOwnPidNamespace(run: SandboxRun): Promise<number> {
  const argv = selfHelperArgv(run, ["--backend", "landlock", "--inherit-pid-namespace"], "here");
  const env = Object.entries(process.env).map(([k, v]) => `${k}=${v ?? ""}`);
  const prepared = libc.prepareSpawn({ path: argv[0]!, argv, env, closeFrom: false, setsid: run.newSession === true });
  const own = openSync("/proc/thread-self/ns/pid", "r");
  let pid: number;
  try {
    try {
      libc.unshare(libc.CLONE_NEWPID);
    } catch (e) {
      const abi = landlockAbi();
      throw new ShellmcpError(
        "SANDBOX_UNAVAILABLE",
        `Landlock ABI ${abi} on this kernel cannot keep a sandboxed command from signalling your other processes ` +
          `(signal scoping needs Linux 6.12, Landlock ABI 6), and a pid namespace of its own needs root ` +
          `(${(e as Error).message}). Install bubblewrap and allow unprivileged user namespaces (the default ` +
          `backend then uses bubblewrap), run on Linux 6.12 or later, or run as root`,
        { abi },
        { cause: e },
      );
    }
    try {
      pid = prepared.start();
    } finally {
      libc.setns(own, libc.CLONE_NEWPID);
    }
  } finally {
    closeSync(own);
    prepared.dispose();
  }
  return waitForNamespaceInit(pid);
}
