/**
 * The modern MCP era (protocol revision 2026-07-28), served beside the legacy one by the same stdio transport
 * (./server.ts routes here every request that carries the modern `_meta` envelope, and `server/discover`; ./http.ts
 * serves it over HTTP, one instance per authenticated subject). No SDK at run time: the era is stateless JSON-RPC
 * with a handful of methods, and docs/mcp-eras.md says why it is not the v2 SDK (its spec types are imported
 * type-only, and test/unit/modern-sdk-schemas.test.ts checks every answer against its schemas).
 *
 * This module is the dispatcher; the parts are in ./modern/: envelope.ts (the `_meta` envelope and JSON-RPC errors),
 * request-state.ts (the signed `requestState`), call.ts (one call across its requests), parking.ts (parked execs:
 * park, redeem, expire; the session backlog), tasks.ts (the tasks extension), clock.ts (time, injected).
 *
 * - Every request carries `io.modelcontextprotocol/protocolVersion` (only 2026-07-28 here, else -32022 naming it)
 *   and `io.modelcontextprotocol/clientCapabilities` (else -32602); every result carries `resultType` and the
 *   server's identity in `_meta`; `server/discover` and `tools/list` carry the cache fields.
 * - A human's approval (a `prompt` decision: `ctx.elicit`) parks the exec, not the request: the `tools/call` is
 *   answered `resultType: "input_required"` with the approval form and a `requestState`, while the command stays
 *   stopped at its `execve` (the promise its escalation decision awaits stays pending, with the call's timeout
 *   paused). The client retries the call with the human's answer: the state is checked (HMAC-SHA256 with a key
 *   of this process, the parked exec's handle, an expiry, a digest of the tool name and arguments), redeemed once,
 *   the answer resumes that same exec, and the retry is answered with the command's result (or with the next
 *   approval it needs). A parked exec nobody answers is denied and its command ended after `parkedTimeoutMs`.
 * - A session's command (`exec_command`) that meets an approval after its call was answered has no request to carry
 *   `input_required`: the approval waits (the exec parked at its `execve`, at most `parkedTimeoutMs`) for the next
 *   request that concerns that session — a `write_stdin` for it, answered `input_required` like any call (its
 *   write is made once the retry answers), or one already in flight — and is denied when none comes in time.
 * - The tasks extension: a call of a client that declares it, still running after `taskAfterMs`, becomes a task
 *   (`tasks/get`, `tasks/update` for approvals met during the task, `tasks/cancel`).
 */
import type { InputRequiredResult } from "@modelcontextprotocol/server";
import { log } from "../log.ts";
import { discoverResult, SERVER_INFO_META_KEY } from "./early-initialize.ts";
import type { ElicitAnswer } from "./elicitation.ts";
import { ModernCall, type Outcome, type Result, sessionOfCall } from "./modern/call.ts";
import { type Clock, nextTurn, systemClock } from "./modern/clock.ts";
import {
  canElicit,
  checkEnvelope,
  clientName,
  declaresTasks,
  errorObject,
  isObject,
  ModernRpcError,
  RPC,
  rpcErrorOf,
} from "./modern/envelope.ts";
import { Parking } from "./modern/parking.ts";
import { callDigest } from "./modern/request-state.ts";
import { Tasks } from "./modern/tasks.ts";

export { isModernRequest } from "./modern/envelope.ts";

/** Default time after which a call of a client that declares the tasks extension becomes a task, ms. */
export const DEFAULT_TASK_AFTER_MS = 5000;
/** Default time a parked exec waits for the human's answer before it is denied and its command ended, ms. */
export const DEFAULT_PARKED_TIMEOUT_MS = 10 * 60 * 1000;

/** A tool as listed (./server.ts `ToolDefinition`). */
interface Tool {
  name: string;
}

/** What a modern tool call can do besides returning (./server.ts `ToolContext`, without MCP roots). */
export interface ModernToolContext {
  signal: AbortSignal;
  progress?: (progress: number, message: string) => void;
  meta?: Record<string, unknown>;
  elicit?: (message: string, requestedSchema: Record<string, unknown>) => Promise<ElicitAnswer>;
  /**
   * `exec_command`: the call's command lives on as session `id` after the call is answered; approvals it meets
   * later are asked on the next request that concerns that session (see the module comment).
   */
  session?: (id: number) => void;
  /**
   * Whether the call's result will reach the client: resolves at once while a request carries the call (or it runs
   * as a task); while it is parked for a human's approval, when it is retried (`true`) or ended unanswered
   * (`false`, after `--input-required-timeout-ms`). `write_stdin` asks before it drains its session, so an ended
   * call takes neither output nor the session's end away from the next call.
   */
  carried?: () => Promise<boolean>;
}

