/**
 * The MCP adapter: the only module that imports `@modelcontextprotocol/sdk` (v1). Everything else speaks in
 * the plain types below, so the SDK can be replaced in one place. Both protocol eras are served from one stdio
 * connection (docs/mcp-eras.md): the legacy one (2025-11-25 and earlier, `initialize`) by the v1 SDK as before, the
 * modern one (2026-07-28: `server/discover`, a `_meta` envelope on every request, `resultType` on every result,
 * approvals as `input_required`) by ./modern.ts, to which the transport routes every request with the envelope.
 *
 * - Low-level `Server` with capabilities `tools` and `experimental["codex/sandbox-state"] = {version: "1.0.0"}`.
 * - `tools/list` / `tools/call` for the tools (`shell`, and Codex's unified exec `exec_command`/`write_stdin`); `codex/sandbox-state/update` as a request (answered `{}`) and,
 *   for older clients, as a notification.
 * - A stdio transport that, unlike the SDK's (and the Rust original, which exits), answers a line that is not
 *   JSON with a JSON-RPC parse error (-32700) and one that is not JSON-RPC with -32600, and keeps serving.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  JSONRPCMessageSchema,
  ListToolsRequestSchema,
  RootsListChangedNotificationSchema,
  McpError,
  type JSONRPCMessage,
} from "@modelcontextprotocol/sdk/types.js";
import { ShellmcpError } from "../errors.ts";
import { log } from "../log.ts";
import { takeEarlyInput, type EarlyInput } from "./early-initialize.ts";
import type { ElicitAnswer } from "./elicitation.ts";
import { isModernRequest, ModernEra } from "./modern.ts";

/** A tool as listed. */
export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
}

/** A tool call's result. */
export interface ToolResult {
  content: { type: "text"; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError: boolean;
  /** The result's `_meta` (`shellmcp/blocked`: what was refused, ../blocked/report.ts). */
  _meta?: Record<string, unknown>;
}

/** What a tool call can do besides returning. */
export interface ToolContext {
  /** Fires on `notifications/cancelled` (and when the client goes away). */
  signal: AbortSignal;
  /** Present when the client sent a progress token. */
  progress?: (progress: number, message: string) => void;
  /**
   * The call's `params._meta` as sent (Codex 0.169 puts the per-call sandbox state in it:
   * `codex/sandbox-state`, `codex/sandbox-state-meta`, `codex/sandbox-launcher`).
   */
  meta?: Record<string, unknown>;
  /** Present when the client declared the `elicitation` capability. */
  elicit?: (message: string, requestedSchema: Record<string, unknown>) => Promise<ElicitAnswer>;
  /**
   * Present when the client declared the `roots` capability: its `file://` roots as absolute paths (asked once, and
   * again after `notifications/roots/list_changed`; an error or a non-file root yields nothing).
   */
  roots?: () => Promise<string[]>;
}

/** Server behaviour supplied by the caller. */
export interface McpServerOptions {
  name: string;
  version: string;
  instructions: string;
  /** The tools listed, in order (the first is `shell`). */
  tools: ToolDefinition[];
  /**
   * The tools as listed to the client named `clientName` (`clientInfo.name` of `initialize`, or the modern era's
   * `io.modelcontextprotocol/clientInfo`; undefined when unknown): the same tools in the same order, only their
   * schemas' presentation may differ (src/mcp/shell-tool.ts `shellToolFor`). Absent: {@link tools}.
   */
  toolsFor?: (clientName: string | undefined) => ToolDefinition[];
  /**
   * Run tool `name` (one of `tools`; another name is answered "tool not found" before this is called). Throw
   * `ShellmcpError` code `USAGE` for bad arguments (→ -32602), anything else → -32603.
   */
  callTool: (name: string, args: Record<string, unknown> | undefined, ctx: ToolContext) => Promise<ToolResult>;
  /** Apply `codex/sandbox-state/update` params. Throw `ShellmcpError` `USAGE` to reject them (→ -32602). */
  onSandboxState: (params: unknown) => void;
  /**
   * Modern era: how long an exec parked for a human's approval (`input_required`) waits for the client's retry
   * before it is denied and its command ended, ms (default ./modern.ts `DEFAULT_PARKED_TIMEOUT_MS`).
   */
  parkedTimeoutMs?: number;
  /**
   * Modern era: after how long a call of a client that declares the tasks extension becomes a task, ms (default
   * ./modern.ts `DEFAULT_TASK_AFTER_MS`).
   */
  taskAfterMs?: number;
}

/** Name of Codex's custom method (and capability). */
export const SANDBOX_STATE_METHOD = "codex/sandbox-state/update";
const SANDBOX_STATE_CAPABILITY = "codex/sandbox-state";

/**
 * A JSON-RPC error with Codex's plain message: the SDK's `McpError` would prefix "MCP error <code>: ". The SDK's
 * protocol layer sends any thrown error's `code`, `message` and `data`.
 */
class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

function toRpcError(e: unknown): RpcError {
  if (e instanceof RpcError) return e;
  if (e instanceof McpError) return new RpcError(e.code, e.message.replace(/^MCP error -?\d+: /, ""), e.data);
  if (e instanceof ShellmcpError) return new RpcError(e.code === "USAGE" ? ErrorCode.InvalidParams : ErrorCode.InternalError, e.message);
  return new RpcError(ErrorCode.InternalError, e instanceof Error ? e.message : String(e));
}

/** Line-delimited JSON-RPC over stdin/stdout, tolerant of bad input. */
class RobustStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private closed = false;
  /**
   * Longest JSON-RPC message accepted, bytes. A `shell` command reaches bash as one argv string, which the
   * kernel caps at 128 KiB (MAX_ARG_STRLEN); 8 MiB leaves room for any legitimate message.
   */
  static readonly MAX_LINE_BYTES = 8 * 1024 * 1024;

