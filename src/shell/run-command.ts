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
 * - {@link runCommand} is plan → acquire → run → settle: the call's sandbox (../sandbox/backend.ts `CallSandbox`)
 *   gives the launch, room and writable view; everything the call acquires is held by one {@link CallResources}.
 */
import { statSync } from "node:fs";
import { constants as osConstants } from "node:os";
import * as libc from "../../ffi/libc.ts";
import type { EscalationBoundary } from "../escalate/decision/boundary.ts";
import type { EscalationServer, ListenOptions } from "../escalate/server.ts";
import { INTERCEPT_ENV_VAR, PROTOCOL_ENV_VARS } from "../escalate/protocol/wire.ts";
import { hasFullNetwork, type SandboxPolicy } from "../sandbox/policy.ts";
import type { CallSandbox, Launch, ProxySpec } from "../sandbox/backend.ts";
import type { EscalationMode, RoomNetworkGrant, RoomSpec } from "../escalate/rooms/plan.ts";
import { openSelfExe } from "../sandbox/linux/bwrap.ts";
import type { FilesystemPlan } from "../sandbox/filesystem-plan.ts";
import { SANDBOX_FAILURE_EXIT } from "../sandbox/linux/in-process.ts";
import { bytesPipe } from "../sandbox/linux/run.ts";
import type { CallCgroup, CgroupManager } from "./cgroup.ts";
import { CappedOutput } from "./output.ts";
import { refusalReport, type CallProxy } from "../network/proxy.ts";
import { roomGrantProxies } from "../escalate/rooms/grants.ts";
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
} from "../sandbox/linux/lifeline.ts";
import { Stopwatch } from "./stopwatch.ts";
import type { GitCheck } from "../sandbox/git/call-check.ts";
import { failIfInjected, isInjected } from "../fault-injection.ts";
import { log } from "../log.ts";
import { envForSelf, isSelfExe } from "../self.ts";
import { TRACE_STEPS, traceStep } from "../trace-steps.ts";

/** Time the output pipe may stay open after the shell exited, ms. */
export const DRAIN_MS = 2000;
/** Interval of progress notifications, ms. */
export const PROGRESS_INTERVAL_MS = 5000;
/** fd number of the escalation socket in the shell. */
const ESCALATE_FD = 3;

/** Moved to ../sandbox/linux/backend.ts with the Linux backends; kept here for its importers. */
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
  notice?: (text: string, detail?: { argv: readonly string[]; reason: string }) => void;
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
   * call owns it from here: it is closed with the call's other resources ({@link CallResources}).
   */
  networkProxy?: CallProxy;
  /**
   * The git guard's snapshot of this call (../sandbox/git/call-check.ts), taken before anything runs: the call
   * owns it from here and settles it once every process of the call has ended ({@link CallResources.holdGitCheck}),
   * on every way out; the caller reads the report from {@link GitCheck.settle}.
   */
  gitCheck?: GitCheck;
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
 * (../sandbox/linux/lifeline.ts), which gets the lifeline's read end at {@link LIFELINE_FD} of `stdio` (filled with "ignore" up to
 * it; changed in place), and joins the call's cgroup (`joinCgroup`, its `cgroup.procs`) before it starts anything.
 * argv[0] must be an absolute path or a name found on this process's PATH; throws `Error` when it is neither.
 * Without a guard binary, `argv` as it is (the caller's spawn does the lookup; `joinCgroup` is then the caller's
 * to arrange). `statusFd`: the guard reports the program's wait status on `fd`, placed at `at` (> {@link EXEC_FD}) of
 * the guard, and lets the program's leftovers run on (../sandbox/linux/lifeline.ts `guardedArgv`).
 */
