/**
 * Escalation wire protocol, exactly as Codex serialises it (docs/escalation.md, "Wire protocol").
 *
 * Handshake: the wrapper sends a 1-byte datagram (`0x00`) carrying one fd (its end of a new stream
 * socketpair) with `SCM_RIGHTS` on the `CODEX_ESCALATE_SOCKET` datagram socket. Then, on the stream:
 *
 *   frame = u32 little-endian payload length ‖ payload (compact UTF-8 JSON)
 *
 *   wrapper → server  EscalateRequest    {"file":…,"argv":[…],"workdir":…,"env":{…}}
 *   server → wrapper  EscalateResponse   {"action":"Run"} | {"action":"Escalate"} | {"action":{"Deny":{"reason":…}}}
 *   wrapper → server  SuperExecMessage   {"fds":[0,1,2]}   (+ the same fds by SCM_RIGHTS, on the first chunk)
 *   server → wrapper  SuperExecResult    {"exit_code":n}
 *
 * Unknown JSON fields are ignored (as serde does); missing or mistyped required fields are a `PROTOCOL` error.
 */
import { ShellmcpError } from "../../errors.ts";
import { ESCALATE_SOCKET_ENV_VAR } from "../../escalation-socket.ts";

/** Wrapper path variable read by newer patched shells (and ours, first). */
export const EXEC_WRAPPER_ENV_VAR = "EXEC_WRAPPER";
/** Wrapper path variable read by the Codex 0.97 bash (and ours, as fallback). */
export const BASH_EXEC_WRAPPER_ENV_VAR = "BASH_EXEC_WRAPPER";
/** Intercept set for our patched shells (../decision/intercept-set.ts); absent: every exec goes to the wrapper. */
export const INTERCEPT_ENV_VAR = "SHELLMCP_INTERCEPT";
/**
 * The variables the wrapper (and the in-shell client, patches/escalate-client.c) strip from the env they forward:
 * Codex's three, in the order Codex lists them, then ours.
 */
export const PROTOCOL_ENV_VARS = [ESCALATE_SOCKET_ENV_VAR, EXEC_WRAPPER_ENV_VAR, BASH_EXEC_WRAPPER_ENV_VAR, INTERCEPT_ENV_VAR] as const;

/** Largest frame payload we accept: 64 MiB (an env + argv is bounded by ARG_MAX, far below this). */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;
/** Size of the frame header. */
export const FRAME_HEADER_BYTES = 4;

/** What the wrapper asks: the program the shell was about to exec. Mirrors Codex's `EscalateRequest`. */
export interface EscalateRequest {
  /** Path the shell passed to execve: absolute after a PATH search, else as typed (`./x`). */
  file: string;
  /** Full argv including argv[0] (which may differ from `file`, e.g. `exec -a`). */
  argv: string[];
  /** The wrapper's working directory. */
  workdir: string;
  /** The wrapper's environment minus {@link PROTOCOL_ENV_VARS}. */
  env: Record<string, string>;
}

/** The server's answer. `Deny.reason` may be null (printed as a bare `Execution denied`). */
export type EscalateAction = { kind: "Run" } | { kind: "Escalate" } | { kind: "Deny"; reason: string | null };

/** Second wrapper message after `Escalate`: destination fd numbers, in the order of the attached fds. */
export interface SuperExecMessage {
  fds: number[];
}

/** Final server message after `Escalate`: the escalated program's exit status (i32). */
export interface SuperExecResult {
  exit_code: number;
}

function protocolError(message: string, data: Record<string, unknown> = {}): ShellmcpError {
  return new ShellmcpError("PROTOCOL", message, data);
}

