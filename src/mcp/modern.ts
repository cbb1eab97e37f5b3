/**
 * The modern MCP era (protocol revision 2026-07-28), served beside the legacy one by the same stdio transport
 * (./server.ts routes here every request that carries the modern `_meta` envelope, and `server/discover`). No SDK:
 * the era is stateless JSON-RPC with a handful of methods, and docs/mcp-eras.md says why it is not the v2 SDK.
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
import { ShellmcpError } from "../errors.ts";
import { isJsonObject as isObject, isRequestId, JSONRPC_ERROR } from "../jsonrpc.ts";
import { log } from "../log.ts";
import { discoverResult, MODERN_PROTOCOL_VERSION, SERVER_INFO_META_KEY } from "./early-initialize.ts";
import type { ElicitAnswer } from "./escalation-policy.ts";

/** `_meta` key of the request's protocol version. */
export const PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion";
/** `_meta` key of the client's name and version (display only). */
const CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo";
/** `_meta` key of the request's client capabilities. */
export const CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities";
/** The tasks extension's name (in client capabilities and in `server/discover`). */
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
/** Default time after which a call of a client that declares the tasks extension becomes a task, ms. */
export const DEFAULT_TASK_AFTER_MS = 5000;
/** How long a finished task's result stays available to `tasks/get`, ms (its `ttlMs`). */
export const TASK_TTL_MS = 10 * 60 * 1000;
/** How often a client should poll a task, ms (its `pollIntervalMs`). */
export const TASK_POLL_MS = 1000;
/** Default time a parked exec waits for the human's answer before it is denied and its command ended, ms. */
export const DEFAULT_PARKED_TIMEOUT_MS = 10 * 60 * 1000;

/** JSON-RPC error codes used here: JSON-RPC 2.0's (../jsonrpc.ts) and MCP's unsupported protocol version. */
export const RPC = {
  METHOD_NOT_FOUND: JSONRPC_ERROR.METHOD_NOT_FOUND,
  INVALID_PARAMS: JSONRPC_ERROR.INVALID_PARAMS,
  INTERNAL_ERROR: JSONRPC_ERROR.INTERNAL_ERROR,
  UNSUPPORTED_PROTOCOL_VERSION: -32022,
} as const;

/** A tool as listed (./server.ts `ToolDefinition`). */
interface Tool {
  name: string;
}

/** A tool call's result (./server.ts `ToolResult`). */
interface Result {
  content: unknown[];
  isError: boolean;
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
}

/** A JSON-RPC error to answer with. */
export class ModernRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** `n` random bytes, base64url (Web Crypto and Bun.CryptoHasher: this module loads no `node:crypto`). */
function randomId(n: number): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(n))).toString("base64url");
}

/** SHA-256 (HMAC-SHA256 with `key`) of `data`, base64url. */
function sha256(data: string, key?: Uint8Array): string {
  return Buffer.from(new Bun.CryptoHasher("sha256", key).update(data).digest()).toString("base64url");
}

