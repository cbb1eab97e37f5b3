/**
 * The proxy of one call (docs/network.md): an HTTP proxy (absolute-form requests and `CONNECT`) and a SOCKS5 proxy
 * (`CONNECT` only), in the server process, on Bun's native sockets through ./relay.ts (backpressure end to end: a
 * short `write()` keeps its remainder and pauses the sending side until it is written — the spec's 30 MB trap).
 *
 * Listeners are per call ({@link CallProxy}): either its own on host loopback (Landlock backend), or listening
 * sockets made inside the call's network namespace and handed over (bubblewrap backend, ./bridge.ts). Every
 * refusal is recorded on the call ({@link CallProxy.refusals}) and answered as Codex 0.169 does:
 * - plain HTTP: `403 Forbidden`, `content-type: application/json`, `x-proxy-error: blocked-by-…`, body
 *   `{"status":"blocked","host":…,"reason":…,"decision":"deny","source":"baseline_policy","protocol":"http","port":…,"message":…}`;
 * - CONNECT: `403 Forbidden`, `content-type: text/plain`, the same `x-proxy-error`, the message as body;
 * - SOCKS5: reply `0x02` (connection not allowed by ruleset).
 * One request per plain-HTTP connection (the upstream connection is fixed to the checked host and the request is
 * sent with `Connection: close`), a `Host` header that differs from the absolute-form target is a `400`, and after
 * a CONNECT the first bytes are read: a TLS ClientHello whose server name differs from the CONNECT host closes the
 * tunnel (a shellmcp check Codex lacks). Bounded: heads of {@link MAX_HEAD_BYTES}, {@link MAX_CONNECTIONS} client
 * connections at a time, {@link HEAD_TIMEOUT_MS} to send a head.
 */
import { promises as dns } from "node:dns";
import { readlinkSync } from "node:fs";
import { closeQuiet } from "../../ffi/libc.ts";
import { log } from "../log.ts";
import { bounded } from "../safe-text.ts";
import {
  BLOCK_MESSAGES,
  decideHost,
  dialAllowed,
  methodAllowed,
  normalizeTarget,
  PROXY_ERROR_HEADER,
  type BlockReason,
  type Lookup,
  type NetworkPolicy,
} from "./policy.ts";
import {
  displayHost,
  HOP_BY_HOP,
  parseAuthority,
  parseClientHelloSni,
  parseHttpHead,
  parseSocksGreeting,
  parseSocksRequest,
  sameHost,
  type HttpHead,
} from "./proxy-wire.ts";
import { answerAndClose, type Conn, handlers, kill, newConn, pair, readFrame, send, startRelay } from "./relay.ts";

type Sock = Bun.Socket<Conn>;

/** Largest request head (request line + headers) or SOCKS5 frame read before a decision, bytes. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** Largest ClientHello waited for after a CONNECT, bytes (a TLS record is at most 16 KiB + 5). */
export const MAX_HELLO_BYTES = 16 * 1024 + 5;
/** Time a client has to send its head (or SOCKS5 frames, or its first tunnel bytes), ms. */
export const HEAD_TIMEOUT_MS = 30_000;
/**
 * Client connections one call's proxy serves at a time; more are closed at once. With a reader that stops, each
 * connection holds at most one read chunk (up to 512 KiB) in the server, so a call's proxy stays bounded
 * (bench/network.ts measures it).
 */
export const MAX_CONNECTIONS = 128;
/** Refusals one call records (and logs); later ones are still refused, not recorded. */
export const MAX_RECORDED_REFUSALS = 1000;
/** Time an upstream connection may take to open, ms. */
export const CONNECT_TIMEOUT_MS = 15_000;

/** Which way a request came: Codex's protocol names (`network_rule`'s `https` is `https_connect` on the wire). */
export type ProxyProtocol = "http" | "https_connect" | "socks5_tcp";

/** One refused request of a call. */
export interface ProxyRefusal {
  host: string;
  port: number;
  protocol: ProxyProtocol;
  reason: BlockReason;
}

/** Options of {@link CallProxy}. */
export interface CallProxyOptions {
  /** What the proxy allows (src/network/policy.ts); people's answers add exact entries on top. */
  policy: NetworkPolicy;
  /** Name lookup (default: the system resolver, every address). Only allow-listed names are passed to it. */
  lookup?: Lookup;
  /** Client connections at a time (default {@link MAX_CONNECTIONS}). */
  maxConnections?: number;
  /**
   * Ask a person about a host refused `not_allowed` (only that reason: `denied` and `not_allowed_local` are final,
   * as in Codex): resolves with how long a yes holds, or undefined for no (declined, timed out, or no way to ask).
   * One question per host at a time: concurrent requests for it wait for the same answer.
   */
  ask?: (q: { host: string; port: number; protocol: ProxyProtocol }) => Promise<ApprovalScope | undefined>;
  /**
   * Destinations a person allowed for the whole session, as {@link approvalKey}s (shared by the server's calls;
   * "session" and "always" add to it).
   */
  sessionAllowed?: Set<string>;
}

