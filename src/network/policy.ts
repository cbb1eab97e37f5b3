/**
 * The network policy of proxy mode, read like Codex 0.169 (`codex-rs/network-proxy/src/{policy,runtime}.rs`,
 * `config/src/permissions_toml.rs`, `features/src/feature_configs.rs`; facts in docs/network.md):
 *
 * - `[features] network_proxy = true` (or the table `[features.network_proxy]` with `enabled` and the network keys,
 *   applied on top of the profile's);
 * - `default_permissions = "<name>"` and `[permissions.<name>.network]`: `enabled`, `mode` (`full` | `limited`),
 *   `domains` (`"pattern" = "allow" | "deny"`), `allow_local_binding`, `enable_socks5`, `enable_socks5_udp`, and the
 *   keys Codex accepts that shellmcp does not act on (`proxy_url`, `socks_url`, `allow_upstream_proxy`, …);
 * - `network_rule`s of the discovered `.rules` files (exact hosts; allow adds, forbidden denies, later wins).
 *
 * The decision for one request ({@link decideHost}) follows Codex's order: unparsable host → `not_allowed`; a deny
 * match → `denied` (deny always wins); without `allow_local_binding` a local/private IP literal (or `localhost`)
 * passes only when listed literally, else `not_allowed_local`; no allow match → `not_allowed`; an allow-listed name
 * is then resolved (names that are not allowed are never resolved) and any non-public answer → `not_allowed_local`,
 * an answer listed as deny → `policy_denied`. The proxy dials one of the checked addresses and nothing else.
 */
import { ShellmcpError } from "../errors.ts";
import type { Config } from "../config/config.ts";
import type { Policy } from "../execpolicy/policy.ts";

/** `mode` of `[permissions.<name>.network]`: `full` (default) or `limited` (GET/HEAD/OPTIONS only, Codex). */
export type NetworkMode = "full" | "limited";

/** The network policy proxy mode enforces (one per server; calls share it). */
export interface NetworkPolicy {
  /** `[features] network_proxy` (bool or the table's `enabled`): proxy mode for calls whose network is enabled. */
  enabled: boolean;
  mode: NetworkMode;
  /** Allow patterns, normalised (lowercase, no trailing dot, port dropped), config first then `network_rule`s. */
  allow: string[];
  /** Deny patterns, normalised the same way. */
  deny: string[];
  /** `allow_local_binding` (default false): local/private targets allowed without an exact entry. */
  allowLocalBinding: boolean;
  /** `enable_socks5` (default true). */
  enableSocks5: boolean;
  /** `enable_socks5_udp` (default true in Codex): read and reported; shellmcp relays no UDP (see docs/network.md). */
  enableSocks5Udp: boolean;
}

/** Why a request was refused: Codex's reasons (`reasons.rs`), plus `sni_mismatch` (a shellmcp check). */
export type BlockReason =
  "not_allowed" | "not_allowed_local" | "denied" | "policy_denied" | "method_not_allowed" | "mitm_required" | "sni_mismatch";

/** Codex 0.169's message per reason (`responses.rs`); `policy_denied`, `mitm_required`, `sni_mismatch` are ours. */
export const BLOCK_MESSAGES: Record<BlockReason, string> = {
  not_allowed: "Domain not in allowlist.",
  not_allowed_local: "Sandbox policy blocks local/private network addresses.",
  denied: "Domain denied by the sandbox policy.",
  policy_denied: "Domain resolves to an address denied by the sandbox policy.",
  method_not_allowed: "Method not allowed in limited mode.",
  mitm_required: "Limited mode allows only plain HTTP GET, HEAD and OPTIONS (no TLS interception in shellmcp).",
  sni_mismatch: "TLS server name differs from the CONNECT host.",
};