  async start(): Promise<void> {
    void this.readLoop();
  }

  /**
   * Split stdin into lines in linear time: complete lines are decoded once; an over-long line is answered with
   * -32600 as soon as it passes the cap and the rest of it is skipped without being buffered.
   */
  private async readLoop(): Promise<void> {
    const max = RobustStdioTransport.MAX_LINE_BYTES;
    let parts: Uint8Array[] = [];
    let size = 0;
    let skipping = false;
    const take = (piece: Uint8Array) => {
      if (skipping || piece.byteLength === 0) return;
      if (size + piece.byteLength > max) {
        skipping = true;
        parts = [];
        size = 0;
        this.sendError(null, ErrorCode.InvalidRequest, `Invalid Request: message longer than ${max} bytes`);
        return;
      }
      parts.push(piece.slice());
      size += piece.byteLength;
    };
    const endLine = () => {
      if (!skipping && size > 0) this.handleBytes(parts.length === 1 ? parts[0]! : Buffer.concat(parts, size));
      parts = [];
      size = 0;
      skipping = false;
    };
    try {
      for await (const chunk of this.early?.source ?? Bun.stdin.stream()) {
        let start = 0;
        for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
          take(chunk.subarray(start, nl));
          endLine();
          start = nl + 1;
        }
        take(chunk.subarray(start));
      }
      endLine();
      log.debug("stdin reached EOF");
    } catch (e) {
      log.debug("stdin read failed", { error: (e as Error).message });
      this.onerror?.(e as Error);
    }
    await this.close();
  }

  private handleBytes(bytes: Uint8Array): void {
    let line = new TextDecoder().decode(bytes);
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line.trim() !== "") this.handleLine(line);
  }

  private handleLine(line: string): void {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      this.sendError(null, ErrorCode.ParseError, `Parse error: ${(e as Error).message}`);
      return;
    }
    // The first line, a `server/discover` answered early (stateless: nothing else to do). An `initialize` answered
    // early still goes to the SDK, whose answer is dropped in send().
    if (this.early !== undefined && !this.earlyAnswerDropped && isModernRequest(value)) {
      const v = value as { id: unknown; method: unknown };
      if (v.method === "server/discover" && v.id === this.early.answeredId()) {
        this.earlyAnswerDropped = true;
        return;
      }
    }
    if (this.route?.(value) === true) return;
    const parsed = JSONRPCMessageSchema.safeParse(value);
    if (!parsed.success) {
      const id =
        typeof value === "object" &&
        value !== null &&
        "id" in value &&
        (typeof (value as { id: unknown }).id === "string" || typeof (value as { id: unknown }).id === "number")
          ? (value as { id: string | number }).id
          : null;
      // A response to one of our requests that we cannot read is dropped; anything else gets -32600.
      if (typeof value === "object" && value !== null && !("method" in value) && id !== null) return;
      this.sendError(id, ErrorCode.InvalidRequest, "Invalid Request: not a JSON-RPC 2.0 message");
      return;
    }
    this.onmessage?.(parsed.data);
  }

  private sendError(id: string | number | null, code: number, message: string): void {
    this.write({ jsonrpc: "2.0", id, error: { code, message } });
  }

  /** Write one JSON-RPC message to stdout (the modern era's answers and notifications). */
  write(msg: unknown): void {
    if (this.closed) return;
    try {
      process.stdout.write(JSON.stringify(msg) + "\n");
    } catch (e) {
      log.debug("stdout write failed", { error: (e as Error).message });
      this.onerror?.(e as Error);
    }
  }

  /**
   * `early`: stdin already being read by {@link startEarlyInitialize}, whose answered `initialize` or
   * `server/discover` is not answered twice. `route`: takes a parsed message before the SDK sees it (true: handled).
   */
  constructor(
    private readonly early?: EarlyInput,
    private readonly route?: (value: unknown) => boolean,
  ) {}
  private earlyAnswerDropped = false;

  async send(message: JSONRPCMessage): Promise<void> {
    if (
      !this.earlyAnswerDropped &&
      this.early !== undefined &&
      "id" in message &&
      !("method" in message) &&
      message.id === this.early.answeredId()
    ) {
      this.earlyAnswerDropped = true; // the SDK's answer to the initialize request already answered early
      return;
    }
    this.write(message);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }
}