/**
 * How long a person's yes holds: this call or this session (server) — both for exactly the host, port and protocol
 * asked about — or always (a `network_rule` is appended: Codex's rule names a host, so it allows every port of it,
 * and the question says so).
 */
export type ApprovalScope = "once" | "session" | "always";

/**
 * The scope a person's yes is remembered at: exact host (normalised, lowercase), port and wire protocol, e.g.
 * `example.com 443 https_connect`; without port and protocol, every port of the host (`example.com * *`: an
 * "always" answer, which appends a host-wide `network_rule`).
 */
export function approvalKey(host: string, port?: number, protocol?: ProxyProtocol): string {
  return `${host} ${port ?? "*"} ${protocol ?? "*"}`;
}

/** Ports a {@link CallProxy} listens on (host loopback) — `socks` absent when SOCKS5 is off. */
export interface ProxyPorts {
  http: number;
  socks?: number;
}

const systemLookup: Lookup = async (host) => (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** The proxy of one call: listeners, live connections, and the refusals to report. */
export class CallProxy {
  /** Every refusal of this call, in order (what the tool result reports). */
  readonly refusals: ProxyRefusal[] = [];
  private readonly listeners: Bun.SocketListener<Conn>[] = [];
  private readonly sockets = new Set<Sock>();
  private readonly lookup: Lookup;
  private readonly max: number;
  private closed = false;

  /** A proxy enforcing `o.policy`; it listens once {@link listenLoopback} or {@link adopt} is called. */
  constructor(private readonly o: CallProxyOptions) {
    this.lookup = o.lookup ?? systemLookup;
    this.max = o.maxConnections ?? MAX_CONNECTIONS;
  }

  /** The policy this proxy enforces. */
  get policy(): NetworkPolicy {
    return this.o.policy;
  }

  /** Listen on ephemeral ports of 127.0.0.1 (SOCKS5 only when the policy enables it). */
  async listenLoopback(): Promise<ProxyPorts> {
    const http = this.listen((s) => this.onHttp(s), { hostname: "127.0.0.1", port: 0 });
    const socks = this.o.policy.enableSocks5 ? this.listen((s) => this.onSocks(s), { hostname: "127.0.0.1", port: 0 }) : undefined;
    return socks === undefined ? { http } : { http, socks };
  }

  /**
   * Accept on listening sockets made elsewhere (inside the call's network namespace, ./bridge.ts): `fds.http`
   * serves HTTP, `fds.socks` SOCKS5. The fds belong to the proxy from here on (closed by {@link close}).
   */
  async adopt(fds: { http: number; socks?: number }): Promise<void> {
    for (const fd of fds.socks === undefined ? [fds.http] : [fds.http, fds.socks]) this.adopted.set(fd, fdTarget(fd));
    if (!this.closed) this.listen((s) => this.onHttp(s), { fd: fds.http });
    if (!this.closed && fds.socks !== undefined) this.listen((s) => this.onSocks(s), { fd: fds.socks });
    if (this.closed) this.releaseAdopted(); // the call ended while they were on their way
  }

  /** Adopted fds and what each referred to (`socket:[inode]`), so a number reused since is never closed. */
  private readonly adopted = new Map<number, string | undefined>();

  /**
   * Close the adopted listening fds that are still open (a listener's `stop()` closes its fd; one never listened on,
   * because the call ended first, is closed here), unless the number now names something else.
   */
  private releaseAdopted(): void {
    for (const [fd, target] of this.adopted) if (target !== undefined && fdTarget(fd) === target) closeQuiet(fd);
    this.adopted.clear();
  }

  /** Stop listening and end every connection of the call (nothing of it stays open after the call). */
  async close(): Promise<void> {
    this.closed = true;
    for (const l of this.listeners) l.stop(false);
    this.listeners.length = 0;
    for (const s of [...this.sockets]) kill(s);
    this.sockets.clear();
    this.releaseAdopted();
  }

  /**
   * Accept on `where` (a loopback address, or a listening fd handed in — `Bun.listen` takes `fd` though its types
   * do not say so): the port listened on (0 for an fd).
   */
  private listen(handler: (s: Sock) => Promise<void>, where: { hostname: string; port: number } | { fd: number }): number {
    const l = Bun.listen<Conn>({
      ...(where as { hostname: string; port: number }),
      allowHalfOpen: true,
      socket: {
        ...handlers,
        open: (s) => {
          s.data = newConn();
          if (this.closed || this.clients >= this.max) {
            kill(s);
            return;
          }
          this.track(s, true);
          // A failure in one connection's handling ends that connection, never the listener.
          handler(s).catch((e: unknown) => {
            log.warn("network proxy connection failed", { error: (e as Error).message });
            if (s.data.peer !== undefined) kill(s.data.peer);
            kill(s);
          });
        },
      },
    });
    this.listeners.push(l);
    return "fd" in where ? 0 : l.port;
  }

  private clients = 0;

  private track(s: Sock, client: boolean): void {
    if (this.closed) {
      kill(s); // an upstream connection that opened after the call ended
      return;
    }
    this.sockets.add(s);
    if (client) this.clients++;
    s.data.onClose = () => {
      this.sockets.delete(s);
      if (client) this.clients--;
    };
  }

  private refuse(host: string, port: number, protocol: ProxyProtocol, reason: BlockReason): void {
    const r = { host, port, protocol, reason };
    // Bounded: a command that loops on refused requests keeps the first MAX_RECORDED_REFUSALS (logged up to there).
    if (this.refusals.length >= MAX_RECORDED_REFUSALS) return;
    this.refusals.push(r);
    log.info("network request refused", { ...r });
  }

  /** Destinations ({@link approvalKey}) a person allowed for this call only. */
  private readonly callAllowed = new Set<string>();
  /** Questions in flight, by {@link approvalKey}. */
  private readonly asking = new Map<string, Promise<ApprovalScope | undefined>>();
  /**
   * Runs a question to a person; the call's stopwatch sets it so that time spent waiting for the answer does not
   * count against the command's timeout (default: runs it as is).
   */
  pauseWhile: <T>(f: () => Promise<T>) => Promise<T> = (f) => f();

  /**
   * The policy for one destination: the configured one, plus `host` as an exact allow entry when a person allowed
   * exactly this host, port and protocol (this call or this session). A yes for `host:443` is no yes for
   * `host:22`: each destination is asked about on its own, as the question names it.
   */
  private policyFor(host: string, port: number, protocol: ProxyProtocol): NetworkPolicy {
    const key = approvalKey(host, port, protocol);
    const session = this.o.sessionAllowed;
    const approved = this.callAllowed.has(key) || (session !== undefined && (session.has(key) || session.has(approvalKey(host))));
    return approved ? { ...this.o.policy, allow: [...this.o.policy.allow, host] } : this.o.policy;
  }

  /** Ask about one destination once for any number of concurrent requests to it; remember a yes for its scope. */
  private approve(host: string, port: number, protocol: ProxyProtocol): Promise<ApprovalScope | undefined> {
    const key = approvalKey(host, port, protocol);
    let q = this.asking.get(key);
    if (q === undefined) {
      q = this.pauseWhile(() => this.o.ask!({ host, port, protocol }))
        .catch(() => undefined)
        .then((scope) => {
          // "always" appended a network_rule, which names the host only: every port of it, from now on.
          const remembered = scope === "always" ? approvalKey(host) : key;
          if (scope === "once") this.callAllowed.add(key);
          else if (scope !== undefined) this.o.sessionAllowed?.add(remembered) ?? this.callAllowed.add(remembered);
          this.asking.delete(key);
          return scope;
        });
      this.asking.set(key, q);
    }
    return q;
  }

  /** Decide (asking a person about a `not_allowed` host when possible) and dial: the upstream socket, or why not. */
  private async open(
    host: string,
    port: number,
    protocol: ProxyProtocol,
    method?: string,
  ): Promise<{ upstream: Sock } | { refused: BlockReason } | { failed: string }> {
    const t = normalizeTarget(host);
    let policy = t === undefined ? this.o.policy : this.policyFor(t.host, port, protocol);
    let d = await decideHost(policy, host, this.lookup);
    if (!d.allowed && d.reason === "not_allowed" && this.o.ask !== undefined && t !== undefined && !this.closed) {
      if ((await this.approve(t.host, port, protocol)) !== undefined) {
        policy = this.policyFor(t.host, port, protocol);
        d = await decideHost(policy, host, this.lookup);
      }
    }
    if (!d.allowed) return { refused: d.reason };
    if (method !== undefined && !methodAllowed(policy.mode, method)) return { refused: "method_not_allowed" };
    const candidates = d.addresses.filter((a) => dialAllowed(policy, host, a));
    if (d.addresses.length > 0 && candidates.length === 0) return { refused: "not_allowed_local" };
    if (candidates.length === 0) return { failed: `cannot resolve ${host}` };
    let last = "";
    for (const address of candidates) {
      if (this.closed) return { failed: "the call ended" };
      try {
        return { upstream: await dial(address, port) };
      } catch (e) {
        last = (e as Error).message;
      }
    }
    return { failed: last };
  }

  // -------------------------------------------------------------------------------------------------------
  // HTTP

  private async onHttp(client: Sock): Promise<void> {
    let h: HttpHead;
    try {
      h = await readFrame(client, parseHttpHead, MAX_HEAD_BYTES, HEAD_TIMEOUT_MS);
    } catch {
      kill(client);
      return;
    }
    if (h.method === "CONNECT") return this.onConnect(client, h);
    const badRequest = (msg: string) => answer(client, 400, "Bad Request", "text/plain", msg);
    let target: { host: string; port: number; path: string };
    const hostHeader = h.headers.find(([k]) => k === "host")?.[1];
    if (h.target.startsWith("/")) {
      // Origin-form sent to the proxy: routed by Host, as Codex does.
      const a = hostHeader === undefined ? undefined : parseAuthority(hostHeader, 80);
      if (a === undefined) return badRequest("missing or invalid Host header");
      target = { ...a, path: h.target };
    } else {
      const m = /^http:\/\/([^/?#]*)([^#]*)/i.exec(h.target);
      const a = m === null || m[1]!.includes("@") ? undefined : parseAuthority(m[1]!, 80);
      if (a === undefined) return badRequest("invalid request target");
      target = { ...a, path: m![2] === "" ? "/" : m![2]!.startsWith("/") ? m![2]! : `/${m![2]}` };
      if (hostHeader !== undefined) {
        const ha = parseAuthority(hostHeader, 80);
        if (ha === undefined || !sameHost(ha.host, target.host) || ha.port !== target.port)
          return badRequest("Host header does not match request target");
      }
    }
    const r = await this.open(target.host, target.port, "http", h.method);
    if ("refused" in r) {
      const shown = displayHost(target.host);
      this.refuse(shown, target.port, "http", r.refused);
      const body = JSON.stringify({
        status: "blocked",
        host: shown,
        reason: r.refused,
        decision: "deny",
        source: "baseline_policy",
        protocol: "http",
        port: target.port,
        message: BLOCK_MESSAGES[r.refused],
      });
      return answer(client, 403, "Forbidden", "application/json", body, PROXY_ERROR_HEADER[r.refused]);
    }
    if ("failed" in r) return answer(client, 502, "Bad Gateway", "text/plain", `upstream unavailable: ${r.failed}`);
    const up = r.upstream;
    this.track(up, false);
    if (client.data.closed) return kill(up);
    const lines = [`${h.method} ${target.path} ${h.version}`];
    for (const [k, v, raw] of h.headers) if (!HOP_BY_HOP.has(k) && !k.startsWith("proxy-")) lines.push(`${raw}: ${v}`);
    if (hostHeader === undefined) lines.push(`Host: ${h.target.slice(7).split(/[/?#]/)[0]}`);
    lines.push("Connection: close", "", "");
    pair(client, up);
    send(up, lines.join("\r\n"));
    startRelay(up);
    startRelay(client); // the bytes after the head go first
  }

  private async onConnect(client: Sock, h: HttpHead): Promise<void> {
    const a = parseAuthority(h.target, undefined);
    if (a === undefined) return answer(client, 400, "Bad Request", "text/plain", "invalid CONNECT target");
    const r = this.o.policy.mode === "limited" ? { refused: "mitm_required" as const } : await this.open(a.host, a.port, "https_connect");
    if ("refused" in r) {
      this.refuse(displayHost(a.host), a.port, "https_connect", r.refused);
      return answer(client, 403, "Forbidden", "text/plain", BLOCK_MESSAGES[r.refused], PROXY_ERROR_HEADER[r.refused]);
    }
    if ("failed" in r) return answer(client, 502, "Bad Gateway", "text/plain", `upstream unavailable: ${r.failed}`);
    const up = r.upstream;
    this.track(up, false);
    if (client.data.closed) return kill(up);
    send(client, "HTTP/1.1 200 Connection established\r\n\r\n");
    // Server-first protocols (ssh) must not wait for the check: upstream → client flows at once.
    pair(client, up);
    startRelay(up);
    let sni: string | null;
    try {
      // Consumes nothing: the hello and whatever follows it stay in the client's inbox for the relay.
      sni = await readFrame(client, parseClientHelloSni, MAX_HELLO_BYTES, HEAD_TIMEOUT_MS);
    } catch {
      kill(client);
      kill(up);
      return;
    }
    if (sni !== null && !sameHost(sni, a.host)) {
      this.refuse(a.host, a.port, "https_connect", "sni_mismatch");
      kill(client);
      kill(up);
      return;
    }
    startRelay(client);
  }

  // -------------------------------------------------------------------------------------------------------
  // SOCKS5 (RFC 1928), CONNECT only, no authentication

  private async onSocks(client: Sock): Promise<void> {
    try {
      const methods = await readFrame(client, parseSocksGreeting, 300, HEAD_TIMEOUT_MS);
      if (!methods.includes(0)) return answerAndClose(client, Buffer.from([5, 0xff]));
      send(client, Buffer.from([5, 0]));
      const { cmd, host, port } = await readFrame(client, parseSocksRequest, 300, HEAD_TIMEOUT_MS);
      const reply = (code: number) => Buffer.from([5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
      if (cmd !== 1) return answerAndClose(client, reply(7)); // command not supported (UDP ASSOCIATE, BIND)
      const r = this.o.policy.mode === "limited" ? { refused: "method_not_allowed" as const } : await this.open(host, port, "socks5_tcp");
      if ("refused" in r) {
        this.refuse(displayHost(host), port, "socks5_tcp", r.refused);
        return answerAndClose(client, reply(2));
      }
      if ("failed" in r) return answerAndClose(client, reply(5));
      const up = r.upstream;
      this.track(up, false);
      if (client.data.closed) return kill(up);
      send(client, reply(0));
      pair(client, up);
      startRelay(up);
      startRelay(client); // the bytes after the request go first
    } catch {
      kill(client);
    }
  }
}

/** What fd `fd` of this process refers to (`socket:[123]`), or undefined when it is not open. */
function fdTarget(fd: number): string | undefined {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return undefined;
  }
}

/**
 * Open a TCP connection to `address:port` (an IP literal: nothing is resolved here), half-open allowed, within
 * {@link CONNECT_TIMEOUT_MS}. Rejects when it fails or times out (a connection that opens after the timeout is
 * closed at once).
 */
function dial(address: string, port: number): Promise<Sock> {
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(new Error("connect timeout"));
    }, CONNECT_TIMEOUT_MS);
    Bun.connect<Conn>({ hostname: address, port, allowHalfOpen: true, data: newConn(), socket: handlers }).then(
      (s) => {
        if (late) return kill(s);
        clearTimeout(timer);
        resolve(s);
      },
      (e: unknown) => {
        clearTimeout(timer);
        // Bun says "Failed to connect" and keeps the reason in `code`: name both (what node:net's message said).
        const code = (e as NodeJS.ErrnoException).code;
        reject(new Error(code === undefined ? (e as Error).message : `connect ${code} ${address}:${port}`));
      },
    );
  });
}

