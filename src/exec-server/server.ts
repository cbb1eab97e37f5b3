/**
 * `shellmcp exec-server`: Codex's JSON-RPC exec-server (exec-server spec §1–§8, Codex 0.169 as observed).
 *
 * - Transports: Bun's websocket server (one JSON-RPC-lite message per frame, text or binary), or `--listen stdio`
 *   (one message per line on stdin/stdout; the server ends when stdin closes, as Codex's does). `"jsonrpc"` is never
 *   sent. Websocket upgrades: an `Origin` header is refused with HTTP 403 (a browser page must not drive it); the
 *   `Authorization: Bearer` credential (a token generated at start by default, or per `--ws-auth`; none only with
 *   `--ws-auth none`) is checked before the upgrade (../auth/bearer.ts, HTTP 401), so a refused client reaches no method; `GET /readyz` answers 200 (Codex's readiness probe, no auth); frames over
 *   {@link ServerOptions.maxMessageBytes} close the connection; output pumps pause while a connection has more than
 *   {@link OUTBOUND_HIGH_WATER_BYTES} unsent.
 * - Requests are handled in arrival order, at most {@link ServerOptions.concurrentRequests} at once per connection
 *   (Codex's `--concurrent-requests`, default 1: strictly one at a time).
 * - Sessions: `initialize {clientName, resumeSessionId}` → `{sessionId}`; on disconnect the session detaches and its
 *   processes keep running for the detached TTL; resuming a live session gives −32010 (the code Codex 0.169 retries).
 * - Methods: `environment/info`, `process/start|read|write|terminate|signal`, `fs/readFile|writeFile|
 *   createDirectory|getMetadata|readDirectory|remove|copy`; every other method −32601 (Codex 0.169 tolerates that
 *   for `fs/watchMissing` and `environmentConfig/read`).
 *
 * This file holds the transports (websocket server, stdio, per-connection queue and pump, message framing and the
 * JSON-RPC envelope); connections and sessions are in ./session.ts, the methods in ./methods.ts.
 */
import type { Server } from "bun";
import { log } from "../log.ts";
import { CgroupManager } from "../shell/cgroup.ts";
import { sweepMountMarkers } from "../sandbox/linux/mount-markers.ts";
import { sweepDeadApproverSockets } from "../approvals/server.ts";
import type { AuthRefusal } from "../auth/bearer.ts";
import { startGuardian, type Guardian } from "./guardian.ts";
import { isKnownMethod, prepare, type MethodContext } from "./methods.ts";
import { RPC, rpcError, toRpcError } from "./rpc.ts";
import { OUTBOUND_HIGH_WATER_BYTES, SessionRegistry, type Conn, type ConnData, type ConnSocket } from "./session.ts";

/** Inbound bytes a connection may have waiting to be handled before it is closed. */
export const MAX_QUEUED_BYTES = 256 * 1024 * 1024;

/** Server settings. */
export interface ServerOptions {
  /** `"stdio"`: JSON lines on stdin/stdout; otherwise a websocket server on `hostname:port`. */
  transport?: "websocket" | "stdio";
  hostname: string;
  port: number;
  /**
   * Websocket authentication (undefined: none — main.ts sets it unless `--ws-auth none`): given the upgrade's
   * `Authorization` header (null when absent),
   * undefined to let it in or the refusal, answered before the upgrade (see ./auth.ts `authorizeUpgrade`).
   */
  authorize?: (authorization: string | null) => AuthRefusal | undefined;
  /** Requests handled at once per connection (≥ 1; Codex's default 1). */
  concurrentRequests: number;
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
  concurrentRequests: 1,
};

/** A running exec-server. */
export interface ExecServer {
  /** `ws://IP:PORT`, or `stdio` for the stdio transport. */
  url: string;
  /** The websocket server (undefined for stdio). */
  server?: Server<ConnData>;
  /** Resolves when the stdio transport's stdin reached EOF (never for websockets). */
  ended: Promise<void>;
  /**
   * Kill every process of every session, stop listening, and remove the per-process cgroups once the kernel has
   * emptied them (see {@link CgroupManager.shutdown}). Never rejects.
   */
  shutdown(): Promise<void>;
}