/** `x-proxy-error` header value per reason (Codex 0.169's four `blocked-by-*` values, plus ours). */
export const PROXY_ERROR_HEADER: Record<BlockReason, string> = {
  not_allowed: "blocked-by-allowlist",
  not_allowed_local: "blocked-by-allowlist",
  denied: "blocked-by-denylist",
  policy_denied: "blocked-by-policy",
  method_not_allowed: "blocked-by-method-policy",
  mitm_required: "blocked-by-mitm-required",
  sni_mismatch: "blocked-by-policy",
};

const NETWORK_KEYS = new Set([
  "enabled",
  "proxy_url",
  "enable_socks5",
  "socks_url",
  "enable_socks5_udp",
  "allow_upstream_proxy",
  "dangerously_allow_non_loopback_proxy",
  "dangerously_allow_all_unix_sockets",
  "mode",
  "domains",
  "unix_sockets",
  "allow_local_binding",
  "mitm",
]);

/** The policy with the feature off and nothing configured. */
export function emptyNetworkPolicy(): NetworkPolicy {
  return { enabled: false, mode: "full", allow: [], deny: [], allowLocalBinding: false, enableSocks5: true, enableSocks5Udp: true };
}

function table(v: unknown, where: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ShellmcpError("CONFIG", `${where} must be a table`);
  return v as Record<string, unknown>;
}

function bool(v: unknown, where: string): boolean {
  if (typeof v !== "boolean") throw new ShellmcpError("CONFIG", `${where}: invalid type: expected a boolean (got ${JSON.stringify(v)})`);
  return v;
}

/**
 * Apply one `network` table (`[permissions.<p>.network]` or `[features.network_proxy]`) at `where` onto `p`.
 * Unknown keys are refused (Codex: `deny_unknown_fields`); `domains` entries are validated as Codex does
 * ({@link normalizePattern}). Warnings (ports dropped) go to `warn`.
 */
function applyNetworkTable(
  p: NetworkPolicy,
  t: Record<string, unknown>,
  where: string,
  warn: (m: string) => void,
  featureTable: boolean,
): void {
  for (const k of Object.keys(t)) {
    if (!NETWORK_KEYS.has(k)) throw new ShellmcpError("CONFIG", `${where}: unknown field \`${k}\``, { key: `${where}.${k}` });
  }
  if (t.enabled !== undefined && featureTable) p.enabled = bool(t.enabled, `${where}.enabled`);
  else if (t.enabled !== undefined) bool(t.enabled, `${where}.enabled`);
  if (t.mode !== undefined) {
    if (t.mode !== "full" && t.mode !== "limited")
      throw new ShellmcpError("CONFIG", `${where}.mode: unknown variant \`${String(t.mode)}\`, expected \`full\` or \`limited\``);
    p.mode = t.mode;
  }
  if (t.allow_local_binding !== undefined) p.allowLocalBinding = bool(t.allow_local_binding, `${where}.allow_local_binding`);
  if (t.enable_socks5 !== undefined) p.enableSocks5 = bool(t.enable_socks5, `${where}.enable_socks5`);
  if (t.enable_socks5_udp !== undefined) p.enableSocks5Udp = bool(t.enable_socks5_udp, `${where}.enable_socks5_udp`);
  if (t.domains !== undefined) {
    for (const [raw, decision] of Object.entries(table(t.domains, `${where}.domains`))) {
      if (decision !== "allow" && decision !== "deny")
        throw new ShellmcpError(
          "CONFIG",
          `${where}.domains.${JSON.stringify(raw)}: unknown variant \`${String(decision)}\`, expected \`allow\` or \`deny\``,
        );
      const pat = normalizePattern(raw, decision, warn);
      const [mine, other] = decision === "allow" ? [p.allow, p.deny] : [p.deny, p.allow];
      const i = other.indexOf(pat);
      if (i >= 0) other.splice(i, 1);
      if (!mine.includes(pat)) mine.push(pat);
    }
  }
}