export function guardedStart(
  argv: readonly string[],
  argv0: string | undefined,
  stdio: (number | "ignore" | "pipe")[],
  joinCgroup?: string,
  statusFd?: { at: number; fd: number },
): { argv: string[]; argv0: string | undefined } {
  if (lifelineProblem() !== undefined) return { argv: [...argv], argv0 };
  const name = argv[0]!;
  const path = name.includes("/") ? name : Bun.which(name);
  if (path === null) throw new Error(`${name}: command not found`);
  for (let fd = 0; fd < LIFELINE_FD; fd++) stdio[fd] ??= "ignore";
  stdio[LIFELINE_FD] = lifelineReadFd();
  const self = selfExecFd(path);
  if (self !== undefined) stdio[EXEC_FD] = self;
  if (statusFd !== undefined) stdio[statusFd.at] = statusFd.fd;
  const g = guardedArgv(path, [argv0 ?? name, ...argv.slice(1)], LIFELINE_FD, {
    ...(self !== undefined ? { execFd: EXEC_FD } : {}),
    ...(joinCgroup !== undefined ? { joinCgroup } : {}),
    ...(statusFd !== undefined ? { statusFd: statusFd.at } : {}),
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
  /** The sandbox could not be built as asked (the reason is the output): nothing ran. */
  sandboxFailed?: boolean;
  /**
   * Resolves once every process of the call has ended, escalated and room programs included: the worker has let go
   * of the listener (its programs killed) and the call's cgroup is empty (without cgroups, only the former). The
   * git guard (../sandbox/git/guard.ts) compares after it. Undefined when nothing was started.
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

/** An fd a call owns: closed exactly once, at the end of the call or earlier, unless handed over to a new owner. */
export class OwnedFd {
  constructor(private current: number) {}
  /** The fd number (-1 once closed or handed over). */
  get fd(): number {
    return this.current;
  }
  /** Close it now (a no-op when already closed or handed over). */
  close(): void {
    if (this.current >= 0) libc.closeQuiet(this.current);
    this.current = -1;
  }
  /** Give it to a new owner, which closes it: the call no longer does. */
  handOver(): number {
    const fd = this.current;
    this.current = -1;
    return fd;
  }
}

/**
 * Everything one call acquires — bridges, mount points, grant proxies, its cgroup, pipes, the terminal's slave, the
 * escalation listener, the stopwatch, timers — released by one `AsyncDisposableStack`, last acquired first, whatever
 * way the call ends (a refusal, an error, a timeout already over, a failed spawn, the shell's end). Releases that
 * finish later (the worker's acknowledgement that the listener is closed, the cgroup emptied) go to
 * {@link settling}: awaited before an early exit returns, handed to the result as `settled` after a run.
 */
export class CallResources implements AsyncDisposable {
  private readonly stack = new AsyncDisposableStack();
  /** Releases still finishing after the stack was disposed. */
  readonly settling: Promise<unknown>[] = [];
  /** Set once the shell started: the result then carries {@link settling} instead of waiting for it. */
  started = false;
  /**
   * The worker's acknowledgement that the call's escalation listener is closed (its rooms killed): what the rooms
   * use (their bridge's child end, the grant proxies) is released after it.
   */
  listenerClosed: Promise<void> | undefined;

  /** Run `release` when the call ends; a failure is logged, never thrown (the other releases still run). */
  hold(release: () => unknown): void {
    this.stack.defer(async () => {
      try {
        await release();
      } catch (e) {
        log.warn("releasing what a call acquired failed", { error: (e as Error).message });
      }
    });
  }

  /**
   * Hold the call's git check (../sandbox/git/call-check.ts): released last (it is held first), it waits for every
   * late release before it (the worker's acknowledgement, the emptied cgroup: every process of the call has ended),
   * then checks; the check is itself a late release, so the result's `settled` includes it.
   */
  holdGitCheck(check: GitCheck): void {
    this.hold(() => {
      const ended = Promise.all(this.settling.map((p) => p.catch(() => undefined)));
      this.settling.push(check.settle(ended));
    });
  }

  /** Own `fd` until the call ends (see {@link OwnedFd}). */
  fd(fd: number): OwnedFd {
    const owned = new OwnedFd(fd);
    this.hold(() => owned.close());
    return owned;
  }

  /** Release everything (once); before the shell started, wait for the late releases too. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stack.disposeAsync();
    if (!this.started) await Promise.all(this.settling.map((p) => p.catch(() => undefined)));
  }
}

/** A result for a call whose shell was never started: `exitCode` 127 with `spawnError` (or as given). */
function notStarted(t0: number, msg: string, sandboxed: boolean, o: Partial<RunCommandResult> = {}): RunCommandResult {
  return {
    exitCode: 127,
    output: msg,
    durationMs: performance.now() - t0,
    timedOut: false,
    cancelled: false,
    outputBytes: 0,
    droppedBytes: 0,
    sandboxed,
    spawnError: msg,
    ...o,
  };
}

/** Why `workdir` cannot be the shell's working folder (Codex's wording for a missing one), or undefined. */
function workdirProblem(workdir: string): string | undefined {
  try {
    return statSync(workdir).isDirectory() ? undefined : `workdir is not a directory: ${workdir}`;
  } catch (e) {
    const missing = (e as NodeJS.ErrnoException).code === "ENOENT";
    return `workdir ${workdir}: ${missing ? "No such file or directory (os error 2)" : (e as Error).message}`;
  }
}

/** Proxy mode's wiring for one call: what the launch and the rooms get, and the bridges to serve. */
interface ProxyWiring {
  spec?: ProxySpec;
  env?: Record<string, string>;
  /** bubblewrap: the call's bridge (server end, child end at {@link PROXY_BRIDGE_FD}). */
  bridge?: { server: OwnedFd; child: OwnedFd };
  /** bubblewrap: the rooms' bridge, kept for the whole call; `stopWatching` once its server end is watched. */
  roomBridge?: { server: OwnedFd; child: OwnedFd; stopWatching?: () => Promise<void> };
  room?: RoomSpec["proxy"];
}

/**
 * Proxy mode (when `o.networkProxy` is set and the call is sandboxed): under bubblewrap a bridge into the
 * namespace at fixed in-namespace ports (and one more for the rooms); under Landlock and Seatbelt the proxy's own
 * loopback ports (the rooms' too).
 */
async function wireProxy(o: RunCommandOptions, res: CallResources): Promise<ProxyWiring> {
  if (o.networkProxy === undefined || !o.sandbox.sandboxed) return {};
  const np = o.networkProxy.policy;
  if (o.sandbox.backend.proxyWiring === "bridge") {
    const pair = () => {
      const b = bridgePair();
      return { server: res.fd(b.serverFd), child: res.fd(b.childFd) };
    };
    const bridge = pair();
    const ports = np.enableSocks5 ? { http: NAMESPACE_PORTS.http, socks: NAMESPACE_PORTS.socks } : { http: NAMESPACE_PORTS.http };
    const env = proxyEnvironment(ports, np.allowLocalBinding);
    const roomBridge: NonNullable<ProxyWiring["roomBridge"]> = pair();
    // The worker may still be starting a room with the child end: closed once it has let go of the listener (its
    // rooms killed), then the watching stops (which closes the server end).
    res.hold(async () => {
      await res.listenerClosed?.catch(() => undefined);
      roomBridge.child.close();
      await roomBridge.stopWatching?.();
    });
    failIfInjected("call_bridge");
    const spec = { fd: PROXY_BRIDGE_FD, ports: Object.values(ports) };
    return { spec, env, bridge, roomBridge, room: { ports: spec.ports, bridgeFd: roomBridge.child.fd, env } };
  }
  const ports = await o.networkProxy.listenLoopback();
  const env = proxyEnvironment(ports, np.allowLocalBinding);
  const spec = { ports: Object.values(ports), allowLocalBinding: np.allowLocalBinding };
  return { spec, env, room: { ports: spec.ports, env } };
}

/** What the call's start-up acquired, for its run. */
interface Acquired {
  launch: Launch;
  proxy: ProxyWiring;
  grantProxies?: Awaited<ReturnType<typeof roomGrantProxies>>;
  cgroup?: CallCgroup;
  listener: ReturnType<EscalationServer["listen"]>;
  /** Where the shell's output is read (a pipe's read end, or a copy of the terminal's master). */
  readEnd: OwnedFd;
  /** The shell's fds 1 and 2 (and 0 on a terminal). */
  writeEnd: OwnedFd;
  /** The shell runs on a session's terminal. */
  terminal: boolean;
  /** On a terminal: escalated programs' own output pipe, merged into the output. */
  escalatedRead?: OwnedFd;
  control: CallControl;
}

/**
 * Acquire what the call needs before its shell starts, each resource held by `res`: proxy wiring, the launch
 * (mount points), the rooms' grant proxies, the cgroup, the output pipe or terminal, the escalation listener.
 * Returns a result instead when the call ends here (a sandbox that cannot be built as asked, a resource that
 * cannot be had); throws what the proxy's or grants' start throws.
 */
async function acquire(o: RunCommandOptions, res: CallResources, t0: number, tty?: OwnedFd): Promise<Acquired | RunCommandResult> {
  const sandboxed = o.sandbox.sandboxed;
  const proxy = await wireProxy(o, res);
  if (TRACE_STEPS) traceStep("proxy");
  let launch: Launch;
  try {
    launch = o.sandbox.launch(o, proxy.spec);
  } catch (e) {
    // A sandbox that cannot be built as asked (e.g. a protected path that is a symlink): fail closed, as the
    // helper does (status 101, the reason in the output).
    const msg = `shellmcp: ${(e as Error).message}\n`;
    return notStarted(t0, msg, true, {
      exitCode: SANDBOX_FAILURE_EXIT,
      outputBytes: msg.length,
      spawnError: undefined,
      sandboxFailed: true,
    });
  }
  res.hold(() => launch.release?.());
  if (TRACE_STEPS) traceStep("launch");
  // What an escalation may run is judged against the sandbox as it is now, when the shell starts.
  const roomSpec = proxy.room === undefined ? roomFor(o) : { ...roomFor(o), proxy: proxy.room };
  // Programs granted domains (`[shellmcp.room_network] npm = ["registry.npmjs.org"]`) get a proxy of their own.
  if (TRACE_STEPS) traceStep("room");
  const grantProxies = await roomGrantProxies(roomSpec, o.networkProxy?.policy);
  const late: string[] = [];
  if (grantProxies !== undefined)
    // As for the room bridge: ended once the worker has let go of the listener (no room can start any more).
    res.hold(async () => {
      await res.listenerClosed?.catch(() => undefined);
      const refused = await grantProxies.end();
      if (refused.length > 0) late.push(refusalReport(refused));
    });
  failIfInjected("call_grants");
  const boundary: EscalationBoundary = {
    baseEnv: o.env,
    writable: o.sandbox.writable(),
    room: grantProxies === undefined ? roomSpec : { ...roomSpec, grantProxies: grantProxies.endpoints },
  };
  const fail = (what: string, e: unknown) => notStarted(t0, `${what}: ${(e as Error).message}`, sandboxed);
  let cgroup: CallCgroup | undefined;
  try {
    const c = (cgroup = o.cgroups?.create());
    if (c !== undefined) res.hold(() => res.settling.push(c.dispose()));
    failIfInjected("call_cgroup");
  } catch (e) {
    return fail("cannot create this call's cgroup", e);
  }
  if (TRACE_STEPS) traceStep("cgroup");
  const io = openOutput(res, tty);
  if ("error" in io) return fail("cannot use the session's terminal", io.error);
  if (TRACE_STEPS) traceStep("output-pipe");
  const control = new CallControl(o, cgroup, late);
  try {
    control.listener = o.server.listen({
      decide: (r) => o.decide(r, control.stopwatch!),
      boundary,
      cgroupProcs: cgroup?.procs,
      outputFd: io.outputFd.fd,
      notice: o.notice,
    });
    io.outputFd.handOver(); // the worker's now
    const l = control.listener;
    // Stops interception for leftovers and kills this call's escalated programs. The commands reach the worker
    // synchronously inside close(); only its acknowledgement is not awaited, so the answer is not delayed by it.
    res.hold(() => res.settling.push((res.listenerClosed = l.close())));
    failIfInjected("call_listen");
  } catch (e) {
    return fail("cannot open this call's escalation listener", e);
  }
  if (TRACE_STEPS) traceStep("listener");
  return { launch, proxy, grantProxies, cgroup, listener: control.listener, terminal: tty !== undefined, ...io, control };
}

/**
 * The shell's output: a pipe (stdout and stderr share it; stdin is /dev/null), or on a session's terminal a copy of
 * the master to read and the slave as fds 0–2, escalated programs' output then going through a pipe of its own
 * (a room passes no terminal). `outputFd`: the worker's copy of where escalated programs write.
 */
function openOutput(
  res: CallResources,
  tty?: OwnedFd & { master?: number },
): { readEnd: OwnedFd; writeEnd: OwnedFd; escalatedRead?: OwnedFd; outputFd: OwnedFd } | { error: unknown } {
  if (tty !== undefined) {
    let readEnd: OwnedFd;
    try {
      readEnd = res.fd(libc.fcntl(tty.master!, libc.SOCK.F_DUPFD_CLOEXEC, 3));
    } catch (e) {
      return { error: e };
    }
    const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
    return { readEnd, writeEnd: tty, escalatedRead: res.fd(r), outputFd: res.fd(w) };
  }
  const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
  const writeEnd = res.fd(w);
  return { readEnd: res.fd(r), writeEnd, outputFd: res.fd(libc.fcntl(w, libc.SOCK.F_DUPFD_CLOEXEC, 3)) };
}

/**
 * A running call's kill switches: timeout or cancel kill the sandboxed shell's process group at once; escalated
 * programs get SIGTERM and {@link ESCALATED_GRACE_MS} to end (git removes its index.lock), then everything left of the
 * call is killed.
 */
class CallControl {
  listener!: ReturnType<EscalationServer["listen"]>;
  stopwatch: Stopwatch | undefined;
  proc: ReturnType<typeof Bun.spawn> | undefined;
  /** The shell runs under a lifeline guard (which kills everything below it on SIGUSR1). */
  guarded = false;
  killed: "timeout" | "cancel" | undefined;
  graceOver: Promise<void> | undefined;
  /** `late`: text for the end of the output, known only once released (the grant proxies' refusals). */
  constructor(
    private readonly o: Pick<RunCommandOptions, "timeoutMs">,
    private readonly cgroup: CallCgroup | undefined,
    readonly late: string[],
  ) {}

  /** Whether the shell has exited (and been reaped). */
  get exited(): boolean {
    return this.proc !== undefined && (this.proc.exitCode !== null || this.proc.signalCode !== null);
  }

  /**
   * The shell's process group, while the shell is unreaped (so its pid, the group's id, cannot have been reused):
   * under a lifeline guard, SIGUSR1 to the guard, which kills everything below it (setsid'd and double-forked
   * processes too, cgroup or not) and then dies of SIGKILL; else SIGKILL to the group.
   */
  killShell(): void {
    const pid = this.proc?.pid ?? 0;
    if (pid <= 0 || this.exited) return;
    if (this.guarded) libc.kill(pid, GUARD_END_SIGNAL);
    else libc.kill(-pid, 9);
  }

  /** Everything of the call, at once. */
  killAll(): void {
    this.cgroup?.kill();
    this.killShell();
    this.listener.signalChildren(9);
  }

  /** End the call for `why`: the shell now, escalated programs after their grace. */
  stop(why: "timeout" | "cancel"): void {
    this.killed ??= why;
    if (this.graceOver !== undefined) return;
    this.listener.signalChildren(15);
    this.killShell();
    this.graceOver = Bun.sleep(ESCALATED_GRACE_MS).then(() => this.killAll());
  }

  /** The call's stopwatch (a prompt pauses it), held by `res`. */
  startStopwatch(res: CallResources): Stopwatch {
    const sw = (this.stopwatch = new Stopwatch(this.o.timeoutMs, () => this.stop("timeout")));
    res.hold(() => sw.dispose());
    return sw;
  }
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
function spawnPlan(
  a: Acquired,
  res: CallResources,
): { argv: string[]; argv0: string | undefined; stdio: (number | "ignore")[]; selfHelper: boolean; seccomp?: OwnedFd } {
  const { launch, cgroup } = a;
  const argv = [...launch.argv];
  const selfHelper = isSelfExe(argv[0]);
  const joins = cgroup !== undefined && launch.ownPidNamespace !== true;
  const guardJoins = joins && lifelineProblem() === undefined;
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
  a.control.guarded = started.argv0 === GUARD_ARGV0;
  return { ...started, stdio, selfHelper, seccomp };
}

/**
 * Once the shell runs: close this process's copies of what the shell now holds, and serve proxy mode's bridges
 * (the namespace's listeners arrive once the inner stage has made them; the proxy accepts on them). A failing call
 * bridge ends the call (fail closed: the namespace has no other way out); `bridgeError` then says why.
 */
function afterStart(o: RunCommandOptions, a: Acquired, s: { seccomp?: OwnedFd }): { bridgeError?: string } {
  const { proxy, control } = a;
  const proc = control.proc!;
  const state: { bridgeError?: string } = {};
  a.writeEnd.close();
  s.seccomp?.close();
  a.listener.releaseClientFd();
  const adopt = (fds: number[]) => o.networkProxy!.adopt(fds.length === 2 ? { http: fds[0]!, socks: fds[1]! } : { http: fds[0]! });
  const count = proxy.spec?.ports.length ?? 0;
  if (proxy.roomBridge !== undefined) {
    let callEnded: () => void = () => undefined;
    const ended = new Promise<void>((r) => (callEnded = r));
    const watched = watchNamespaceListeners(proxy.roomBridge.server.handOver(), count, (fds) => void adopt(fds), ended);
    proxy.roomBridge.stopWatching = async () => {
      callEnded();
      await watched;
    };
  }
  a.grantProxies?.watch();
  if (proxy.bridge !== undefined) {
    proxy.bridge.child.close();
    void receiveNamespaceListeners(proxy.bridge.server.handOver(), count, proc.exited)
      .then(adopt)
      .catch((e: unknown) => {
        if (control.exited) return; // ended first: its own output says why
        state.bridgeError = `shellmcp: the network proxy bridge failed, the command was stopped: ${(e as Error).message}\n`;
        control.killAll();
      });
  }
  return state;
}

/**
 * Read the output until EOF while the shell runs; after it exits, escalated programs keep their grace (when killed),
 * everything left of the call is killed (its cgroup), and the pipe gets {@link DRAIN_MS} more to reach EOF.
 * Resolves with the shell's exit status once the reading has stopped.
 */
async function pump(o: RunCommandOptions, res: CallResources, a: Acquired, out: CappedOutput, t0: number): Promise<number> {
  const { control } = a;
  const onAbort = () => control.stop("cancel");
  o.signal?.addEventListener("abort", onAbort);
  res.hold(() => o.signal?.removeEventListener("abort", onAbort));
  if (o.signal?.aborted) onAbort();
  if (o.onProgress !== undefined) {
    const progress = setInterval(() => o.onProgress!(performance.now() - t0, out.total), PROGRESS_INTERVAL_MS);
    res.hold(() => clearInterval(progress));
  }
  const take = (chunk: Uint8Array) => {
    if (TRACE_STEPS && out.total === 0) traceStep("first-byte");
    out.push(chunk);
    o.onOutput?.(chunk);
  };
  // A terminal's reader owns (and closes) its copy of the master.
  const readers = [readOutput(a.terminal ? a.readEnd.handOver() : a.readEnd.fd, a.terminal, take)];
  if (a.escalatedRead !== undefined) readers.push(readOutput(a.escalatedRead.fd, false, take));
  let eof = false;
  const drained = Promise.all(readers.map((r) => r.done)).then(() => (eof = true));
  const exitCode = await control.proc!.exited;
  if (TRACE_STEPS) traceStep("exit");
  // Reaped: from now on its pid (the session's id) may be reused by any new process, so it is no longer tracked.
  o.track?.(control.proc!.pid, false);
  // The shell is gone: the worker lets go of its copy of the pipe (later escalations of leftovers get /dev/null).
  a.listener.releaseOutput();
  // Killed (timeout, cancel): escalated programs have their grace period, unless they end (and close the pipe) first.
  if (control.graceOver !== undefined) await Promise.race([drained, control.graceOver]);
  // Everything the call started ends with it (background jobs, detached or not); their end closes the pipe.
  a.cgroup?.kill();
  await Promise.race([drained, Bun.sleep(DRAIN_MS)]);
  if (!eof) await Promise.all(readers.map((r) => r.cancel()));
  if (TRACE_STEPS) traceStep("drained");
  return exitCode;
}

/**
 * Run the command to completion (or timeout/cancel): plan (the workdir), acquire (./run-command.ts `acquire`: every
 * resource held by one {@link CallResources}), run (spawn, then read the output until the shell and its leftovers are
 * gone), settle (release everything, last acquired first; the result's `settled` says when the late releases are
 * done). Never throws for command failures. A session (./session-manager.ts) runs it "detached": it does not await
 * it at once, gives a `terminal` and `onOutput`, a `signal` of its own (kill) and no practical timeout.
 */
export async function runCommand(o: RunCommandOptions): Promise<RunCommandResult> {
  const t0 = performance.now();
  await using res = new CallResources();
  // What the caller acquired for the call is ours from the start, released last: the git check waits for the rest.
  if (o.gitCheck !== undefined) res.holdGitCheck(o.gitCheck);
  if (o.networkProxy !== undefined) res.hold(() => o.networkProxy!.close());
  // The terminal's slave is ours from the start.
  const tty = o.terminal === undefined ? undefined : Object.assign(res.fd(o.terminal.slave), { master: o.terminal.master });
  // Plan.
  const bad = workdirProblem(o.workdir);
  if (bad !== undefined) return notStarted(t0, bad, o.sandbox.sandboxed);
  if (TRACE_STEPS) traceStep("workdir");
  // Acquire.
  const a = await acquire(o, res, t0, tty);
  if (!("launch" in a)) return a;
  const { control, launch } = a;
  const stopwatch = control.startStopwatch(res);
  // Time a person takes to answer a network question does not count against the timeout either.
  if (o.networkProxy !== undefined) o.networkProxy.pauseWhile = (f) => stopwatch.paused(f);
  if (stopwatch.expired || isInjected("call_expired"))
    return notStarted(t0, "", launch.sandboxed, { exitCode: 124, timedOut: true, spawnError: undefined });
  // Run.
  let spawn: ReturnType<typeof spawnPlan>;
  try {
    spawn = spawnPlan(a, res);
    if (TRACE_STEPS) traceStep("spawn-plan");
    const env = shellEnvironment({ ...o, policy: o.sandbox.policy }, a.listener.shellEnv(o.wrapperPath, ESCALATE_FD), {
      ...launch.env,
      ...a.proxy.env,
    });
    failIfInjected("call_spawn");
    control.proc = Bun.spawn(spawn.argv, {
      cwd: o.workdir,
      env: spawn.selfHelper ? envForSelf(env) : env,
      stdio: spawn.stdio as unknown as ["ignore", "pipe", "pipe"],
      detached: true, // setsid: the shell (or its guard) leads its own session and process group
      argv0: spawn.argv0,
    });
  } catch (e) {
    return notStarted(t0, `cannot start ${launch.argv[0]}: ${(e as Error).message}`, o.sandbox.sandboxed);
  }
  res.started = true;
  if (TRACE_STEPS) traceStep("spawn");
  const pid = control.proc.pid;
  o.track?.(pid, true);
  o.onStarted?.({
    interrupt: () => {
      if (!control.exited) libc.kill(-pid, 2);
    },
  });
  const bridge = afterStart(o, a, spawn);
  if (TRACE_STEPS) traceStep("after-start");
  const out = new CappedOutput(o.maxOutputBytes);
  const exitCode = await pump(o, res, a, out, t0);
  // Settle.
  await res[Symbol.asyncDispose]();
  if (TRACE_STEPS) traceStep("released");
  for (const text of control.late) out.push(Buffer.from(text));
  const proc = control.proc;
  const sig = proc.signalCode === null || proc.signalCode === undefined ? undefined : String(proc.signalCode);
  return {
    exitCode: sig !== undefined ? 128 + (osConstants.signals[sig as NodeJS.Signals] ?? 0) : exitCode,
    output: bridge.bridgeError === undefined ? out.text() : out.text() + bridge.bridgeError,
    durationMs: performance.now() - t0,
    timedOut: control.killed === "timeout",
    cancelled: control.killed === "cancel",
    signal: sig,
    outputBytes: out.total,
    droppedBytes: out.dropped,
    sandboxed: launch.sandboxed,
    settled: Promise.all(res.settling.map((p) => p.catch(() => undefined))).then(() => undefined),
  };
}