/** Start listening (or reading stdin). Throws when the address cannot be bound. */
export function startExecServer(opts: ServerOptions): ExecServer {
  const sessions = new SessionRegistry(opts.detachedSessionTtlMs);
  let nextConnId = 1;
  // One cgroup per process, so that terminate ends everything it started (see src/shell/cgroup.ts).
  // What servers killed with SIGKILL left: bubblewrap's mount points and deny folders, approver sockets (the cgroups:
  // CgroupManager.detect).
  if (process.platform === "linux") sweepMountMarkers();
  void sweepDeadApproverSockets();
  const cg = CgroupManager.detect();
  const cgroups = cg instanceof CgroupManager ? cg : undefined;
  if (!(cg instanceof CgroupManager))
    log.warn(
      "exec-server: no per-process cgroups; terminate kills process groups and descendants only, and processes outlive a server killed with SIGKILL",
      { why: cg.error },
    );
  // Everything in those cgroups is killed when this server dies, however (./guardian.ts). Started with the first
  // `process/start` (before that there is nothing to kill; an idle server spawns nothing).
  let guardian: Guardian | undefined;
  let guardianTried = false;
  const ensureGuardian = () => {
    if (guardianTried || cgroups === undefined) return;
    guardianTried = true;
    guardian = startGuardian(cgroups.base);
  };

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
          message:
            c.peer === "stdio"
              ? `failed to parse JSON-RPC message from exec-server stdio: ${why}`
              : `failed to parse websocket JSON-RPC message from exec-server websocket ${c.peer}: ${why}`,
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
    if (method === "process/start") ensureGuardian();
    try {
      const run = prepare(methods, c, method, params ?? null);
      const result = await run();
      reply(c, id, result);
    } catch (e) {
      replyError(c, id, e);
    }
    if (stale) close(c);
  }

  const max = Math.max(1, opts.concurrentRequests);
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
        if (max === 1) {
          await handle(c, raw);
          continue;
        }
        c.inFlight++;
        void handle(c, raw)
          .catch((e: unknown) => log.error("exec-server: handler failed", { error: String(e) }))
          .finally(() => {
            c.inFlight--;
            c.slotWaiters.shift()?.();
          });
        while (c.inFlight >= max && !c.closed) await new Promise<void>((r) => c.slotWaiters.push(r));
      }
    } catch (e) {
      log.error("exec-server: handler failed", { error: String(e) });
    } finally {
      c.busy = false;
    }
  }

  const newConn = (ws: ConnSocket, peer: string): Conn => ({
    id: nextConnId++,
    ws,
    peer,
    initSent: false,
    initialized: false,
    queue: [],
    queuedBytes: 0,
    busy: false,
    closed: false,
    drainWaiters: [],
    inFlight: 0,
    slotWaiters: [],
  });
  const enqueue = (c: Conn, raw: string | Buffer) => {
    if (c.closed) return;
    c.queue.push(raw);
    c.queuedBytes += raw.length;
    if (c.queuedBytes > MAX_QUEUED_BYTES) {
      log.warn("exec-server: a client queued too many unanswered requests; closing its connection", { peer: c.peer });
      close(c);
      return;
    }
    void pump(c);
  };
  const shutdownAll = async () => {
    sessions.killAll();
    await cgroups?.shutdown();
    guardian?.stop();
  };

  if (opts.transport === "stdio") return startStdio(newConn, enqueue, sessions, shutdownAll);

  const server = Bun.serve<ConnData>({
    hostname: opts.hostname,
    port: opts.port,
    fetch(req, srv) {
      if (req.headers.get("origin") !== null) return new Response("Origin header not allowed\n", { status: 403 });
      const ip = srv.requestIP(req);
      const peer = ip === null ? "unknown" : ip.family === "IPv6" ? `[${ip.address}]:${ip.port}` : `${ip.address}:${ip.port}`;
      if (req.method === "GET" && new URL(req.url).pathname === "/readyz" && req.headers.get("upgrade") === null)
        return new Response(null, { status: 200 });
      const refused = opts.authorize?.(req.headers.get("authorization"));
      if (refused !== undefined) {
        log.info("exec-server: refused a websocket upgrade", { peer, why: refused.message });
        return new Response(refused.message, { status: refused.status, headers: { "content-type": "text/plain; charset=utf-8" } });
      }
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
        ws.data.conn = newConn(ws, ws.data.peer);
      },
      message(ws, raw) {
        enqueue(ws.data.conn!, raw);
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
    ended: new Promise<void>(() => undefined),
    async shutdown() {
      void server.stop(true);
      await shutdownAll();
    },
  };
}

/**
 * The stdio transport: one connection whose messages are the lines of stdin (empty lines skipped) and whose
 * replies and events are lines on stdout. Codex 0.169 prints nothing else on stdout in this mode, and exits when
 * stdin reaches EOF; `ended` resolves then (the caller shuts down, killing the processes).
 */
function startStdio(
  newConn: (ws: ConnSocket, peer: string) => Conn,
  enqueue: (c: Conn, raw: string) => void,
  sessions: SessionRegistry,
  shutdownAll: () => Promise<void>,
): ExecServer {
  const out = process.stdout;
  let ended!: () => void;
  const endedP = new Promise<void>((r) => (ended = r));
  const socket: ConnSocket = {
    send: (text: string) => out.write(`${text}\n`),
    close: () => ended(),
    cork: (fn: () => void) => fn(),
    getBufferedAmount: () => out.writableLength,
  };
  const c = newConn(socket, "stdio");
  out.on("drain", () => {
    for (const w of c.drainWaiters.splice(0)) w();
  });
  out.on("error", () => ended());
  void (async () => {
    const dec = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of Bun.stdin.stream()) {
        buf += dec.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, "");
          buf = buf.slice(nl + 1);
          if (line.trim() !== "") enqueue(c, line);
        }
      }
      if (buf.trim() !== "") enqueue(c, buf);
    } catch (e) {
      log.info("exec-server: stdin failed", { error: String(e) });
    }
    // Let the requests already read finish before ending (their replies still go out).
    while ((c.busy || c.inFlight > 0) && !c.closed) await new Promise((r) => setTimeout(r, 5));
    ended();
  })();
  void endedP.then(() => sessions.detach(c));
  return { url: "stdio", ended: endedP, shutdown: shutdownAll };
}
