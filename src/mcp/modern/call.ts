/**
 * One `tools/call` of the modern era across the requests that carry it (the first, and each retry): the approvals
 * its command asked and where they stand, its abort signal, and its result. Knows no table: ./parking.ts parks and
 * resumes calls, ./tasks.ts turns them into tasks.
 */
import type { ElicitRequestFormParams, InputRequests } from "@modelcontextprotocol/server";
import { log } from "../../log.ts";
import type { ElicitAnswer } from "../elicitation.ts";
import { isObject } from "./envelope.ts";

/** A tool call's result (../server.ts `ToolResult`). */
export interface Result {
  content: unknown[];
  isError: boolean;
}

/** A call's outcome: its result, or the error it failed with (never both). */
export interface Outcome {
  result?: Result;
  error?: unknown;
}

/** One approval asked by a call's command: the form (message, JSON Schema), and how to answer it. */
export interface Asked {
  message: string;
  requestedSchema: Record<string, unknown>;
  answer: (a: ElicitAnswer) => void;
}

/** How an approval is asked elsewhere once its call was answered (a session's next request). */
export type LateAsk = (message: string, requestedSchema: Record<string, unknown>) => Promise<ElicitAnswer>;

/**
 * The session a call of `name` with `args` concerns: `write_stdin`'s `session_id` (a safe integer; Codex's unified
 * exec, ../unified-exec.ts), else none.
 */
export function sessionOfCall(name: string, args: Record<string, unknown> | undefined): number | undefined {
  const id = args?.session_id;
  return name === "write_stdin" && typeof id === "number" && Number.isSafeInteger(id) ? id : undefined;
}

/** One `tools/call` of the modern era, across the requests (the first, and each retry) that carry it. */
export class ModernCall {
  readonly controller = new AbortController();
  /** Approvals asked and not yet sent to the client, by key (`approval-N`). */
  readonly pending = new Map<string, Asked>();
  /** Approvals sent in an `input_required` result (or a task's `inputRequests`), awaiting the client's answer. */
  readonly awaiting = new Map<string, Asked>();
  /** The JSON-RPC request that carries the call now (`undefined` while parked or as a task). */
  current: { id: string | number; progressToken?: string | number } | undefined;
  /** Set once the call's result has been sent (or the call was ended). */
  finished = false;
  private nextKey = 1;
  private wake: (() => void) | undefined;
  /** While parked: resolved when the call is retried (`true`) or ended (`false`). */
  private gate: { promise: Promise<boolean>; open: (carried: boolean) => void } | undefined;
  /** The command's outcome (never rejects: an error is its value). */
  done!: Promise<Outcome>;
  /**
   * Where approvals go once this call was answered: an `exec_command` whose command lives on as a session hands
   * them to the era, which asks them on the next request about that session (undefined: denied).
   */
  late: LateAsk | undefined;

  constructor(
    readonly name: string,
    readonly digest: string,
    /** The session this call concerns (`write_stdin`'s), see {@link sessionOfCall}. */
    readonly session?: number,
  ) {}

  /** Whether nobody can answer on this call any more (its result sent, or it was ended). */
  get over(): boolean {
    return this.finished || this.controller.signal.aborted;
  }

  /** Ask the human (the command waits at its exec until answered); after the call ended: {@link late}, or denied. */
  ask(message: string, requestedSchema: Record<string, unknown>): Promise<ElicitAnswer> {
    if (this.over && this.late !== undefined) return this.late(message, requestedSchema);
    if (this.over) {
      // Nobody can answer any more (the call's result was sent): denied, never run unasked.
      log.notice("approval asked after the call ended: denied", { message });
      return Promise.resolve({ action: "cancel" });
    }
    return new Promise((answer) => {
      this.pending.set(`approval-${this.nextKey++}`, { message, requestedSchema, answer });
      this.wake?.();
    });
  }

  /** Wake {@link asked}'s waiter when approvals are pending (after answers left some unanswered). */
  poke(): void {
    if (this.pending.size > 0) this.wake?.();
  }

  /** Resolves once an approval is pending (at once if one already is). */
  asked(): Promise<void> {
    if (this.pending.size > 0) return Promise.resolve();
    return new Promise((res) => {
      this.wake = () => {
        this.wake = undefined;
        res();
      };
    });
  }

  /** The call is parked (its request answered `input_required`): {@link carried} waits until it is retried or ended. */
  parked(): void {
    this.current = undefined;
    if (this.gate !== undefined) return;
    let open!: (carried: boolean) => void;
    const promise = new Promise<boolean>((r) => (open = r));
    this.gate = { promise, open };
  }

  /** The parked call is retried: a request carries it again. */
  unparked(): void {
    this.gate?.open(true);
    this.gate = undefined;
  }

  /**
   * Whether the call's result will reach the client: `true` at once unless it is parked or ended; while parked,
   * once it is retried (`true`, re-checked: it may be parked again) or ended (`false`).
   */
  async carried(): Promise<boolean> {
    while (this.gate !== undefined && !this.controller.signal.aborted) await this.gate.promise;
    return !this.controller.signal.aborted;
  }

  /** End the call: finished, its command aborted, every approval (awaited, then pending) denied. */
  end(): void {
    this.gate?.open(false);
    this.gate = undefined;
    this.finished = true;
    this.controller.abort();
    for (const a of [...this.awaiting.values(), ...this.pending.values()]) a.answer({ action: "cancel" });
    this.awaiting.clear();
    this.pending.clear();
  }

  /**
   * Move the pending approvals to the awaited ones; returns their `inputRequests` (key → `elicitation/create` form
   * request; the forms' schemas are ../elicitation.ts's, checked against the SDK's by the fast tier).
   */
  publish(): InputRequests {
    const inputRequests: InputRequests = {};
    for (const [key, asked] of this.pending) {
      this.pending.delete(key);
      this.awaiting.set(key, asked);
      inputRequests[key] = {
        method: "elicitation/create",
        params: {
          mode: "form",
          message: asked.message,
          requestedSchema: asked.requestedSchema as ElicitRequestFormParams["requestedSchema"],
        },
      };
    }
    return inputRequests;
  }

  /** Give the awaited approvals their answers from `inputResponses`; one without an answer is pending again. */
  resume(responses: unknown): void {
    const r = isObject(responses) ? responses : {};
    for (const [key, asked] of this.awaiting) {
      this.awaiting.delete(key);
      const answer = toAnswer(r[key], asked.requestedSchema);
      if (answer === undefined) this.pending.set(key, asked);
      else asked.answer(answer);
    }
  }
}

/**
 * An `ElicitResult` from a retry's `inputResponses`, or `undefined` when it is missing or not one. Accepted content
 * keeps only the fields the form asked for (`schema.properties`) with primitive values: a client cannot add a field
 * the human was not shown (e.g. `always_allow` to a prompt rule's form, which offers none).
 */
export function toAnswer(v: unknown, schema: Record<string, unknown>): ElicitAnswer | undefined {
  if (!isObject(v)) return undefined;
  if (v.action === "accept") {
    if (!isObject(v.content)) return { action: "accept" };
    const asked = isObject(schema.properties) ? schema.properties : {};
    const content: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v.content))
      if (Object.hasOwn(asked, k) && ["string", "number", "boolean"].includes(typeof x)) content[k] = x;
    return { action: "accept", content };
  }
  if (v.action === "decline" || v.action === "cancel") return { action: v.action };
  return undefined;
}
