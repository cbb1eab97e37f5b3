/**
 * The pseudo-terminal of a `tty: true` process started under the lifeline guard (./process.ts): the server's own
 * terminal (libc `openPty`, 24×80), whose other end the guard makes its controlling terminal (`--ctty`), instead of
 * Bun's pty spawn, which keeps that other end open until the process it started (the guard) ends — and the guard
 * lets the program's leftovers run on, so Bun's terminal would report EOF only once the last of them had ended.
 *
 * Output is read through a `tty.ReadStream` (as `serve`'s sessions read theirs, src/shell/output-pump.ts: the
 * stream owns the master and closes it; the last close of the other end reads as EIO, taken as EOF), paused while
 * the client is behind (the program then blocks on a full terminal: backpressure without signals). Input is queued
 * and written to a copy of the master in pieces of {@link PIECE} bytes, each once `poll` reports room, so a program
 * that does not read its input never blocks the server; what cannot be written once the terminal is gone is lost
 * (as bytes written after the program ended, exec-server spec §3.5).
 */
import { writeSync } from "node:fs";
import type { ReadStream } from "node:tty";
import * as libc from "../../ffi/libc.ts";

/** Bytes written to the terminal per write, each after `poll` says there is room. */
const PIECE = 256;
/** How long to wait before looking for room again when the terminal's input is full, ms. */
const RETRY_MS = 10;
/** `F_DUPFD_CLOEXEC` (Linux). */
const F_DUPFD_CLOEXEC = 1030;

/** What an {@link OwnTerminal} reports to, and asks of, its process. */
export interface TerminalOwner {
  /** A chunk read from the terminal. */
  terminalOutput(data: Uint8Array): void;
  /** The terminal reached EOF (every other end closed) or failed; called once. */
  terminalEnded(): void;
  /** Whether the client is behind (reading pauses). */
  backpressured(): boolean;
  /** Resolves when the client can take more output. */
  waitWritable(): Promise<void>;
}

/** The server's end of one process's terminal: see the top of this file. */
export class OwnTerminal {
  private readonly stream: ReadStream;
  /** A copy of the master for input (the stream closes its own at EOF); −1 once closed. */
  private input: number;
  private queue: Uint8Array[] = [];
  private retry: ReturnType<typeof setTimeout> | undefined;
  private paused = false;
  private destroyed = false;

  /**
   * Take over `master` (a blocking pseudo-terminal master; closed by the stream at EOF) and start reading it for
   * `owner`. Throws `SYSCALL` when the master cannot be copied for input (the master is then not taken).
   */
  constructor(master: number, owner: TerminalOwner) {
    this.input = libc.fcntl(master, F_DUPFD_CLOEXEC, 3);
    this.stream = new (require("node:tty") as typeof import("node:tty")).ReadStream(master);
    this.stream.on("data", (d: Buffer) => {
      owner.terminalOutput(new Uint8Array(d));
      if (this.paused || !owner.backpressured()) return;
      this.paused = true;
      this.stream.pause();
      void owner.waitWritable().then(() => {
        this.paused = false;
        this.stream.resume();
      });
    });
    this.stream.on("error", () => undefined); // EIO: every other end is closed
    this.stream.on("close", () => {
      this.closeInput();
      if (!this.destroyed) owner.terminalEnded();
    });
  }

  /** Queue `data` as the program's input (written in order as the terminal takes it). */
  write(data: Uint8Array): void {
    if (this.input < 0 || data.byteLength === 0) return;
    this.queue.push(data);
    if (this.retry === undefined) this.flush();
  }

  /** Write what the terminal has room for now; look again in {@link RETRY_MS} when some is left. */
  private flush(): void {
    this.retry = undefined;
    try {
      while (this.queue.length > 0 && this.input >= 0) {
        const [ready] = libc.poll([{ fd: this.input, events: libc.POLL.OUT }], 0);
        if ((ready! & (libc.POLL.ERR | libc.POLL.HUP | libc.POLL.NVAL)) !== 0) break;
        if ((ready! & libc.POLL.OUT) === 0) {
          this.retry = setTimeout(() => this.flush(), RETRY_MS);
          return;
        }
        const head = this.queue[0]!;
        const n = writeSync(this.input, head, 0, Math.min(PIECE, head.byteLength));
        if (n >= head.byteLength) this.queue.shift();
        else this.queue[0] = head.subarray(n);
      }
    } catch {
      // the terminal is gone (EIO): the rest is lost
    }
    if (this.queue.length > 0 && this.retry === undefined) this.queue = [];
  }

  /** The process could not be started: close both copies of the master, reporting nothing. */
  destroy(): void {
    this.destroyed = true;
    this.closeInput();
    this.stream.destroy();
  }

  /** Stop writing input (what is queued is dropped); the output is read on until EOF. Idempotent. */
  closeInput(): void {
    if (this.retry !== undefined) clearTimeout(this.retry);
    this.retry = undefined;
    this.queue = [];
    if (this.input >= 0) libc.closeQuiet(this.input);
    this.input = -1;
  }
}
