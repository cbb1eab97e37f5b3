/**
 * The proxy's wire formats (docs/network.md), parsed from the bytes a client sent before any decision: HTTP request
 * heads and authorities, SOCKS5 greetings and requests, a TLS ClientHello's server name, and the host as Codex
 * 0.169 names it in a refusal. Pure: each parser answers undefined while the bytes are incomplete.
 */
import { canonicalIp, normalizeTarget } from "./policy.ts";

/**
 * The host as Codex 0.169 names it in a refusal (`normalize_host`): trimmed, lowercase, without brackets and one
 * trailing dot, but in the spelling the request used (`2130706435`, not `127.0.0.3`; observed side by side).
 */
export function displayHost(raw: string): string {
  let h = raw.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  return h.endsWith(".") ? h.slice(0, -1) : h;
}

/** Hop-by-hop headers dropped when forwarding (`Proxy-*` too; `Connection: close` is added). */
export const HOP_BY_HOP = new Set(["connection", "keep-alive", "te", "trailer", "upgrade", "proxy-connection", "proxy-authorization"]);

/** Whether two hosts are the same after normalisation (case, trailing dot, IP spellings). */
export function sameHost(a: string, b: string): boolean {
  const x = normalizeTarget(a);
  const y = normalizeTarget(b);
  return x !== undefined && y !== undefined && x.host === y.host;
}

/** `host[:port]` or `[v6][:port]` → host and port (`defaultPort` when absent; required when undefined). */
export function parseAuthority(s: string, defaultPort: number | undefined): { host: string; port: number } | undefined {
  let host: string;
  let port: string | undefined;
  const t = s.trim();
  if (t.startsWith("[")) {
    const close = t.indexOf("]");
    if (close < 0) return undefined;
    host = t.slice(1, close);
    const after = t.slice(close + 1);
    if (after !== "" && !after.startsWith(":")) return undefined;
    port = after === "" ? undefined : after.slice(1);
  } else {
    const i = t.lastIndexOf(":");
    if (i >= 0 && t.indexOf(":") !== i) return undefined; // unbracketed IPv6
    host = i >= 0 ? t.slice(0, i) : t;
    port = i >= 0 ? t.slice(i + 1) : undefined;
  }
  if (host === "") return undefined;
  if (port === undefined) return defaultPort === undefined ? undefined : { host, port: defaultPort };
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) return undefined;
  return { host, port: Number(port) };
}

/** A parsed request head: method, target, version, headers as `[lowercase name, value, name as sent]`. */
export interface HttpHead {
  method: string;
  target: string;
  version: string;
  headers: [string, string, string][];
}

/** Parse a request head from `buf` once it holds `\r\n\r\n`; throws on a malformed one. */
export function parseHttpHead(buf: Buffer): { value: HttpHead; used: number } | undefined {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^([A-Z]+) (\S+) (HTTP\/1\.[01])$/.exec(lines[0]!);
  if (m === null) throw new Error("bad request line");
  const headers: [string, string, string][] = [];
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i <= 0 || /\s/.test(l.slice(0, i))) throw new Error("bad header");
    headers.push([l.slice(0, i).toLowerCase(), l.slice(i + 1).trim(), l.slice(0, i)]);
  }
  return { value: { method: m[1]!, target: m[2]!, version: m[3]!, headers }, used: end + 4 };
}

/**
 * A SOCKS5 greeting (RFC 1928 §3: `05 n methods…`): the offered auth methods and the bytes used, or undefined while
 * incomplete. Throws when the version is not 5.
 */
export function parseSocksGreeting(buf: Buffer): { value: number[]; used: number } | undefined {
  if (buf.length < 2) return undefined;
  if (buf[0] !== 5) throw new Error("not SOCKS5");
  const n = buf[1]!;
  if (buf.length < 2 + n) return undefined;
  return { value: [...buf.subarray(2, 2 + n)], used: 2 + n };
}

/**
 * A SOCKS5 request (RFC 1928 §4: `05 cmd 00 atyp addr port`): the command, the host (dotted IPv4, canonical IPv6,
 * or the domain name as sent, latin1) and the port, with the bytes used; undefined while incomplete. Throws when the
 * version is not 5 or the address type unknown.
 */
export function parseSocksRequest(buf: Buffer): { value: { cmd: number; host: string; port: number }; used: number } | undefined {
  if (buf.length < 5) return undefined;
  if (buf[0] !== 5) throw new Error("not SOCKS5");
  const cmd = buf[1]!;
  const atyp = buf[3]!;
  let host: string;
  let at: number;
  if (atyp === 1) {
    if (buf.length < 10) return undefined;
    host = [...buf.subarray(4, 8)].join(".");
    at = 8;
  } else if (atyp === 3) {
    const n = buf[4]!;
    if (buf.length < 5 + n + 2) return undefined;
    host = buf.subarray(5, 5 + n).toString("latin1");
    at = 5 + n;
  } else if (atyp === 4) {
    if (buf.length < 22) return undefined;
    const words: string[] = [];
    for (let i = 0; i < 8; i++) words.push(buf.readUInt16BE(4 + 2 * i).toString(16));
    host = canonicalIp(words.join(":")) ?? words.join(":");
    at = 20;
  } else throw new Error("bad address type");
  return { value: { cmd, host, port: buf.readUInt16BE(at) }, used: at + 2 };
}

/**
 * The server name of a TLS ClientHello at the start of `buf`: the name, `null` when the bytes are not TLS or the
 * hello carries no server name, undefined while incomplete. Throws for a malformed hello. Consumes nothing.
 */
export function parseClientHelloSni(buf: Buffer): { value: string | null; used: number } | undefined {
  if (buf.length === 0) return undefined;
  if (buf[0] !== 0x16) return { value: null, used: 0 };
  if (buf.length < 5) return undefined;
  const recLen = buf.readUInt16BE(3);
  if (buf.length < 5 + recLen) return undefined;
  const b = buf.subarray(5, 5 + recLen);
  const need = (n: number) => {
    if (n > b.length) throw new Error("truncated ClientHello");
  };
  need(4);
  if (b[0] !== 1) throw new Error("not a ClientHello");
  let p = 4 + 2 + 32; // type, length, version, random
  need(p + 1);
  p += 1 + b[p]!; // session id
  need(p + 2);
  p += 2 + b.readUInt16BE(p); // cipher suites
  need(p + 1);
  p += 1 + b[p]!; // compression methods
  if (p + 2 > b.length) return { value: null, used: 0 }; // no extensions
  const extEnd = p + 2 + b.readUInt16BE(p);
  p += 2;
  need(extEnd);
  while (p + 4 <= extEnd) {
    const type = b.readUInt16BE(p);
    const len = b.readUInt16BE(p + 2);
    p += 4;
    need(p + len);
    if (type === 0) {
      let q = p + 2;
      while (q + 3 <= p + len) {
        const nameType = b[q]!;
        const nameLen = b.readUInt16BE(q + 1);
        need(q + 3 + nameLen);
        if (nameType === 0) return { value: b.subarray(q + 3, q + 3 + nameLen).toString("latin1"), used: 0 };
        q += 3 + nameLen;
      }
      return { value: null, used: 0 };
    }
    p += len;
  }
  return { value: null, used: 0 };
}
