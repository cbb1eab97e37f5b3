/**
 * The modern era's state machine in the fast tier (issue 42): parked execs (redeem once, replay, expiry, refusal
 * reasons), the session backlog, tasks, and cancellation, driven by a fake runner and a fake clock
 * (test/helpers/modern-fake.ts) — no process, no timers standing in for waits.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { log } from "../../src/log.ts";
import { caps, fakeEra, turn, until } from "../helpers/modern-fake.ts";

const PARKED_MS = 60_000;
const REFUSED = { code: -32602, message: "Invalid or expired requestState", data: { reason: "invalid_request_state" } };

/** The reasons logged for refused request states, and every log line's data (to check no state is in them). */
function watchRefusals() {
  const spy = spyOn(log, "warn").mockImplementation(() => {});
  return {
    reasons: () => spy.mock.calls.filter(([m]) => m === "refused a requestState").map(([, d]) => (d as { reason: string }).reason),
    logged: () => JSON.stringify(spy.mock.calls),
    restore: () => spy.mockRestore(),
  };
}

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

/** Start a `shell` call whose command asks one approval; returns the parked answer and the run. */
async function parked(f: ReturnType<typeof fakeEra>, args: Record<string, unknown> = { command: "touch x" }) {
  const id = f.send("tools/call", { name: "shell", arguments: args });
  const run = await f.run(f.runs.length);
  const answer = run.ask();
  const first = (await f.answerTo(id)).result as { resultType: string; inputRequests: Record<string, unknown>; requestState: string };
  return { run, answer, first };
}

