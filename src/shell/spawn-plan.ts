/**
 * How the call's shell starts: its argv, argv[0] and fds ({@link spawnPlan}: the call's cgroup joined first, the
 * lifeline guard, the seccomp program, the proxy bridge's child end, the genuine executable), its environment
 * ({@link shellEnvironment}), and the start itself ({@link spawnShell}). {@link guardedStart} and
 * {@link joinCgroupFirst} serve the exec-server's processes too.
 */
import { INTERCEPT_ENV_VAR, PROTOCOL_ENV_VARS } from "../escalate/protocol/wire.ts";
import { hasFullNetwork, type SandboxPolicy } from "../sandbox/policy.ts";
import { bytesPipe } from "../sandbox/bytes-pipe.ts";
import { PROXY_BRIDGE_FD } from "../network/bridge.ts";
import { HOST_PLATFORM } from "../sandbox/host-platform.ts";
import { failIfInjected } from "../fault-injection.ts";
import { envForSelf, isSelfExe, openSelfExe } from "../self.ts";
import { TRACE_STEPS, traceStep } from "../trace-steps.ts";
import type { Acquired } from "./call-acquire.ts";
import type { CallResources, OwnedFd } from "./call-resources.ts";
import type { RunCommandOptions } from "./run-options.ts";

/** fd number of the escalation socket in the shell. */
const ESCALATE_FD = 3;

/** The platform's lifeline guard (../sandbox/platform.ts `Lifeline`; on Linux ../sandbox/linux/lifeline.ts). */
const LIFELINE = HOST_PLATFORM.lifeline;

/** The POSIX shell that moves itself into the call's cgroup before anything of the call runs. */
const TRAMPOLINE_SH = "/bin/sh";

/**
 * `argv` started through `/bin/sh`, which first writes its own pid into `procs` (joining the call's cgroup) and
 * then execs `argv`: every process of the call is in the cgroup from its first instruction (moving the shell
 * after it started would race with its first fork). A failed write stops the call (exit 126), never runs it
 * outside. Costs one dash start (~0.5 ms).
 */
export function joinCgroupFirst(procs: string, argv: string[]): string[] {
  return [TRAMPOLINE_SH, "-c", 'echo $$ > "$0" || exit 126; exec "$@"', procs, ...argv];
}

/**
 * The shell's environment: the policy-filtered `o.env` without any inherited protocol variable, then the
 * listener's (socket fd, wrapper paths), the intercept set when given, `CODEX_SANDBOX_NETWORK_DISABLED=1` when the
 * network is off, and the launcher's own (Seatbelt's `CODEX_SANDBOX`).
 */
export function shellEnvironment(
  o: Pick<RunCommandOptions, "env" | "interceptSet"> & { policy: SandboxPolicy },
  protocol: Record<string, string>,
  launcherEnv?: Record<string, string>,
): Record<string, string> {
  const env: Record<string, string> = { ...o.env };
  for (const k of PROTOCOL_ENV_VARS) delete env[k];
  Object.assign(env, protocol);
  if (o.interceptSet !== undefined) env[INTERCEPT_ENV_VAR] = o.interceptSet;
  if (!hasFullNetwork(o.policy)) env.CODEX_SANDBOX_NETWORK_DISABLED = "1";
  return Object.assign(env, launcherEnv);
}

/**
 * How to start `argv` (run as `argv0` when given) so that it dies with the server: through the lifeline guard
 * (../sandbox/platform.ts `Lifeline`), which gets the lifeline's read end at its `fd` of `stdio` (filled with "ignore"
 * up to it; changed in place), and joins the call's cgroup (`joinCgroup`, its `cgroup.procs`) before it starts anything.
 * argv[0] must be an absolute path or a name found on this process's PATH; throws `Error` when it is neither.
 * Without a guard binary, `argv` as it is (the caller's spawn does the lookup; `joinCgroup` is then the caller's
 * to arrange). `statusFd`: the guard reports the program's wait status on `fd`, placed at `at` (> the guard's `execFd`) of
 * the guard, and lets the program's leftovers run on (../sandbox/platform.ts `Lifeline.guardedArgv`). `ctty`: the
 * terminal at fd 0 becomes the guard's controlling terminal (the caller starts it in a new session).
 */
export function guardedStart(
  argv: readonly string[],
  argv0: string | undefined,
  stdio: (number | "ignore" | "pipe")[],
  joinCgroup?: string,
  statusFd?: { at: number; fd: number },
  ctty = false,
): { argv: string[]; argv0: string | undefined } {
  if (LIFELINE.problem() !== undefined) return { argv: [...argv], argv0 };
  const name = argv[0]!;
  const path = name.includes("/") ? name : Bun.which(name);
  if (path === null) throw new Error(`${name}: command not found`);
  for (let fd = 0; fd < LIFELINE.fd; fd++) stdio[fd] ??= "ignore";
  stdio[LIFELINE.fd] = LIFELINE.readFd();
  const self = LIFELINE.selfExecFd(path);
  if (self !== undefined) stdio[LIFELINE.execFd] = self;
  if (statusFd !== undefined) stdio[statusFd.at] = statusFd.fd;
  const g = LIFELINE.guardedArgv(path, [argv0 ?? name, ...argv.slice(1)], LIFELINE.fd, {
    ...(self !== undefined ? { execFd: LIFELINE.execFd } : {}),
    ...(joinCgroup !== undefined ? { joinCgroup } : {}),
    ...(statusFd !== undefined ? { statusFd: statusFd.at } : {}),
    ...(ctty ? { ctty: 0 } : {}),
  })!;
  return { argv: [g.path, ...g.argv.slice(1)], argv0: g.argv[0] };
}

