/**
 * `serve --listen http://HOST:PORT/PATH`: MCP over streamable HTTP on one endpoint (Bun.serve), many clients in
 * one process. This file is what stands in front of the MCP layer (../mcp/http.ts): the listener (TLS with
 * `--tls-cert/--tls-key`), probes, Host and Origin checks, authentication (../auth/http.ts), body caps, the table
 * of legacy MCP sessions and their limits, idle ends and the drain at SIGTERM.
 *
 * Each legacy MCP session (`initialize` → `Mcp-Session-Id`) gets its own client from {@link HttpServeOptions.newClient}
 * (its own exec_command sessions, sandbox state, approvals) and is bound to the principal that opened it: another
 * principal naming its id gets the same 404 as an unknown id. Modern-era (2026-07-28) requests are stateless and
 * served per principal (one client per subject).
 *
 * Answers of this layer (before the MCP layer sees a request): `GET /healthz` and `/readyz` 200 without auth;
 * another path 404; a Host not of this server 421 (its listen host and port, loopback names for a loopback one,
 * `--allowed-host`; any Host on a wildcard address without `--allowed-host`); a foreign `Origin` 403; no or a bad credential 401 (with
 * `WWW-Authenticate`), insufficient scope 403; a method other than GET/POST/DELETE 405; a POST that is not
 * `application/json` 415; a body over the cap 413; JSON that does not parse 400 (-32700); an unknown, foreign or
 * ended session 404 (-32001); too many sessions 503 (-32000); too many calls in flight in one session 429 (-32000).
 */
import { log } from "../log.ts";
import type { HttpAuth } from "../auth/http.ts";
import { isRefusal } from "../auth/http.ts";
import { isModernRequest } from "../mcp/modern.ts";
import { ModernHttp, startHttpSession, type HttpMcpSession } from "../mcp/http.ts";
import type { McpServerOptions } from "../mcp/server.ts";
import { ShellmcpError } from "../errors.ts";

/** A connection with no byte either way for this long is closed by Bun, s (slow or vanished clients). */
export const SOCKET_IDLE_SECONDS = 60;
/** Default largest request body, bytes (a `shell` command is at most 128 KiB; 4 MiB as the SDK's default). */
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Default legacy MCP sessions open at once, server-wide. */
export const DEFAULT_MAX_CLIENTS = 64;
/** Default requests in flight at once in one MCP session. */
export const DEFAULT_MAX_CALLS_PER_CLIENT = 16;
/** Default: a session with no request for this long is ended with everything it started, ms (30 minutes). */
export const DEFAULT_CLIENT_IDLE_TIMEOUT_MS = 30 * 60 * 1000;

/** One client's server behaviour and how to end what it started. */
export interface HttpClient {
  options: McpServerOptions;
  /** End the client's exec sessions and running calls (resolves when they are gone). */
  close(): Promise<void>;
}

/** What {@link startHttpServer} needs. */
export interface HttpServeOptions {
  /** The parsed `--listen` URL (http: or https:). */
  url: URL;
  auth: HttpAuth;
  /** A new client (a legacy MCP session, or a modern-era subject). */
  newClient: () => HttpClient;
  tls?: { cert: string; key: string };
  /** Origins allowed besides this server's own (`--allowed-origin`, exact `scheme://host[:port]`). */
  allowedOrigins?: string[];
  /** Host header values allowed besides this server's own (`--allowed-host`, e.g. the name a proxy is reached by). */
  allowedHosts?: string[];
  maxBodyBytes?: number;
  maxClients?: number;
  maxCallsPerClient?: number;
  idleTimeoutMs?: number;
}

/** A running HTTP server. */
export interface HttpServer {
  /** The endpoint's URL with the real port (`--listen ...:0` picks a free one). */
  url: URL;
  /** Legacy MCP sessions open now. */
  clients(): number;
  /** Stop accepting, end every session and client (their processes), then resolve. */
  stop(): Promise<void>;
}

/** One legacy MCP session in the server's table, by its `Mcp-Session-Id`. */
interface SessionEntry {
  /** The MCP layer's session (../mcp/http.ts). */
  session: HttpMcpSession;
  /** The session's own client (its exec sessions, sandbox state, approvals). */
  client: HttpClient;
  /** The principal that opened it (../auth/http.ts `Principal.subject`): only it may use the session. */
  subject: string;
  /** When its last request came or its last answer ended, ms since the epoch (for the idle end). */
  lastSeen: number;
  /** Its requests in flight now (an SSE answer counts until its stream ends). */
  inFlight: number;
}

