/**
 * The exec-server's JSON-RPC error type and the serde-like parameter decoders every method uses.
 *
 * Errors travel as {@link ShellmcpError} with code `PROTOCOL` and `data.rpcCode` (the JSON-RPC code the client
 * branches on: −32600 invalid request, −32601 unknown method, −32602 invalid params, −32603 internal, −32004 not
 * found, −32010 already attached). Decoder messages follow serde's wording ("missing field `env`", "invalid type:
 * string \"yes\", expected a boolean") because Codex's exec-server answers with them; clients only branch on codes.
 */
import { normalize } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { isJsonObject, JSONRPC_ERROR } from "../jsonrpc.ts";

/** JSON-RPC error codes used by Codex's exec-server: JSON-RPC 2.0's (../jsonrpc.ts) and its own two. */
export const RPC = {
  INVALID_REQUEST: JSONRPC_ERROR.INVALID_REQUEST,
  METHOD_NOT_FOUND: JSONRPC_ERROR.METHOD_NOT_FOUND,
  INVALID_PARAMS: JSONRPC_ERROR.INVALID_PARAMS,
  INTERNAL: JSONRPC_ERROR.INTERNAL_ERROR,
  NOT_FOUND: -32004,
  ALREADY_ATTACHED: -32010,
} as const;

/** A JSON-RPC error to answer with. */
export function rpcError(rpcCode: number, message: string): ShellmcpError {
  return new ShellmcpError("PROTOCOL", message, { rpcCode });
}

/** The JSON-RPC `{code, message}` of any thrown value (unknown errors are −32603). */
export function toRpcError(e: unknown): { code: number; message: string } {
  if (e instanceof ShellmcpError && typeof e.data.rpcCode === "number") return { code: e.data.rpcCode, message: e.message };
  return { code: RPC.INTERNAL, message: e instanceof Error ? e.message : String(e) };
}

/** −32602 with a decoder message. */
export function invalidParams(message: string): ShellmcpError {
  return rpcError(RPC.INVALID_PARAMS, message);
}

/** serde's description of a JSON value in "invalid type" messages. */
export function describe(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (typeof v === "boolean") return `boolean \`${v}\``;
  if (typeof v === "number") return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
  if (typeof v === "string") return `string ${JSON.stringify(v)}`;
  if (Array.isArray(v)) return "sequence";
  return "map";
}

/** Wrong-type error in serde's words. */
export function invalidType(v: unknown, expected: string): ShellmcpError {
  return invalidParams(`invalid type: ${describe(v)}, expected ${expected}`);
}

/** The params object of a request (`struct` names it in the error). Absent/null params fail like serde. */
export function paramsObject(params: unknown, struct: string): Record<string, unknown> {
  if (!isJsonObject(params)) throw invalidType(params, `struct ${struct}`);
  return params;
}

/** Field readers. `required` fields raise "missing field `k`"; optional ones accept null/absent. */
export const field = {
  string(o: Record<string, unknown>, k: string): string {
    const v = o[k];
    if (v === undefined) throw invalidParams(`missing field \`${k}\``);
    if (typeof v !== "string") throw invalidType(v, "a string");
    return v;
  },
  optString(o: Record<string, unknown>, k: string): string | undefined {
    const v = o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "string") throw invalidType(v, "a string");
    return v;
  },
  bool(o: Record<string, unknown>, k: string): boolean {
    const v = o[k];
    if (v === undefined) throw invalidParams(`missing field \`${k}\``);
    if (typeof v !== "boolean") throw invalidType(v, "a boolean");
    return v;
  },
  optBool(o: Record<string, unknown>, k: string): boolean | undefined {
    const v = o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "boolean") throw invalidType(v, "a boolean");
    return v;
  },
  optUint(o: Record<string, unknown>, k: string): number | undefined {
    const v = o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw invalidType(v, "u64");
    return v;
  },
  stringList(o: Record<string, unknown>, k: string): string[] {
    const v = o[k];
    if (v === undefined) throw invalidParams(`missing field \`${k}\``);
    if (!Array.isArray(v)) throw invalidType(v, "a sequence");
    for (const x of v) if (typeof x !== "string") throw invalidType(x, "a string");
    return v as string[];
  },
  stringMap(o: Record<string, unknown>, k: string, required: boolean): Record<string, string> | undefined {
    const v = o[k];
    if (v === undefined && required) throw invalidParams(`missing field \`${k}\``);
    if (v === undefined || (v === null && !required)) return undefined;
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw invalidType(v, "a map");
    for (const x of Object.values(v)) if (typeof x !== "string") throw invalidType(x, "a string");
    return v as Record<string, string>;
  },
};

const B64 = /^[A-Za-z0-9+/]*$/;

/**
 * Decode standard base64 with padding (RFC 4648 §4), strictly, as Rust's `base64` STANDARD engine does. Throws a
 * plain `Error` with that crate's wording ("Invalid symbol 33, offset 0.", "Invalid padding", "Invalid input
 * length."); the caller picks the JSON-RPC code.
 */
export function decodeBase64(s: string): Uint8Array {
  const body = s.replace(/=+$/, "");
  if (!B64.test(body)) {
    for (let i = 0; i < body.length; i++) {
      const c = body.charCodeAt(i);
      if (!/[A-Za-z0-9+/]/.test(body[i]!)) throw new Error(`Invalid symbol ${c}, offset ${i}.`);
    }
  }
  if (s.length % 4 !== 0) {
    if (body.length % 4 === 1) throw new Error(`Invalid input length.`);
    throw new Error("Invalid padding");
  }
  if (s.length - body.length > 2) throw new Error("Invalid padding");
  return new Uint8Array(Buffer.from(s, "base64"));
}

/** Base64 (standard, padded) of bytes. */
export function encodeBase64(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");
}

/**
 * A path parameter: an absolute path (the April protocol) or a `file://` URI (Codex 0.169's `PathUri`), normalised
 * lexically (`a/link/../f` is `a/f`, as Codex's `AbsolutePathBuf` does; trailing slashes dropped). A relative path →
 * −32602 "AbsolutePathBuf deserialized without a base path".
 */
export function decodePath(v: unknown, key: string): string {
  if (v === undefined) throw invalidParams(`missing field \`${key}\``);
  if (typeof v !== "string") throw invalidType(v, "a string");
  let p = v;
  if (/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(v)) {
    let url: URL;
    try {
      url = new URL(v);
    } catch {
      throw invalidParams(`invalid URI: ${v}`);
    }
    if (url.protocol !== "file:") throw invalidParams(`unsupported URI scheme \`${url.protocol.slice(0, -1)}\`; expected a file:// URI`);
    if (url.host !== "" && url.host !== "localhost") throw invalidParams(`file URI names a remote host: ${v}`);
    try {
      p = decodeURIComponent(url.pathname);
    } catch {
      throw invalidParams(`invalid percent-encoding in URI: ${v}`);
    }
  }
  if (p.includes("\0")) throw invalidParams("path contains a NUL byte");
  if (!p.startsWith("/")) throw invalidParams("AbsolutePathBuf deserialized without a base path");
  let n = normalize(p);
  while (n.length > 1 && n.endsWith("/")) n = n.slice(0, -1);
  return n;
}
