/**
 * `shellmcp exec-server`: Codex's websocket JSON-RPC exec-server (exec-server spec §1–§8, Codex 0.169 as observed).
 *
 * - Transport: Bun's websocket server on a loopback address; one JSON-RPC-lite message per frame (text or binary;
 *   `"jsonrpc"` never sent); requests handled strictly one at a time per connection; an `Origin` header is refused
 *   with HTTP 403 (a browser page must not drive it); frames over {@link ServerOptions.maxMessageBytes} close the
 *   connection; output pumps pause while a connection has more than {@link OUTBOUND_HIGH_WATER_BYTES} unsent.
 * - Sessions: `initialize {clientName, resumeSessionId}` → `{sessionId}`; on disconnect the session detaches and its
 *   processes keep running for the detached TTL; resuming a live session gives −32010 (the code Codex 0.169 retries).
 * - Methods: `environment/info`, `process/start|read|write|terminate|signal`, `fs/readFile|writeFile|
 *   createDirectory|getMetadata|readDirectory|remove|copy`; every other method −32601 (Codex 0.169 tolerates that
 *   for `fs/watchMissing` and `environmentConfig/read`).
 *
 * This file holds the transport (websocket server, per-connection queue and pump, message framing and the
 * JSON-RPC envelope); connections and sessions are in ./session.ts, the methods in ./methods.ts.
 */
import type { Server } from "bun";
import { log } from "../log.ts";
import { CgroupManager } from "../shell/cgroup.ts";
import { isKnownMethod, prepare, type MethodContext } from "./methods.ts";
import { RPC, rpcError, toRpcError } from "./rpc.ts";
import { OUTBOUND_HIGH_WATER_BYTES, SessionRegistry, type Conn, type ConnData } from "./session.ts";

export { environmentInfo } from "./methods.ts";
export { OUTBOUND_HIGH_WATER_BYTES } from "./session.ts";

/** Inbound bytes a connection may have waiting to be handled before it is closed. */
export const MAX_QUEUED_BYTES = 256 * 1024 * 1024;

/** Server settings. */
export interface ServerOptions {
  hostname: string;
  port: number;
  /** How long a detached session (and its processes) is kept for resume, ms. */
  detachedSessionTtlMs: number;
  /** How long a closed process stays readable, ms. */
  processRetentionMs: number;
  /** Largest inbound websocket message, bytes. */
  maxMessageBytes: number;
}

/** Defaults: Codex's current 30 s TTL and retention; 128 MiB messages (a whole file in `fs/writeFile`). */
export const DEFAULT_SERVER_OPTIONS: ServerOptions = {
  hostname: "127.0.0.1",
  port: 0,
  detachedSessionTtlMs: 30_000,
  processRetentionMs: 30_000,
  maxMessageBytes: 128 * 1024 * 1024,
};

/** A running exec-server. */
export interface ExecServer {
  url: string;
  server: Server<ConnData>;
  /**
   * Kill every process of every session, stop listening, and remove the per-process cgroups once the kernel has
   * emptied them (see {@link CgroupManager.shutdown}). Never rejects.
   */
  shutdown(): Promise<void>;
}