/** One modern-era (2026-07-28) client, one per subject: ended like a session when idle. */
interface ModernClient {
  /** The modern-era MCP layer serving this subject's requests (../mcp/http.ts). */
  era: ModernHttp;
  client: HttpClient;
  /** When its last request came or ended, ms since the epoch (for the idle end). */
  lastSeen: number;
  /** Its requests in flight now. */
  inFlight: number;
}

/** Whether `host` (a URL hostname) is a loopback address or name. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * Parse `--listen`: `http://HOST:PORT/PATH` (or https: with TLS); PORT 0 picks a free one; PATH defaults to `/mcp`.
 * Throws `USAGE`.
 */
export function parseListenUrl(listen: string): URL {
  let u: URL;
  try {
    u = new URL(listen);
  } catch {
    throw new ShellmcpError("USAGE", `--listen ${listen}: not a URL; give http://HOST:PORT/PATH, e.g. http://127.0.0.1:8765/mcp`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new ShellmcpError(
      "USAGE",
      `--listen ${listen}: serve listens on http:// or https:// URLs (stdio is the default without --listen)`,
    );
  if (u.port === "" && !/:\d+(\/|$)/.test(listen.replace(/^\w+:\/\//, "")))
    throw new ShellmcpError("USAGE", `--listen ${listen}: name the port (0 for a free one)`);
  if (u.search !== "" || u.hash !== "" || u.username !== "" || u.password !== "")
    throw new ShellmcpError("USAGE", `--listen ${listen}: no query, fragment or user-info in the endpoint URL`);
  if (u.pathname === "/" || u.pathname === "") u.pathname = "/mcp";
  return u;
}

const rpcError = (status: number, code: number, message: string, headers?: Record<string, string>) =>
  Response.json({ jsonrpc: "2.0", id: null, error: { code, message } }, { status, headers });

/** Read a body of at most `max` bytes; undefined when it is longer (declared or streamed). */
async function readCapped(req: Request, max: number): Promise<Uint8Array | undefined> {
  const declared = Number(req.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > max) return undefined;
  if (req.body === null) return new Uint8Array();
  const parts: Uint8Array[] = [];
  let size = 0;
  const reader = req.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      void reader.cancel().catch(() => undefined);
      return undefined;
    }
    parts.push(value);
  }
  return Buffer.concat(parts, size);
}

/** Start listening. Throws `USAGE` when the address cannot be bound. */
export function startHttpServer(o: HttpServeOptions): HttpServer {
  const limits: Limits = {
    maxBody: o.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    maxClients: o.maxClients ?? DEFAULT_MAX_CLIENTS,
    maxCalls: o.maxCallsPerClient ?? DEFAULT_MAX_CALLS_PER_CLIENT,
    idleMs: o.idleTimeoutMs ?? DEFAULT_CLIENT_IDLE_TIMEOUT_MS,
  };
  const hostname = o.url.hostname.replace(/^\[|\]$/g, "");
  // Requests come only once this function has returned: `endpoint` is made by then.
  const bun = listen(o, hostname, limits.maxBody, (req, peer, noIdleCut) => endpoint.handle(req, peer, noIdleCut));
  const endpoint = new Endpoint(o, limits, addressesOf(o, hostname, bun.port));
  const sweep = setInterval(() => endpoint.sweep(), Math.max(50, Math.min(limits.idleMs / 4, 30_000)));
  sweep.unref();
  return {
    url: endpoint.at.url,
    clients: () => endpoint.sessions.size,
    async stop() {
      endpoint.stopping = true;
      clearInterval(sweep);
      await endpoint.endAll();
      void bun.stop(true);
    },
  };
}

/** The limits of one server ({@link HttpServeOptions}, defaults applied). */
interface Limits {
  /** Largest request body, bytes. */
  maxBody: number;
  /** Clients open at once: legacy sessions (those being initialised included) and modern-era subjects. */
  maxClients: number;
  /** Requests in flight at once in one legacy session. */
  maxCalls: number;
  /** A client with no request in flight for this long is ended with everything it started, ms. */
  idleMs: number;
}

/**
 * Listen on `hostname` and `o.url`'s port (0: a free one), with TLS when `o.tls` names a certificate and key;
 * `fetch` answers every request, with the peer's address and a function that lifts the socket's idle cut for this
 * request. Bodies far over `maxBody` (bytes) are refused by Bun (bare 413). Throws `USAGE` when the address cannot be
 * bound (or the TLS files cannot be read).
 */
function listen(
  o: HttpServeOptions,
  hostname: string,
  maxBody: number,
  fetch: (req: Request, peer: string | undefined, noIdleCut: () => void) => Promise<Response>,
): ReturnType<typeof Bun.serve> {
  try {
    return Bun.serve({
      hostname,
      port: Number(o.url.port || 0),
      tls: o.tls === undefined ? undefined : { cert: Bun.file(o.tls.cert), key: Bun.file(o.tls.key) },
      // A connection silent this long is cut (a client trickling its headers or body, or gone): SSE streams carry
      // the SDK's keep-alive comment every 15 s; a modern-era answer, which has none, lifts it once authenticated.
      idleTimeout: SOCKET_IDLE_SECONDS,
      // Bun refuses (bare 413) only bodies far over the cap; readCapped() answers the rest with a JSON-RPC error.
      maxRequestBodySize: maxBody + 1024 * 1024,
      fetch: (req, srv) => fetch(req, srv.requestIP(req)?.address, () => srv.timeout(req, 0)),
      error: (e) => {
        log.warn("http request failed", { error: e.message });
        return new Response("internal error", { status: 500 });
      },
    });
  } catch (e) {
    throw new ShellmcpError("USAGE", `--listen ${o.url.href}: cannot listen there: ${(e as Error).message}`);
  }
}

/** The server's own addresses, known once it listens ({@link addressesOf}). */
interface Addresses {
  /** The endpoint's URL with the real port. */
  url: URL;
  /**
   * The Host header values served (`host:port`): the URL's, the loopback names for a loopback listener, and
   * `--allowed-host`.
   */
  ownHosts: Set<string>;
  /** Every Host is served: bound to every address (0.0.0.0, ::) with no `--allowed-host`. */
  anyHost: boolean;
  /** The Origin header values allowed (`scheme://host:port`): the URL's, the loopback ones, `--allowed-origin`. */
  ownOrigins: Set<string>;
  /** The path of the endpoint's OAuth protected-resource metadata (`/.well-known/oauth-protected-resource/PATH`). */
  metadataPath: string;
  /** Its URL, named in a refusal's `WWW-Authenticate`. */
  metadataUrl: string;
}

/** The addresses of the server `o` describes, listening on `hostname` (brackets removed) and `port`. */
function addressesOf(o: HttpServeOptions, hostname: string, port: number | undefined): Addresses {
  const url = new URL(o.url.href);
  url.port = String(port);
  const origin = url.origin;
  const loopback = isLoopbackHost(url.hostname);
  const p = String(port);
  const ownHosts = new Set([url.host, ...(loopback ? [`127.0.0.1:${p}`, `localhost:${p}`, `[::1]:${p}`] : []), ...(o.allowedHosts ?? [])]);
  // Bound to every address (0.0.0.0, ::) with no --allowed-host: the names it is reached by are unknown, so any Host
  // is served (such a listener has authentication and TLS: ./serve.ts); the Origin check still holds.
  const anyHost = (hostname === "0.0.0.0" || hostname === "::") && (o.allowedHosts ?? []).length === 0;
  const ownOrigins = new Set([
    origin,
    ...(loopback ? [`${url.protocol}//127.0.0.1:${p}`, `${url.protocol}//localhost:${p}`, `${url.protocol}//[::1]:${p}`] : []),
    ...(o.allowedOrigins ?? []),
  ]);
  const metadataPath = `/.well-known/oauth-protected-resource${o.url.pathname}`;
  return { url, ownHosts, anyHost, ownOrigins, metadataPath, metadataUrl: `${origin}${metadataPath}` };
}

/**
 * The endpoint behind the listener: a request's way through this layer's checks (the file's header lists the
 * answers) to the MCP layer, and the clients it keeps — the legacy sessions by id, the modern-era clients by subject —
 * with their limits and idle ends.
 */
class Endpoint {
  /** Legacy MCP sessions, by `Mcp-Session-Id`. */
  readonly sessions = new Map<string, SessionEntry>();
  /** Modern-era clients, by subject. */
  readonly modern = new Map<string, ModernClient>();
  /** Legacy sessions being initialised (counted against `maxClients`). */
  private pending = 0;
  /** The server is stopping: `/readyz` says so, and every request to the endpoint is refused (503). */
  stopping = false;

  constructor(
    private readonly o: HttpServeOptions,
    private readonly limits: Limits,
    /** Where the server listens ({@link addressesOf}). */
    readonly at: Addresses,
  ) {}

  /** Answer `req` from `peer` (its address, for the log); `noIdleCut` lifts the socket's idle cut for this request. */
  async handle(req: Request, peer: string | undefined, noIdleCut: () => void): Promise<Response> {
    const early = this.screen(req, peer);
    if (early !== undefined) return early;
    if (this.stopping) return rpcError(503, -32000, "Service Unavailable: the server is shutting down");
    const who = await this.o.auth.check(req.headers.get("authorization"), this.at.metadataUrl);
    if (isRefusal(who)) {
      log.info("refused a request", { status: who.status, why: who.message, peer });
      return new Response(`${who.message}\n`, {
        status: who.status,
        headers: who.wwwAuthenticate === undefined ? {} : { "WWW-Authenticate": who.wwwAuthenticate },
      });
    }
    const sid = req.headers.get("mcp-session-id");
    const entry = sid === null ? undefined : this.sessions.get(sid);
    if (sid !== null && (entry === undefined || entry.subject !== who.subject)) return rpcError(404, -32001, "Session not found");
    if (req.method === "GET" || req.method === "DELETE") {
      if (entry === undefined) return rpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required");
      entry.lastSeen = Date.now();
      const r = await entry.session.handle(req);
      if (req.method === "DELETE") await this.endSession(sid!);
      return r;
    }
    if (req.method !== "POST") return new Response("Method Not Allowed\n", { status: 405, headers: { Allow: "GET, POST, DELETE" } });
    const body = await this.readJson(req);
    if (body instanceof Response) return body;
    if (sid === null && isModernRequest(body.json)) return this.serveModern(who.subject, body.json, req, noIdleCut);
    if (entry === undefined) return this.openSession(who.subject, body.json, req);
    return this.serveInSession(entry, req, body.json);
  }

  /**
   * What is answered before authentication, or undefined for a request to the endpoint: the probes (`/healthz`, and
   * `/readyz` 503 while stopping), a Host not served here (421), a foreign Origin (403, logged with `peer`), the OAuth
   * protected-resource metadata (oauth mode), another path (404).
   */
  private screen(req: Request, peer: string | undefined): Response | undefined {
    const u = new URL(req.url);
    if (req.method === "GET" && (u.pathname === "/healthz" || u.pathname === "/readyz"))
      return this.stopping && u.pathname === "/readyz" ? new Response("draining\n", { status: 503 }) : new Response("ok\n");
    const host = req.headers.get("host");
    if (host === null || (!this.at.anyHost && !this.at.ownHosts.has(host.toLowerCase())))
      return new Response("Misdirected Request: Host not served here\n", { status: 421 });
    const from = req.headers.get("origin");
    if (from !== null && !this.at.ownOrigins.has(from)) {
      log.warn("refused a foreign Origin", { origin: from.slice(0, 200), peer });
      return new Response("Forbidden: Origin not allowed\n", { status: 403 });
    }
    const auth = this.o.auth;
    if (
      auth.mode === "oauth" &&
      req.method === "GET" &&
      (u.pathname === this.at.metadataPath || u.pathname === "/.well-known/oauth-protected-resource")
    )
      return Response.json({
        resource: this.at.url.href,
        authorization_servers: [auth.issuer],
        bearer_methods_supported: ["header"],
        ...(auth.scopes.length > 0 ? { scopes_supported: auth.scopes } : {}),
        resource_name: "shellmcp",
      });
    if (u.pathname !== this.o.url.pathname) return new Response("Not Found\n", { status: 404 });
    return undefined;
  }

  /**
   * A POST's body as JSON (`{ json }`), or the refusal: a Content-Type other than `application/json` (415), a body
   * over `maxBody` bytes (413), JSON that does not parse (400, -32700).
   */
  private async readJson(req: Request): Promise<{ json: unknown } | Response> {
    const ct = (req.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
    if (ct !== "application/json") return rpcError(415, -32000, "Unsupported Media Type: Content-Type must be application/json");
    const bytes = await readCapped(req, this.limits.maxBody);
    if (bytes === undefined) return rpcError(413, -32000, `Payload Too Large: request bodies are limited to ${this.limits.maxBody} bytes`);
    try {
      return { json: JSON.parse(new TextDecoder().decode(bytes)) };
    } catch {
      return rpcError(400, -32700, "Parse error: Invalid JSON");
    }
  }

  /**
   * A modern-era request `body` of `subject`: served by the subject's client, made on its first request (503 when
   * `maxClients` are open). The answer comes when the call ends, so the socket's idle cut is lifted (`noIdleCut`).
   */
  private async serveModern(subject: string, body: unknown, req: Request, noIdleCut: () => void): Promise<Response> {
    const { maxClients } = this.limits;
    let m = this.modern.get(subject);
    if (m === undefined) {
      if (this.sessions.size + this.modern.size + this.pending >= maxClients)
        return rpcError(503, -32000, `Service Unavailable: ${maxClients} clients are open, the most this server keeps`);
      const client = this.o.newClient();
      m = { era: new ModernHttp(client.options), client, lastSeen: Date.now(), inFlight: 0 };
      this.modern.set(subject, m);
    }
    noIdleCut(); // the answer comes when the call ends, with no byte before it
    const mm = m;
    mm.inFlight++;
    try {
      return await mm.era.handle(body as { id: string | number; method: string; params?: unknown }, req.signal);
    } finally {
      mm.inFlight--;
      mm.lastSeen = Date.now();
    }
  }

  /**
   * A POST with no session: an `initialize` (`body`) opens a legacy session of `subject` with a new client (400 for
   * anything else, 503 when `maxClients` are open); the session is in the table once the MCP layer gives it its id,
   * and leaves it (its client ended) when the layer closes it. A client whose session never opened is ended.
   */
  private async openSession(subject: string, body: unknown, req: Request): Promise<Response> {
    const { maxClients } = this.limits;
    const isInit =
      typeof body === "object" && body !== null && !Array.isArray(body) && (body as { method?: unknown }).method === "initialize";
    if (!isInit) return rpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required (or send initialize first)");
    if (this.sessions.size + this.modern.size + this.pending >= maxClients)
      return rpcError(
        503,
        -32000,
        `Service Unavailable: ${maxClients} MCP sessions are open, the most this server keeps; end one (DELETE) first`,
      );
    this.pending++;
    const client = this.o.newClient();
    let registered = false;
    try {
      const r = await startHttpSession(
        client.options,
        req,
        body,
        (id, session) => {
          registered = true;
          this.sessions.set(id, { session, client, subject, lastSeen: Date.now(), inFlight: 0 });
          log.info("http session opened", { session: id.slice(0, 8), subject: subject.slice(0, 24) });
        },
        (id) => {
          const e = this.sessions.get(id);
          if (e !== undefined) {
            this.sessions.delete(id);
            void e.client.close();
          }
        },
      );
      if (!registered) void client.close();
      return r;
    } finally {
      this.pending--;
    }
  }

  /**
   * A POST `body` in the legacy session `entry`: 429 when `maxCalls` of its requests are in flight; else served by
   * its MCP session, counted in flight until the answer is done (an SSE answer: until its stream ends or the client
   * drops it).
   */
  private async serveInSession(entry: SessionEntry, req: Request, body: unknown): Promise<Response> {
    const { maxCalls } = this.limits;
    if (entry.inFlight >= maxCalls)
      return rpcError(429, -32000, `Too Many Requests: ${maxCalls} requests of this session are in flight, the most it may have`);
    entry.inFlight++;
    entry.lastSeen = Date.now();
    let counted = true;
    const done = () => {
      if (!counted) return;
      counted = false;
      entry.lastSeen = Date.now();
      entry.inFlight--;
    };
    let r: Response;
    try {
      r = await entry.session.handle(req, body);
    } catch (e) {
      done();
      throw e;
    }
    if (r.body === null) {
      done();
      return r;
    }
    // An SSE answer stays in flight until its stream ends (the call answered) or the client drops it.
    const counting = new TransformStream<Uint8Array, Uint8Array>({ flush: done });
    r.body.pipeTo(counting.writable).catch(done);
    return new Response(counting.readable, { status: r.status, statusText: r.statusText, headers: r.headers });
  }

  /** End every session and modern-era client with no request in flight for `idleMs` (logged). */
  sweep(): void {
    const now = Date.now();
    for (const [id, e] of this.sessions)
      if (e.inFlight === 0 && now - e.lastSeen > this.limits.idleMs) {
        log.info("http session idle: ended", { session: id.slice(0, 8) });
        void this.endSession(id);
      }
    for (const [subject, m] of this.modern)
      if (m.inFlight === 0 && now - m.lastSeen > this.limits.idleMs) {
        log.info("http modern-era client idle: ended", { subject: subject.slice(0, 24) });
        this.modern.delete(subject);
        m.era.close();
        void m.client.close();
      }
  }

  /** End the session `id` (gone from the table at once), then its client; nothing when there is none. */
  async endSession(id: string): Promise<void> {
    const e = this.sessions.get(id);
    if (e === undefined) return;
    this.sessions.delete(id);
    await e.session.close();
    await e.client.close();
  }

  /** End every session and every modern-era client (their processes), then resolve. */
  async endAll(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((id) => this.endSession(id)));
    await Promise.all([...this.modern.values()].map((m) => (m.era.close(), m.client.close())));
    this.modern.clear();
  }
}
