/**
 * Escalation server (main-thread side): one per `shellmcp serve` process, any number of concurrent listeners
 * (one per shell run), any number of concurrent sessions (one per intercepted exec) — docs/escalation.md, "Server side".
 *
 * The socket work happens in a Worker (./worker/worker.ts) blocked in poll(2); this side only decides. Each listener
 * owns a seqpacket socketpair (Codex: datagram): the client end goes to the shell (put it at some fd in the child and export
 * `CODEX_ESCALATE_SOCKET=<that fd>`), the server end is watched by the worker. Each request is passed to the
 * listener's `decide` function. `Escalate` runs the program outside the call's sandbox on the wrapper's fds 0,1,2
 * with the request's argv (argv[0] included) and workdir, where the server's {@link Placement} puts it
 * (./placement.ts, asked once per `Escalate`: in production the boundary's checks, then a room built by the call's
 * backend, or the bare host for a listener without rooms — `--escalation host`, Codex's meaning). A placement that
 * keeps the program inside turns it into `Run` (inside the call's sandbox) and the call's result says why; a placement
 * that fails denies it.
 *
 * Nothing here knows about MCP, exec policy, environment filtering, git taint or rooms: `decide` and the placement are
 * injected (as Codex's `shell-escalation` server is given its policy and `prepare_escalated_exec`).
 */
import * as libc from "../../ffi/libc.ts";
import { ShellmcpError } from "../errors.ts";
import { ESCALATE_SOCKET_ENV_VAR } from "../escalation-socket.ts";
import { log } from "../log.ts";
import { bounded } from "../safe-text.ts";
import { workerUrl as workerUrlOf } from "../self.ts";
import type { EscalationBoundary, Grant } from "./decision/boundary.ts";
import { resolveRequest, type Decided, type ResolvedRequest } from "./decision/request.ts";
import { OutputGates } from "./worker/output-gate.ts";
import { ParkingWorker } from "./worker/port.ts";
import type { Placement } from "./placement.ts";
import type { EscalateSpawn } from "./rooms/keep.ts";
import { BASH_EXEC_WRAPPER_ENV_VAR, EXEC_WRAPPER_ENV_VAR, type EscalateAction, type EscalateRequest } from "./protocol/wire.ts";
import type { Command, WorkerEvent, WorkerPort } from "./worker/messages.ts";

export type { WorkerPort } from "./worker/messages.ts";

/**
 * Decides what to do with one intercepted exec: the wire's {@link EscalateAction}. `Escalate` runs the program
 * outside the sandbox, subject to the listener's {@link EscalationBoundary} (which may turn it into `Run`). A
 * throw or rejection denies it (fail closed).
 */
export type Decide = (request: ResolvedRequest) => Promise<Decided> | Decided;

/** Options of {@link EscalationServer.listen}. */
export interface ListenOptions {
  decide: Decide;
  /** The sandbox the shell runs in: decides what an `Escalate` may run, and with which environment. */
  boundary: EscalationBoundary;
  /** `cgroup.procs` of the call's cgroup: escalated programs are moved there as they start. */
  cgroupProcs?: string;
  /**
   * A copy of the write end of the call's output pipe, handed to the worker: where a room sends an escalated
   * program's output when the command gave it a terminal. Release it when the shell exits
   * ({@link EscalationListener.releaseOutput}), or the pipe never reaches EOF; closing the listener closes it too.
   * Who closes it is decided through ./worker/output-gate.ts, never by the caller.
   */
  outputFd?: number;
  /**
   * Where to say, for the call's result, that an `Escalate` decision was turned into a run inside the sandbox
   * (the boundary refused the program, no room could be built, the inspection failed) and why: a model passes
   * it on to the human, who would otherwise see only a program failing inside the sandbox. `detail`: the program's
   * argv and the reason, for the result's blocked report (src/blocked/report.ts, layer `escalation`).
   */
  notice?: (text: string, detail?: { argv: readonly string[]; reason: string }) => void;
}

/** Most notices one listener (one call) passes on ({@link EscalationListener.notice}). */
export const MAX_NOTICES = 8;

/** What the server answers one request: the wire's action, and for `Escalate` what the worker starts. */
type Answer = { action: EscalateAction; spawn?: EscalateSpawn };

/**
 * One shell run's listener ({@link EscalationServer.listen}): the client end of its socketpair for the shell, the
 * variables that point the shell's exec wrapper at it, the call's notices, and its closing.
 */
