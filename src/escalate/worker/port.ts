/**
 * The real {@link WorkerPort} of the escalation server (../server.ts): the worker thread (./worker.ts) and this
 * side of its control socket, and the worker's parking (issue 40, idle memory).
 *
 * Parking: a Worker is a JavaScript runtime of its own, ~2.5 MiB of the server's anonymous memory even when it has
 * nothing to do. When the server has been idle long enough (../../serve.ts `IdleRelease`), {@link ParkingWorker.park}
 * asks the worker to end if nothing is open (no listener, no session, no kept room: the worker decides, from its own
 * table); the next command that needs a worker starts a new one (~3.5 ms, once, on the next call). What the worker
 * shares with main carries over: the output gates' buffer, the listener ids (main's), the session ids (each worker
 * goes on from where the parked one stopped: a late decision names no session of the next). Its own lifeline pipe
 * is closed when it parks (no guard of its thread runs then) and made again by the next worker.
 *
 * No command is lost and none reaches a worker that is ending: from the `park` command until the worker's answer
 * (`parked` or `park-refused`), commands are held here; then they go to the same worker (refused) or to a new one
 * (parked). While parked, a `release-heap` or `stop` needs no worker and is answered here (`heap-released`,
 * `stopped`); any other command starts one.
 */
import * as libc from "../../../ffi/libc.ts";
import { log } from "../../log.ts";
import { encodeFrame } from "../protocol/wire.ts";
import type { Command, WorkerEvent, WorkerPort } from "./messages.ts";

/**
 * The escalation worker at `url`, started again after each park. `gates`: the output gates' shared buffer
 * (./output-gate.ts), given to every worker. The constructor starts the first worker (throws when it cannot:
 * no thread, no socket).
 */
export class ParkingWorker implements WorkerPort {
  private worker: Worker | undefined;
  /** This side of the current worker's control socket (-1 when parked or closed). */
  private fd = -1;
  /** The worker's side, until the worker owns it (it closes it when it ends); closed here if it never started. */
  private theirs = -1;
  private state: "running" | "parking" | "parked" = "running";
  /** Commands sent while a `park` waits for its answer. */
  private readonly held: Command[] = [];
  private parkAnswer: ((parked: boolean) => void) | undefined;
  private onEvent: (e: WorkerEvent) => void = () => undefined;
  private onError: (message: string) => void = () => undefined;
  /**
   * The first session id the next worker gives out: where the parked one stopped (its `parked` event), so that a
   * decision main sends late for a session of a parked worker (its run ended while a human was asked) names no
   * session of the next one.
   */
  private nextSid = 1;
  /**
   * The listener sockets (each `listen`'s fd) sent to the current worker before it said `ready`: when it fails
   * before (a worker started again after a park that cannot start), nobody will ever read them, and a shell's
   * wrapper would wait on its handshake until the call's timeout; they are closed here instead, so that every exec
   * of that shell fails closed at once.
   */
  private unclaimed: number[] = [];
  /** Workers started after a park (for the log and the tests). */
  restarts = 0;

  constructor(
    private readonly url: string,
    private readonly gates: SharedArrayBuffer,
  ) {
    this.startWorker();
  }

  /** Start a worker with a new control socket. Throws when the socket or the Worker cannot be made. */
  private startWorker(): void {
    const [mine, theirs] = libc.socketpair(libc.SOCK.AF_UNIX, libc.SOCK.SOCK_STREAM | libc.SOCK.SOCK_CLOEXEC);
    let worker: Worker;
    try {
      // Not `smol`: it saves ~9 MiB of RSS but costs ~1 ms per intercepted exec in GC (bench/escalation.ts).
      worker = new Worker(this.url);
    } catch (e) {
      libc.closeQuiet(mine);
      libc.closeQuiet(theirs);
      throw e;
    }
    this.worker = worker;
    this.fd = mine;
    this.theirs = theirs;
    this.unclaimed = [];
    worker.onmessage = (ev: MessageEvent<WorkerEvent>) => this.onMessage(worker, ev.data);
    worker.onerror = (ev) => {
      if (this.worker !== worker) return;
      // Failed before it polled anything (no `ready`): the listeners it was sent are no one's.
      if (this.theirs >= 0) this.unclaimed.splice(0).forEach(libc.closeQuiet);
      if (this.restarts > 0 && this.theirs >= 0) return this.failedToStartAgain(worker, ev.message);
      this.parkAnswer?.(false);
      this.parkAnswer = undefined;
      this.onError(ev.message);
    };
    worker.postMessage({ controlFd: theirs, gates: this.gates, firstSid: this.nextSid });
  }

