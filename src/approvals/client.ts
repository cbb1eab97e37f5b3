/**
 * The client half of the local approver: connect to the approver sockets of the `serve` processes of this user
 * (./place.ts), after checking the folder and each socket (a real socket of this user, `0600`, in a `0700` folder of
 * this user) and, once connected, the server itself (./peer.ts: a server inside a sandbox, which could show a person
 * false questions, is refused).
 */
import { existsSync, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Socket } from "bun";
import { checkPeer } from "./peer.ts";
import { dirProblem } from "./place.ts";
import { takeLines, type ClientLine, type ServerLine } from "./protocol.ts";

/** What {@link ServerConnection.open} says of a socket nobody listens on (its server ended without removing it). */
export const STALE = "nobody listens on it any more (its server has ended)";

/** One connected server. */
export class ServerConnection {
  private buf = "";
  private readonly queue: ServerLine[] = [];
  private waiters: ((l: ServerLine | undefined) => void)[] = [];
  private ended = false;
  /** The socket, set once connected. */
  socket?: Socket<undefined>;

  constructor(readonly path: string) {}

  /** Connect and judge the server; resolves with why it is not used, or undefined when it is. */
  async open(): Promise<string | undefined> {
    try {
      this.socket = await Bun.connect<undefined>({
        unix: this.path,
        socket: {
          data: (_s, d) => this.received(d),
          close: () => this.end(),
          error: () => this.end(),
        },
      });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ECONNREFUSED") return STALE;
      return `cannot connect: ${(e as Error).message}${code === undefined ? "" : ` (${code})`}`;
    }
    const v = await checkPeer((this.socket as unknown as { fd: number }).fd);
    if (v.refused !== undefined) {
      this.socket.end();
      return `the process ${v.pid} behind it is not trusted: ${v.refused}`;
    }
    return undefined;
  }

  private received(d: Buffer): void {
    this.buf += d.toString("utf8");
    let lines: string[];
    try {
      ({ lines, rest: this.buf } = takeLines(this.buf));
    } catch {
      this.socket?.end();
      return;
    }
    for (const l of lines) {
      let v: ServerLine;
      try {
        v = JSON.parse(l) as ServerLine;
      } catch {
        continue;
      }
      const w = this.waiters.shift();
      if (w !== undefined) w(v);
      else this.queue.push(v);
    }
  }

  private end(): void {
    this.ended = true;
    for (const w of this.waiters.splice(0)) w(undefined);
  }

  /** The next line from the server, or undefined once the connection has ended. */
  next(): Promise<ServerLine | undefined> {
    const q = this.queue.shift();
    if (q !== undefined) return Promise.resolve(q);
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((r) => this.waiters.push(r));
  }

  /** Send one line. */
  send(line: ClientLine): void {
    this.socket?.write(JSON.stringify(line) + "\n");
  }

  /** Close the connection. */
  close(): void {
    this.socket?.end();
  }
}

/**
 * The approver sockets in `dir`: `{ sockets }` (none when the folder does not exist yet), or `{ error }` when the
 * folder itself is unsafe. Files
 * that are not sockets of this user with mode `0600` are left out and named in `skipped`.
 */
export function listSockets(dir: string): { sockets: string[]; skipped: string[] } | { error: string } {
  if (!existsSync(dir)) return { sockets: [], skipped: [] }; // no server with --approver has run yet
  const why = dirProblem(dir);
  if (why !== undefined) return { error: why };
  const sockets: string[] = [];
  const skipped: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    if (!/^\d+\.sock$/.test(name)) continue;
    const p = join(dir, name);
    try {
      const st = lstatSync(p);
      if (st.isSocket() && st.uid === process.getuid!() && (st.mode & 0o077) === 0) sockets.push(p);
      else skipped.push(`${p}: not a socket of this user with mode 0600`);
    } catch {
      // removed meanwhile
    }
  }
  return { sockets, skipped };
}
