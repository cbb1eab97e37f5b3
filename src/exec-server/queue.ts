/**
 * Each exec-server connection's inbound queue and its pump: messages are handled in arrival order, at most
 * `concurrentRequests` at once (Codex's `--concurrent-requests`, default 1: strictly one at a time); a connection
 * with more than {@link MAX_QUEUED_BYTES} waiting is closed, and one whose replies pile up unsent (more than
 * {@link OUTBOUND_HIGH_WATER_BYTES}) is not served further until its socket drains.
 */
import { log } from "../log.ts";
import { OUTBOUND_HIGH_WATER_BYTES, type Conn, type ConnSocket } from "./session.ts";

/** Inbound bytes a connection may have waiting to be handled before it is closed. */
export const MAX_QUEUED_BYTES = 256 * 1024 * 1024;

/** The connections of one server: make one for a socket, queue a message on one. */
export interface ConnQueues {
  /** A new connection on `ws` (`peer`: `ip:port` or `stdio`), nothing queued. */
  newConn(ws: ConnSocket, peer: string): Conn;
  /** Queue one inbound message on `c` and pump it (ignored once `c` closed). */
  enqueue(c: Conn, raw: string | Buffer): void;
}

/**
 * The queues of one server: `handle` answers one message (./envelope.ts); `close` closes a connection that queued
 * too much; `concurrentRequests` (≥ 1 after clamping) bounds the messages handled at once per connection.
 */
export function connQueues(opts: {
  concurrentRequests: number;
  handle: (c: Conn, raw: string | Buffer) => Promise<void>;
  close: (c: Conn) => void;
}): ConnQueues {
  const max = Math.max(1, opts.concurrentRequests);
  let nextConnId = 1;
  const pump = (c: Conn) => pumpConn(c, max, opts.handle);
  return {
    newConn: (ws, peer) => ({
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
    }),
    enqueue(c, raw) {
      if (c.closed) return;
      c.queue.push(raw);
      c.queuedBytes += raw.length;
      if (c.queuedBytes > MAX_QUEUED_BYTES) {
        log.warn("exec-server: a client queued too many unanswered requests; closing its connection", { peer: c.peer });
        opts.close(c);
        return;
      }
      void pump(c);
    },
  };
}

/** Handle `c`'s queued messages in order, `max` at once, until the queue is empty (one pump per connection). */
async function pumpConn(c: Conn, max: number, handle: (c: Conn, raw: string | Buffer) => Promise<void>): Promise<void> {
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