describe("parked execs", () => {
  test("an approval parks the exec: input_required with the form; the retry's answer resumes the same run, redeemed once", async () => {
    const f = fakeEra();
    const { run, answer, first } = await parked(f);
    expect(first.resultType).toBe("input_required");
    expect(first.inputRequests).toEqual({
      "approval-1": {
        method: "elicitation/create",
        params: { mode: "form", message: "Allow the command?", requestedSchema: expect.any(Object) },
      },
    });
    const retry = f.send("tools/call", {
      name: "shell",
      arguments: { command: "touch x" },
      requestState: first.requestState,
      inputResponses: { "approval-1": { action: "accept", content: { reason: "ok", always_allow: true } } },
    });
    // The form offers no always_allow: the client cannot add it.
    expect(await answer).toEqual({ action: "accept", content: { reason: "ok" } });
    run.finish("done");
    expect((await f.answerTo(retry)).result).toMatchObject({ resultType: "complete", content: [{ type: "text", text: "done" }] });
    expect(f.runs).toHaveLength(1);
  });

  test("refused states are logged with an opaque reason — malformed, mac, expired, bind, used — never their content", async () => {
    const w = watchRefusals();
    restore = w.restore;
    const f = fakeEra();
    const { run, answer, first } = await parked(f);
    const [v, body, mac] = first.requestState.split(".");
    const payload = JSON.parse(Buffer.from(body!, "base64url").toString()) as { e: number };
    const retry = (requestState: unknown, args: Record<string, unknown> = { command: "touch x" }) =>
      f.request("tools/call", { name: "shell", arguments: args, requestState, inputResponses: { "approval-1": { action: "accept" } } });
    expect((await retry("v1.e30")).error).toEqual(REFUSED);
    expect((await retry(42)).error).toEqual(REFUSED);
    expect(
      (await retry(`${v}.${Buffer.from(JSON.stringify({ ...payload, e: payload.e + 1 })).toString("base64url")}.${mac}`)).error,
    ).toEqual(REFUSED);
    expect((await retry(first.requestState, { command: "touch other" })).error).toEqual(REFUSED);
    expect(w.reasons()).toEqual(["malformed", "malformed", "mac", "bind"]);
    // None of those consumed the parked exec: the genuine retry resumes it.
    const ok = f.send("tools/call", {
      name: "shell",
      arguments: { command: "touch x" },
      requestState: first.requestState,
      inputResponses: { "approval-1": { action: "accept" } },
    });
    expect((await answer).action).toBe("accept");
    run.finish("done");
    expect((await f.answerTo(ok)).result).toMatchObject({ resultType: "complete" });
    // Replayed: used.
    expect((await retry(first.requestState)).error).toEqual(REFUSED);
    // A state of an exec that timed out: expired (and its exec was ended).
    const second = await parked(f, { command: "touch y" });
    f.clock.advance(PARKED_MS);
    expect(await second.answer).toEqual({ action: "cancel" });
    expect(second.run.ctx.signal.aborted).toBe(true);
    expect((await retry(second.first.requestState, { command: "touch y" })).error).toEqual(REFUSED);
    expect(w.reasons()).toEqual(["malformed", "malformed", "mac", "bind", "used", "expired"]);
    expect(w.logged()).not.toContain(body!);
    expect(w.logged()).not.toContain(mac!);
    expect(w.logged()).not.toContain(second.first.requestState.split(".")[1]!);
  });

  test("a state is good until just before its expiry, and the exec is ended at it", async () => {
    const f = fakeEra();
    const { run, answer, first } = await parked(f);
    f.clock.advance(PARKED_MS - 1);
    expect(run.ctx.signal.aborted).toBe(false);
    const retry = f.send("tools/call", {
      name: "shell",
      arguments: { command: "touch x" },
      requestState: first.requestState,
      inputResponses: { "approval-1": { action: "decline" } },
    });
    expect(await answer).toEqual({ action: "decline" });
    f.clock.advance(PARKED_MS); // the parked timer was stopped: nothing is ended
    expect(run.ctx.signal.aborted).toBe(false);
    run.finish("denied");
    expect((await f.answerTo(retry)).result).toMatchObject({ resultType: "complete" });
    expect(f.clock.live).toBe(0);
  });

  test("carried: at once while a request carries the call; while parked, true on the retry and false when it expires", async () => {
    const f = fakeEra();
    const { run, answer, first } = await parked(f);
    let verdict: boolean | undefined;
    void run.ctx.carried!().then((v) => (verdict = v));
    await turn();
    expect(verdict).toBeUndefined(); // parked: a write_stdin drains nothing yet
    f.send("tools/call", {
      name: "shell",
      arguments: { command: "touch x" },
      requestState: first.requestState,
      inputResponses: { "approval-1": { action: "accept" } },
    });
    await answer;
    await turn();
    expect(verdict).toBe(true);
    const second = await parked(f, { command: "touch y" });
    void second.run.ctx.carried!().then((v) => (verdict = v));
    await turn();
    f.clock.advance(PARKED_MS);
    await second.answer;
    await turn();
    expect(verdict).toBe(false); // ended unanswered: the session's output and end stay for the next call
    expect(await second.run.ctx.carried!()).toBe(false);
  });

  test("a retry without the answer is asked again under a new state; approvals asked together go out together", async () => {
    const f = fakeEra();
    const id = f.send("tools/call", { name: "shell", arguments: { command: "a & b" } });
    const run = await f.run(0);
    const a = run.ask("a?");
    const b = run.ask("b?");
    const first = (await f.answerTo(id)).result as { inputRequests: Record<string, unknown>; requestState: string };
    expect(Object.keys(first.inputRequests)).toEqual(["approval-1", "approval-2"]);
    const again = (
      await f.request("tools/call", {
        name: "shell",
        arguments: { command: "a & b" },
        requestState: first.requestState,
        inputResponses: { "approval-1": { action: "accept" } },
      })
    ).result as typeof first & { resultType: string };
    expect(await a).toEqual({ action: "accept" });
    expect(again.resultType).toBe("input_required");
    expect(Object.keys(again.inputRequests)).toEqual(["approval-2"]);
    expect(again.requestState).not.toBe(first.requestState);
    const done = f.send("tools/call", {
      name: "shell",
      arguments: { command: "a & b" },
      requestState: again.requestState,
      inputResponses: { "approval-2": { action: "cancel" } },
    });
    expect(await b).toEqual({ action: "cancel" });
    run.finish("one ran");
    expect((await f.answerTo(done)).result).toMatchObject({ resultType: "complete" });
  });

  test("a client without elicitation is never asked (the runner gets no elicit)", async () => {
    const f = fakeEra();
    const id = f.send("tools/call", { name: "shell", arguments: { command: "x" } }, caps({ elicit: false }));
    const run = await f.run(0);
    expect(run.ctx.elicit).toBeUndefined();
    run.finish("denied");
    expect((await f.answerTo(id)).result).toMatchObject({ resultType: "complete" });
  });
});