/** The server behaviour the modern era serves (the same callbacks as the legacy era's, ./server.ts). */
export interface ModernEraOptions {
  name: string;
  version: string;
  instructions: string;
  tools: Tool[];
  /**
   * The tools as listed to the client named `clientName` (the request's `io.modelcontextprotocol/clientInfo` name;
   * undefined when it sends none): the same tools as {@link tools}, only their schemas' presentation may differ
   * (e.g. no `format: "uint64"`). Absent: {@link tools}.
   */
  toolsFor?: (clientName: string | undefined) => Tool[];
  callTool: (name: string, args: Record<string, unknown> | undefined, ctx: ModernToolContext) => Promise<Result>;
  onSandboxState: (params: unknown) => void;
  /** Write one JSON-RPC message to the client. */
  send: (message: Record<string, unknown>) => void;
  /** How long a parked exec waits for the human's answer, ms (default {@link DEFAULT_PARKED_TIMEOUT_MS}). */
  parkedTimeoutMs?: number;
  /**
   * After how long a call of a client that declares the tasks extension becomes a task (its answer a
   * `resultType: "task"`, its result fetched by `tasks/get`), ms (default {@link DEFAULT_TASK_AFTER_MS}).
   */
  taskAfterMs?: number;
  /** Time and timers (default: the system's; the fast tier injects a fake one). */
  clock?: Clock;
}

/** A modern request as routed here (see {@link isModernRequest}). */
interface ModernRequest {
  id: string | number;
  method: string;
  params?: unknown;
}

/** The modern era's request handling (one per stdio server process, one per subject over HTTP). */
export class ModernEra {
  private readonly clock: Clock;
  private readonly parking: Parking;
  private readonly tasks: Tasks;
  private readonly taskAfterMs: number;
  /** Calls whose current request is in flight, by request id (for `notifications/cancelled`). */
  private readonly inFlight = new Map<string | number, ModernCall>();
  /** Unfinished calls (parked ones included). */
  private readonly calls = new Set<ModernCall>();
  /** Requests cancelled while in flight: their answer is not sent. */
  private readonly cancelled = new Set<string | number>();

  constructor(private readonly o: ModernEraOptions) {
    this.clock = o.clock ?? systemClock;
    const parkedTimeoutMs = o.parkedTimeoutMs ?? DEFAULT_PARKED_TIMEOUT_MS;
    this.taskAfterMs = o.taskAfterMs ?? DEFAULT_TASK_AFTER_MS;
    this.parking = new Parking(this.clock, parkedTimeoutMs);
    this.tasks = new Tasks(this.clock, this.parking, parkedTimeoutMs, this.taskAfterMs);
  }

  /**
   * Serve one modern request (see {@link isModernRequest}); the answer is sent through `send`, unless the client
   * cancelled the request meanwhile (then nothing more is sent for it).
   */
  handle(msg: ModernRequest): void {
    const send = (m: Record<string, unknown>) => {
      if (!this.cancelled.delete(msg.id)) this.o.send(m);
    };
    void this.answer(msg).then(
      (result) => send({ jsonrpc: "2.0", id: msg.id, result }),
      (e: unknown) => send({ jsonrpc: "2.0", id: msg.id, error: errorObject(rpcErrorOf(e)) }),
    );
  }

  /** `notifications/cancelled` for `requestId`: true when it was a modern request in flight (its command is ended). */
  cancel(requestId: unknown): boolean {
    if (typeof requestId !== "string" && typeof requestId !== "number") return false;
    const call = this.inFlight.get(requestId);
    if (call === undefined) return false;
    log.info("modern call cancelled", { requestId });
    this.cancelled.add(requestId);
    call.controller.abort();
    return true;
  }

  /** The client went away: every call (parked ones included) is ended. */
  close(): void {
    this.parking.close();
    this.tasks.close();
    for (const call of this.calls) {
      call.controller.abort();
      for (const a of [...call.pending.values(), ...call.awaiting.values()]) a.answer({ action: "cancel" });
    }
  }

  /** The result of one modern request (its envelope checked), or a thrown {@link ModernRpcError}. */
  private async answer(msg: ModernRequest): Promise<Record<string, unknown>> {
    const { params, meta, caps } = checkEnvelope(msg.params);
    const stamp = { [SERVER_INFO_META_KEY]: { name: this.o.name, version: this.o.version } };
    switch (msg.method) {
      case "server/discover":
        return discoverResult({ name: this.o.name, version: this.o.version });
      case "tools/list": {
        const tools = this.o.toolsFor?.(clientName(meta)) ?? this.o.tools;
        return { resultType: "complete", tools, ttlMs: 0, cacheScope: "private", _meta: stamp };
      }
      case "codex/sandbox-state/update":
        try {
          this.o.onSandboxState(params);
        } catch (e) {
          throw new ModernRpcError(RPC.INVALID_PARAMS, `failed to deserialize sandbox state: ${(e as Error).message}`);
        }
        return { resultType: "complete", _meta: stamp };
      case "tools/call": {
        const r = await this.toolCall(msg.id, params, meta, caps);
        return { ...r, _meta: { ...(isObject(r._meta) ? r._meta : {}), ...stamp } };
      }
      case "tasks/get":
        return { ...this.tasks.view(params.taskId), resultType: "complete", _meta: stamp };
      case "tasks/update":
        this.tasks.update(params.taskId, params.inputResponses);
        return { resultType: "complete", _meta: stamp };
      case "tasks/cancel":
        this.tasks.cancel(params.taskId);
        return { resultType: "complete", _meta: stamp };
      default:
        throw new ModernRpcError(RPC.METHOD_NOT_FOUND, `Method not found: ${msg.method}`);
    }
  }