/**
 * Read the network policy from a parsed config (`-c` overrides already applied) and the loaded rules. Throws
 * `CONFIG` naming the key for what Codex 0.169 refuses: a `default_permissions` profile that does not exist, a
 * wrong type, an unknown key, a deny `*`, an empty or malformed pattern. `warn` receives non-fatal notes.
 */
export function readNetworkPolicy(cfg: Config, rules: Policy | undefined, warn: (m: string) => void = () => undefined): NetworkPolicy {
  const p = emptyNetworkPolicy();
  const features = cfg.features === undefined ? {} : table(cfg.features, "features");
  const np = features.network_proxy;
  if (np !== undefined && typeof np !== "boolean") table(np, "features.network_proxy");
  if (typeof np === "boolean") p.enabled = np;
  const name = cfg.default_permissions;
  if (name !== undefined) {
    if (typeof name !== "string") throw new ShellmcpError("CONFIG", "default_permissions must be a string");
    const perms = cfg.permissions === undefined ? {} : table(cfg.permissions, "permissions");
    const builtin = name.startsWith(":");
    const profile = perms[name];
    if (profile === undefined && !builtin)
      throw new ShellmcpError("CONFIG", `default_permissions refers to undefined profile \`${name}\``, { key: "default_permissions" });
    if (profile !== undefined) {
      const prof = table(profile, `permissions.${name}`);
      if (prof.network !== undefined)
        applyNetworkTable(p, table(prof.network, `permissions.${name}.network`), `permissions.${name}.network`, warn, false);
    }
  }
  if (typeof np === "object") applyNetworkTable(p, np as Record<string, unknown>, "features.network_proxy", warn, true);
  // network_rule: exact hosts, in file order; allow moves a host to the allow list, forbidden to the deny list.
  if (rules !== undefined) {
    const lists = rules.networkLists();
    for (const h of lists.denied) {
      const i = p.allow.indexOf(h);
      if (i >= 0) p.allow.splice(i, 1);
      if (!p.deny.includes(h)) p.deny.push(h);
    }
    for (const h of lists.allowed) {
      const i = p.deny.indexOf(h);
      if (i >= 0) p.deny.splice(i, 1);
      if (!p.allow.includes(h)) p.allow.push(h);
    }
  }
  return p;
}

/**
 * Normalise one `domains` pattern as Codex does (`normalize_host`): trim, lowercase, one trailing dot dropped,
 * `[…]` dropped around IPv6, `:port` dropped when the entry has exactly one `:` (Codex ignores ports in entries;
 * a note goes to `warn`); IP literals in canonical form. Throws `CONFIG` for an empty entry, a deny `*` (Codex:
 * "invalid value for network.denied_domains: * (allowed exact hosts or scoped wildcards like *.example.com or
 * **.example.com)"), or characters no host can have.
 */
export function normalizePattern(raw: string, decision: "allow" | "deny", warn: (m: string) => void = () => undefined): string {
  const list = decision === "allow" ? "allowed_domains" : "denied_domains";
  const invalid = () =>
    new ShellmcpError(
      "CONFIG",
      `network proxy constraints are invalid: invalid value for network.${list}: ${raw} (allowed exact hosts or scoped wildcards like *.example.com or **.example.com)`,
      { pattern: raw },
    );
  let h = raw.trim().toLowerCase();
  if (h.startsWith("[")) {
    const close = h.indexOf("]");
    if (close < 0) throw invalid();
    if (h.length > close + 1) {
      if (!/^:\d+$/.test(h.slice(close + 1))) throw invalid();
      warn(`network: the port in ${JSON.stringify(raw)} is ignored (Codex's entries cover every port)`);
    }
    h = h.slice(1, close);
  } else if ((h.match(/:/g) ?? []).length === 1) {
    const [host, port] = h.split(":") as [string, string];
    if (/^\d+$/.test(port)) warn(`network: the port in ${JSON.stringify(raw)} is ignored (Codex's entries cover every port)`);
    h = host;
  }
  if (h.endsWith(".")) h = h.slice(0, -1);
  if (h === "") throw invalid();
  if (h === "*") {
    if (decision === "deny") throw invalid();
    return h;
  }
  if (!/^[a-z0-9*?._:%_-]+$/.test(h) || h.includes("..")) throw invalid();
  const ip = canonicalIp(h);
  return ip ?? h;
}