/**
 * The legacy era's SDK `Server` with the tools, elicitation, roots and sandbox-state handlers of `o`, not yet
 * connected: stdio connects one ({@link serveStdio}), the HTTP transport one per MCP session (./http.ts).
 */
export function createLegacyServer(o: McpServerOptions): Server {
  const server = new Server(
    { name: o.name, version: o.version },
    { capabilities: { tools: {}, experimental: { [SANDBOX_STATE_CAPABILITY]: { version: "1.0.0" } } }, instructions: o.instructions },
  );

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: o.toolsFor?.(server.getClientVersion()?.name) ?? o.tools }));

  let roots: Promise<string[]> | undefined;
  server.setNotificationHandler(RootsListChangedNotificationSchema, async () => {
    roots = undefined;
  });
  // Asked on behalf of the call that first needs them (over HTTP: on that call's SSE stream, see elicit below).
  const listRoots = (relatedRequestId?: string | number): Promise<string[]> =>
    (roots ??= server.listRoots(undefined, { relatedRequestId }).then(
      (r) => r.roots.filter((x) => x.uri.startsWith("file://")).map((x) => decodeURIComponent(new URL(x.uri).pathname)),
      () => {
        roots = undefined;
        return [];
      },
    ));

  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    if (!o.tools.some((t) => t.name === req.params.name)) throw new RpcError(ErrorCode.InvalidParams, "tool not found");
    const token = extra._meta?.progressToken;
    const canElicit = server.getClientCapabilities()?.elicitation !== undefined;
    const hasRoots = server.getClientCapabilities()?.roots !== undefined;
    const ctx: ToolContext = {
      signal: extra.signal,
      meta: req.params._meta as Record<string, unknown> | undefined,
      progress:
        token === undefined
          ? undefined
          : (progress, message) => {
              extra
                .sendNotification({ method: "notifications/progress", params: { progressToken: token, progress, message } })
                .catch(() => undefined);
            },
      elicit: canElicit
        ? async (message, requestedSchema) => {
            const r = await server.elicitInput(
              { message, requestedSchema: requestedSchema as never },
              // Related to the call: over HTTP it goes on the call's own SSE stream, which is open while the call
              // runs (the GET stream may not be: a client need not open one). On stdio it changes nothing.
              { signal: extra.signal, timeout: 24 * 3600 * 1000, relatedRequestId: extra.requestId },
            );
            return { action: r.action, content: r.content as Record<string, unknown> | undefined };
          }
        : undefined,
      roots: hasRoots ? () => listRoots(extra.requestId) : undefined,
    };
    try {
      return (await o.callTool(req.params.name, req.params.arguments, ctx)) as never;
    } catch (e) {
      throw toRpcError(e);
    }
  });

  server.fallbackRequestHandler = async (req) => {
    if (req.method !== SANDBOX_STATE_METHOD) throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${req.method}`);
    if (req.params === undefined) throw new RpcError(ErrorCode.InvalidParams, "missing params for sandbox state request");
    try {
      o.onSandboxState(req.params);
    } catch (e) {
      throw new RpcError(ErrorCode.InvalidParams, `failed to deserialize sandbox state: ${toRpcError(e).message}`, req.params);
    }
    return {} as never;
  };
  server.fallbackNotificationHandler = async (n) => {
    if (n.method !== SANDBOX_STATE_METHOD) return;
    try {
      o.onSandboxState(n.params);
    } catch (e) {
      log.warn("ignored a malformed codex/sandbox-state/update notification", { error: (e as Error).message });
    }
  };
  return server;
}

/** Serve MCP on stdio until the client closes stdin. */
export async function serveStdio(o: McpServerOptions): Promise<void> {
  const server = createLegacyServer(o);

  // The modern era: requests with the 2026-07-28 envelope, and the cancellation of those in flight.
  let transport: RobustStdioTransport | undefined = undefined;
  const modern = new ModernEra({ ...o, send: (m) => transport?.write(m) });
  transport = new RobustStdioTransport(takeEarlyInput(), (value) => {
    if (isModernRequest(value)) {
      modern.handle(value as { id: string | number; method: string; params?: unknown });
      return true;
    }
    const v = value as { method?: unknown; params?: { requestId?: unknown } } | null;
    return typeof v === "object" && v !== null && v.method === "notifications/cancelled" && modern.cancel(v.params?.requestId);
  });
  const closed = new Promise<void>((res) => {
    server.onclose = () => {
      modern.close();
      res();
    };
  });
  server.onerror = (e) => log.debug("mcp transport error", { error: e.message });
  await server.connect(transport);
  await closed;
}