  /** `tools/call`: a new call, or the retry of a parked one (`requestState`), driven until it answers. */
  private async toolCall(
    id: string | number,
    params: Record<string, unknown>,
    meta: Record<string, unknown>,
    caps: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    const name = params.name;
    if (typeof name !== "string" || !this.o.tools.some((t) => t.name === name))
      throw new ModernRpcError(RPC.INVALID_PARAMS, "tool not found");
    const args = params.arguments;
    if (args !== undefined && !isObject(args)) throw new ModernRpcError(RPC.INVALID_PARAMS, "arguments must be an object");
    const digest = callDigest(name, args);
    const progressToken = typeof meta.progressToken === "string" || typeof meta.progressToken === "number" ? meta.progressToken : undefined;
    let call: ModernCall;
    if (params.requestState !== undefined) {
      call = this.parking.redeem(params.requestState, digest);
      call.resume(params.inputResponses);
    } else {
      call = this.start(name, args, digest, meta, caps);
    }
    call.current = { id, progressToken };
    this.inFlight.set(id, call);
    try {
      return await this.drive(call, declaresTasks(caps));
    } finally {
      this.inFlight.delete(id);
    }
  }

  /** The context a new call's tool gets: its signal, progress (when asked for), and elicitation (when possible). */
  private contextFor(call: ModernCall, meta: Record<string, unknown>, canAsk: boolean): ModernToolContext {
    return {
      signal: call.controller.signal,
      meta,
      // As in the legacy era, only when the client asked for progress (the first request's token); then sent on
      // the token of the request that carries the call now (none while parked or as a task).
      progress:
        meta.progressToken === undefined
          ? undefined
          : (progress, message) => {
              const token = call.current?.progressToken;
              if (token === undefined) return;
              this.o.send({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: token, progress, message } });
            },
      elicit: canAsk ? (message, schema) => call.ask(message, schema) : undefined,
      carried: () => call.carried(),
      session: canAsk
        ? (id) => {
            call.late = (message, schema) => this.parking.sessionAsk(id, message, schema);
          }
        : undefined,
    };
  }

  /** Start a new call of `name`. */
  private start(
    name: string,
    args: Record<string, unknown> | undefined,
    digest: string,
    meta: Record<string, unknown>,
    caps: Record<string, unknown>,
  ): ModernCall {
    const session = sessionOfCall(name, args);
    const call = new ModernCall(name, digest, session);
    const ctx = this.contextFor(call, meta, canElicit(caps));
    this.calls.add(call);
    // Approvals the session's command met while no request about it was open: this call carries them, and its own
    // work (a write_stdin's write) waits for their answers; none is done for a call that ended unanswered.
    const waiting = session === undefined ? [] : this.parking.takeBacklog(session, call);
    const before = waiting.length === 0 ? Promise.resolve(true) : Promise.all(waiting).then(() => !call.over);
    call.done = before.then((go): Promise<Outcome> | Outcome =>
      go
        ? this.o.callTool(name, args, ctx).then(
            (result) => ({ result }),
            (error: unknown) => ({ error }),
          )
        : { error: new ModernRpcError(RPC.INTERNAL_ERROR, "the call ended before its approvals were answered") },
    );
    this.parking.track(call);
    void call.done.then(() => {
      this.calls.delete(call);
      this.parking.forget(call);
    });
    return call;
  }

  /**
   * Wait for the call's result or its next approval; the latter parks it and answers `input_required`. `tasks`:
   * the request declared the tasks extension, and a call still running after `taskAfterMs` becomes a task.
   */
  private async drive(call: ModernCall, tasks: boolean): Promise<Record<string, unknown>> {
    let cancelTaskTimer = () => {};
    const later = tasks
      ? new Promise<"task">((r) => {
          const t = this.clock.setTimer(() => r("task"), this.taskAfterMs);
          cancelTaskTimer = () => t.cancel();
        })
      : new Promise<never>(() => {});
    const next = await Promise.race([call.done, call.asked().then(() => undefined), later]);
    cancelTaskTimer();
    if (next === "task") return this.tasks.start(call);
    if (next !== undefined) {
      this.parking.settle(call);
      call.current = undefined;
      if (next.error !== undefined) throw next.error;
      return { ...next.result!, resultType: "complete" };
    }
    await nextTurn(); // approvals asked at the same moment (`a & b`) go out together
    const inputRequests = call.publish();
    const requestState = this.parking.park(call);
    log.info("exec parked for a human's approval", { tool: call.name, approvals: Object.keys(inputRequests) });
    const answer: InputRequiredResult = { resultType: "input_required", inputRequests, requestState };
    return { ...answer };
  }
}
