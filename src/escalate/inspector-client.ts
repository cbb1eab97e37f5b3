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
import { log } from "../log.ts";
import { workerUrl } from "../self.ts";
import type { InspectReply, InspectRequest } from "./inspector.ts";

/** How long one inspection may take before its decision fails closed, ms (a normal one takes well under 5 ms). */
export const INSPECT_DEADLINE_MS = 3_000;

/** What {@link Inspector.inspect} resolves to: the worker's reply, or why there is none. */
export type InspectOutcome = InspectReply | { id: number; ok: false; error: string; timedOut: true };

/** One inspector worker, restarted after a deadline. */
export class Inspector {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: InspectOutcome) => void; timer: Timer }>();

  /**
   * @param deadlineMs the deadline of each inspection (tests shorten it).
   * @param url the worker's URL (tests); by default the copy embedded in the executable (../self.ts).
   */
  constructor(
    private readonly deadlineMs: number = INSPECT_DEADLINE_MS,
    private readonly url?: string,
  ) {}

  private start(): Worker {
    const w = new Worker(this.url ?? workerUrl("escalate/inspector"));
    w.onmessage = (ev: MessageEvent<InspectReply>) => {
      const p = this.pending.get(ev.data.id);
      if (p === undefined) return;
      clearTimeout(p.timer);
      this.pending.delete(ev.data.id);
      p.resolve(ev.data);
    };
    w.onerror = (ev) => {
      log.error("decision inspector failed; restarting it", { message: ev.message });
      this.abandon(w, `the decision inspector failed: ${ev.message}`);
    };
    w.unref();
    return w;
  }

  /** Fail every pending inspection of `w` and let the next inspection start a new worker. */
  private abandon(w: Worker, reason: string): void {
    if (this.worker !== w) return;
    this.worker = undefined;
    w.terminate();
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.resolve({ id, ok: false, error: reason, timedOut: true });
    }
    this.pending.clear();
  }

  /** Inspect one decision (see ./inspector.ts); never rejects. */
  inspect(req: Omit<InspectRequest, "id">): Promise<InspectOutcome> {
    const id = this.nextId++;
    const w = (this.worker ??= this.start());
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        log.warn("decision inspection timed out: a file under a writable root blocked it; the worker is replaced", {
          file: req.request.file,
          deadline_ms: this.deadlineMs,
        });
        this.abandon(
          w,
          `inspecting the program and its repository took longer than ${this.deadlineMs} ms (a file under a writable root blocked it)`,
        );
      }, this.deadlineMs);
      this.pending.set(id, { resolve, timer });
      w.postMessage({ ...req, id } satisfies InspectRequest);
    });
  }

  /** Stop the worker (pending inspections fail closed). */
  stop(): void {
    if (this.worker !== undefined) this.abandon(this.worker, "the escalation server stopped");
  }
}