describe("the session backlog", () => {
  /** An exec_command answered while its command lives on as session 7; returns its run. */
  async function session(f: ReturnType<typeof fakeEra>) {
    const id = f.send("tools/call", { name: "exec_command", arguments: { cmd: "sh" } });
    const run = await f.run(0);
    run.ctx.session!(7);
    run.finish("Process running with session ID 7");
    expect((await f.answerTo(id)).result).toMatchObject({ resultType: "complete" });
    return run;
  }

  test("an approval after the call was answered waits for the next write_stdin, whose write waits for the answer", async () => {
    const f = fakeEra();
    const exec = await session(f);
    const late = exec.ask("late?");
    const id = f.send("tools/call", { name: "write_stdin", arguments: { session_id: 7, chars: "y\n" } });
    const first = (await f.answerTo(id)).result as { resultType: string; inputRequests: Record<string, unknown>; requestState: string };
    expect(first.resultType).toBe("input_required");
    expect(Object.keys(first.inputRequests)).toEqual(["approval-1"]);
    expect(f.runs).toHaveLength(1); // the write is not made yet
    const retry = f.send("tools/call", {
      name: "write_stdin",
      arguments: { session_id: 7, chars: "y\n" },
      requestState: first.requestState,
      inputResponses: { "approval-1": { action: "accept" } },
    });
    expect(await late).toEqual({ action: "accept" });
    const write = await f.run(1);
    write.finish("y");
    expect((await f.answerTo(retry)).result).toMatchObject({ resultType: "complete" });
  });

  test("a late approval with no request about its session is denied after the timeout", async () => {
    const f = fakeEra();
    const exec = await session(f);
    const late = exec.ask();
    f.clock.advance(PARKED_MS - 1);
    let settled = false;
    void late.then(() => (settled = true));
    await turn();
    expect(settled).toBe(false);
    f.clock.advance(1);
    expect(await late).toEqual({ action: "cancel" });
    // The next write_stdin carries nothing and writes at once.
    const id = f.send("tools/call", { name: "write_stdin", arguments: { session_id: 7, chars: "" } });
    (await f.run(1)).finish("");
    expect((await f.answerTo(id)).result).toMatchObject({ resultType: "complete" });
  });

  test("a write_stdin answered input_required and never retried: the approval is denied and the write never made", async () => {
    const f = fakeEra();
    const exec = await session(f);
    const late = exec.ask();
    const id = f.send("tools/call", { name: "write_stdin", arguments: { session_id: 7, chars: "rm\n" } });
    expect(((await f.answerTo(id)).result as { resultType: string }).resultType).toBe("input_required");
    f.clock.advance(PARKED_MS);
    expect(await late).toEqual({ action: "cancel" });
    await until(() => f.clock.live === 0);
    expect(f.runs).toHaveLength(1);
  });

  test("an approval met while a write_stdin is in flight is asked on it", async () => {
    const f = fakeEra();
    const exec = await session(f);
    const id = f.send("tools/call", { name: "write_stdin", arguments: { session_id: 7, chars: "go\n" } });
    await f.run(1);
    const late = exec.ask("during");
    const first = (await f.answerTo(id)).result as { resultType: string; requestState: string };
    expect(first.resultType).toBe("input_required");
    const retry = f.send("tools/call", {
      name: "write_stdin",
      arguments: { session_id: 7, chars: "go\n" },
      requestState: first.requestState,
      inputResponses: { "approval-1": { action: "decline" } },
    });
    expect(await late).toEqual({ action: "decline" });
    f.runs[1]!.finish("");
    expect((await f.answerTo(retry)).result).toMatchObject({ resultType: "complete" });
  });
});