/** Start listening. Throws when the address cannot be bound. */
export function startExecServer(opts: ServerOptions): ExecServer {
  const sessions = new SessionRegistry(opts.detachedSessionTtlMs);
  let nextConnId = 1;
  // One cgroup per process, so that terminate ends everything it started (see src/shell/cgroup.ts).
  const cg = CgroupManager.detect();
  const cgroups = cg instanceof CgroupManager ? cg : undefined;
  if (!(cg instanceof CgroupManager))
    log.info("exec-server: no per-process cgroups; terminate kills process groups and descendants only", { why: cg.error });

  const send = (c: Conn, msg: unknown) => {
    if (!c.closed) c.ws.send(JSON.stringify(msg));
  };
  const reply = (c: Conn, id: unknown, result: unknown) => send(c, { id, result });
  const replyError = (c: Conn, id: unknown, e: unknown) => {
    const { code, message } = toRpcError(e);
    send(c, { error: { code, message }, id });
  };
  const close = (c: Conn) => {
    if (!c.closed) c.ws.close();
    sessions.detach(c);
  };
  const methods: MethodContext = { sessions, cgroups, processRetentionMs: opts.processRetentionMs };

  async function handle(c: Conn, raw: string | Buffer): Promise<void> {
    let text: string;
    let msg: unknown;
    const malformed = (why: string) =>
      send(c, {
        error: {
          code: RPC.INVALID_REQUEST,
          message: `failed to parse websocket JSON-RPC message from exec-server websocket ${c.peer}: ${why}`,
        },
        id: -1,
      });
    try {
      text = typeof raw === "string" ? raw : new TextDecoder("utf-8", { fatal: true }).decode(raw);
      msg = JSON.parse(text);
    } catch (e) {
      return malformed((e as Error).message);
    }
    if (typeof msg !== "object" || msg === null || Array.isArray(msg)) return malformed("expected a JSON-RPC object");
    const m = msg as Record<string, unknown>;
    if ("id" in m) {
      if (typeof m.method === "string") {
        const id = m.id;
        if (!((typeof id === "number" && Number.isSafeInteger(id)) || typeof id === "string"))
          return malformed("data did not match any variant of untagged enum RequestId");
        return handleRequest(c, id, m.method, m.params);
      }
      if ("result" in m || "error" in m) {
        log.info("exec-server: client sent a response; closing", { peer: c.peer });
        return close(c);
      }
      return malformed("missing field `error`");
    }
    if (typeof m.method === "string") {
      if (m.method === "initialized" && c.session !== undefined && c.session.attachment === c) {
        c.initialized = true;
        return;
      }
      log.info("exec-server: unexpected notification; closing", { peer: c.peer, method: m.method });
      return close(c);
    }
    return malformed("missing field `method`");
  }

  async function handleRequest(c: Conn, id: string | number, method: string, params: unknown): Promise<void> {
    if (!isKnownMethod(method))
      return replyError(c, id, rpcError(RPC.METHOD_NOT_FOUND, `exec-server stub does not implement \`${method}\` yet`));
    const stale = c.session !== undefined && c.session.attachment !== c;
    try {
      const run = prepare(methods, c, method, params ?? null);
      const result = await run();
      reply(c, id, result);
    } catch (e) {
      replyError(c, id, e);
    }
    if (stale) close(c);
  }

  async function pump(c: Conn): Promise<void> {
    if (c.busy) return;
    c.busy = true;
    try {
      while (c.queue.length > 0 && !c.closed) {
        // A client that does not read its replies is not served further (its replies would pile up in memory).
        while (!c.closed && c.ws.getBufferedAmount() >= OUTBOUND_HIGH_WATER_BYTES) {
          await new Promise<void>((r) => {
            c.drainWaiters.push(r);
            setTimeout(r, 50);
          });
        }
        const raw = c.queue.shift()!;
        c.queuedBytes -= raw.length;
        await handle(c, raw);
      }
    } catch (e) {
      log.error("exec-server: handler failed", { error: String(e) });
    } finally {
      c.busy = false;
    }
  }

  const server = Bun.serve<ConnData>({
    hostname: opts.hostname,
    port: opts.port,
    fetch(req, srv) {
      if (req.headers.get("origin") !== null) return new Response("Origin header not allowed\n", { status: 403 });
      const ip = srv.requestIP(req);
      const peer = ip === null ? "unknown" : ip.family === "IPv6" ? `[${ip.address}]:${ip.port}` : `${ip.address}:${ip.port}`;
      if (srv.upgrade(req, { data: { peer } })) return undefined;
      return new Response("expected a websocket upgrade\n", { status: 400 });
    },
    websocket: {
      maxPayloadLength: opts.maxMessageBytes,
      backpressureLimit: 2 * 1024 * 1024 * 1024 - 1,
      closeOnBackpressureLimit: false,
      perMessageDeflate: false,
      sendPings: true,
      idleTimeout: 0,
      open(ws) {
        ws.data.conn = {
          id: nextConnId++,
          ws,
          peer: ws.data.peer,
          initSent: false,
          initialized: false,
          queue: [],
          queuedBytes: 0,
          busy: false,
          closed: false,
          drainWaiters: [],
        };
      },
      message(ws, raw) {
        const c = ws.data.conn!;
        if (c.closed) return;
        c.queue.push(raw);
        c.queuedBytes += raw.length;
        if (c.queuedBytes > MAX_QUEUED_BYTES) {
          log.warn("exec-server: a client queued too many unanswered requests; closing its connection", { peer: c.peer });
          close(c);
          return;
        }
        void pump(c);
      },
      drain(ws) {
        const c = ws.data.conn!;
        if (ws.getBufferedAmount() < OUTBOUND_HIGH_WATER_BYTES) for (const w of c.drainWaiters.splice(0)) w();
      },
      close(ws) {
        const c = ws.data.conn;
        if (c !== undefined) sessions.detach(c);
      },
    },
  });
  const host = opts.hostname.includes(":") ? `[${opts.hostname}]` : opts.hostname;
  return {
    url: `ws://${host}:${server.port}`,
    server,
    async shutdown() {
      sessions.killAll();
      server.stop(true);
      await cgroups?.shutdown();
    },
  };
}
