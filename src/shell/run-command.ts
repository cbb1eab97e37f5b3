/**
 * Run one shell command for the `shell` tool: the patched shell (`-lc`/`-c`) in `workdir`, under the sandbox
 * policy (through this binary's `codex-linux-sandbox` role unless `danger-full-access`/`external-sandbox`), with
 * every exec going to the escalation server.
 *
 * - stdout and stderr share one pipe, so the output is interleaved in arrival order; capped (head + tail).
 * - The shell leads its own session/process group; timeout and cancellation SIGKILL that group and the
 *   escalated programs of this call (which run in groups of their own).
 * - The timeout is a pausable stopwatch: time waiting for a human does not count.
 * - After the shell exits, the pipe gets {@link DRAIN_MS} to reach EOF (background jobs may hold it); what was
 *   read is kept either way (Codex discarded it).
 */
import { statSync } from "node:fs";
import { constants as osConstants } from "node:os";
import * as libc from "../../ffi/libc.ts";
import type { EscalationBoundary } from "../escalate/boundary.ts";
import type { EscalationServer, ListenOptions } from "../escalate/server.ts";
import { INTERCEPT_ENV_VAR, PROTOCOL_ENV_VARS } from "../escalate/protocol.ts";
import { hasFullNetwork, type SandboxPolicy } from "../sandbox/policy.ts";
import type { CallSandbox, Launch, ProxySpec } from "../sandbox/backend.ts";
import type { EscalationMode, RoomNetworkGrant, RoomSpec } from "../sandbox/room.ts";
import { openSelfExe } from "../sandbox/linux/bwrap.ts";
import type { FilesystemPlan } from "../sandbox/filesystem-plan.ts";
import { SANDBOX_FAILURE_EXIT } from "../sandbox/linux/in-process.ts";
import { bytesPipe } from "../sandbox/linux/run.ts";
import type { CallCgroup, CgroupManager } from "./cgroup.ts";
import { CappedOutput } from "./output.ts";
import { refusalReport, type CallProxy } from "../network/proxy.ts";
import { roomGrantProxies } from "../sandbox/room-grants.ts";
import { bridgePair, NAMESPACE_PORTS, PROXY_BRIDGE_FD, receiveNamespaceListeners, watchNamespaceListeners } from "../network/bridge.ts";
import { proxyEnvironment } from "../network/env.ts";
import {
  EXEC_FD,
  GUARD_ARGV0,
  GUARD_END_SIGNAL,
  guardedArgv,
  LIFELINE_FD,
  lifelineProblem,
  lifelineReadFd,
  selfExecFd,
} from "./lifeline.ts";
import { Stopwatch } from "./stopwatch.ts";
import { failIfInjected } from "../fault-injection.ts";
import { log } from "../log.ts";
import { envForSelf, isSelfExe } from "../self.ts";

/** Time the output pipe may stay open after the shell exited, ms. */
export const DRAIN_MS = 2000;
/** Interval of progress notifications, ms. */
export const PROGRESS_INTERVAL_MS = 5000;
/** fd number of the escalation socket in the shell. */
const ESCALATE_FD = 3;

export type { Launch, ProxySpec } from "../sandbox/backend.ts";
export { helperCommand } from "../sandbox/linux/backend.ts";

