/**
 * The request-state codec: what a `tools/call` answered `input_required` hands the client, to be given back on the
 * retry. `v1.<base64url payload>.<base64url HMAC-SHA256>` with a random key of this process (a state from another
 * server process, or from before a restart, fails). Signed, not encrypted: the payload holds only a random handle,
 * a digest and an expiry. Web Crypto and `Bun.CryptoHasher`: this module loads no `node:crypto`.
 */
import { isObject } from "./envelope.ts";

/** The payload a `requestState` carries. */
export interface StatePayload {
  /** Handle of the parked exec (random, base64url). */
  h: string;
  /** Digest of the tool name and arguments of the call that parked it ({@link callDigest}). */
  d: string;
  /** Expiry, ms since the epoch: refused from this instant on. */
  e: number;
}

/**
 * Why a request state was refused, as logged (never the state's content): `malformed` (not a `v1` state of three
 * parts, or a payload that is not one), `mac` (not signed by this process), `expired`, `bind` (another call's: its
 * tool name or arguments differ), `used` (redeemed already, or its exec gone).
 */
export type RefusalReason = "malformed" | "mac" | "expired" | "bind" | "used";

/** `n` random bytes, base64url. */
export function randomId(n: number): string {
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

/** The digest that binds a state to one call: SHA-256 of the canonical `[name, args ?? {}]`, base64url. */
export function callDigest(name: string, args: Record<string, unknown> | undefined): string {
  return sha256(canonical([name, args ?? {}]));
}

/** The verdict on a state: its payload, or why it is refused. */
export type Verdict = { ok: true; payload: StatePayload } | { ok: false; reason: "malformed" | "mac" | "expired" };

/** Signs and checks request states with a random key of this process. */
export class RequestStateCodec {
  private readonly key = crypto.getRandomValues(new Uint8Array(32));

  /** Sign `p`. */
  mint(p: StatePayload): string {
    const body = Buffer.from(JSON.stringify(p)).toString("base64url");
    return `v1.${body}.${this.mac(body)}`;
  }

  /**
   * Check `state` at time `now` (ms since the epoch): `malformed` (not a string of at most 4096 characters, not
   * `v1.<payload>.<mac>`, or a signed payload without its fields), `mac` (the signature is not this process's),
   * `expired` (`now >= e`), else the payload.
   */
  verify(state: unknown, now: number): Verdict {
    if (typeof state !== "string" || state.length > 4096) return { ok: false, reason: "malformed" };
    const parts = state.split(".");
    if (parts.length !== 3 || parts[0] !== "v1") return { ok: false, reason: "malformed" };
    if (!sameBytes(this.mac(parts[1]!), parts[2]!)) return { ok: false, reason: "mac" };
    let p: unknown;
    try {
      p = JSON.parse(Buffer.from(parts[1]!, "base64url").toString());
    } catch {
      return { ok: false, reason: "malformed" };
    }
    if (!isObject(p) || typeof p.h !== "string" || typeof p.d !== "string" || typeof p.e !== "number")
      return { ok: false, reason: "malformed" };
    return now >= p.e ? { ok: false, reason: "expired" } : { ok: true, payload: p as unknown as StatePayload };
  }

  private mac(body: string): string {
    return sha256(body, this.key);
  }
}
