/**
 * One command run's face: what the caller asks ({@link RunCommandOptions}) and what it gets back
 * ({@link RunCommandResult}, {@link notStarted} for a call whose shell never started). ./run-command.ts runs it.
 */
import type * as libc from "../../ffi/libc.ts";
import type { EscalationServer, ListenOptions } from "../escalate/server.ts";
import type { CallSandbox } from "../sandbox/backend.ts";
import type { EscalationMode, RoomNetworkGrant } from "../escalate/rooms/plan.ts";
import type { CallProxy } from "../network/proxy.ts";
import type { GitCheck } from "../sandbox/git/call-check.ts";
import type { CgroupManager } from "./cgroup.ts";
import type { Stopwatch } from "./stopwatch.ts";

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

/** A result for a call whose shell was never started: `exitCode` 127 with `spawnError` (or as given). */
export function notStarted(t0: number, msg: string, sandboxed: boolean, o: Partial<RunCommandResult> = {}): RunCommandResult {
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