export class EscalationListener {
  private closed = false;
  private clientFdOpen = true;
  private outputReleased = false;

  /** @internal */
  constructor(
    private readonly server: EscalationServer,
    readonly id: number,
    /** Client end of the seqpacket socketpair (CLOEXEC here; dup it into the shell). */
    readonly clientFd: number,
    /** @internal */ readonly options: ListenOptions,
    /** @internal The output fd's slot in the server's {@link OutputGates}, when it got one. */
    readonly gate?: number,
  ) {}

  /**
   * Variables to add to the shell's environment: `CODEX_ESCALATE_SOCKET=<childFd>`, and `EXEC_WRAPPER` and
   * `BASH_EXEC_WRAPPER` both set to `wrapperPath` (newer and 0.97-era patched shells).
   */
  shellEnv(wrapperPath: string, childFd: number): Record<string, string> {
    return { [ESCALATE_SOCKET_ENV_VAR]: String(childFd), [EXEC_WRAPPER_ENV_VAR]: wrapperPath, [BASH_EXEC_WRAPPER_ENV_VAR]: wrapperPath };
  }

  private readonly noticed = new Set<string>();

  /**
   * Tell the call's result (through {@link ListenOptions.notice}) that a program the rules let out ran inside the
   * sandbox instead, and why: once per distinct program and reason, at most {@link MAX_NOTICES} per call.
   */
  notice(argv: readonly string[], reason: string): void {
    const say = this.options.notice;
    if (say === undefined) return;
    const text = `\`${bounded(argv.join(" "), 120)}\` ran inside the sandbox, not escalated: ${bounded(reason, 400)}`;
    if (this.noticed.has(text)) return;
    this.noticed.add(text);
    if (this.noticed.size <= MAX_NOTICES) say(text, { argv, reason });
    else if (this.noticed.size === MAX_NOTICES + 1)
      say("more programs ran inside the sandbox instead of escalating (see the server's log)");
  }

  /** Close this process's copy of the client fd (call once the shell has its own copy). */
  releaseClientFd(): void {
    if (this.clientFdOpen) {
      this.clientFdOpen = false;
      libc.closeQuiet(this.clientFd);
    }
  }

  /**
   * Let go of the call's output pipe (see {@link ListenOptions.outputFd}): call when the shell has exited. The
   * worker's copy is closed here and now unless the worker is using it this instant (./worker/output-gate.ts); without a
   * gate slot, by a message to the worker. Idempotent; a no-op once {@link close} was called (the worker closes it).
   */
  releaseOutput(): void {
    const fd = this.options.outputFd;
    if (fd === undefined || this.outputReleased || this.closed) return;
    this.outputReleased = true;
    if (this.gate !== undefined) this.server.gates.release(this.gate, fd);
    else this.server.command({ t: "release-output", lid: this.id });
  }

  /** Send `signal` to the process group of every live escalated program of this listener. */
  signalChildren(signal: number): void {
    this.server.command({ t: "kill", lid: this.id, signal });
  }

  /**
   * Stop listening: later execs of this run's background jobs fail closed in their wrapper, and escalated
   * programs still running are killed (SIGKILL to their process groups). Resolves when the worker has closed
   * the socket.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.releaseClientFd();
    await this.server.unlisten(this.id, true);
  }
}

/** The escalation server. Create with {@link EscalationServer.start}; one is enough per process. */
export class EscalationServer {
  private readonly listeners = new Map<number, EscalationListener>();
  private readonly unlistenWaiters = new Map<number, () => void>();
  private nextLid = 1;
  private stopped = false;
  private stoppedPromise: Promise<void>;
  private resolveStopped!: () => void;

  /**
   * A server over `port`, placing its escalated execs with `placement`. {@link EscalationServer.start} is the way to
   * get a working one; this constructor is for tests that drive the server through a fake port (the server counts
   * as started: the port's `ready` event is not awaited).
   */
  constructor(
    private readonly port: WorkerPort,
    private readonly placement: Placement,
    /** @internal Who closes each listener's output fd, shared with the worker (./worker/output-gate.ts). */
    readonly gates: OutputGates = new OutputGates(),
  ) {
    this.stoppedPromise = new Promise((r) => (this.resolveStopped = r));
    port.connect(
      (e) => this.onEvent(e),
      (message) => {
        if (this.onStartFailure !== undefined) return this.onStartFailure(new Error(message));
        // Fail closed: no new listener can be opened, so no shell can run unsupervised; calls in flight hang in
        // their wrappers until their timeout kills them.
        this.dead = true;
        log.error("escalation worker failed; no further commands can run", { message });
        // Nobody will answer what was waiting for the worker: a listener's close, a heap release.
        for (const w of this.unlistenWaiters.values()) w();
        this.unlistenWaiters.clear();
        for (const w of this.heapReleased.splice(0)) w();
        this.resolveStopped();
      },
    );
  }

