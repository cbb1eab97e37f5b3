/**
 * Connections and sessions of the exec-server (./server.ts): a connection's state (its inbound queue, whether it
 * initialized, its drain waiters), a session's processes and the connection it is attached to, and the registry
 * of sessions — attaching on `initialize`, detaching on disconnect (the session and its processes are kept for
 * the detached TTL, then killed). Outbound backpressure is measured against {@link OUTBOUND_HIGH_WATER_BYTES}.
 */
import { log } from "../log.ts";
import type { ManagedProcess, ProcessEvent } from "./process.ts";

/** Pumps pause while a connection has more than this many bytes queued for sending. */
export const OUTBOUND_HIGH_WATER_BYTES = 4 * 1024 * 1024;

/**
 * What a connection writes to: Bun's `ServerWebSocket` for websocket clients, or the stdio transport's adapter
 * (`--listen stdio`, one JSON message per line on stdout). `getBufferedAmount` is the bytes accepted but not sent
 * yet (backpressure); `cork` batches the sends `fn` makes.
 */
export interface ConnSocket {
  send(text: string): unknown;
  close(): void;
  cork(fn: () => void): unknown;
  getBufferedAmount(): number;
}

/**
 * One client connection (a websocket, or stdin/stdout): `session` once `initialize` succeeded; `initSent`/`initialized` the handshake so far;
 * `queue`/`queuedBytes` inbound messages not handled yet (`busy` while one is); `closed` once it closed or was
 * closed; `drainWaiters` resolve when the socket drains (or closes); `inFlight` requests being handled now (at most
 * `--concurrent-requests`), `slotWaiters` resolve when one of them finishes.
 */
export interface Conn {
  id: number;
  ws: ConnSocket;
  peer: string;
  session?: Session;
  initSent: boolean;
  initialized: boolean;
  queue: (string | Buffer)[];
  queuedBytes: number;
  busy: boolean;
  closed: boolean;
  drainWaiters: (() => void)[];
  inFlight: number;
  slotWaiters: (() => void)[];
}

/** Per-websocket data in Bun's server: the peer address (`ip:port`), and the connection once opened. */
export interface ConnData {
  peer: string;
  conn?: Conn;
}

/**
 * A session: its processes by id (`"starting"` while one is being started) and the connection it is attached to
 * (none while detached; `expiry` is then the timer that ends it). Process events go to the attached connection
 * and are dropped while detached (the retained output stays readable).
 */
export class Session {
  readonly id = crypto.randomUUID();
  readonly processes = new Map<string, ManagedProcess | "starting">();
  attachment: Conn | undefined;
  expiry: ReturnType<typeof setTimeout> | undefined;

  notify(e: ProcessEvent, json?: string): void {
    const c = this.attachment;
    if (c !== undefined && !c.closed) c.ws.send(json ?? JSON.stringify(e));
  }

  cork(fn: () => void): void {
    const c = this.attachment;
    if (c !== undefined && !c.closed) c.ws.cork(fn);
    else fn();
  }

  backpressured(): boolean {
    const c = this.attachment;
    return c !== undefined && !c.closed && c.ws.getBufferedAmount() >= OUTBOUND_HIGH_WATER_BYTES;
  }

  async waitWritable(): Promise<void> {
    for (;;) {
      const c = this.attachment;
      if (c === undefined || c.closed || c.ws.getBufferedAmount() < OUTBOUND_HIGH_WATER_BYTES) return;
      await new Promise<void>((r) => {
        c.drainWaiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  killAll(): void {
    for (const p of this.processes.values()) if (p !== "starting") p.kill();
  }
}

/** Every session of a server, by id. A detached session is kept `detachedSessionTtlMs` ms, then killed and dropped. */
export class SessionRegistry {
  private readonly sessions = new Map<string, Session>();

  constructor(private readonly detachedSessionTtlMs: number) {}

  /** The session `id`, if it still exists (attached or detached). */
  get(id: string): Session | undefined {
    return this.sessions.get(id);
  }

  /** A new session, registered (not attached yet). */
  create(): Session {
    const s = new Session();
    this.sessions.set(s.id, s);
    return s;
  }

  /** Attach `s` to `c` (a detached session's expiry is cancelled). */
  attach(c: Conn, s: Session): void {
    if (s.expiry !== undefined) clearTimeout(s.expiry);
    s.expiry = undefined;
    s.attachment = c;
    c.session = s;
  }

  /** `c` is closed: its drain waiters are released, and its session (if still attached to it) detaches. */
  detach(c: Conn): void {
    c.closed = true;
    for (const w of c.drainWaiters.splice(0)) w();
    for (const w of c.slotWaiters.splice(0)) w();
    const s = c.session;
    if (s === undefined || s.attachment !== c) return;
    s.attachment = undefined;
    s.expiry = setTimeout(() => {
      if (s.attachment !== undefined) return;
      this.sessions.delete(s.id);
      s.killAll();
      log.info("exec-server: detached session expired", { sessionId: s.id });
    }, this.detachedSessionTtlMs);
  }

  /** Kill every process of every session (shutdown). */
  killAll(): void {
    for (const s of this.sessions.values()) s.killAll();
  }
}
