/**
 * The tasks extension (`io.modelcontextprotocol/tasks`): a call of a client that declares it, still running after
 * `taskAfterMs`, becomes a task, answered `resultType: "task"` at once and driven in the background. `tasks/get`
 * shows it (its `inputRequests` while an approval waits, its result or error once ended), `tasks/update` answers
 * its approvals, `tasks/cancel` ends its command. An approval nobody answers within `parkedTimeoutMs` cancels the
 * task. An ended task stays visible for {@link TASK_TTL_MS}. Task ids are unguessable: the id is the bearer handle.
 */
import type { TaskStatus } from "@modelcontextprotocol/server";
import { log } from "../../log.ts";
import type { ModernCall } from "./call.ts";
import { type Clock, nextTurn, type TimerHandle } from "./clock.ts";
import { errorObject, ModernRpcError, RPC, rpcErrorOf, type RpcErrorObject } from "./envelope.ts";
import type { Parking } from "./parking.ts";
import { randomId } from "./request-state.ts";

/** How long a finished task's result stays available to `tasks/get`, ms (its `ttlMs`). */
export const TASK_TTL_MS = 10 * 60 * 1000;
/** How often a client should poll a task, ms (its `pollIntervalMs`). */
const TASK_POLL_MS = 1000;

/** A task: a call that outlived `taskAfterMs`, polled by `tasks/get`. */
interface Task {
  id: string;
  call: ModernCall;
  status: TaskStatus;
  /** ISO 8601 timestamps. */
  createdAt: string;
  lastUpdatedAt: string;
  inputRequests?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: RpcErrorObject;
  /** Denies the awaited approvals and ends the command when nobody answers them in time. */
  parkedTimer?: TimerHandle;
}

/** The tasks of one modern era, by id. */
export class Tasks {
  private readonly tasks = new Map<string, Task>();

  constructor(
    private readonly clock: Clock,
    private readonly parking: Parking,
    /** How long a task's approvals wait before the task is cancelled, ms. */
    private readonly parkedTimeoutMs: number,
    /** After how long a call became a task, ms (logged). */
    private readonly taskAfterMs: number,
  ) {}

  private stamp(): string {
    return new Date(this.clock.now()).toISOString();
  }

  /** The task `id` names, or -32602 `Unknown or expired taskId`. */
  private task(id: unknown): Task {
    const t = typeof id === "string" ? this.tasks.get(id) : undefined;
    if (t === undefined) throw new ModernRpcError(RPC.INVALID_PARAMS, "Unknown or expired taskId");
    return t;
  }

  /** `tasks/get`: the task `id` names as shown (status, timestamps, `ttlMs`, `pollIntervalMs`, and per status). */
  view(id: unknown): Record<string, unknown> {
    return this.viewOf(this.task(id));
  }

  private viewOf(t: Task): Record<string, unknown> {
    return {
      taskId: t.id,
      status: t.status,
      createdAt: t.createdAt,
      lastUpdatedAt: t.lastUpdatedAt,
      ttlMs: TASK_TTL_MS,
      pollIntervalMs: TASK_POLL_MS,
      ...(t.status === "input_required" ? { inputRequests: t.inputRequests } : {}),
      ...(t.status === "completed" ? { result: t.result } : {}),
      ...(t.status === "failed" ? { error: t.error } : {}),
    };
  }

  /** Turn `call` into a task, driven in the background until it ends; returns the `CreateTaskResult`. */
  start(call: ModernCall): Record<string, unknown> {
    const now = this.stamp();
    const task: Task = { id: randomId(18), call, status: "working", createdAt: now, lastUpdatedAt: now };
    this.tasks.set(task.id, task);
    call.current = undefined; // no progress notifications for tasks
    log.info("call became a task", { tool: call.name, afterMs: this.taskAfterMs });
    void this.drive(task);
    return { resultType: "task", ...this.viewOf(task) };
  }

  /** Follow `task`'s call: publish each approval it asks, record its outcome. */
  private async drive(task: Task): Promise<void> {
    const { call } = task;
    for (;;) {
      const next = await Promise.race([call.done, call.asked().then(() => undefined)]);
      if (task.status === "cancelled") return;
      if (next !== undefined) {
        this.parking.settle(call);
        if (next.error !== undefined) {
          task.error = errorObject(rpcErrorOf(next.error));
          this.end(task, "failed");
        } else {
          task.result = { ...next.result!, resultType: "complete" };
          this.end(task, "completed");
        }
        return;
      }
      await nextTurn();
      task.inputRequests = call.publish();
      task.status = "input_required";
      task.lastUpdatedAt = this.stamp();
      task.parkedTimer?.cancel();
      task.parkedTimer = this.clock.setTimer(() => {
        log.notice("approval not answered in time: denied, command ended", { task: task.id, ms: this.parkedTimeoutMs });
        this.end(task, "cancelled");
      }, this.parkedTimeoutMs);
    }
  }

  /** `tasks/update`: answer the approvals of the task `id` names when it awaits them (else nothing). */
  update(id: unknown, inputResponses: unknown): void {
    const task = this.task(id);
    if (task.status !== "input_required") return;
    task.parkedTimer?.cancel();
    task.status = "working";
    task.inputRequests = undefined;
    task.lastUpdatedAt = this.stamp();
    task.call.resume(inputResponses);
    task.call.poke();
  }

  /** `tasks/cancel`: end the task `id` names and its command, when it still runs (else nothing). */
  cancel(id: unknown): void {
    const task = this.task(id);
    if (task.status === "working" || task.status === "input_required") this.end(task, "cancelled");
  }

  /** End a task: `cancelled` ends its command (its approvals denied); kept for `tasks/get` for {@link TASK_TTL_MS}. */
  private end(task: Task, status: "completed" | "failed" | "cancelled"): void {
    task.parkedTimer?.cancel();
    task.status = status;
    task.inputRequests = undefined;
    task.lastUpdatedAt = this.stamp();
    if (status === "cancelled") task.call.end();
    this.clock.setTimer(() => this.tasks.delete(task.id), TASK_TTL_MS, true);
  }

  /** The client went away: no task's approval timer fires any more (the era ends the calls). */
  close(): void {
    for (const t of this.tasks.values()) t.parkedTimer?.cancel();
  }
}
