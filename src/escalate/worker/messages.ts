/**
 * What the escalation server (../server.ts) and its worker (./worker.ts) say to each other — the commands main
 * sends over the control socket and the events the worker posts back — and the bounds the worker enforces on
 * its sessions (docs: "escalation server bounds"). Types and constants only: importing it starts nothing.
 */
import type { EscalateAction, EscalateRequest } from "../protocol/wire.ts";
import type { EscalateSpawn } from "../rooms/keep.ts";

/**
 * Commands main sends to the worker. `cgroupProcs`: the call's `cgroup.procs` file, for escalated children;
 * `outputFd`: a copy of the write end of the call's output pipe, owned by the worker from then on (closed by
 * `release-output`, or with the listener); with `gate` (its slot in ./output-gate.ts `OutputGates`), shared with
 * main instead, which may close it itself.
 */
export type Command =
  | { t: "listen"; lid: number; fd: number; cgroupProcs?: string; outputFd?: number; gate?: number }
  | { t: "release-output"; lid: number }
  | { t: "unlisten"; lid: number; killChildren: boolean }
  | { t: "decision"; sid: number; action: EscalateAction; spawn?: EscalateSpawn }
  | { t: "kill"; lid: number; signal: number }
  | { t: "release-heap" }
  /** The server is idle: stop, as `stop` does, only if nothing is open (./port.ts parks the worker). */
  | { t: "park" }
  | { t: "stop" };

/** Events the worker posts to main. */
export type WorkerEvent =
  | { t: "ready" }
  | { t: "request"; lid: number; sid: number; request: EscalateRequest }
  | { t: "spawned"; lid: number; sid: number; pid: number }
  | { t: "exited"; lid: number; sid: number; pid: number; exitCode: number }
  | { t: "session-error"; lid: number; sid: number; message: string }
  | { t: "unlistened"; lid: number }
  /** Kept room `rid` of listener `lid` has ended (main gives back its mount points and checks its control files). */
  | { t: "room-ended"; lid: number; rid: number }
  /** The worker's heap release (`release-heap`) has run: its collection and `Bun.shrink()` are done. */
  | { t: "heap-released" }
  /**
   * `park`: nothing was open, the worker has closed everything of its own and ends. `nextSid`: the first session id
   * it never gave out, where the next worker starts (./port.ts): main may still answer a session of this worker
   * (a decision that outlived its run), and must never name one of the next.
   */
  | { t: "parked"; nextSid: number }
  /** `park`: a listener, session or room is still open; the worker runs on. */
  | { t: "park-refused" }
  | { t: "stopped" };

/** Largest `EscalateRequest` frame, bytes. Codex's requests carry the whole environment (≤ ARG_MAX, 2 MiB by default). */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** Bytes one listener (shell run) may hold in partly received frames, across all its sessions. */
export const MAX_LISTENER_BUFFERED_BYTES = 8 * 1024 * 1024;
/** Sessions (intercepted execs in flight) one listener may hold. */
export const MAX_SESSIONS_PER_LISTENER = 128;
/** Sessions the worker holds across all listeners (each is an fd; RLIMIT_NOFILE is the hard wall). */
export const MAX_SESSIONS = 4096;
/** Time a peer has for each step it owes (send the request, read the answer, …), ms. */
export const SESSION_IO_TIMEOUT_MS = 10_000;
/** Most bytes read by one `recvmsg` on the control socket or a session socket. */
export const RECV_CHUNK = 256 * 1024;

/**
 * How the server talks to its worker (./worker.ts): commands down, events up. ../server.ts `EscalationServer.start`
 * builds the real one (a Worker and a control socket); the fast tier's tests give the server a fake.
 */
export interface WorkerPort {
  /** Send one command; may block on a small write, never throws for a live worker. */
  send(c: Command): void;
  /** Where the worker's events and its failure (the error's message) go; called once, by the server. */
  connect(onEvent: (e: WorkerEvent) => void, onError: (message: string) => void): void;
  /** End the worker at once (it did not stop in time, or never started). */
  terminate(): void;
  /** Release this side of the control channel (after the worker stopped or was terminated). */
  close(): void;
  /**
   * Ask an idle worker to end until the next command that needs one (./port.ts): resolves true once it has,
   * false when something was open. Absent: the worker is never parked (the fast tier's fakes).
   */
  park?(): Promise<boolean>;
}
