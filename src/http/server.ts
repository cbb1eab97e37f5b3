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

interface SessionEntry {
  session: HttpMcpSession;
  client: HttpClient;
  subject: string;
  lastSeen: number;
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
  const maxBody = o.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const maxClients = o.maxClients ?? DEFAULT_MAX_CLIENTS;
  const maxCalls = o.maxCallsPerClient ?? DEFAULT_MAX_CALLS_PER_CLIENT;
  const idleMs = o.idleTimeoutMs ?? DEFAULT_CLIENT_IDLE_TIMEOUT_MS;
  const sessions = new Map<string, SessionEntry>();
  /** Modern-era clients, one per subject: ended like sessions when idle. */
  const modern = new Map<string, { era: ModernHttp; client: HttpClient; lastSeen: number; inFlight: number }>();
  let pending = 0; // sessions being initialised (counted against maxClients)
  let stopping = false;
  const path = o.url.pathname;
  const hostname = o.url.hostname.replace(/^\[|\]$/g, "");

  let bun: ReturnType<typeof Bun.serve>;
  try {
    bun = Bun.serve({
      hostname,
      port: Number(o.url.port || 0),
      tls: o.tls === undefined ? undefined : { cert: Bun.file(o.tls.cert), key: Bun.file(o.tls.key) },
      // A connection silent this long is cut (a client trickling its headers or body, or gone): SSE streams carry
      // the SDK's keep-alive comment every 15 s; a modern-era answer, which has none, lifts it once authenticated.
      idleTimeout: SOCKET_IDLE_SECONDS,
      // Bun refuses (bare 413) only bodies far over the cap; readCapped() answers the rest with a JSON-RPC error.
      maxRequestBodySize: maxBody + 1024 * 1024,
      fetch: (req, srv) => handle(req, srv.requestIP(req)?.address, () => srv.timeout(req, 0)),
      error: (e) => {
        log.warn("http request failed", { error: e.message });
        return new Response("internal error", { status: 500 });
      },
    });
  } catch (e) {
    throw new ShellmcpError("USAGE", `--listen ${o.url.href}: cannot listen there: ${(e as Error).message}`);
  }
  const url = new URL(o.url.href);
  url.port = String(bun.port);
  const origin = url.origin;
  const loopback = isLoopbackHost(url.hostname);
  const port = String(bun.port);
  const ownHosts = new Set([
    url.host,
    ...(loopback ? [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`] : []),
    ...(o.allowedHosts ?? []),
  ]);
  // Bound to every address (0.0.0.0, ::) with no --allowed-host: the names it is reached by are unknown, so any Host
  // is served (such a listener has authentication and TLS: ./serve.ts); the Origin check still holds.
  const anyHost = (hostname === "0.0.0.0" || hostname === "::") && (o.allowedHosts ?? []).length === 0;
  const ownOrigins = new Set([
    origin,
    ...(loopback ? [`${url.protocol}//127.0.0.1:${port}`, `${url.protocol}//localhost:${port}`, `${url.protocol}//[::1]:${port}`] : []),
    ...(o.allowedOrigins ?? []),
  ]);
  const metadataPath = `/.well-known/oauth-protected-resource${path}`;
  const metadataUrl = `${origin}${metadataPath}`;

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, e] of sessions)
        if (e.inFlight === 0 && now - e.lastSeen > idleMs) {
          log.info("http session idle: ended", { session: id.slice(0, 8) });
          void endSession(id);
        }
      for (const [subject, m] of modern)
        if (m.inFlight === 0 && now - m.lastSeen > idleMs) {
          log.info("http modern-era client idle: ended", { subject: subject.slice(0, 24) });
          modern.delete(subject);
          m.era.close();
          void m.client.close();
        }
    },
    Math.max(50, Math.min(idleMs / 4, 30_000)),
  );
  sweep.unref();

  async function endSession(id: string): Promise<void> {
    const e = sessions.get(id);
    if (e === undefined) return;
    sessions.delete(id);
    await e.session.close();
    await e.client.close();
  }

  async function handle(req: Request, peer: string | undefined, noIdleCut: () => void): Promise<Response> {
    const u = new URL(req.url);
    if (req.method === "GET" && (u.pathname === "/healthz" || u.pathname === "/readyz"))
      return stopping && u.pathname === "/readyz" ? new Response("draining\n", { status: 503 }) : new Response("ok\n");
    const host = req.headers.get("host");
    if (host === null || (!anyHost && !ownHosts.has(host.toLowerCase())))
      return new Response("Misdirected Request: Host not served here\n", { status: 421 });
    const from = req.headers.get("origin");
    if (from !== null && !ownOrigins.has(from)) {
      log.warn("refused a foreign Origin", { origin: from.slice(0, 200), peer });
      return new Response("Forbidden: Origin not allowed\n", { status: 403 });
    }
    if (
      o.auth.mode === "oauth" &&
      req.method === "GET" &&
      (u.pathname === metadataPath || u.pathname === "/.well-known/oauth-protected-resource")
    )
      return Response.json({
        resource: url.href,
        authorization_servers: [o.auth.issuer],
        bearer_methods_supported: ["header"],
        ...(o.auth.scopes.length > 0 ? { scopes_supported: o.auth.scopes } : {}),
        resource_name: "shellmcp",
      });
    if (u.pathname !== path) return new Response("Not Found\n", { status: 404 });
    if (stopping) return rpcError(503, -32000, "Service Unavailable: the server is shutting down");
    const who = await o.auth.check(req.headers.get("authorization"), metadataUrl);
    if (isRefusal(who)) {
      log.info("refused a request", { status: who.status, why: who.message, peer });
      return new Response(`${who.message}\n`, {
        status: who.status,
        headers: who.wwwAuthenticate === undefined ? {} : { "WWW-Authenticate": who.wwwAuthenticate },
      });
    }
    const sid = req.headers.get("mcp-session-id");
    const entry = sid === null ? undefined : sessions.get(sid);
    if (sid !== null && (entry === undefined || entry.subject !== who.subject)) return rpcError(404, -32001, "Session not found");
    if (req.method === "GET" || req.method === "DELETE") {
      if (entry === undefined) return rpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required");
      entry.lastSeen = Date.now();
      const r = await entry.session.handle(req);
      if (req.method === "DELETE") await endSession(sid!);
      return r;
    }
    if (req.method !== "POST") return new Response("Method Not Allowed\n", { status: 405, headers: { Allow: "GET, POST, DELETE" } });
    const ct = (req.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
    if (ct !== "application/json") return rpcError(415, -32000, "Unsupported Media Type: Content-Type must be application/json");
    const bytes = await readCapped(req, maxBody);
    if (bytes === undefined) return rpcError(413, -32000, `Payload Too Large: request bodies are limited to ${maxBody} bytes`);
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      return rpcError(400, -32700, "Parse error: Invalid JSON");
    }
    if (sid === null && isModernRequest(body)) {
      let m = modern.get(who.subject);
      if (m === undefined) {
        if (sessions.size + modern.size + pending >= maxClients)
          return rpcError(503, -32000, `Service Unavailable: ${maxClients} clients are open, the most this server keeps`);
        const client = o.newClient();
        m = { era: new ModernHttp(client.options), client, lastSeen: Date.now(), inFlight: 0 };
        modern.set(who.subject, m);
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
    if (entry === undefined) {
      const isInit =
        typeof body === "object" && body !== null && !Array.isArray(body) && (body as { method?: unknown }).method === "initialize";
      if (!isInit) return rpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required (or send initialize first)");
      if (sessions.size + modern.size + pending >= maxClients)
        return rpcError(
          503,
          -32000,
          `Service Unavailable: ${maxClients} MCP sessions are open, the most this server keeps; end one (DELETE) first`,
        );
      pending++;
      const client = o.newClient();
      let registered = false;
      try {
        const r = await startHttpSession(
          client.options,
          req,
          body,
          (id, session) => {
            registered = true;
            sessions.set(id, { session, client, subject: who.subject, lastSeen: Date.now(), inFlight: 0 });
            log.info("http session opened", { session: id.slice(0, 8), subject: who.subject.slice(0, 24) });
          },
          (id) => {
            const e = sessions.get(id);
            if (e !== undefined) {
              sessions.delete(id);
              void e.client.close();
            }
          },
        );
        if (!registered) void client.close();
        return r;
      } finally {
        pending--;
      }
    }
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

  return {
    url,
    clients: () => sessions.size,
    async stop() {
      stopping = true;
      clearInterval(sweep);
      await Promise.all([...sessions.keys()].map((id) => endSession(id)));
      await Promise.all([...modern.values()].map((m) => (m.era.close(), m.client.close())));
      modern.clear();
      void bun.stop(true);
    },
  };
}