  /** How long the worker may take to start polling, ms. */
  static readonly START_TIMEOUT_MS = 10_000;
  /** How long {@link releaseHeap} waits for the worker's word that its release has run, ms. */
  static readonly HEAP_RELEASE_WAIT_MS = 1_000;
  /** Waiting for the worker's `heap-released`. */
  private readonly heapReleased: (() => void)[] = [];
  /** How long `stop()` waits for the worker before terminating it, ms. */
  static readonly STOP_TIMEOUT_MS = 2_000;

  /**
   * Start the worker; resolves once it is polling. Every `Escalate` decision is placed by `placement` (production:
   * ./placement.ts `BoundaryPlacement`). Fails closed with `ESCALATION_UNAVAILABLE` when the worker errors or is not
   * ready within {@link START_TIMEOUT_MS}. `workerUrl` is for tests; by default the worker is the copy embedded in the
   * executable (never a file on disk, see ../self.ts) or, from source, ./worker/worker.ts.
   */
  static async start(placement: Placement, workerUrl: string = workerUrlOf("escalate/worker/worker")): Promise<EscalationServer> {
    const gates = new OutputGates();
    const port = new ParkingWorker(workerUrl, gates.buffer);
    const server = new EscalationServer(port, placement, gates);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ready = new Promise<void>((res, rej) => {
      server.onReady = res;
      server.onStartFailure = rej;
      timer = setTimeout(
        () => rej(new Error(`not ready after ${EscalationServer.START_TIMEOUT_MS} ms`)),
        EscalationServer.START_TIMEOUT_MS,
      );
    });
    try {
      await ready;
    } catch (e) {
      port.terminate();
      port.close();
      throw new ShellmcpError("ESCALATION_UNAVAILABLE", `the escalation worker could not start: ${(e as Error).message}`, {}, { cause: e });
    } finally {
      clearTimeout(timer);
      server.onStartFailure = undefined;
    }
    port.unref();
    return server;
  }

  private onStartFailure?: (e: Error) => void;
  /** Set when the worker died: nothing can be decided any more, and `listen` refuses. */
  private dead = false;

  private onReady?: () => void;

  /**
   * Open a listener for one shell run. Throws `ESCALATION_UNAVAILABLE` when the server is stopped, its worker died, or
   * its parked worker cannot start again (then nothing of the listener stays open).
   */
  listen(options: ListenOptions): EscalationListener {
    if (this.stopped) throw new ShellmcpError("ESCALATION_UNAVAILABLE", "escalation server is stopped");
    if (this.dead) throw new ShellmcpError("ESCALATION_UNAVAILABLE", "the escalation worker died; restart the server");
    // Seqpacket, not datagram (Codex's): the same one-message-per-handshake wire, but the kernel never sends a
    // seqpacket message anywhere but to the peer (an address given to sendmsg is ignored), and the sandbox's
    // seccomp filter allows no datagram socket at all (issue 22: no addressed send to a host socket).
    const [serverEnd, clientEnd] = libc.socketpair(libc.SOCK.AF_UNIX, libc.SOCK.SOCK_SEQPACKET | libc.SOCK.SOCK_CLOEXEC);
    // The placement learns where this call's sandbox can write (in production: git taint, ../sandbox/git/taint.ts).
    this.placement.observe?.({ t: "listening", boundary: options.boundary });
    const gate = options.outputFd !== undefined ? this.gates.take() : undefined;
    const l = new EscalationListener(this, this.nextLid++, clientEnd, options, gate);
    this.listeners.set(l.id, l);
    try {
      this.command({ t: "listen", lid: l.id, fd: serverEnd, cgroupProcs: options.cgroupProcs, outputFd: options.outputFd, gate });
    } catch (e) {
      // A parked worker could not start again (./worker/port.ts: out of fds or threads): no worker has this
      // listener, so nothing of it stays open here (it would keep the worker from ever parking again). The caller
      // still owns its output fd, and fails its call closed.
      this.listeners.delete(l.id);
      if (gate !== undefined) this.gates.putBack(gate);
      libc.closeQuiet(serverEnd);
      libc.closeQuiet(clientEnd);
      this.placement.observe?.({ t: "listener-closed", listener: l.id });
      throw new ShellmcpError(
        "ESCALATION_UNAVAILABLE",
        `the escalation worker could not start again: ${(e as Error).message}`,
        {},
        { cause: e },
      );
    }
    return l;
  }