/** Whether `a` and `b` are equal, in time independent of where they differ. */
function sameBytes(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Whether `msg` (a parsed JSON-RPC message) belongs to the modern era: a request whose `params._meta` names a
 * protocol version (any: an unsupported one is answered -32022 here), or any `server/discover` (one without the
 * envelope is answered -32602). `initialize` never is: it selects the legacy era.
 */
export function isModernRequest(msg: unknown): boolean {
  if (!isObject(msg) || typeof msg.method !== "string" || msg.method === "initialize") return false;
  if (!isRequestId(msg.id)) return false;
  if (msg.method === "server/discover") return true;
  return isObject(msg.params) && isObject(msg.params._meta) && PROTOCOL_VERSION_META_KEY in msg.params._meta;
}

/** JSON with object keys sorted, so that a digest does not depend on the client's key order. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (isObject(v))
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

/** The payload a `requestState` carries. */
interface StatePayload {
  /** Handle of the parked exec. */
  h: string;
  /** Digest of the tool name and arguments of the call that parked it. */
  d: string;
  /** Expiry, ms since the epoch. */
  e: number;
}

/**
 * Signed request states: `v1.<base64url payload>.<base64url HMAC-SHA256>` with a random key of this process (a
 * state from another server process, or from before a restart, fails). Signed, not encrypted: the payload holds
 * only a random handle, a digest and an expiry.
 */
export class RequestStateCodec {
  private readonly key = crypto.getRandomValues(new Uint8Array(32));

  /** Sign `p`. */
  mint(p: StatePayload): string {
    const body = Buffer.from(JSON.stringify(p)).toString("base64url");
    return `v1.${body}.${this.mac(body)}`;
  }

  /** The payload of a state this process signed and that has not expired, else `undefined`. */
  verify(state: unknown, now = Date.now()): StatePayload | undefined {
    if (typeof state !== "string" || state.length > 4096) return undefined;
    const parts = state.split(".");
    if (parts.length !== 3 || parts[0] !== "v1") return undefined;
    if (!sameBytes(this.mac(parts[1]!), parts[2]!)) return undefined;
    let p: unknown;
    try {
      p = JSON.parse(Buffer.from(parts[1]!, "base64url").toString());
    } catch {
      return undefined;
    }
    if (!isObject(p) || typeof p.h !== "string" || typeof p.d !== "string" || typeof p.e !== "number") return undefined;
    return p.e < now ? undefined : (p as unknown as StatePayload);
  }

  private mac(body: string): string {
    return sha256(body, this.key);
  }
}

/** One approval asked by a call's command: the form, and how to answer it. */
interface Asked {
  message: string;
  requestedSchema: Record<string, unknown>;
  answer: (a: ElicitAnswer) => void;
}

/**
 * The session a call of `name` with `args` concerns: `write_stdin`'s `session_id` (Codex's unified exec,
 * ./unified-exec.ts), else none.
 */
function sessionOfCall(name: string, args: Record<string, unknown> | undefined): number | undefined {
  const id = args?.session_id;
  return name === "write_stdin" && typeof id === "number" && Number.isSafeInteger(id) ? id : undefined;
}

/** One `tools/call` of the modern era, across the requests (the first, and each retry) that carry it. */
class ModernCall {
  readonly controller = new AbortController();
  /** Approvals asked and not yet sent to the client. */
  readonly pending = new Map<string, Asked>();
  /** Approvals sent in an `input_required` result, awaiting the client's retry. */
  readonly awaiting = new Map<string, Asked>();
  /** The JSON-RPC request that carries the call now (`undefined` while parked). */
  current: { id: string | number; progressToken?: string | number } | undefined;
  /** Set once the call's result has been sent. */
  finished = false;
  private nextKey = 1;
  private wake: (() => void) | undefined;
  /** The command's result (never rejects: an error is its value). */
  done!: Promise<{ result?: Result; error?: unknown }>;
  /**
   * Where approvals go once this call was answered: an `exec_command` whose command lives on as a session hands
   * them to the era, which asks them on the next request about that session (undefined: denied).
   */
  late: ((message: string, requestedSchema: Record<string, unknown>) => Promise<ElicitAnswer>) | undefined;

  constructor(
    readonly name: string,
    readonly digest: string,
    /** The session this call concerns (`write_stdin`'s), see {@link sessionOfCall}. */
    readonly session?: number,
  ) {}

  /** Ask the human (the command waits at its exec until answered). */
  ask(message: string, requestedSchema: Record<string, unknown>): Promise<ElicitAnswer> {
    if ((this.finished || this.controller.signal.aborted) && this.late !== undefined) return this.late(message, requestedSchema);
    if (this.finished || this.controller.signal.aborted) {
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
}

/** A task (tasks extension): a call that outlived {@link ModernEraOptions.taskAfterMs}, polled by `tasks/get`. */
interface Task {
  id: string;
  call: ModernCall;
  status: "working" | "input_required" | "completed" | "failed" | "cancelled";
  createdAt: string;
  lastUpdatedAt: string;
  inputRequests?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
  /** Denies the awaited approvals and ends the command when nobody answers them in time. */
  parkedTimer?: Timer;
}

function rpcErrorOf(e: unknown): ModernRpcError {
  return e instanceof ModernRpcError
    ? e
    : e instanceof ShellmcpError && e.code === "USAGE"
      ? new ModernRpcError(RPC.INVALID_PARAMS, e.message)
      : new ModernRpcError(RPC.INTERNAL_ERROR, e instanceof Error ? e.message : String(e));
}

function errorObject(e: ModernRpcError): { code: number; message: string; data?: unknown } {
  return { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) };
}

/** The modern era's request handling (one per server process). */
export class ModernEra {
  private readonly codec = new RequestStateCodec();
  /** Parked calls by handle. */
  private readonly parked = new Map<string, { call: ModernCall; timer: Timer }>();
  /** Calls whose current request is in flight, by request id (for `notifications/cancelled`). */
  private readonly inFlight = new Map<string | number, ModernCall>();
  private readonly calls = new Set<ModernCall>();
  private readonly parkedTimeoutMs: number;
  private readonly taskAfterMs: number;
  /** Requests cancelled while in flight: their answer is not sent. */
  private readonly cancelled = new Set<string | number>();
  /** Tasks by id (unguessable: the id is the bearer handle). */
  private readonly tasks = new Map<string, Task>();
  /** Unfinished calls that concern a session (`write_stdin`), by session id. */
  private readonly sessionCalls = new Map<number, Set<ModernCall>>();
  /**
   * Approvals of sessions' commands met when no call about the session was unfinished, by session id: each waits
   * for the next such call, and is denied (`cancel`) after `parkedTimeoutMs` if none comes.
   */
  private readonly backlog = new Map<number, { asked: Asked; timer: Timer }[]>();

  constructor(private readonly o: ModernEraOptions) {
    this.parkedTimeoutMs = o.parkedTimeoutMs ?? DEFAULT_PARKED_TIMEOUT_MS;
    this.taskAfterMs = o.taskAfterMs ?? DEFAULT_TASK_AFTER_MS;
  }

  /**
   * Serve one modern request (see {@link isModernRequest}); the answer is sent through `send`, unless the client
   * cancelled the request meanwhile (then nothing more is sent for it).
   */
  handle(msg: { id: string | number; method: string; params?: unknown }): void {
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
    for (const { timer } of this.parked.values()) clearTimeout(timer);
    this.parked.clear();
    for (const t of this.tasks.values()) clearTimeout(t.parkedTimer);
    for (const waiting of this.backlog.values())
      for (const { asked, timer } of waiting) {
        clearTimeout(timer);
        asked.answer({ action: "cancel" });
      }
    this.backlog.clear();
    for (const call of this.calls) {
      call.controller.abort();
      for (const a of [...call.pending.values(), ...call.awaiting.values()]) a.answer({ action: "cancel" });
    }
  }

  private async answer(msg: { id: string | number; method: string; params?: unknown }): Promise<Record<string, unknown>> {
    const params = isObject(msg.params) ? msg.params : {};
    const meta = isObject(params._meta) ? params._meta : undefined;
    const version = meta?.[PROTOCOL_VERSION_META_KEY];
    if (typeof version !== "string")
      throw new ModernRpcError(
        RPC.INVALID_PARAMS,
        `Invalid _meta envelope for protocol revision ${MODERN_PROTOCOL_VERSION}: missing ${PROTOCOL_VERSION_META_KEY}`,
      );
    if (version !== MODERN_PROTOCOL_VERSION)
      throw new ModernRpcError(RPC.UNSUPPORTED_PROTOCOL_VERSION, `Unsupported protocol version: ${version}`, {
        supported: [MODERN_PROTOCOL_VERSION],
        requested: version,
      });
    const caps = meta![CLIENT_CAPABILITIES_META_KEY];
    if (!isObject(caps))
      throw new ModernRpcError(
        RPC.INVALID_PARAMS,
        `Invalid _meta envelope for protocol revision ${MODERN_PROTOCOL_VERSION}: missing ${CLIENT_CAPABILITIES_META_KEY}`,
      );
    const stamp = { [SERVER_INFO_META_KEY]: { name: this.o.name, version: this.o.version } };
    switch (msg.method) {
      case "server/discover":
        return discoverResult({ name: this.o.name, version: this.o.version });
      case "tools/list":
        return { resultType: "complete", tools: this.listed(meta!), ttlMs: 0, cacheScope: "private", _meta: stamp };
      case "codex/sandbox-state/update":
        try {
          this.o.onSandboxState(params);
        } catch (e) {
          throw new ModernRpcError(RPC.INVALID_PARAMS, `failed to deserialize sandbox state: ${(e as Error).message}`);
        }
        return { resultType: "complete", _meta: stamp };
      case "tools/call": {
        const r = await this.toolCall(msg.id, params, meta!, caps);
        return { ...r, _meta: { ...(isObject(r._meta) ? r._meta : {}), ...stamp } };
      }
      case "tasks/get":
        return { ...this.taskView(this.task(params.taskId)), resultType: "complete", _meta: stamp };
      case "tasks/update": {
        const task = this.task(params.taskId);
        if (task.status === "input_required") {
          clearTimeout(task.parkedTimer);
          task.status = "working";
          task.inputRequests = undefined;
          task.lastUpdatedAt = new Date().toISOString();
          this.resume(task.call, params.inputResponses);
          task.call.poke();
        }
        return { resultType: "complete", _meta: stamp };
      }
      case "tasks/cancel": {
        const task = this.task(params.taskId);
        if (task.status === "working" || task.status === "input_required") this.endTask(task, "cancelled");
        return { resultType: "complete", _meta: stamp };
      }
      default:
        throw new ModernRpcError(RPC.METHOD_NOT_FOUND, `Method not found: ${msg.method}`);
    }
  }

  /** The tools listed to the client this request's `_meta` names (display only: the set of tools never changes). */
  private listed(meta: Record<string, unknown>): Tool[] {
    const info = meta[CLIENT_INFO_META_KEY];
    const name = isObject(info) && typeof info.name === "string" ? info.name : undefined;
    return this.o.toolsFor?.(name) ?? this.o.tools;
  }
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
    const digest = sha256(canonical([name, args ?? {}]));
    const progressToken = typeof meta.progressToken === "string" || typeof meta.progressToken === "number" ? meta.progressToken : undefined;
    let call: ModernCall;
    if (params.requestState !== undefined) {
      call = this.redeem(params.requestState, digest);
      this.resume(call, params.inputResponses);
    } else {
      call = this.start(name, args, digest, meta, caps);
    }
    call.current = { id, progressToken };
    this.inFlight.set(id, call);
    const ext = caps.extensions;
    try {
      return await this.drive(call, isObject(ext) && isObject(ext[TASKS_EXTENSION]));
    } finally {
      this.inFlight.delete(id);
    }
  }

  /** The task `id` names, or -32602. */
  private task(id: unknown): Task {
    const t = typeof id === "string" ? this.tasks.get(id) : undefined;
    if (t === undefined) throw new ModernRpcError(RPC.INVALID_PARAMS, "Unknown or expired taskId");
    return t;
  }

  /** A task as `tasks/get` shows it. */
  private taskView(t: Task): Record<string, unknown> {
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
  private startTask(call: ModernCall): Record<string, unknown> {
    const now = new Date().toISOString();
    const task: Task = { id: randomId(18), call, status: "working", createdAt: now, lastUpdatedAt: now };
    this.tasks.set(task.id, task);
    call.current = undefined; // no progress notifications for tasks
    log.info("call became a task", { tool: call.name, afterMs: this.taskAfterMs });
    void (async () => {
      for (;;) {
        const next = await Promise.race([call.done, call.asked().then(() => undefined)]);
        if (task.status === "cancelled") return;
        if (next !== undefined) {
          this.settle(call);
          if (next.error !== undefined) {
            task.error = errorObject(rpcErrorOf(next.error));
            this.endTask(task, "failed");
          } else {
            task.result = { ...next.result!, resultType: "complete" };
            this.endTask(task, "completed");
          }
          return;
        }
        await new Promise((r) => setTimeout(r, 0));
        task.inputRequests = this.publish(call);
        task.status = "input_required";
        task.lastUpdatedAt = new Date().toISOString();
        clearTimeout(task.parkedTimer);
        task.parkedTimer = setTimeout(() => {
          log.notice("approval not answered in time: denied, command ended", { task: task.id, ms: this.parkedTimeoutMs });
          this.endTask(task, "cancelled");
        }, this.parkedTimeoutMs);
      }
    })();
    return { resultType: "task", ...this.taskView(task) };
  }

  /** End a task: `cancelled` ends its command (its approvals denied); kept for `tasks/get` for {@link TASK_TTL_MS}. */
  private endTask(task: Task, status: "completed" | "failed" | "cancelled"): void {
    clearTimeout(task.parkedTimer);
    task.status = status;
    task.inputRequests = undefined;
    task.lastUpdatedAt = new Date().toISOString();
    if (status === "cancelled") {
      const { call } = task;
      call.finished = true;
      call.controller.abort();
      for (const a of [...call.awaiting.values(), ...call.pending.values()]) a.answer({ action: "cancel" });
      call.awaiting.clear();
      call.pending.clear();
    }
    setTimeout(() => this.tasks.delete(task.id), TASK_TTL_MS).unref();
  }

  /** Move the pending approvals to the awaited ones; their `inputRequests` (the approval forms). */
  private publish(call: ModernCall): Record<string, unknown> {
    const inputRequests: Record<string, unknown> = {};
    for (const [key, asked] of call.pending) {
      call.pending.delete(key);
      call.awaiting.set(key, asked);
      inputRequests[key] = {
        method: "elicitation/create",
        params: { mode: "form", message: asked.message, requestedSchema: asked.requestedSchema },
      };
    }
    return inputRequests;
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
    const elicitation = caps.elicitation;
    // `elicitation: {}` is form mode; a client that declares modes must name `form`.
    const canAsk = isObject(elicitation) && (Object.keys(elicitation).length === 0 || isObject(elicitation.form));
    const ctx: ModernToolContext = {
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
      session: canAsk
        ? (id) => {
            call.late = (message, schema) => this.sessionAsk(id, message, schema);
          }
        : undefined,
    };
    this.calls.add(call);
    // Approvals the session's command met while no request about it was open: this call carries them, and its own
    // work (a write_stdin's write) waits for their answers; none is done for a call that ended unanswered.
    const waiting = session === undefined ? [] : this.takeBacklog(session, call);
    const before =
      waiting.length === 0 ? Promise.resolve(true) : Promise.all(waiting).then(() => !call.finished && !call.controller.signal.aborted);
    call.done = before.then((go) =>
      go
        ? this.o.callTool(name, args, ctx).then(
            (result) => ({ result }),
            (error: unknown) => ({ error }),
          )
        : { error: new ModernRpcError(RPC.INTERNAL_ERROR, "the call ended before its approvals were answered") },
    );
    if (session !== undefined) {
      let set = this.sessionCalls.get(session);
      if (set === undefined) this.sessionCalls.set(session, (set = new Set()));
      set.add(call);
    }
    void call.done.then(() => {
      this.calls.delete(call);
      this.forget(call);
    });
    return call;
  }

  /** `call` no longer carries approvals of its session. */
  private forget(call: ModernCall): void {
    if (call.session === undefined) return;
    const set = this.sessionCalls.get(call.session);
    set?.delete(call);
    if (set?.size === 0) this.sessionCalls.delete(call.session);
  }

  /**
   * `call`'s result is being sent: it is finished; approvals still pending (met while it was parked or in its last
   * moment) go to the next request about its session, or are denied when it has none.
   */
  private settle(call: ModernCall): void {
    call.finished = true;
    this.forget(call);
    if (call.pending.size === 0) return;
    const session = call.session;
    const later =
      call.late ?? (session === undefined ? undefined : (m: string, s: Record<string, unknown>) => this.sessionAsk(session, m, s));
    for (const asked of call.pending.values())
      if (later === undefined) asked.answer({ action: "cancel" });
      else void later(asked.message, asked.requestedSchema).then(asked.answer);
    call.pending.clear();
  }

  /**
   * An approval met by session `id`'s command after its `exec_command` was answered: asked on an unfinished call
   * about that session if there is one (its request, or its retry, carries it), else kept for the next one and
   * denied after `parkedTimeoutMs`.
   */
  private sessionAsk(id: number, message: string, requestedSchema: Record<string, unknown>): Promise<ElicitAnswer> {
    for (const c of this.sessionCalls.get(id) ?? [])
      if (!c.finished && !c.controller.signal.aborted) return c.ask(message, requestedSchema);
    return new Promise((answer) => {
      const entry = {
        asked: { message, requestedSchema, answer },
        timer: setTimeout(() => {
          const list = this.backlog.get(id) ?? [];
          list.splice(list.indexOf(entry), 1);
          if (list.length === 0) this.backlog.delete(id);
          log.notice("approval not answered in time: denied", { session: id, ms: this.parkedTimeoutMs });
          answer({ action: "cancel" });
        }, this.parkedTimeoutMs),
      };
      const list = this.backlog.get(id) ?? [];
      list.push(entry);
      this.backlog.set(id, list);
      log.info("a session's command waits for a human's approval until the next request about it", { session: id });
    });
  }

  /**
   * Move session `id`'s waiting approvals into `call` (pending: its request answers `input_required`); one promise
   * per approval, resolved once it is answered.
   */
  private takeBacklog(id: number, call: ModernCall): Promise<void>[] {
    const list = this.backlog.get(id) ?? [];
    this.backlog.delete(id);
    return list.map(({ asked, timer }) => {
      clearTimeout(timer);
      return new Promise<void>((answered) => {
        void call.ask(asked.message, asked.requestedSchema).then((a) => {
          asked.answer(a);
          answered();
        });
      });
    });
  }

  /** The parked call a retry's `requestState` names, taken out of the table (a state is good once). */
  private redeem(state: unknown, digest: string): ModernCall {
    const p = this.codec.verify(state);
    const entry = p === undefined ? undefined : this.parked.get(p.h);
    if (p === undefined || entry === undefined || entry.call.digest !== p.d || p.d !== digest) {
      log.warn("refused a requestState", {
        reason: p === undefined ? "invalid or expired" : entry === undefined ? "already used or timed out" : "another call's",
      });
      throw new ModernRpcError(RPC.INVALID_PARAMS, "Invalid or expired requestState", { reason: "invalid_request_state" });
    }
    clearTimeout(entry.timer);
    this.parked.delete(p.h);
    return entry.call;
  }

  /** Give the awaited approvals their answers from `inputResponses`; one without an answer is asked again. */
  private resume(call: ModernCall, responses: unknown): void {
    const r = isObject(responses) ? responses : {};
    for (const [key, asked] of call.awaiting) {
      call.awaiting.delete(key);
      const answer = toAnswer(r[key], asked.requestedSchema);
      if (answer === undefined) call.pending.set(key, asked);
      else asked.answer(answer);
    }
  }

  /**
   * Wait for the call's result or its next approval; the latter parks it and answers `input_required`. `tasks`:
   * the request declared the tasks extension, and a call still running after `taskAfterMs` becomes a task.
   */
  private async drive(call: ModernCall, tasks: boolean): Promise<Record<string, unknown>> {
    let taskTimer: Timer | undefined;
    const later = tasks
      ? new Promise<"task">((r) => (taskTimer = setTimeout(() => r("task"), this.taskAfterMs)))
      : new Promise<never>(() => {});
    const next = await Promise.race([call.done, call.asked().then(() => undefined), later]);
    clearTimeout(taskTimer);
    if (next === "task") return this.startTask(call);
    if (next !== undefined) {
      this.settle(call);
      call.current = undefined;
      if (next.error !== undefined) throw next.error;
      return { ...next.result!, resultType: "complete" };
    }
    await new Promise((r) => setTimeout(r, 0)); // approvals asked at the same moment (`a & b`) go out together
    const inputRequests = this.publish(call);
    const handle = randomId(16);
    const timer = setTimeout(() => this.expire(handle), this.parkedTimeoutMs);
    this.parked.set(handle, { call, timer });
    call.current = undefined;
    const requestState = this.codec.mint({ h: handle, d: call.digest, e: Date.now() + this.parkedTimeoutMs });
    log.info("exec parked for a human's approval", { tool: call.name, approvals: Object.keys(inputRequests) });
    return { resultType: "input_required", inputRequests, requestState };
  }

  /** A parked call nobody answered in time: its approvals are denied and its command ended. */
  private expire(handle: string): void {
    const entry = this.parked.get(handle);
    if (entry === undefined) return;
    this.parked.delete(handle);
    const { call } = entry;
    log.notice("approval not answered in time: denied, command ended", { tool: call.name, ms: this.parkedTimeoutMs });
    call.finished = true;
    call.controller.abort();
    for (const a of [...call.awaiting.values(), ...call.pending.values()]) a.answer({ action: "cancel" });
    call.awaiting.clear();
    call.pending.clear();
  }
}

/**
 * An `ElicitResult` from a retry's `inputResponses`, or `undefined` when it is missing or not one. Accepted content
 * keeps only the fields the form asked for (`schema.properties`) with primitive values: a client cannot add a field
 * the human was not shown (e.g. `always_allow` to a prompt rule's form, which offers none).
 */
function toAnswer(v: unknown, schema: Record<string, unknown>): ElicitAnswer | undefined {
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