/** One command run. */
export interface RunCommandOptions {
  command: string;
  workdir: string;
  login: boolean;
  timeoutMs: number;
  shellPath: string;
  wrapperPath: string;
  env: Record<string, string>;
  /** The call's sandbox (../sandbox/backend.ts): its backend and state, asked for the launch, room and writable view. */
  sandbox: CallSandbox;
  server: EscalationServer;
  /**
   * Decides each exec of this call: the escalation request and the call's stopwatch (a prompt pauses it, so the
   * time a person takes to answer does not count against `timeoutMs`).
   */
  decide: (req: Parameters<ListenOptions["decide"]>[0], stopwatch: Stopwatch) => ReturnType<ListenOptions["decide"]>;
  maxOutputBytes: number;
  signal?: AbortSignal;
  onProgress?: (elapsedMs: number, outputBytes: number) => void;
  /**
   * Called with the shell's session id (its pid) and `true` once it has started, `false` as soon as it has been
   * reaped (the id may be reused from then on): the server kills the sessions of running shells at shutdown.
   */
  track?: (pgid: number, running: boolean) => void;
  /** Per-call cgroups (every process of the call ends with it); undefined where the host has none. */
  cgroups?: CgroupManager;
  /**
   * Intercept set for our patched shells (`SHELLMCP_INTERCEPT`, from `interceptSetFor(policy)`): programs outside
   * it are exec'd directly. Undefined: the variable is removed (an inherited one included), so every exec goes
   * to the wrapper.
   */
  interceptSet?: string;
  /** Told when an `Escalate` decision ran inside the sandbox instead, and why (../escalate/server.ts `ListenOptions.notice`). */
  notice?: (text: string) => void;
  /**
   * Where escalated programs run (../sandbox/room.ts): `room` (default) or `host` (Codex's meaning), and the extra
   * writable paths per program.
   */
  escalation?: {
    mode: EscalationMode;
    extraWritable: Readonly<Record<string, readonly string[]>>;
    /** `[shellmcp.room_network]` (../sandbox/room.ts `RoomSpec.networkGrants`). */
    roomNetwork?: Readonly<Record<string, RoomNetworkGrant>>;
    /** `[shellmcp.room_readable]` (../sandbox/room.ts `RoomSpec.readableGrants`). */
    roomReadable?: Readonly<Record<string, readonly string[]>>;
  };
  /**
   * Network proxy mode (docs/network.md): the call's proxy. Under bubblewrap the command gets a private network
   * namespace whose only listeners are handed to it (src/network/bridge.ts); under Landlock it listens on the
   * host's loopback and TCP connect is limited to its ports. The proxy variables are set for the command. The
   * caller closes the proxy after the call.
   */
  networkProxy?: CallProxy;
  /**
   * A session's pseudo-terminal (`exec_command` with `tty: true`, ./session-manager.ts): the shell's fds 0–2 are
   * `slave` (runCommand takes ownership of it: closed once the shell has started, or on a failed start) and the
   * output is read from a copy of `master` (the caller keeps `master` to write input). Absent: stdin is /dev/null
   * and stdout/stderr share a pipe.
   */
  terminal?: libc.PtyPair;
  /** Every chunk of output as it arrives (a session's buffer), besides the capped output of the result. */
  onOutput?: (chunk: Uint8Array) => void;
  /**
   * Told once the shell runs: `interrupt()` sends SIGINT to its process group (Codex's `"\u0003"` to a pipe session).
   */
  onStarted?: (control: { interrupt: () => void }) => void;
}

/** How long escalated programs get between SIGTERM and SIGKILL when their call times out or is cancelled, ms. */
export const ESCALATED_GRACE_MS = 2000;

/**
 * The room escalated programs of this call run in: built by the backend the call's own sandbox uses (bubblewrap,
 * Landlock or Seatbelt: ../sandbox/backend.ts `SandboxBackend.room`), on the host when the call is not sandboxed or
 * `escalation = "host"`, and unavailable (they run inside the call's sandbox) when the backend cannot build one or
 * the call's plan cannot be made.
 */
export function roomFor(o: Pick<RunCommandOptions, "escalation" | "sandbox" | "networkProxy">): RoomSpec {
  const extraWritable = {
    extraWritable: o.escalation?.extraWritable ?? {},
    networkGrants: o.escalation?.roomNetwork ?? {},
    readableGrants: o.escalation?.roomReadable ?? {},
  };
  let call: FilesystemPlan;
  try {
    call = o.sandbox.plan();
  } catch (e) {
    return { backend: { kind: "unavailable", reason: (e as Error).message }, call: UNSANDBOXED, ...extraWritable };
  }
  if (o.escalation?.mode === "host" || o.sandbox.enforcement === "none") return { backend: { kind: "host" }, call, ...extraWritable };
  const allowLocalBinding = o.networkProxy?.policy.allowLocalBinding === true;
  return { backend: o.sandbox.backend.room(o.sandbox, { allowLocalBinding }), call, ...extraWritable };
}

/** Placeholder plan when the call's own plan cannot be computed (the room is then unavailable anyway). */
const UNSANDBOXED: FilesystemPlan = {
  sandboxed: false,
  fullRead: true,
  fullWrite: true,
  readableRoots: [],
  includePlatformDefaults: false,
  writableRoots: [],
  deniedPaths: [],
  network: "enabled",
  strict: false,
};

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
 * (./lifeline.ts), which gets the lifeline's read end at {@link LIFELINE_FD} of `stdio` (filled with "ignore" up to
 * it; changed in place), and joins the call's cgroup (`joinCgroup`, its `cgroup.procs`) before it starts anything.
 * argv[0] must be an absolute path or a name found on this process's PATH; throws `Error` when it is neither.
 * Without a guard binary, `argv` as it is (the caller's spawn does the lookup; `joinCgroup` is then the caller's
 * to arrange).
 */
