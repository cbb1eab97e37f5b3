/**
 * The socket plumbing of the call proxy (./proxy.ts), on Bun's native sockets (`Bun.listen`, `Bun.connect`)
 * rather than `node:net` streams: a new connection through the proxy costs about 0.1 ms less on loopback and a
 * stalled download holds less memory (docs/network.md, bench/network.ts).
 *
 * Bun.Socket's `write()` is unbuffered and may take fewer bytes than asked (the spec's 30 MB trap): every write
 * goes through {@link send}, which keeps the remainder in the socket's {@link Conn.out} queue and writes it on
 * `drain`. A relay ({@link startRelay}) pauses the socket it reads from while the other side's queue is not empty
 * and resumes it once the queue is flushed, so a slow reader slows the sender end to end and the proxy holds at
 * most one read chunk per direction.
 */

/** The state of one proxy socket (its `Bun.Socket.data`). */
export interface Conn {
  /** The socket at the other end of the relay, once there is one. */
  peer: Bun.Socket<Conn> | undefined;
  /** Whether bytes read from this socket go straight to {@link peer} (otherwise they collect in {@link inbox}). */
  relaying: boolean;
  /** Bytes read from this socket and not yet consumed, while not relaying (request heads, SOCKS5 frames, hellos). */
  inbox: Buffer;
  /** A frame reader waiting for more of {@link inbox} or for the read side to end ({@link readFrame}). */
  wake: (() => void) | undefined;
  /** Whether bytes read from this socket are dropped (an answer was sent; the proxy only waits for it to close). */
  discard: boolean;
  /** Bytes to write to this socket that the kernel has not taken yet, in order. */
  out: Buffer[];
  /** End the write side (FIN) once {@link out} is empty. */
  ending: boolean;
  /** The write side was ended. */
  writeEnded: boolean;
  /** The other end sent FIN. */
  readEnded: boolean;
  /** The socket is closed. */
  closed: boolean;
  /** Reading is paused ({@link pause}): each change is a syscall, so it is made only when the state changes. */
  paused: boolean;
  /** Called once when the socket closes (the proxy's bookkeeping). */
  onClose: (() => void) | undefined;
}

/** Fresh state for a socket. */
export function newConn(): Conn {
  return {
    peer: undefined,
    relaying: false,
    inbox: EMPTY,
    wake: undefined,
    discard: false,
    out: [],
    ending: false,
    writeEnded: false,
    readEnded: false,
    closed: false,
    paused: false,
    onClose: undefined,
  };
}

const EMPTY = Buffer.alloc(0);

/** Stop reading from `s` (the kernel holds what arrives, and TCP flow control slows the sender). */
export function pause(s: Bun.Socket<Conn>): void {
  const c = s.data;
  if (c.paused || c.closed) return;
  c.paused = true;
  s.pause();
}

/** Read from `s` again. */
export function resume(s: Bun.Socket<Conn>): void {
  const c = s.data;
  if (!c.paused || c.closed) return;
  c.paused = false;
  s.resume();
}

/**
 * Queue `data` for `s` and write what the kernel takes now: true when all of it was written (or `s` is closed and
 * the bytes are dropped), false when some wait in `s.data.out` for `drain`.
 */
export function send(s: Bun.Socket<Conn>, data: Buffer | string): boolean {
  const c = s.data;
  if (c.closed || c.writeEnded) return true;
  const b = typeof data === "string" ? Buffer.from(data, "latin1") : data;
  if (c.out.length > 0) {
    c.out.push(Buffer.from(b)); // the caller's buffer is never kept
    return false;
  }
  const n = s.write(b);
  if (n < 0) return true;
  if (n >= b.length) return true;
  // A copy of the rest only: keeping a view would keep the whole read chunk alive (measured: more memory).
  c.out.push(Buffer.from(b.subarray(n)));
  return false;
}

/** End `s`'s write side (FIN) once everything queued for it is written. */
export function finish(s: Bun.Socket<Conn>): void {
  const c = s.data;
  if (c.closed || c.writeEnded) return;
  c.ending = true;
  if (c.out.length === 0) endNow(s);
}

/**
 * End the write side now. Bun's `end()` closes the whole socket, so a half-close is `shutdown()`; once the other
 * end's FIN is read too, the socket closes (Bun closes a shut-down socket when FIN arrives).
 */
function endNow(s: Bun.Socket<Conn>): void {
  const c = s.data;
  c.ending = false;
  c.writeEnded = true;
  if (c.readEnded) s.end();
  else s.shutdown();
}

/** Close `s` at once with a reset (`terminate()`: SO_LINGER 0), dropping whatever is queued. */
export function kill(s: Bun.Socket<Conn>): void {
  if (s.data.closed) return;
  s.data.out.length = 0;
  s.terminate();
}

/**
 * Send a last answer on `s` and end its write side; whatever the client sends after it is read and dropped until
 * it closes (so its FIN is seen and the socket does not linger).
 */