  private onMessage(worker: Worker, e: WorkerEvent): void {
    if (this.worker !== worker) return;
    if (e.t === "ready") {
      this.theirs = -1; // the worker polls it now, and closes it when it ends
      this.unclaimed = []; // and owns the listeners it was sent
    }
    if (e.t === "park-refused") return this.answerPark(false);
    if (e.t === "parked") {
      if (e.nextSid > this.nextSid) this.nextSid = e.nextSid;
      // Parked once the thread has ended: its runtime's teardown runs after this message, and the server gives back
      // the executable's code pages after the park (what the teardown touched would come back otherwise).
      let done = false;
      const ended = () => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        libc.closeQuiet(this.fd);
        this.fd = -1;
        this.worker = undefined;
        this.answerPark(true);
      };
      const timer = setTimeout(ended, ParkingWorker.END_WAIT_MS);
      worker.addEventListener("close", ended);
      return;
    }
    this.onEvent(e);
  }

  /**
   * A worker started again after a park failed before it said `ready` (a thread or fd limit, for a moment): parked
   * again, so that the next call tries anew rather than every later call being refused for the server's life. The
   * runs it was sent fail closed (their listeners are closed: each exec's wrapper fails).
   */
  private failedToStartAgain(worker: Worker, message: string): void {
    worker.terminate();
    libc.closeQuiet(this.fd);
    libc.closeQuiet(this.theirs);
    this.fd = this.theirs = -1;
    this.worker = undefined;
    this.state = "parked";
    log.warn("the escalation worker could not start again; its call's execs fail closed, the next call tries again", { message });
  }

  /** How long a parked worker's thread may take to end before it is taken as ended, ms. */
  static readonly END_WAIT_MS = 1000;

  /** The park's answer: the state it leaves, the promise resolved, the commands held meanwhile sent on. */
  private answerPark(parked: boolean): void {
    this.state = parked ? "parked" : "running";
    this.parkAnswer?.(parked);
    this.parkAnswer = undefined;
    for (const c of this.held.splice(0)) this.send(c);
  }

  /**
   * Send one command: held while a park waits for its answer. While parked, only a `listen` starts a new worker: a
   * parked worker had nothing open, so what any other command names is gone — `release-heap`, `stop` and `unlisten`
   * are answered here (`heap-released`, `stopped`, `unlistened`), `kill`, `release-output` and `decision` have
   * nothing to act on. Throws when a new worker cannot be started (the caller fails closed).
   */
  send(c: Command): void {
    if (this.state === "parking") {
      this.held.push(c);
      return;
    }
    if (this.state === "parked") {
      if (c.t !== "listen") return this.answerParked(c);
      this.startWorker();
      this.restarts++;
      log.debug("escalation worker started again (it was parked)", { restarts: this.restarts });
      this.state = "running";
      this.worker!.unref();
    }
    this.write(c);
  }

  /** What a parked worker would have said to `c` (any command but `listen`), said here. */
  private answerParked(c: Exclude<Command, { t: "listen" }>): void {
    const answer: WorkerEvent | undefined =
      c.t === "stop"
        ? { t: "stopped" }
        : c.t === "release-heap"
          ? { t: "heap-released" }
          : c.t === "unlisten"
            ? { t: "unlistened", lid: c.lid }
            : undefined; // kill, release-output, decision, park: nothing of theirs is left
    if (answer !== undefined) queueMicrotask(() => this.onEvent(answer));
  }

  private write(c: Command): void {
    if (c.t === "listen" && this.theirs >= 0) this.unclaimed.push(c.fd);
    const frame = encodeFrame(new TextEncoder().encode(JSON.stringify(c)));
    let sent = 0;
    while (sent < frame.byteLength) sent += libc.sendmsg(this.fd, frame.subarray(sent));
  }

  /**
   * Ask the worker to end if nothing is open: resolves true once it has (parked), false when something was open,
   * it is already parking (the first ask's answer comes first) or the worker failed. Never rejects.
   */
  park(): Promise<boolean> {
    if (this.state === "parked") return Promise.resolve(true);
    if (this.state === "parking") return Promise.resolve(false);
    this.write({ t: "park" });
    this.state = "parking";
    return new Promise((res) => (this.parkAnswer = res));
  }

  connect(onEvent: (e: WorkerEvent) => void, onError: (message: string) => void): void {
    this.onEvent = onEvent;
    this.onError = onError;
  }

  /** Let the process exit while only the current worker runs (as every later one does). */
  unref(): void {
    this.worker?.unref();
  }

  terminate(): void {
    this.worker?.terminate();
  }

  close(): void {
    libc.closeQuiet(this.fd);
    this.fd = -1;
    if (this.theirs >= 0) libc.closeQuiet(this.theirs); // the worker never took it
    this.theirs = -1;
  }
}
