/**
 * JSON-RPC 2.0's error codes and envelope checks, shared by the MCP server (src/mcp/) and the exec-server
 * (src/exec-server/rpc.ts, whose JSON-RPC-lite messages are JSON-RPC 2.0 without the `"jsonrpc"` member). Each
 * protocol adds its own codes beside these (MCP's −32022 unsupported protocol version; the exec-server's −32004 not
 * found and −32010 already attached). Imports nothing.
 */

/** The error codes JSON-RPC 2.0 defines (§5.1), by name. */
export const JSONRPC_ERROR = {
  /** Invalid JSON was received. */
  PARSE_ERROR: -32700,
  /** The JSON sent is not a valid request object. */
  INVALID_REQUEST: -32600,
  /** The method does not exist or is not available. */
  METHOD_NOT_FOUND: -32601,
  /** Invalid method parameters. */
  INVALID_PARAMS: -32602,
  /** Internal JSON-RPC error. */
  INTERNAL_ERROR: -32603,
} as const;

/** Whether `v` is a JSON object (not null, not an array): the shape of every JSON-RPC message and of `params`. */
export function isJsonObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Whether `v` is a request id: a string or a number (JSON-RPC 2.0 §4; `null` is not one here). With
 * `integer: true`, a number must be a safe integer (the exec-server's `RequestId`, as serde's untagged enum of
 * `i64` and `String` reads it).
 */
export function isRequestId(v: unknown, opts: { integer?: boolean } = {}): v is string | number {
  if (typeof v === "string") return true;
  return typeof v === "number" && (opts.integer !== true || Number.isSafeInteger(v));
}