// ---------------------------------------------------------------------------------------------------------
// Hosts and addresses

/** A dotted-quad IPv4 address in canonical form: each octet 0–255 in decimal without a leading zero. */
const CANONICAL_V4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/**
 * Canonical IP of `host` when it is an IP literal in any WHATWG spelling (`2130706433`, `127.1`, `0x7f.0.0.1`,
 * `::FFFF:127.0.0.1` → `127.0.0.1`; IPv6 compressed, lowercase; IPv4-mapped IPv6 as its IPv4), else undefined.
 * `host` has no brackets.
 */
export function canonicalIp(host: string): string | undefined {
  // Already canonical (four decimal octets, no leading zeros: `010` is octal to WHATWG): the common case, without
  // the URL parser.
  if (CANONICAL_V4.test(host)) return host;
  if (host.includes(":")) {
    let u: string;
    try {
      u = new URL(`http://[${host}]/`).hostname;
    } catch {
      return undefined;
    }
    const v6 = u.slice(1, -1);
    const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
    if (m !== null) {
      const hi = parseInt(m[1]!, 16);
      const lo = parseInt(m[2]!, 16);
      return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
    }
    return v6;
  }
  // WHATWG: a host whose last label is numeric is an IPv4 address (or invalid).
  const labels = host.split(".");
  if (labels[labels.length - 1] === "") labels.pop();
  const last = labels[labels.length - 1] ?? "";
  if (!/^(0x[0-9a-f]*|[0-9]+)$/i.test(last)) return undefined;
  try {
    const h = new URL(`http://${host}/`).hostname;
    return /^\d+\.\d+\.\d+\.\d+$/.test(h) ? h : undefined;
  } catch {
    return undefined;
  }
}

/** A request target, normalised: `host` lowercase without trailing dot or brackets, `ip` when it is an IP literal. */
export interface Target {
  host: string;
  ip?: string;
}

/**
 * Normalise a request's host as Codex's `normalize_host` does (trim, lowercase, one trailing dot, brackets), then
 * canonicalise IP spellings. Undefined when it cannot be a host (empty, spaces, control characters, `/`, `@`,
 * or anything the WHATWG host parser refuses): such a request is refused `not_allowed`.
 */
export function normalizeTarget(raw: string): Readonly<Target> | undefined {
  const known = targetCache.get(raw);
  if (known !== undefined) return known ?? undefined;
  const t = normalizeTargetUncached(raw);
  // A pure function of the string, asked several times per request (decision, re-check, Host/SNI comparison).
  if (targetCache.size >= TARGET_CACHE_SIZE) targetCache.clear();
  targetCache.set(raw, t ?? null);
  return t;
}

/** Hosts {@link normalizeTarget} remembers (the cache is emptied when full). */
const TARGET_CACHE_SIZE = 512;
const targetCache = new Map<string, Readonly<Target> | null>();

function normalizeTargetUncached(raw: string): Target | undefined {
  let h = raw.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.endsWith(".")) h = h.slice(0, -1);
  if (h === "" || !/^[a-z0-9._:_-]+$/.test(h)) return undefined;
  const ip = canonicalIp(h);
  if (ip !== undefined) return { host: ip, ip };
  if (h.includes(":")) return undefined;
  try {
    if (new URL(`http://${h}/`).hostname !== h) return undefined;
  } catch {
    return undefined;
  }
  return { host: h };
}

function v4(ip: string): number[] | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(ip);
  return m === null ? undefined : [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])];
}