function parseJson(payload: Uint8Array, what: string): unknown {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(payload);
  } catch {
    throw protocolError(`${what}: payload is not valid UTF-8`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw protocolError(`${what}: invalid JSON: ${(e as Error).message}`);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

// ---------------------------------------------------------------------------------------------------------
// JSON ⇄ types

/** Serialise a request exactly as Codex does (field order file, argv, workdir, env). */
export function encodeRequest(r: EscalateRequest): Uint8Array {
  return utf8(JSON.stringify({ file: r.file, argv: r.argv, workdir: r.workdir, env: r.env }));
}

/** Parse and validate an `EscalateRequest` payload. Throws `PROTOCOL` with the offending field. */
export function decodeRequest(payload: Uint8Array): EscalateRequest {
  const v = parseJson(payload, "EscalateRequest");
  if (!isObject(v)) throw protocolError("EscalateRequest: expected a JSON object");
  const { file, argv, workdir, env } = v;
  if (typeof file !== "string") throw protocolError("EscalateRequest: missing or non-string field `file`");
  if (!Array.isArray(argv) || !argv.every((a) => typeof a === "string")) {
    throw protocolError("EscalateRequest: missing field `argv` or not an array of strings");
  }
  if (typeof workdir !== "string") throw protocolError("EscalateRequest: missing or non-string field `workdir`");
  if (!isObject(env) || !Object.values(env).every((x) => typeof x === "string")) {
    throw protocolError("EscalateRequest: missing field `env` or not an object of strings");
  }
  if (file.includes("\0") || workdir.includes("\0") || argv.some((a) => (a as string).includes("\0"))) {
    throw protocolError("EscalateRequest: NUL byte in a path or argument");
  }
  return { file, argv: argv as string[], workdir, env: env as Record<string, string> };
}

/** Serialise a response: `{"action":"Run"}`, `{"action":"Escalate"}`, `{"action":{"Deny":{"reason":…}}}`. */
export function encodeResponse(a: EscalateAction): Uint8Array {
  const action = a.kind === "Deny" ? { Deny: { reason: a.reason } } : a.kind;
  return utf8(JSON.stringify({ action }));
}

/** Parse an `EscalateResponse` payload. */
export function decodeResponse(payload: Uint8Array): EscalateAction {
  const v = parseJson(payload, "EscalateResponse");
  if (!isObject(v)) throw protocolError("EscalateResponse: expected a JSON object");
  const a = v.action;
  if (a === "Run") return { kind: "Run" };
  if (a === "Escalate") return { kind: "Escalate" };
  if (isObject(a) && isObject(a.Deny)) {
    const reason = a.Deny.reason;
    if (reason === undefined || reason === null) return { kind: "Deny", reason: null };
    if (typeof reason === "string") return { kind: "Deny", reason };
  }
  throw protocolError(`EscalateResponse: unknown action ${JSON.stringify(a)}`);
}

/** Serialise a `SuperExecMessage`. */
export function encodeSuperExec(m: SuperExecMessage): Uint8Array {
  return utf8(JSON.stringify({ fds: m.fds }));
}

/** Parse a `SuperExecMessage`; fd numbers must be distinct integers in 0..1023. */
export function decodeSuperExec(payload: Uint8Array): SuperExecMessage {
  const v = parseJson(payload, "SuperExecMessage");
  if (!isObject(v) || !Array.isArray(v.fds)) throw protocolError("SuperExecMessage: missing field `fds`");
  const fds = v.fds;
  if (!fds.every((f) => Number.isInteger(f) && (f as number) >= 0 && (f as number) < 1024)) {
    throw protocolError("SuperExecMessage: `fds` must be integers in 0..1023");
  }
  if (new Set(fds).size !== fds.length) throw protocolError("SuperExecMessage: duplicate destination fds");
  return { fds: fds as number[] };
}

/** Serialise a `SuperExecResult`. */
export function encodeResult(r: SuperExecResult): Uint8Array {
  return utf8(JSON.stringify({ exit_code: r.exit_code }));
}

/** Parse a `SuperExecResult`; `exit_code` must be an i32. */
export function decodeResult(payload: Uint8Array): SuperExecResult {
  const v = parseJson(payload, "SuperExecResult");
  if (!isObject(v) || !Number.isInteger(v.exit_code)) throw protocolError("SuperExecResult: missing or non-integer `exit_code`");
  const code = v.exit_code as number;
  if (code < -(2 ** 31) || code >= 2 ** 31) throw protocolError("SuperExecResult: `exit_code` out of i32 range");
  return { exit_code: code };
}

// ---------------------------------------------------------------------------------------------------------
// framing

/** `payload` with its 4-byte little-endian length header. Throws `PROTOCOL` above {@link MAX_FRAME_BYTES}. */
export function encodeFrame(payload: Uint8Array): Uint8Array {
  if (payload.byteLength > MAX_FRAME_BYTES) throw protocolError(`message too large: ${payload.byteLength}`, { bytes: payload.byteLength });
  const out = new Uint8Array(FRAME_HEADER_BYTES + payload.byteLength);
  new DataView(out.buffer).setUint32(0, payload.byteLength, true);
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** Payload length announced by a 4-byte header. Throws `PROTOCOL` above `maxBytes`. */
export function frameLength(header: Uint8Array, maxBytes = MAX_FRAME_BYTES): number {
  if (header.byteLength < FRAME_HEADER_BYTES) throw protocolError("short frame header");
  const n = new DataView(header.buffer, header.byteOffset, FRAME_HEADER_BYTES).getUint32(0, true);
  if (n > maxBytes) throw protocolError(`frame too large: ${n} bytes (limit ${maxBytes})`, { bytes: n });
  return n;
}

/**
 * Incremental frame decoder for a non-blocking stream: feed bytes as they arrive, take whole payloads out.
 * Throws `PROTOCOL` as soon as a header announces more than `maxBytes`.
 */
export class FrameDecoder {
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  /** Payload length of the frame being received, once its header is in. */
  private want: number | undefined;

  constructor(private readonly maxBytes = MAX_FRAME_BYTES) {}

  /** Bytes held that do not yet form a whole frame. */
  get pending(): number {
    return this.buffered;
  }

  /** Append received bytes. */
  push(bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    this.chunks.push(bytes.slice());
    this.buffered += bytes.byteLength;
  }

  /**
   * Next whole payload, or undefined if more bytes are needed. Linear in the bytes received: the chunks are
   * joined once, when the whole frame is in (the header is checked against the cap as soon as it arrives).
   */
  next(): Uint8Array | undefined {
    if (this.buffered < FRAME_HEADER_BYTES) return undefined;
    if (this.want === undefined) this.want = frameLength(this.head(), this.maxBytes);
    if (this.buffered < FRAME_HEADER_BYTES + this.want) return undefined;
    const all = this.flatten();
    const n = this.want;
    this.want = undefined;
    const payload = all.slice(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + n);
    const rest = all.subarray(FRAME_HEADER_BYTES + n);
    this.chunks = rest.byteLength > 0 ? [rest.slice()] : [];
    this.buffered = rest.byteLength;
    return payload;
  }

  /** The first {@link FRAME_HEADER_BYTES} bytes (they may span chunks). */
  private head(): Uint8Array {
    const first = this.chunks[0]!;
    if (first.byteLength >= FRAME_HEADER_BYTES) return first;
    const h = new Uint8Array(FRAME_HEADER_BYTES);
    let at = 0;
    for (const c of this.chunks) {
      const take = Math.min(c.byteLength, FRAME_HEADER_BYTES - at);
      h.set(c.subarray(0, take), at);
      at += take;
      if (at === FRAME_HEADER_BYTES) break;
    }
    return h;
  }

  private flatten(): Uint8Array {
    if (this.chunks.length === 1) return this.chunks[0]!;
    const all = new Uint8Array(this.buffered);
    let at = 0;
    for (const c of this.chunks) {
      all.set(c, at);
      at += c.byteLength;
    }
    this.chunks = [all];
    return all;
  }
}

function utf8(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}