  /** @internal */
  unlisten(lid: number, killChildren: boolean): Promise<void> {
    // No worker to answer (dead, or stopped: its shutdown closed every listener): nothing to wait for.
    if (this.dead || this.portClosed) return Promise.resolve();
    return new Promise((res) => {
      this.unlistenWaiters.set(lid, res);
      this.command({ t: "unlisten", lid, killChildren });
    });
  }

  /**
   * Have the worker give back the heap memory its calls left behind (a full collection and `Bun.shrink()` on its own
   * thread, as ../serve.ts `releaseHeap` does on the main one). For an idle server. Resolves once the worker says its
   * release has run (what it compiled again afterwards has then touched the executable's code pages, so they can be
   * given back after it), or after {@link HEAP_RELEASE_WAIT_MS} (a busy or dead worker); never rejects.
   */
  releaseHeap(): Promise<void> {
    if (this.stopped || this.dead || this.portClosed) return Promise.resolve();
    const done = new Promise<void>((res) => {
      this.heapReleased.push(res);
      setTimeout(res, EscalationServer.HEAP_RELEASE_WAIT_MS).unref();
    });
    this.command({ t: "release-heap" });
    return done;
  }

  /**
   * Park the worker while the server is idle (issue 40: it is ~2.5 MiB of the server's anonymous memory): it ends if
   * nothing is open — no listener here, and in the worker no session or kept room — and the next {@link listen}
   * starts a new one (~3.5 ms, once). Resolves true once parked, false when something was open, the server is
   * stopped or its worker dead, or its port cannot park. Never rejects.
   */
  park(): Promise<boolean> {
    if (this.stopped || this.dead || this.portClosed || this.listeners.size > 0 || this.port.park === undefined)
      return Promise.resolve(false);
    return this.port.park().then((parked) => {
      if (parked) this.placement.observe?.({ t: "parked" });
      return parked;
    });
  }

  /** Stop the worker: every listener closes and every escalated program still running is killed. */
  async stop(): Promise<void> {
    if (this.stopped) return this.stoppedPromise;
    this.stopped = true;
    this.placement.observe?.({ t: "stopping" });
    for (const l of this.listeners.values()) l.releaseClientFd();
    this.command({ t: "stop" });
    const timeout = new Promise<"timeout">((res) => setTimeout(() => res("timeout"), EscalationServer.STOP_TIMEOUT_MS).unref());
    if ((await Promise.race([this.stoppedPromise, timeout])) === "timeout") {
      log.warn("escalation worker did not stop in time; terminating it");
      this.port.terminate();
    }
    this.portClosed = true;
    this.port.close();
  }

  /** Set once {@link stop} has closed the control socket: its fd number may belong to anything opened since. */
  private portClosed = false;

  /**
   * @internal Send a command to the worker (blocking write of a small frame). Nothing is sent once the worker is dead
   * (nobody reads the control socket any more: a blocking write could hang forever) or the control socket is closed
   * (a call still ending after {@link stop}: its close, kill or release would go to whatever now has that fd number).
   */
  command(c: Command): void {
    if (this.dead || this.portClosed) return;
    this.port.send(c);
  }