function v6Words(ip: string): number[] {
  const [head, tail] = ip.includes("::") ? ip.split("::") : [ip, undefined];
  const parse = (s: string | undefined) => (s === undefined || s === "" ? [] : s.split(":").map((w) => parseInt(w, 16)));
  const a = parse(head);
  const b = parse(tail);
  return tail === undefined ? a : [...a, ...new Array(8 - a.length - b.length).fill(0), ...b];
}

/**
 * Whether a canonical IP (from {@link canonicalIp}) is not a public address: loopback, unspecified, private
 * (RFC 1918, ULA), link-local (cloud metadata included), CGNAT, TEST-NETs, benchmarking, IETF protocol
 * assignments, multicast, reserved and broadcast, and IPv6 forms embedding such an IPv4 (NAT64 `64:ff9b::/96`).
 * Mirrors Codex's `is_non_public_ip`.
 */
export function isNonPublicIp(ip: string): boolean {
  const a = v4(ip);
  if (a !== undefined) {
    const [x, y, z] = a as [number, number, number, number];
    return (
      x === 0 ||
      x === 10 ||
      x === 127 ||
      (x === 100 && y >= 64 && y <= 127) ||
      (x === 169 && y === 254) ||
      (x === 172 && y >= 16 && y <= 31) ||
      (x === 192 && y === 0 && z === 0) ||
      (x === 192 && y === 0 && z === 2) ||
      (x === 192 && y === 168) ||
      (x === 198 && (y === 18 || y === 19)) ||
      (x === 198 && y === 51 && z === 100) ||
      (x === 203 && y === 0 && z === 113) ||
      x >= 224
    );
  }
  const w = v6Words(ip);
  if (w.length !== 8) return true;
  const zeroUpTo = (n: number) => w.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(7) && (w[7] === 0 || w[7] === 1)) return true; // :: and ::1
  if (w[0] === 0x64 && w[1] === 0xff9b && zeroUpTo(0) && w[2] === 0 && w[3] === 0 && w[4] === 0 && w[5] === 0)
    return isNonPublicIp(`${w[6]! >> 8}.${w[6]! & 255}.${w[7]! >> 8}.${w[7]! & 255}`);
  const first = w[0]!;
  return (
    (first & 0xfe00) === 0xfc00 || // ULA fc00::/7
    (first & 0xffc0) === 0xfe80 || // link-local fe80::/10
    (first & 0xffc0) === 0xfec0 || // site-local (deprecated)
    (first & 0xff00) === 0xff00 || // multicast
    (first === 0x2001 && w[1] === 0x0db8) || // documentation
    (first === 0xfd00 && w[1] === 0x0ec2) // AWS metadata fd00:ec2::/32
  );
}

/** Whether a normalised target is local on its face: `localhost` (and its subdomains) or a non-public IP literal. */
function isLocalLiteral(t: Target): boolean {
  if (t.ip !== undefined) return isNonPublicIp(t.ip);
  return t.host === "localhost" || t.host.endsWith(".localhost");
}

const patternCache = new Map<string, RegExp>();

/**
 * Whether normalised host `host` matches pattern `pat` (Codex's globs): `*` everything; `*.x` strict subdomains
 * of `x` at any depth; `**.x` `x` and its subdomains; `*`/`?` elsewhere are globs within the name; anything else
 * exact. Case was folded by normalisation.
 */
export function hostMatches(pat: string, host: string): boolean {
  if (pat === "*") return true;
  if (!pat.includes("*") && !pat.includes("?")) return pat === host;
  if (pat.startsWith("**.")) {
    const apex = pat.slice(3);
    if (!apex.includes("*") && !apex.includes("?")) return host === apex || host.endsWith(`.${apex}`);
  }
  let re = patternCache.get(pat);
  if (re === undefined) {
    const body = (pat.startsWith("**.") ? pat.slice(3) : pat)
      .split("")
      .map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[.+^${}()|[\]\\-]/g, "\\$&")))
      .join("");
    re = new RegExp(pat.startsWith("**.") ? `^(?:.+\\.)?${body}$` : pat.startsWith("*.") ? `^.+${body.slice(2)}$` : `^${body}$`);
    patternCache.set(pat, re);
  }
  return re.test(host);
}

