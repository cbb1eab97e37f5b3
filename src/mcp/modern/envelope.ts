/**
 * The modern era's envelope (protocol revision 2026-07-28): which requests belong to it, the `_meta` keys every
 * request carries, the checks of that envelope (-32022 for another version, -32602 for a missing key), and the
 * JSON-RPC errors the era answers with.
 */
import { ShellmcpError } from "../../errors.ts";
import { MODERN_PROTOCOL_VERSION } from "../early-initialize.ts";

/** `_meta` key of the request's protocol version. */
export const PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion";
/** `_meta` key of the client's name and version (display only). */
const CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo";
/** `_meta` key of the request's client capabilities. */
export const CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities";
/** The tasks extension's name (in client capabilities and in `server/discover`). */
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** JSON-RPC error codes used by the modern era. */
export const RPC = {
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  UNSUPPORTED_PROTOCOL_VERSION: -32022,
} as const;

/** A JSON-RPC error to answer with: `code`, `message`, and `data` when defined. */
export class ModernRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** A JSON-RPC `error` member. */
export interface RpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** Whether `v` is a plain JSON object (not null, not an array). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Whether `msg` (a parsed JSON-RPC message) belongs to the modern era: a request whose `params._meta` names a
 * protocol version (any: an unsupported one is answered -32022), or any `server/discover` (one without the envelope
 * is answered -32602). `initialize` never is: it selects the legacy era.
 */
export function isModernRequest(msg: unknown): boolean {
  if (!isObject(msg) || typeof msg.method !== "string" || msg.method === "initialize") return false;
  if (typeof msg.id !== "string" && typeof msg.id !== "number") return false;
  if (msg.method === "server/discover") return true;
  return isObject(msg.params) && isObject(msg.params._meta) && PROTOCOL_VERSION_META_KEY in msg.params._meta;
}

/** A request's checked envelope: its `params` (an empty object when absent), `_meta`, and client capabilities. */
export interface Envelope {
  params: Record<string, unknown>;
  meta: Record<string, unknown>;
  caps: Record<string, unknown>;
}

/**
 * Check the envelope of a modern request's `params`. Throws {@link ModernRpcError}: -32602 when `_meta` lacks the
 * protocol version or the client capabilities, -32022 (with `data: {supported, requested}`) for a version other
 * than 2026-07-28.
 */
export function checkEnvelope(rawParams: unknown): Envelope {
  const params = isObject(rawParams) ? rawParams : {};
  const meta = isObject(params._meta) ? params._meta : undefined;
  const version = meta?.[PROTOCOL_VERSION_META_KEY];
  if (meta === undefined || typeof version !== "string")
    throw new ModernRpcError(
      RPC.INVALID_PARAMS,
      `Invalid _meta envelope for protocol revision ${MODERN_PROTOCOL_VERSION}: missing ${PROTOCOL_VERSION_META_KEY}`,
    );
  if (version !== MODERN_PROTOCOL_VERSION)
    throw new ModernRpcError(RPC.UNSUPPORTED_PROTOCOL_VERSION, `Unsupported protocol version: ${version}`, {
      supported: [MODERN_PROTOCOL_VERSION],
      requested: version,
    });
  const caps = meta[CLIENT_CAPABILITIES_META_KEY];
  if (!isObject(caps))
    throw new ModernRpcError(
      RPC.INVALID_PARAMS,
      `Invalid _meta envelope for protocol revision ${MODERN_PROTOCOL_VERSION}: missing ${CLIENT_CAPABILITIES_META_KEY}`,
    );
  return { params, meta, caps };
}

/** The client's name from `_meta`'s client info (display only), or `undefined`. */
export function clientName(meta: Record<string, unknown>): string | undefined {
  const info = meta[CLIENT_INFO_META_KEY];
  return isObject(info) && typeof info.name === "string" ? info.name : undefined;
}

/** Whether the client can be asked (form elicitation): `elicitation: {}` is form mode, else `form` must be named. */
export function canElicit(caps: Record<string, unknown>): boolean {
  const elicitation = caps.elicitation;
  return isObject(elicitation) && (Object.keys(elicitation).length === 0 || isObject(elicitation.form));
}

/** Whether the client declares the tasks extension (`extensions["io.modelcontextprotocol/tasks"]`). */
export function declaresTasks(caps: Record<string, unknown>): boolean {
  const ext = caps.extensions;
  return isObject(ext) && isObject(ext[TASKS_EXTENSION]);
}

/**
 * The JSON-RPC error for a failure: a {@link ModernRpcError} as is, a usage error as -32602, anything else as
 * -32603 with its message.
 */
export function rpcErrorOf(e: unknown): ModernRpcError {
  return e instanceof ModernRpcError
    ? e
    : e instanceof ShellmcpError && e.code === "USAGE"
      ? new ModernRpcError(RPC.INVALID_PARAMS, e.message)
      : new ModernRpcError(RPC.INTERNAL_ERROR, e instanceof Error ? e.message : String(e));
}

/** The `error` member for `e` (`data` only when defined). */
export function errorObject(e: ModernRpcError): RpcErrorObject {
  return { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) };
}