  private onEvent(e: WorkerEvent): void {
    switch (e.t) {
      case "ready":
        this.onReady?.();
        return;
      case "request":
        void this.decide(e.lid, e.sid, e.request);
        return;
      case "spawned":
        log.debug("escalated program spawned", { listener: e.lid, session: e.sid, pid: e.pid });
        return;
      case "exited":
        log.debug("escalated program exited", { listener: e.lid, session: e.sid, pid: e.pid });
        this.placement.observe?.({ t: "program-ended", session: e.sid });
        return;
      case "session-error":
        log.warn("escalate session failed", { listener: e.lid, session: e.sid, error: e.message });
        return;
      case "room-ended":
        this.placement.observe?.({ t: "room-ended", listener: e.lid, room: e.rid });
        return;
      case "unlistened": {
        this.placement.observe?.({ t: "listener-closed", listener: e.lid });
        const gate = this.listeners.get(e.lid)?.gate;
        // The worker has let go of the listener's output fd for good: its slot may serve another listener.
        if (gate !== undefined) this.gates.putBack(gate);
        this.listeners.delete(e.lid);
        this.unlistenWaiters.get(e.lid)?.();
        this.unlistenWaiters.delete(e.lid);
        return;
      }
      case "heap-released":
        for (const w of this.heapReleased.splice(0)) w();
        return;
      case "stopped":
        for (const w of this.heapReleased.splice(0)) w();
        this.placement.observe?.({ t: "stopped" });
        this.listeners.clear();
        for (const w of this.unlistenWaiters.values()) w();
        this.unlistenWaiters.clear();
        this.resolveStopped();
        return;
    }
  }

  /**
   * Answer request `raw` of session `sid` of listener `lid`: resolve it, ask the listener's `decide`, and for
   * `Escalate` place the program ({@link escalate}); the answer (and what to start) goes to the worker. Never
   * rejects: a failure denies the exec with its reason.
   */
  private async decide(lid: number, sid: number, raw: EscalateRequest): Promise<void> {
    const l = this.listeners.get(lid);
    let answer: Answer;
    try {
      if (l === undefined) throw new ShellmcpError("PROTOCOL", "request for a closed listener");
      const request = resolveRequest(raw);
      const { grant, ...wire } = await l.options.decide(request);
      // Decided after its run ended (a human answered late): the worker has ended the session with the listener.
      // Nothing is placed (a room for an ended call) nor sent (it would start a parked worker for nothing).
      if (!this.listeners.has(lid)) return log.debug("decided after its run ended: dropped", { listener: lid, session: sid });
      const action = wire as EscalateAction;
      answer = action.kind === "Escalate" ? await this.escalate(l, sid, request, action, grant) : { action };
      // The run ended while the placement ran: nothing is sent (the worker has ended the session), and what was placed
      // for it is given back now (its room would otherwise wait for a program that never starts).
      if (!this.listeners.has(lid)) return this.abandon(lid, sid, answer.spawn);
    } catch (err) {
      // Fail closed: a policy or client error denies the exec, and says why.
      const msg = err instanceof Error ? err.message : String(err);
      log.warn("escalation decision failed", { error: msg });
      answer = { action: { kind: "Deny", reason: `escalation policy error: ${msg}` } };
    }
    if (!this.stopped) this.command({ t: "decision", sid, action: answer.action, spawn: answer.spawn });
  }

  /**
   * What the placement set up for session `sid` of listener `lid`, which closed while it was placed, is given back: a
   * kept room this decision would have opened (its `start` comes with it) has ended — the worker, which would have
   * said so, never gets it (a room opened earlier is the worker's to end and report) — and the listener is closed
   * again for the placement, which settles what it placed for the listener since (this program's room).
   */
  private abandon(lid: number, sid: number, spawn: EscalateSpawn | undefined): void {
    log.debug("placed after its run ended: given back", { listener: lid, session: sid });
    if (spawn?.room?.start !== undefined) this.placement.observe?.({ t: "room-ended", listener: lid, room: spawn.room.rid });
    this.placement.observe?.({ t: "listener-closed", listener: lid });
  }

  /**
   * An `Escalate` decision (`action`, with the `grant` behind it) for session `sid`: asks the placement, once, where
   * the program runs. Placed `inside` the call's sandbox: answered `Run`, and the call's result says why
   * ({@link EscalationListener.notice}); else the `Escalate` with the spawn the worker starts. A placement that rejects
   * rejects here (the caller denies the exec).
   */
  private async escalate(
    l: EscalationListener,
    sid: number,
    request: ResolvedRequest,
    action: EscalateAction,
    grant?: Grant,
  ): Promise<Answer> {
    const placed = await this.placement.prepareEscalatedExec({
      listener: l.id,
      session: sid,
      request,
      boundary: l.options.boundary,
      ...(grant !== undefined ? { grant } : {}),
    });
    if ("inside" in placed) {
      l.notice(request.argv, placed.inside);
      return { action: { kind: "Run" } };
    }
    return { action, spawn: placed.spawn };
  }
}
