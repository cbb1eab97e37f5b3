/**
 * The modern era (src/mcp/modern.ts) driven in-process for the fast tier: a fake clock (time jumps, timers fire in
 * order, no real waiting), a fake runner (each tool call is a {@link Run} the test ends or makes ask for approval),
 * and a client that sends requests with the 2026-07-28 envelope and awaits their answers (event-driven).
 */
import type { ElicitAnswer } from "../../src/mcp/elicitation.ts";
import { type ModernToolContext, ModernEra, type ModernEraOptions } from "../../src/mcp/modern.ts";
import type { Clock, TimerHandle } from "../../src/mcp/modern/clock.ts";

/** A clock whose time moves only by {@link FakeClock.advance}; timers due by then fire in order of due time. */
export class FakeClock implements Clock {
  private t = 1_800_000_000_000;
  private timers: { at: number; fn: () => void; live: boolean }[] = [];

  now(): number {
    return this.t;
  }

  setTimer(fn: () => void, ms: number): TimerHandle {
    const timer = { at: this.t + ms, fn, live: true };
    this.timers.push(timer);
    return { cancel: () => void (timer.live = false) };
  }

  /** Timers set and neither fired nor cancelled. */
  get live(): number {
    return this.timers.filter((x) => x.live).length;
  }

  /** Move time on by `ms`, firing each timer due meanwhile (at its due time). */
  advance(ms: number): void {
    const target = this.t + ms;
    for (;;) {
      const due = this.timers.filter((x) => x.live && x.at <= target).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      due.live = false;
      this.t = due.at;
      due.fn();
    }
    this.t = target;
  }
}

/** One tool call as the fake runner sees it: its arguments and context, and how the test ends it. */
export interface Run {
  name: string;
  args: Record<string, unknown> | undefined;
  ctx: ModernToolContext;
  /** End the call with a text result (and `structuredContent`, when given). */
  finish(text: string, structuredContent?: Record<string, unknown>): void;
  /** Fail the call. */
  fail(e: unknown): void;
  /** Ask the human (as the escalation decision does); the answer the client gives. */
  ask(message?: string): Promise<ElicitAnswer>;
}

/** The form an approval asks with (src/mcp/elicitation.ts's shape: a reason the human may give). */
export const FORM = { type: "object", properties: { reason: { type: "string", title: "Reason" } } };

/** A JSON-RPC message the era sent. */
export type Sent = Record<string, unknown> & { id?: string | number; result?: Record<string, unknown>; error?: Record<string, unknown> };

/** Client capabilities: elicitation (form), and the tasks extension when `tasks`. */
export function caps(o: { elicit?: boolean; tasks?: boolean } = {}): Record<string, unknown> {
  return {
    ...(o.elicit === false ? {} : { elicitation: {} }),
    ...(o.tasks === true ? { extensions: { "io.modelcontextprotocol/tasks": {} } } : {}),
  };
}

/** A modern era over a fake clock and runner. */
export function fakeEra(o: Partial<ModernEraOptions> = {}) {
  const clock = new FakeClock();
  const sent: Sent[] = [];
  const runs: Run[] = [];
  const sentWaiters: (() => void)[] = [];
  const runWaiters: (() => void)[] = [];
  const tools = [{ name: "shell" }, { name: "exec_command" }, { name: "write_stdin" }];
  const era = new ModernEra({
    name: "shellmcp",
    version: "0.0.0-test",
    instructions: "test",
    tools,
    onSandboxState: () => {},
    send: (m) => {
      sent.push(m);
      for (const w of sentWaiters.splice(0)) w();
    },
    callTool: (name, args, ctx) =>
      new Promise((resolve, reject) => {
        runs.push({
          name,
          args,
          ctx,
          finish: (text, structuredContent) =>
            resolve({ content: [{ type: "text", text }], isError: false, ...(structuredContent && { structuredContent }) }),
          fail: reject,
          ask: (message = "Allow the command?") => ctx.elicit!(message, FORM),
        });
        for (const w of runWaiters.splice(0)) w();
      }),
    parkedTimeoutMs: 60_000,
    taskAfterMs: 5_000,
    clock,
    ...o,
  });
  let nextId = 1;
  /** The message answering request `id`, once sent. */
  const answerTo = async (id: string | number): Promise<Sent> => {
    for (;;) {
      const m = sent.find((x) => x.id === id);
      if (m !== undefined) return m;
      await new Promise<void>((r) => sentWaiters.push(r));
    }
  };
  /** Send a request; returns its id. */
  const send = (method: string, params: Record<string, unknown> = {}, c = caps()): number => {
    const id = nextId++;
    const _meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": c,
      ...(params._meta as object),
    };
    era.handle({ id, method, params: { ...params, _meta } });
    return id;
  };
  return {
    era,
    clock,
    sent,
    runs,
    send,
    answerTo,
    /** Send a request and await its answer. */
    request: (method: string, params: Record<string, unknown> = {}, c = caps()) => answerTo(send(method, params, c)),
    /** The `n`th run (0-based), once the runner got it. */
    async run(n: number): Promise<Run> {
      while (runs[n] === undefined) await new Promise<void>((r) => runWaiters.push(r));
      return runs[n];
    },
  };
}

/**
 * Yield macrotask turns until `cond` holds (at most 50: the era gathers approvals over one turn, so a few suffice);
 * throws when it never does. Not a timer standing in for a wait: no time is assumed to pass.
 */
export async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 50; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 0));
  }
  throw new Error("condition not reached");
}

/** One macrotask turn: every promise already settled has run its reactions (no time is assumed to pass). */
export function turn(): Promise<void> {
  return new Promise((r) => setTimeout(r, 0));
}