/** A name lookup: every address of `host` (canonical IPs). Rejects when it fails. */
export type Lookup = (host: string) => Promise<string[]>;

/** Outcome of {@link decideHost}: allowed with the addresses the proxy may dial, or refused with a reason. */
export type HostDecision = { allowed: true; addresses: string[] } | { allowed: false; reason: BlockReason };

/** How long a name lookup for the local check may take, ms (Codex: 2 s; on timeout the request is refused). */
export const LOOKUP_TIMEOUT_MS = 2000;

/**
 * Decide one request for `rawHost` (port ignored: Codex's entries cover every port) under `p` (see the top of this
 * file for the order). Names that are not allow-listed are never passed to `lookup`; an allowed name's addresses
 * are looked up once and returned, so the proxy dials what was checked (the DNS-rebinding anchor). An IP literal
 * is "resolved" to itself. A lookup failure or timeout (after {@link LOOKUP_TIMEOUT_MS}) refuses the request
 * `not_allowed_local` when the local check needs the answer (fail closed, as Codex); with `allow_local_binding` it
 * yields no address, which the proxy reports as a failed upstream (502, SOCKS reply 4).
 */
export async function decideHost(p: NetworkPolicy, rawHost: string, lookup: Lookup): Promise<HostDecision> {
  const t = normalizeTarget(rawHost);
  if (t === undefined) return { allowed: false, reason: "not_allowed" };
  if (p.deny.some((d) => hostMatches(d, t.host))) return { allowed: false, reason: "denied" };
  const listedExactly = p.allow.includes(t.host);
  const local = isLocalLiteral(t);
  if (!p.allowLocalBinding && local && !listedExactly) return { allowed: false, reason: "not_allowed_local" };
  if (!p.allow.some((a) => hostMatches(a, t.host))) return { allowed: false, reason: "not_allowed" };
  if (t.ip !== undefined) return { allowed: true, addresses: [t.ip] };
  let addresses: string[];
  try {
    addresses = await withTimeout(lookup(t.host), LOOKUP_TIMEOUT_MS);
  } catch {
    return p.allowLocalBinding ? { allowed: true, addresses: [] } : { allowed: false, reason: "not_allowed_local" };
  }
  addresses = addresses.map((a) => canonicalIp(a) ?? a);
  if (addresses.some((a) => p.deny.includes(a))) return { allowed: false, reason: "policy_denied" };
  // `localhost` listed exactly stands for its loopback answer (Codex 0.169 let it through); anything else local
  // needs allow_local_binding.
  if (!p.allowLocalBinding && !(local && listedExactly) && (addresses.length === 0 || addresses.some(isNonPublicIp)))
    return { allowed: false, reason: "not_allowed_local" };
  return { allowed: true, addresses };
}

/**
 * Connect-time re-check of the address about to be dialed (Codex's `TargetCheckedTcpConnector`): a non-public
 * address needs `allow_local_binding`, or to be what an exactly listed local target stands for.
 */
export function dialAllowed(p: NetworkPolicy, rawHost: string, address: string): boolean {
  const ip = canonicalIp(address) ?? address;
  if (p.deny.includes(ip)) return false;
  if (p.allowLocalBinding || !isNonPublicIp(ip)) return true;
  const t = normalizeTarget(rawHost);
  return t !== undefined && p.allow.includes(t.host) && isLocalLiteral(t);
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timeout")), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/** Whether `method` may be sent in `mode` (limited: GET, HEAD, OPTIONS only, as Codex). */
export function methodAllowed(mode: NetworkMode, method: string): boolean {
  return mode === "full" || method === "GET" || method === "HEAD" || method === "OPTIONS";
}
