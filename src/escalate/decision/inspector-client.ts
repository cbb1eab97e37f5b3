/**
 * Main-thread side of the decision inspector (./inspector.ts): sends each `Escalate` decision's inspection to the
 * inspector Worker and waits at most {@link INSPECT_DEADLINE_MS}. The main thread never reads a file a sandbox
 * could have written (issue 34, item 1): a FIFO, a huge file or a hung filesystem under a writable root can cost
 * one decision, never the server.
 *
 * On a deadline the decision fails closed (the caller runs the program inside the call's sandbox and says why),
 * the wedged worker is terminated and a fresh one is started for the next decision. The worker starts on the first
 * escalation (most calls never escalate: no cost for them).
 */
import { log } from "../../log.ts";
import { workerUrl } from "../../self.ts";
import type { InspectReply, InspectRequest } from "./inspector.ts";

/** How long one inspection may take before its decision fails closed, ms (a normal one takes well under 5 ms). */
export const INSPECT_DEADLINE_MS = 3_000;

/** What {@link Inspector.inspect} resolves to: the worker's reply, or why there is none. */
export type InspectOutcome = InspectReply | { id: number; ok: false; error: string; timedOut: true };

/** One inspector worker, restarted after a deadline. */
export class Inspector {
  private worker: Worker | undefined;
  private nextId = 1;
  /** Inspections in flight: how to answer each, its deadline, what was asked, and which worker has it. */
  private readonly pending = new Map<number, { resolve: (r: InspectOutcome) => void; timer: Timer; req: InspectRequest; worker: Worker }>();

  /**
   * @param deadlineMs the deadline of each inspection (tests shorten it).
   * @param url the worker's URL (tests); by default the copy embedded in the executable (../../self.ts).
   */
  constructor(
    private readonly deadlineMs: number = INSPECT_DEADLINE_MS,
    private readonly url?: string,
  ) {}

  private current(): Worker {
    if (this.worker !== undefined) return this.worker;
    const w = new Worker(this.url ?? workerUrl("escalate/decision/inspector"));
    w.onmessage = (ev: MessageEvent<InspectReply>) => this.answer(ev.data.id, ev.data);
    w.onerror = (ev) => {
      log.error("decision inspector failed; restarting it", { message: ev.message });
      this.retire(w);
      for (const [id, p] of this.pending) if (p.worker === w) this.answer(id, failed(id, `the decision inspector failed: ${ev.message}`));
    };
    w.unref();
    this.worker = w;
    return w;
  }

  private answer(id: number, r: InspectOutcome): void {
    const p = this.pending.get(id);
    if (p === undefined) return;
    clearTimeout(p.timer);
    this.pending.delete(id);
    p.resolve(r);
  }

  /** Terminate `w` (wedged or failed); the next inspection starts a new worker. */
  private retire(w: Worker): void {
    if (this.worker === w) this.worker = undefined;
    w.terminate();
  }

  /**
   * Inspection `id` missed its deadline: it fails closed, its worker is replaced, and the other inspections that
   * worker held are sent again to the new one (one wedged decision never fails another call's).
   */
  private expire(id: number): void {
    const p = this.pending.get(id);
    if (p === undefined) return;
    log.warn("decision inspection timed out: a file under a writable root blocked it; the worker is replaced", {
      file: p.req.request.file,
      deadline_ms: this.deadlineMs,
    });
    this.answer(
      id,
      failed(
        id,
        `inspecting the program and its repository took longer than ${this.deadlineMs} ms (a file under a writable root blocked it)`,
      ),
    );
    const wedged = p.worker;
    this.retire(wedged);
    for (const q of this.pending.values()) {
      if (q.worker !== wedged) continue;
      q.worker = this.current();
      q.worker.postMessage(q.req);
    }
  }

  /** Inspect one decision (see ./inspector.ts); never rejects. */
  inspect(request: Omit<InspectRequest, "id">): Promise<InspectOutcome> {
    const id = this.nextId++;
    const req: InspectRequest = { ...request, id };
    return new Promise((resolve) => {
      const worker = this.current();
      const timer = setTimeout(() => this.expire(id), this.deadlineMs);
      this.pending.set(id, { resolve, timer, req, worker });
      worker.postMessage(req);
    });
  }

  /**
   * The server is idle: end the worker when no inspection is in flight (its thread is ~2 MiB of the server's memory,
   * issue 40); the next inspection starts a new one. Returns whether no worker runs now.
   */
  park(): boolean {
    if (this.pending.size > 0) return false;
    if (this.worker !== undefined) this.retire(this.worker);
    return true;
  }

  /** Stop the worker (pending inspections fail closed). */
  stop(): void {
    for (const id of [...this.pending.keys()]) this.answer(id, failed(id, "the escalation server stopped"));
    if (this.worker !== undefined) this.retire(this.worker);
  }
}

function failed(id: number, error: string): InspectOutcome {
  return { id, ok: false, error, timedOut: true };
}