export function answerAndClose(s: Bun.Socket<Conn>, data: Buffer | string): void {
  const c = s.data;
  c.discard = true;
  c.inbox = EMPTY;
  c.wake = undefined;
  send(s, data);
  finish(s);
  resume(s);
}

/** Make `a` and `b` each other's peer (no bytes flow until {@link startRelay}). */
export function pair(a: Bun.Socket<Conn>, b: Bun.Socket<Conn>): void {
  a.data.peer = b;
  b.data.peer = a;
}

/**
 * Relay what `from` reads to its peer from now on, starting with what it has read and not consumed; a FIN read
 * from `from` ends the peer's write side once its queue is written.
 */
export function startRelay(from: Bun.Socket<Conn>): void {
  const c = from.data;
  const to = c.peer!;
  c.relaying = true;
  c.wake = undefined;
  let flushed = true;
  if (c.inbox.length > 0) {
    flushed = send(to, c.inbox);
    c.inbox = EMPTY;
  }
  if (c.readEnded) finish(to);
  else if (flushed) resume(from);
  else pause(from);
}

/**
 * Wait until `parse` recognises a frame at the start of what `s` has read (at most `maxBytes`, within
 * `timeoutMs`): resolves with its value and leaves the bytes after the frame in `s.data.inbox`. Reading goes on
 * until more bytes arrive with no reader waiting, which pauses `s` (so at most one read chunk is held).
 * Rejects on a malformed (`parse` threw) or oversized frame, the timeout, or the peer ending or closing first.
 */
export function readFrame<T>(
  s: Bun.Socket<Conn>,
  parse: (buf: Buffer) => { value: T; used: number } | undefined,
  maxBytes: number,
  timeoutMs: number,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const c = s.data;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let settled = false;
    const done = (err: Error | undefined, value?: T) => {
      settled = true;
      if (timer !== undefined) clearTimeout(timer);
      c.wake = undefined;
      if (err !== undefined) reject(err);
      else resolve(value as T);
    };
    const attempt = () => {
      if (c.inbox.length > 0) {
        let r: { value: T; used: number } | undefined;
        try {
          r = parse(c.inbox);
        } catch (e) {
          return done(e as Error);
        }
        if (r !== undefined) {
          c.inbox = c.inbox.subarray(r.used);
          return done(undefined, r.value);
        }
        if (c.inbox.length >= maxBytes) return done(new Error("frame too large"));
      }
      if (c.readEnded || c.closed) return done(new Error("peer went away"));
    };
    attempt();
    if (settled) return;
    c.wake = attempt;
    timer = setTimeout(() => done(new Error("timeout")), timeoutMs);
    resume(s);
  });
}

/** Write what is queued for `s`; once empty, end it if asked and let the relay that feeds it read again. */
function flush(s: Bun.Socket<Conn>): void {
  const c = s.data;
  while (c.out.length > 0) {
    const b = c.out[0]!;
    const n = s.write(b);
    if (n < 0) {
      c.out.length = 0;
      return;
    }
    if (n < b.length) {
      c.out[0] = b.subarray(n);
      return;
    }
    c.out.shift();
  }
  if (c.ending) endNow(s);
  const src = c.peer;
  if (src !== undefined && src.data.relaying && !src.data.readEnded) resume(src);
}

/**
 * The handlers every proxy socket uses (clients and upstreams alike). A listener adds its own `open`, which must
 * set `socket.data` to {@link newConn}() before anything else.
 */
export const handlers: Bun.SocketHandler<Conn> = {
  data(s, d) {
    const c = s.data;
    if (c.relaying) {
      if (!send(c.peer!, d)) pause(s);
      return;
    }
    if (c.discard) return;
    c.inbox = c.inbox.length === 0 ? Buffer.from(d) : Buffer.concat([c.inbox, d]);
    if (c.wake !== undefined) c.wake();
    else pause(s); // nobody reads now (a decision or a dial is under way): the kernel holds the rest
  },
  drain(s) {
    flush(s);
  },
  end(s) {
    const c = s.data;
    c.readEnded = true;
    if (c.writeEnded) s.end(); // both directions are done
    if (c.relaying) finish(c.peer!);
    else c.wake?.();
  },
  close(s, err) {
    const c = s.data;
    if (c.closed) return;
    c.closed = true;
    c.out.length = 0;
    c.onClose?.();
    c.wake?.();
    const p = c.peer;
    if (p === undefined || p.data.closed) return;
    // A failed side ends both; a side closed cleanly leaves the other nothing to do once its queue is written.
    if (err !== undefined) return kill(p);
    finish(p);
    // Whatever `p` still sends has nowhere to go: read and drop it, so its FIN is seen and it closes.
    if (p.data.relaying) resume(p);
  },
  error(s) {
    const p = s.data.peer;
    if (p !== undefined) kill(p);
    kill(s);
  },
};