/**
 * The argv, argv[0] and fds the shell starts with: the cgroup joined first, the lifeline guard, the seccomp program,
 * the bridge's child end, the genuine executable. The shell joins the call's cgroup before it runs anything, except
 * under direct bubblewrap: there every sandboxed process is in bwrap's pid namespace, which the kernel kills whole
 * when bwrap's init exits (it dies with bwrap, --die-with-parent), so the cgroup only needs the escalated programs
 * (the worker moves those in); that saves a /bin/sh start per call. The lifeline guard joins it itself before it
 * forks (no trampoline). Without a guard: our own helper (/proc/self/exe) cannot go through the trampoline (the
 * shell would exec itself): it joins the cgroup itself, first thing (`--join-cgroup`), before it starts anything of
 * the call; anything else goes through /bin/sh.
 */
export function spawnPlan(
  a: Acquired,
  res: CallResources,
): { argv: string[]; argv0: string | undefined; stdio: (number | "ignore")[]; selfHelper: boolean; seccomp?: OwnedFd } {
  const { launch, cgroup } = a;
  const argv = [...launch.argv];
  const selfHelper = isSelfExe(argv[0]);
  const joins = cgroup !== undefined && launch.ownPidNamespace !== true;
  const guardJoins = joins && LIFELINE.problem() === undefined;
  const trampoline = joins && !guardJoins && !selfHelper;
  if (joins && !guardJoins && selfHelper) argv.splice(2, 0, "--join-cgroup", cgroup!.procs);
  const seccomp = launch.seccomp === undefined ? undefined : res.fd(bytesPipe(launch.seccomp.program));
  const stdio: (number | "ignore")[] = [a.terminal ? a.writeEnd.fd : "ignore", a.writeEnd.fd, a.writeEnd.fd];
  stdio[ESCALATE_FD] = a.listener.clientFd;
  if (seccomp !== undefined) stdio[launch.seccomp!.fd] = seccomp.fd;
  if (a.proxy.bridge !== undefined) {
    for (let fd = 0; fd < PROXY_BRIDGE_FD; fd++) stdio[fd] ??= "ignore";
    stdio[PROXY_BRIDGE_FD] = a.proxy.bridge.child.fd;
  }
  for (const [at, fd] of launch.fds ?? []) {
    for (let i = 0; i < at; i++) stdio[i] ??= "ignore";
    stdio[at] = fd; // e.g. the loopback network's namespaces, for the room launcher's --join-ns
  }
  const selfExe = launch.selfExeFd !== undefined ? openSelfExe() : undefined;
  if (selfExe !== undefined) {
    for (let fd = 0; fd < launch.selfExeFd!; fd++) stdio[fd] ??= "ignore";
    stdio[launch.selfExeFd!] = selfExe; // bwrap binds it over the executable's path for our inner stage
  }
  const target = trampoline ? joinCgroupFirst(cgroup!.procs, argv) : argv;
  const started = guardedStart(target, trampoline ? undefined : launch.argv0, stdio, guardJoins ? cgroup!.procs : undefined);
  a.control.guarded = started.argv0 === LIFELINE.argv0;
  return { ...started, stdio, selfHelper, seccomp };
}

/**
 * Start the call's shell as {@link spawnPlan} says, with {@link shellEnvironment} (the listener's variables, the
 * launch's and the proxy's), in `o.workdir`, leading its own session and process group; the process goes to
 * `a.control.proc` and is returned with the plan's seccomp pipe (closed once the shell holds it). Throws when it cannot start
 * (a missing program, a failed spawn, an injected `call_spawn` fault); fds acquired meanwhile are held by `res`.
 */
export function spawnShell(
  o: RunCommandOptions,
  a: Acquired,
  res: CallResources,
): { proc: NonNullable<Acquired["control"]["proc"]>; seccomp?: OwnedFd } {
  const spawn = spawnPlan(a, res);
  if (TRACE_STEPS) traceStep("spawn-plan");
  const env = shellEnvironment({ ...o, policy: o.sandbox.policy }, a.listener.shellEnv(o.wrapperPath, ESCALATE_FD), {
    ...a.launch.env,
    ...a.proxy.env,
  });
  failIfInjected("call_spawn");
  const proc = (a.control.proc = Bun.spawn(spawn.argv, {
    cwd: o.workdir,
    env: spawn.selfHelper ? envForSelf(env) : env,
    stdio: spawn.stdio as unknown as ["ignore", "pipe", "pipe"],
    detached: true, // setsid: the shell (or its guard) leads its own session and process group
    argv0: spawn.argv0,
  }));
  return { proc, seccomp: spawn.seccomp };
}