/** Send a complete answer and close (one request per proxy connection). */
function answer(sock: Sock, status: number, phrase: string, type: string, body: string, proxyError?: string): void {
  const head = [
    `HTTP/1.1 ${status} ${phrase}`,
    `content-type: ${type}`,
    ...(proxyError === undefined ? [] : [`x-proxy-error: ${proxyError}`]),
    `content-length: ${Buffer.byteLength(body)}`,
    "connection: close",
    "",
    "",
  ].join("\r\n");
  answerAndClose(sock, Buffer.from(head + body));
}

/**
 * The lines appended to a call's output naming every host the proxy refused, with the reason (the model otherwise
 * sees only `curl: (56)`): `shellmcp: network access refused: other.test:443 (https_connect): not_allowed — Domain
 * not in allowlist.` Repeats are counted, at most 20 lines.
 */
export function refusalReport(refusals: readonly ProxyRefusal[]): string {
  const counts = new Map<string, number>();
  for (const r of refusals) {
    const host = bounded(r.host.includes(":") ? `[${r.host}]` : r.host, 256);
    const k = `${host}:${r.port} (${r.protocol}): ${r.reason} — ${BLOCK_MESSAGES[r.reason]}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  const lines = [...counts].slice(0, 20).map(([k, n]) => `shellmcp: network access refused: ${k}${n > 1 ? ` (${n} times)` : ""}\n`);
  if (counts.size > 20) lines.push(`shellmcp: … and ${counts.size - 20} more refused destinations\n`);
  return lines.join("");
}