export function guardedStart(
  argv: readonly string[],
  argv0: string | undefined,
  stdio: (number | "ignore")[],
  joinCgroup?: string,
): { argv: string[]; argv0: string | undefined } {
  if (lifelineProblem() !== undefined) return { argv: [...argv], argv0 };
  const name = argv[0]!;
  const path = name.includes("/") ? name : Bun.which(name);
  if (path === null) throw new Error(`${name}: command not found`);
  for (let fd = 0; fd < LIFELINE_FD; fd++) stdio[fd] ??= "ignore";
  stdio[LIFELINE_FD] = lifelineReadFd();
  const self = selfExecFd(path);
  if (self !== undefined) stdio[EXEC_FD] = self;
  const g = guardedArgv(path, [argv0 ?? name, ...argv.slice(1)], LIFELINE_FD, {
    ...(self !== undefined ? { execFd: EXEC_FD } : {}),
    ...(joinCgroup !== undefined ? { joinCgroup } : {}),
  })!;
  return { argv: [g.path, ...g.argv.slice(1)], argv0: g.argv[0] };
}

/** Outcome. `exitCode` is 128+N for a signal death; `spawnError` when nothing could be started. */
export interface RunCommandResult {
  exitCode: number;
  output: string;
  durationMs: number;
  timedOut: boolean;
  cancelled: boolean;
  signal?: string;
  outputBytes: number;
  droppedBytes: number;
  sandboxed: boolean;
  spawnError?: string;
  /**
   * Resolves once every process of the call has ended, escalated and room programs included: the worker has let go
   * of the listener (its programs killed) and the call's cgroup is empty (without cgroups, only the former). The
   * git guard (../sandbox/git-guard.ts) compares after it. Undefined when nothing was started.
   */
  settled?: Promise<void>;
}

/**
 * Read `readEnd` (the call's own output pipe or terminal master, an fd) until EOF, giving each chunk to `push`: a pipe through Bun's file stream, a terminal's master through a
 * `tty.ReadStream` (Bun's file stream uses positioned reads, which a terminal refuses; the stream owns the fd and
 * closes it, and the slave's last close reads as EIO, taken as EOF). `cancel` stops reading.
 */
function readOutput(
  readEnd: number,
  terminal: boolean,
  push: (chunk: Uint8Array) => void,
): { done: Promise<void>; cancel: () => Promise<void> } {
  if (terminal) {
    const stream = new (require("node:tty") as typeof import("node:tty")).ReadStream(readEnd);
    const done = new Promise<void>((res) => {
      stream.on("data", (d: Buffer) => push(new Uint8Array(d)));
      stream.on("error", () => undefined); // EIO: every slave fd is closed
      stream.on("close", () => res());
    });
    return {
      done,
      cancel: async () => {
        stream.destroy();
        await done;
      },
    };
  }
  const reader = Bun.file(readEnd).stream().getReader();
  const done = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        push(value);
      }
    } catch {
      // the fd was closed under us after the drain deadline
    }
  })();
  return { done, cancel: () => reader.cancel().catch(() => undefined) };
}

/**
 * Run the command to completion (or timeout/cancel). Never throws for command failures. A session
 * (./session-manager.ts) runs it "detached": it does not await it at once, gives a `terminal` and `onOutput`, a
 * `signal` of its own (kill) and no practical timeout.
 */