describe("tasks", () => {
  /** A call of a tasks client that outlives taskAfterMs: its CreateTaskResult and run. */
  async function task(f: ReturnType<typeof fakeEra>) {
    const id = f.send("tools/call", { name: "shell", arguments: { command: "make" } }, caps({ tasks: true }));
    const run = await f.run(0);
    f.clock.advance(5_000);
    const created = (await f.answerTo(id)).result as { resultType: string; taskId: string; status: string };
    expect(created).toMatchObject({ resultType: "task", status: "working", ttlMs: 600_000, pollIntervalMs: 1000 });
    return { run, taskId: created.taskId };
  }
  const get = async (f: ReturnType<typeof fakeEra>, taskId: string) =>
    (await f.request("tasks/get", { taskId }, caps({ tasks: true }))).result as Record<string, unknown>;

  test("a call still running after taskAfterMs becomes a task; its approval is answered by tasks/update; its result by tasks/get", async () => {
    const f = fakeEra();
    const { run, taskId } = await task(f);
    const answer = run.ask();
    let view: Record<string, unknown> = {};
    for (let i = 0; i < 5 && view.status !== "input_required"; i++) {
      await turn();
      view = await get(f, taskId);
    }
    expect(view).toMatchObject({ status: "input_required", inputRequests: { "approval-1": { method: "elicitation/create" } } });
    await f.request("tasks/update", { taskId, inputResponses: { "approval-1": { action: "accept" } } });
    expect(await answer).toEqual({ action: "accept" });
    expect(await get(f, taskId)).toMatchObject({ status: "working" });
    run.finish("built");
    await turn();
    expect(await get(f, taskId)).toMatchObject({
      status: "completed",
      resultType: "complete",
      result: { resultType: "complete", content: [{ type: "text", text: "built" }] },
    });
    // Kept for its ttl, then gone.
    f.clock.advance(600_000);
    expect((await f.request("tasks/get", { taskId })).error).toMatchObject({ code: -32602, message: "Unknown or expired taskId" });
  });

  test("a task's approval nobody answers cancels the task and ends its command; a failed call is a failed task", async () => {
    const f = fakeEra();
    const { run, taskId } = await task(f);
    const answer = run.ask();
    let view: Record<string, unknown> = {};
    for (let i = 0; i < 5 && view.status !== "input_required"; i++) {
      await turn();
      view = await get(f, taskId);
    }
    expect(view.status).toBe("input_required");
    f.clock.advance(PARKED_MS);
    expect(await answer).toEqual({ action: "cancel" });
    expect(run.ctx.signal.aborted).toBe(true);
    expect(await get(f, taskId)).toMatchObject({ status: "cancelled" });
    const second = fakeEra();
    const t2 = await task(second);
    t2.run.fail(new Error("spawn failed"));
    await turn();
    expect(await get(second, t2.taskId)).toMatchObject({ status: "failed", error: { code: -32603, message: "spawn failed" } });
  });

  test("tasks/cancel ends the command and denies its approvals; an unknown task id is -32602", async () => {
    const f = fakeEra();
    const { run, taskId } = await task(f);
    const answer = run.ask();
    expect((await f.request("tasks/cancel", { taskId })).result).toMatchObject({ resultType: "complete" });
    expect(run.ctx.signal.aborted).toBe(true);
    expect(await answer).toEqual({ action: "cancel" });
    expect(await get(f, taskId)).toMatchObject({ status: "cancelled" });
    expect((await f.request("tasks/cancel", { taskId: "nope" })).error).toMatchObject({ code: -32602 });
  });
});

describe("cancellation", () => {
  test("notifications/cancelled for a request in flight ends its command and sends no answer; for a parked one it is not the era's", async () => {
    const f = fakeEra();
    const id = f.send("tools/call", { name: "shell", arguments: { command: "sleep" } });
    const run = await f.run(0);
    expect(f.era.cancel(id)).toBe(true);
    expect(run.ctx.signal.aborted).toBe(true);
    run.finish("killed");
    const other = await f.request("tools/list");
    expect(f.sent.some((m) => m.id === id)).toBe(false);
    expect(other.result).toMatchObject({ resultType: "complete", ttlMs: 0, cacheScope: "private" });
    const p = await parked(f, { command: "touch z" });
    expect(f.era.cancel(f.sent.at(-1)!.id)).toBe(false);
    expect(p.run.ctx.signal.aborted).toBe(false);
    expect(f.era.cancel({})).toBe(false);
  });

  test("close ends every call: parked execs and session backlog denied, commands aborted, no timer left", async () => {
    const f = fakeEra();
    const p = await parked(f);
    const id = f.send("tools/call", { name: "exec_command", arguments: { cmd: "sh" } });
    const exec = await f.run(1);
    exec.ctx.session!(3);
    exec.finish("session 3");
    await f.answerTo(id);
    const late = exec.ask();
    f.era.close();
    expect(await p.answer).toEqual({ action: "cancel" });
    expect(p.run.ctx.signal.aborted).toBe(true);
    expect(await late).toEqual({ action: "cancel" });
    expect(f.clock.live).toBe(0);
  });
});
