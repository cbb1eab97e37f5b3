/**
 * The exec-server's two transports over one connection model (./queue.ts, ./session.ts): Bun's websocket server
 * (one JSON-RPC-lite message per frame, text or binary; `GET /readyz`; an `Origin` header refused with 403; the
 * `authorize` hook checked before the upgrade, so a refused client reaches no method) and `--listen stdio` (one
 * message per line on stdin/stdout).
 */
import { log } from "../log.ts";
import type { ConnQueues } from "./queue.ts";
import type { ExecServer, ServerOptions } from "./server.ts";
import { OUTBOUND_HIGH_WATER_BYTES, type ConnData, type ConnSocket, type SessionRegistry } from "./session.ts";

/**
 * The websocket transport on `opts.hostname:opts.port` (Bun's server; throws when the address cannot be bound).
 * Each socket is one connection of `conns`; its frames are queued in order; a closed socket detaches its session.
 * `shutdown` stops listening, then runs `shutdownAll` (kill the processes, remove the cgroups).
 */
export function startWebsocket(
  opts: ServerOptions,
  conns: ConnQueues,
  sessions: SessionRegistry,
  shutdownAll: () => Promise<void>,
): ExecServer {
  const { newConn, enqueue } = conns;
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
export function startStdio(conns: ConnQueues, sessions: SessionRegistry, shutdownAll: () => Promise<void>): ExecServer {
  const { newConn, enqueue } = conns;
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