export async function runCommand(o: RunCommandOptions): Promise<RunCommandResult> {
  const t0 = performance.now();
  const out = new CappedOutput(o.maxOutputBytes);
  const sandboxedGuess = o.sandbox.sandboxed;
  const fail = (msg: string): RunCommandResult => ({
    exitCode: 127,
    output: msg,
    durationMs: performance.now() - t0,
    timedOut: false,
    cancelled: false,
    outputBytes: 0,
    droppedBytes: 0,
    sandboxed: sandboxedGuess,
    spawnError: msg,
  });
  // The terminal's slave is ours from the start: closed on a return before the start-up stack holds it.
  const failEarly = (msg: string): RunCommandResult => {
    if (o.terminal !== undefined) libc.closeQuiet(o.terminal.slave);
    return fail(msg);
  };
  try {
    if (!statSync(o.workdir).isDirectory()) return failEarly(`workdir is not a directory: ${o.workdir}`);
  } catch (e) {
    return failEarly(
      `workdir ${o.workdir}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "No such file or directory (os error 2)" : (e as Error).message}`,
    );
  }
  // What the call acquires before its shell runs (bridges, mount points, its cgroup, the output pipe, the
  // escalation listener, the stopwatch, the seccomp pipe) is released by this one stack, last first, on every way
  // out before the shell has started: a refusal, an error, a timeout already over, a failed spawn. Once the shell
  // runs, the stack is emptied (`move()`) and the end of the call releases everything in its own order below.
  await using startup = new AsyncDisposableStack();
  const hold = (release: () => unknown) =>
    startup.defer(async () => {
      try {
        await release();
      } catch (e) {
        log.warn("releasing what a call acquired failed", { error: (e as Error).message });
      }
    });
  const tty = o.terminal;
  if (tty !== undefined) hold(() => libc.closeQuiet(tty.slave));
  // Proxy mode: under bubblewrap a bridge into the namespace at fixed in-namespace ports; under Landlock the
  // proxy's own loopback ports.
  let proxySpec: ProxySpec | undefined;
  let bridge: { serverFd: number; childFd: number } | undefined;
  let proxyEnv: Record<string, string> | undefined;
  if (o.networkProxy !== undefined && sandboxedGuess) {
    const np = o.networkProxy.policy;
    if (o.sandbox.backend.proxyWiring === "bridge") {
      const b = (bridge = bridgePair());
      hold(() => [b.serverFd, b.childFd].forEach(libc.closeQuiet));
      const ports = np.enableSocks5 ? { http: NAMESPACE_PORTS.http, socks: NAMESPACE_PORTS.socks } : { http: NAMESPACE_PORTS.http };
      proxySpec = { fd: PROXY_BRIDGE_FD, ports: Object.values(ports) };
      proxyEnv = proxyEnvironment(ports, np.allowLocalBinding);
    } else {
      const ports = await o.networkProxy.listenLoopback();
      proxySpec = { ports: Object.values(ports), allowLocalBinding: np.allowLocalBinding };
      proxyEnv = proxyEnvironment(ports, np.allowLocalBinding);
    }
  }
  // Escalation rooms of a bubblewrap call get namespaces of their own, bridged the same way over one more pair
  // (kept for the whole call); Landlock rooms are limited to the call's loopback ports.
  let roomBridge: { serverFd: number; childFd: number } | undefined;
  let roomProxy: RoomSpec["proxy"];
  if (proxySpec !== undefined) {
    if (bridge !== undefined) {
      const b = (roomBridge = bridgePair());
      hold(() => [b.serverFd, b.childFd].forEach(libc.closeQuiet));
      roomProxy = { ports: proxySpec.ports, bridgeFd: roomBridge.childFd, env: proxyEnv! };
    } else roomProxy = { ports: proxySpec.ports, env: proxyEnv! };
  }
  let launch: Launch;
  try {
    launch = o.sandbox.launch(o, proxySpec);
  } catch (e) {
    // A sandbox that cannot be built as asked (e.g. a protected path that is a symlink): fail closed, as the
    // helper does (status 101, the reason in the output).
    const msg = `shellmcp: ${(e as Error).message}\n`;
    return {
      exitCode: SANDBOX_FAILURE_EXIT,
      output: msg,
      durationMs: performance.now() - t0,
      timedOut: false,
      cancelled: false,
      outputBytes: msg.length,
      droppedBytes: 0,
      sandboxed: true,
    };
  }
  const { argv, argv0, sandboxed } = launch;
  /** Give back the direct plan's host mount points, once the sandbox has ended. */
  const release = () => launch.release?.();
  hold(release);

  let pid = 0;
  let killed: "timeout" | "cancel" | undefined;
  let stopwatch: Stopwatch | undefined;
  // What an escalation may run is judged against the sandbox as it is now, when the shell starts.
  const roomSpec = roomProxy === undefined ? roomFor(o) : { ...roomFor(o), proxy: roomProxy };
  // Programs granted domains (`[shellmcp.room_network] npm = ["registry.npmjs.org"]`) get a proxy of their own.
  const grantProxies = await roomGrantProxies(roomSpec, o.networkProxy?.policy);
  if (grantProxies !== undefined) hold(() => grantProxies.end());
  const boundary: EscalationBoundary = {
    baseEnv: o.env,
    writable: o.sandbox.writable(),
    room: grantProxies === undefined ? roomSpec : { ...roomSpec, grantProxies: grantProxies.endpoints },
  };
  let cgroup: CallCgroup | undefined;
  try {
    const c = (cgroup = o.cgroups?.create());
    if (c !== undefined) hold(() => c.dispose());
    failIfInjected("call_cgroup");
  } catch (e) {
    return fail(`cannot create this call's cgroup: ${(e as Error).message}`);
  }
  // The worker gets its own copy of the output pipe's write end (for escalated programs given a terminal); it is
  // created after the pipe below, so the listener is opened there.
  let readEnd: number;
  let writeEnd: number;
  if (tty !== undefined) {
    writeEnd = tty.slave; // held since the start
    try {
      readEnd = libc.fcntl(tty.master, libc.SOCK.F_DUPFD_CLOEXEC, 3);
    } catch (e) {
      return fail(`cannot use the session's terminal: ${(e as Error).message}`);
    }
    const r = readEnd;
    hold(() => libc.closeQuiet(r));
  } else {
    [readEnd, writeEnd] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
    const [r, w] = [readEnd, writeEnd];
    hold(() => [r, w].forEach(libc.closeQuiet));
  }
  // On a terminal, escalated programs' output goes through a pipe of its own, merged into the output below: a room
  // passes no terminal (its programs' stdout would otherwise be the session's terminal, readable as input).
  let escalatedRead: number | undefined;
  let outputFd: number | undefined;
  if (tty !== undefined) {
    const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
    escalatedRead = r;
    outputFd = w;
    hold(() => libc.closeQuiet(r));
  } else outputFd = libc.fcntl(writeEnd, libc.SOCK.F_DUPFD_CLOEXEC, 3);
  hold(() => outputFd !== undefined && libc.closeQuiet(outputFd)); // until the listener has it
  let listener: ReturnType<EscalationServer["listen"]>;
  try {
    listener = o.server.listen({
      decide: (r) => o.decide(r, stopwatch!),
      boundary,
      cgroupProcs: cgroup?.procs,
      outputFd,
      notice: o.notice,
    });
    outputFd = undefined; // the worker's now
    const l = listener;
    hold(() => l.close());
    failIfInjected("call_listen");
  } catch (e) {
    return fail(`cannot open this call's escalation listener: ${(e as Error).message}`);
  }
  // Timeout or cancel: the sandboxed shell's process group dies at once; escalated programs get SIGTERM and
  // ESCALATED_GRACE_MS to end (git removes its index.lock), then everything left of the call is killed.
  let graceOver: Promise<void> | undefined;
  // The shell's process group, while the shell is unreaped (so its pid, the group's id, cannot have been reused):
  // under a lifeline guard, SIGUSR1 to the guard, which kills everything below it (setsid'd and double-forked
  // processes too, cgroup or not) and then dies of SIGKILL; else SIGKILL to the group.
  const killShell = () => {
    if (pid <= 0 || proc.exitCode !== null || proc.signalCode !== null) return;
    if (guarded) libc.kill(pid, GUARD_END_SIGNAL);
    else libc.kill(-pid, 9);
  };
  const killAll = () => {
    cgroup?.kill();
    killShell();
    listener.signalChildren(9);
  };
  const killTree = () => {
    if (graceOver !== undefined) return;
    listener.signalChildren(15);
    killShell();
    graceOver = Bun.sleep(ESCALATED_GRACE_MS).then(killAll);
  };
  stopwatch = new Stopwatch(o.timeoutMs, () => {
    killed ??= "timeout";
    killTree();
  });
  const sw = stopwatch;
  hold(() => sw.dispose());
  // Time a person takes to answer a network question does not count against the timeout either.
  if (o.networkProxy !== undefined) o.networkProxy.pauseWhile = (f) => stopwatch!.paused(f);
  if (stopwatch.expired) {
    return {
      exitCode: 124,
      output: "",
      durationMs: performance.now() - t0,
      timedOut: true,
      cancelled: false,
      outputBytes: 0,
      droppedBytes: 0,
      sandboxed,
    };
  }
  // The shell joins the call's cgroup before it runs anything, except under direct bubblewrap: there every
  // sandboxed process is in bwrap's pid namespace, which the kernel kills whole when bwrap's init exits (it dies
  // with bwrap, --die-with-parent), so the cgroup only needs the escalated programs (the worker moves those in).
  // Saves a /bin/sh start per call.
  // The lifeline guard joins it itself before it forks (no trampoline). Without a guard: our own helper
  // (/proc/self/exe) cannot go through the trampoline (the shell would exec itself): it joins the cgroup itself,
  // first thing (`--join-cgroup`), before it starts anything of the call; anything else goes through /bin/sh.
  const selfHelper = isSelfExe(argv[0]);
  const joins = cgroup !== undefined && launch.ownPidNamespace !== true;
  const guardJoins = joins && lifelineProblem() === undefined;
  const trampoline = joins && !guardJoins && !selfHelper;
  if (joins && !guardJoins && selfHelper) argv.splice(2, 0, "--join-cgroup", cgroup!.procs);
  const seccomp = launch.seccomp === undefined ? undefined : bytesPipe(launch.seccomp.program);
  if (seccomp !== undefined) hold(() => libc.closeQuiet(seccomp));
  const stdio: (number | "ignore")[] = [tty !== undefined ? writeEnd : "ignore", writeEnd, writeEnd, listener.clientFd];
  if (seccomp !== undefined) stdio[launch.seccomp!.fd] = seccomp;
  if (bridge !== undefined) {
    for (let fd = 0; fd < PROXY_BRIDGE_FD; fd++) stdio[fd] ??= "ignore";
    stdio[PROXY_BRIDGE_FD] = bridge.childFd;
  }
  const selfExeFd = launch.selfExeFd;
  const selfExe = selfExeFd !== undefined ? openSelfExe() : undefined;
  if (selfExe !== undefined) {
    for (let fd = 0; fd < selfExeFd!; fd++) stdio[fd] ??= "ignore";
    stdio[selfExeFd!] = selfExe; // bwrap binds it over the executable's path for our inner stage
  }
  let proc!: ReturnType<typeof Bun.spawn>;
  let guarded = false;
  try {
    const env = (selfHelper ? envForSelf : (e: Record<string, string>) => e)(
      shellEnvironment({ ...o, policy: o.sandbox.policy }, listener.shellEnv(o.wrapperPath, ESCALATE_FD), { ...launch.env, ...proxyEnv }),
    );
    const target = trampoline ? joinCgroupFirst(cgroup!.procs, argv) : argv;
    const started = guardedStart(target, trampoline ? undefined : argv0, stdio, guardJoins ? cgroup!.procs : undefined);
    guarded = started.argv0 === GUARD_ARGV0;
    failIfInjected("call_spawn");
    proc = Bun.spawn(started.argv, {
      cwd: o.workdir,
      env,
      stdio: stdio as unknown as ["ignore", "pipe", "pipe"],
      detached: true, // setsid: the shell (or its guard) leads its own session and process group
      argv0: started.argv0,
    });
  } catch (e) {
    return fail(`cannot start ${argv[0]}: ${(e as Error).message}`);
  }
  // The shell runs: from here on the end of the call releases what the start-up acquired.
  startup.move();
  pid = proc.pid;
  o.track?.(pid, true);
  o.onStarted?.({
    interrupt: () => {
      if (proc.exitCode === null && proc.signalCode === null) libc.kill(-pid, 2);
    },
  });
  libc.closeQuiet(writeEnd);
  if (seccomp !== undefined) libc.closeQuiet(seccomp);
  listener.releaseClientFd();
  // The bridge: the namespace's listeners arrive once the inner stage has made them; the proxy accepts on them.
  // Anything failing here ends the call (fail closed: the namespace has no other way out).
  let bridgeError: string | undefined;
  let roomsWatched: Promise<void> | undefined;
  let callEnded: () => void = () => undefined;
  if (roomBridge !== undefined) {
    const proxy = o.networkProxy!;
    const count = proxySpec!.ports.length;
    const ended = new Promise<void>((r) => (callEnded = r));
    roomsWatched = watchNamespaceListeners(
      roomBridge.serverFd,
      count,
      (fds) => void proxy.adopt(fds.length === 2 ? { http: fds[0]!, socks: fds[1]! } : { http: fds[0]! }),
      ended,
    );
  }
  grantProxies?.watch();
  if (bridge !== undefined) {
    libc.closeQuiet(bridge.childFd);
    const proxy = o.networkProxy!;
    const count = proxySpec!.ports.length;
    void receiveNamespaceListeners(bridge.serverFd, count, proc.exited)
      .then((fds) => proxy.adopt(fds.length === 2 ? { http: fds[0]!, socks: fds[1]! } : { http: fds[0]! }))
      .catch((e: unknown) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return; // ended first: its own output says why
        bridgeError = `shellmcp: the network proxy bridge failed, the command was stopped: ${(e as Error).message}\n`;
        killAll();
      });
  }

  const onAbort = () => {
    killed ??= "cancel";
    killTree();
  };
  o.signal?.addEventListener("abort", onAbort);
  if (o.signal?.aborted) onAbort();
  const progress =
    o.onProgress === undefined ? undefined : setInterval(() => o.onProgress!(performance.now() - t0, out.total), PROGRESS_INTERVAL_MS);

  // Read the shared pipe (or the terminal) until EOF; after the shell exits, give it DRAIN_MS more.
  let eof = false;
  const take = (chunk: Uint8Array) => {
    out.push(chunk);
    o.onOutput?.(chunk);
  };
  const readers = [readOutput(readEnd, tty !== undefined, take)];
  if (escalatedRead !== undefined) readers.push(readOutput(escalatedRead, false, take));
  const reader = { cancel: () => Promise.all(readers.map((r) => r.cancel())) };
  const pump = Promise.all(readers.map((r) => r.done)).then(() => {
    eof = true;
  });
  const exitCode = await proc.exited;
  // Reaped: from now on its pid (the session's id) may be reused by any new process, so it is no longer tracked.
  o.track?.(pid, false);
  // The shell is gone: the worker lets go of its copy of the pipe (later escalations of leftovers get /dev/null).
  listener.releaseOutput();
  // Killed (timeout, cancel): escalated programs have their grace period, unless they end (and close the pipe) first.
  if (graceOver !== undefined) await Promise.race([pump, graceOver]);
  // Everything the call started ends with it (background jobs, detached or not); their end closes the pipe.
  cgroup?.kill();
  await Promise.race([pump, Bun.sleep(DRAIN_MS)]);
  if (!eof) await reader.cancel();
  if (tty === undefined) libc.closeQuiet(readEnd); // a terminal's reader closed its own
  if (escalatedRead !== undefined) libc.closeQuiet(escalatedRead);
  if (progress !== undefined) clearInterval(progress);
  o.signal?.removeEventListener("abort", onAbort);
  stopwatch.dispose();
  // Stops interception for leftovers and kills this call's escalated programs. The commands reach the worker
  // synchronously inside close(); only its acknowledgement is not awaited, so the answer is not delayed by it.
  const listenerClosed = listener.close();
  const disposed = cgroup?.dispose();
  release();
  if (roomBridge !== undefined) {
    // The worker may still be starting a room with the bridge's child end: close it once the worker has let go of
    // the listener (its rooms killed), then stop watching (that closes the server end).
    await listenerClosed.catch(() => undefined);
    libc.closeQuiet(roomBridge.childFd);
    callEnded();
    await roomsWatched;
  }
  if (grantProxies !== undefined) {
    // As for the room bridge: once the worker has let go of the listener, no room can start any more.
    await listenerClosed.catch(() => undefined);
    const refused = await grantProxies.end();
    if (refused.length > 0) out.push(Buffer.from(refusalReport(refused)));
  }

  const sig = proc.signalCode === null || proc.signalCode === undefined ? undefined : String(proc.signalCode);
  const code = sig !== undefined ? 128 + (osConstants.signals[sig as NodeJS.Signals] ?? 0) : exitCode;
  return {
    exitCode: code,
    output: bridgeError === undefined ? out.text() : out.text() + bridgeError,
    durationMs: performance.now() - t0,
    timedOut: killed === "timeout",
    cancelled: killed === "cancel",
    signal: sig,
    outputBytes: out.total,
    droppedBytes: out.dropped,
    sandboxed,
    settled: Promise.all([listenerClosed.catch(() => undefined), disposed]).then(() => undefined),
  };
}
