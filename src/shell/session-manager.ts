/**
 * The processes behind Codex's unified exec (`exec_command` / `write_stdin`, the shared spec notes on unified exec, unified-exec.md
 * §4): a command still running when its call's yield time ends stays here under a session id, its output collected
 * in a bounded head-and-tail buffer that each later call drains.
 *
 * Bounds, each with a clear error instead of Codex's silent pruning: at most `maxSessions` at once (a new
 * `exec_command` is refused with the list of running sessions), at most `maxBufferedBytes` of output kept between
 * calls (first and last halves, `... N bytes omitted ...` in between, as Codex), and `idleTimeoutMs` without a call
 * (the session is killed; a later `write_stdin` is told so). Sessions end with the server ({@link closeAll}).
 *
 * Nothing here knows MCP or the sandbox: a session's process is started by the caller (../serve/call.ts, through
 * `runCommand` with the same sandbox, rules and network as `shell`) and handed over as a {@link SessionProcess}.
 */
import type { BlockedLog } from "../blocked/report.ts";
import { writeSync } from "node:fs";
import * as libc from "../../ffi/libc.ts";
import { CappedOutput } from "./output.ts";

/** Codex's buffer between calls: 1 MiB (512 KiB head + 512 KiB tail). */
export const DEFAULT_MAX_BUFFERED_BYTES = 1024 * 1024;
/** Sessions kept at once (Codex: 64, pruned silently; here a clear refusal past it). */
export const DEFAULT_MAX_SESSIONS = 16;
/** A session without an `exec_command`/`write_stdin` call for this long is killed, ms (Codex has none: 30 min). */
export const DEFAULT_IDLE_TIMEOUT_MS = 30 * 60 * 1000;
/** Ended sessions whose end is explained to a later `write_stdin` (the newest kept). */
const MAX_REMEMBERED_ENDS = 256;

/** The limits of one server's sessions. */
export interface SessionLimits {
  maxSessions: number;
  /** Output kept between two calls of one session, bytes (head and tail halves). */
  maxBufferedBytes: number;
  /** Time without a call after which a session is killed, ms. */
  idleTimeoutMs: number;
}

/** The handle a caller gives for a started session process. */
export interface SessionProcess {
  /** Ends every process of the session (the run's cancellation). */
  kill: () => void;
  /** SIGINT to the session's process group (Codex's `"\u0003"`); a no-op until started. */
  interrupt: () => void;
  /** The terminal's master for input (`tty: true`); undefined for a pipe session (stdin is /dev/null). */
  terminalFd?: number;
  /**
   * Resolves with the exit code (128+N for a signal) once every process of the session has ended and the output
   * is read to its end, and `trailer`: text of shellmcp's own to append to the last output (the git guard's report);
   * `blocked`: what the session's command had refused (../blocked/report.ts), for the last result's `_meta`.
   */
  ended: Promise<{ exitCode: number; trailer: string; blocked?: BlockedLog }>;
}

/** What one call collected from a session. */
export interface Collected {
  /** Output since the previous call, lossy UTF-8 (with `... N bytes omitted ...` when the buffer overflowed). */
  output: string;
  /** Bytes that arrived during this call's window, dropped ones included (Codex's "Original token count" base). */
  bytes: number;
  /** Set when the process ended (this session is then forgotten). */
  exitCode?: number;
  /** With `exitCode`: what the session's command had refused. */
  blocked?: BlockedLog;
}

/** A refusal, worded for the model (Codex's wording where Codex has one). */
export class SessionError extends Error {}

/** Head-and-tail byte buffer (./output.ts `CappedOutput`) drained by each call, with Codex's omission marker. */
class HeadTail {
  private out: CappedOutput;
  constructor(private readonly cap: number) {
    this.out = new CappedOutput(cap);
  }

  /** Bytes pushed since the last drain, dropped ones included. */
  get total(): number {
    return this.out.total;
  }

  push(chunk: Uint8Array): void {
    this.out.push(chunk);
  }

  /** Everything buffered as text, and empty the buffer. */
  drain(): { text: string; bytes: number } {
    const k = this.out.kept();
    const text = "whole" in k ? k.whole : `${k.head}\n... ${this.out.dropped} bytes omitted ...\n${k.tail}`;
    const bytes = this.out.total;
    this.out = new CappedOutput(this.cap);
    return { text, bytes };
  }
}

interface Session {
  id: number;
  command: string;
  tty: boolean;
  buffer: HeadTail;
  proc?: SessionProcess;
  /** Set once the process has ended. */
  exit?: { exitCode: number; trailer: string; blocked?: BlockedLog };
  /** Wakes a waiting call when output arrives or the process ends. */
  wake: () => void;
  idle?: ReturnType<typeof setTimeout>;
  /** Calls on one session are serialised (Codex C's interaction lock). */
  lock: Promise<void>;
  /** `performance.now()` of the last call on it (or its start). */
  lastCall: number;
  /** Set once a call has reported the end (so a call that waited outside the lock does not report it again). */
  reported?: boolean;
}

/** The sessions of one server. */
export class SessionManager {
  private readonly live = new Map<number, Session>();
  private readonly ends = new Map<number, string>();
  private closed = false;

  constructor(readonly limits: SessionLimits) {}

  /**
   * Open sessions: id, command, whether on a terminal, whether the process still runs (an ended one stays until a
   * call reports its end), seconds since the last call on it, bytes of output waiting for the next call.
   */
  list(): { id: number; command: string; tty: boolean; running: boolean; idleSeconds: number; bufferedBytes: number }[] {
    const now = performance.now();
    return [...this.live.values()].map((s) => ({
      id: s.id,
      command: s.command,
      tty: s.tty,
      running: s.exit === undefined,
      idleSeconds: Math.round((now - s.lastCall) / 1000),
      bufferedBytes: s.buffer.total,
    }));
  }

  /**
   * End session `id` (every process of it) at a user's or model's request; a later `write_stdin` is told it was
   * killed. Returns false when no such session is open.
   */
  kill(id: number): boolean {
    const s = this.live.get(id);
    if (s === undefined) return false;
    const proc = s.proc;
    this.forget(s, "the session was ended by list_sessions (kill)");
    proc?.kill();
    return true;
  }

  /** The live sessions as one line each, for errors. */
  describe(): string {
    const l = this.list();
    if (l.length === 0) return "no session is running";
    return l.map((s) => `${s.id}${s.tty ? " (tty)" : ""}${s.running ? "" : " (exited, not yet polled)"}: ${oneLine(s.command)}`).join("; ");
  }

  /**
   * Reserve an id for a new session running `command` (random in 1000–99999, unique among live and remembered
   * ids, as Codex). Throws {@link SessionError} past `maxSessions` (naming the running sessions) or after
   * {@link closeAll}.
   */
  open(command: string, tty: boolean): number {
    if (this.closed) throw new SessionError("the server is shutting down");
    if (this.live.size >= this.limits.maxSessions)
      throw new SessionError(
        `shellmcp keeps at most ${this.limits.maxSessions} sessions at once and ${this.live.size} are open (${this.describe()}). ` +
          `End one with list_sessions {"kill": [id]}, interrupt one with write_stdin chars "\\u0003", or poll a finished one with write_stdin; ` +
          `the user can raise the limit (serve --max-sessions or [shellmcp] max_sessions)`,
      );
    let id: number;
    do id = 1000 + Math.floor(Math.random() * 99000);
    while (this.live.has(id) || this.ends.has(id));
    const s: Session = {
      id,
      command,
      tty,
      buffer: new HeadTail(this.limits.maxBufferedBytes),
      wake: () => undefined,
      lock: Promise.resolve(),
      lastCall: performance.now(),
    };
    this.live.set(id, s);
    this.touch(s);
    return id;
  }

  /** Output of session `id` as it arrives. */
  output(id: number, chunk: Uint8Array): void {
    const s = this.live.get(id);
    if (s === undefined) return;
    s.buffer.push(chunk);
    s.wake();
  }

  /** Attach the started process of session `id`; its end is recorded (and wakes a waiting call). */
  attach(id: number, proc: SessionProcess): void {
    const s = this.live.get(id);
    if (s === undefined) {
      proc.kill();
      return;
    }
    s.proc = proc;
    void proc.ended.then(
      (e) => {
        s.exit = e;
        s.wake();
      },
      (err: unknown) => {
        s.exit = { exitCode: 1, trailer: `\nshellmcp: the session failed: ${(err as Error).message}\n` };
        s.wake();
      },
    );
  }

  /** Forget a session whose start failed (no process). */
  abandon(id: number): void {
    const s = this.live.get(id);
    if (s === undefined) return;
    if (s.idle !== undefined) clearTimeout(s.idle);
    this.live.delete(id);
  }

  /**
   * One call's collection: optionally write `chars` first (terminal sessions; `"\u0003"` also interrupts the
   * process group, on pipes only that is accepted), then wait until `yieldMs` have passed or the process has ended,
   * and drain the buffer. An ended process is reported once and then forgotten (Codex). Throws
   * {@link SessionError} with Codex's texts: "Unknown process id N" (with why, when shellmcp ended it), "stdin is
   * closed for this session; …".
   *
   * `carried` (the modern era's `ModernToolContext.carried`, src/mcp/modern.ts): asked after the wait,
   * outside the session's lock; resolves `false` when the call ended unanswered (parked for a human's approval and
   * never retried). Then nothing is drained and the end is not reported: the output and the end stay for the next
   * call (a {@link SessionError} goes to the ended call, which nobody reads). Without it the drain follows the wait
   * at once.
   */
  async collect(id: number, yieldMs: number, chars = "", carried?: () => Promise<boolean>): Promise<Collected> {
    const s = this.live.get(id);
    if (s === undefined) throw this.unknown(id);
    const prev = s.lock;
    let unlock!: () => void;
    s.lock = new Promise((r) => (unlock = r));
    await prev;
    try {
      if (s.idle !== undefined) clearTimeout(s.idle); // no idle end while a call waits on it
      if (chars !== "") {
        if (chars === "\u0003") s.proc?.interrupt();
        if (s.tty && s.proc?.terminalFd !== undefined && s.exit === undefined) {
          try {
            writeAll(s.proc.terminalFd, Buffer.from(chars, "utf8"));
          } catch (e) {
            throw new SessionError(`cannot write to the session's terminal: ${(e as Error).message}`);
          }
        } else if (!s.tty && chars !== "\u0003")
          throw new SessionError("stdin is closed for this session; rerun exec_command with tty=true to keep stdin open");
      }
      if (s.exit === undefined) {
        const ses = s;
        await new Promise<void>((res) => {
          const done = () => {
            clearTimeout(t);
            ses.wake = () => undefined;
            res();
          };
          const t = setTimeout(done, yieldMs);
          ses.wake = () => {
            if (ses.exit !== undefined || this.live.get(ses.id) !== ses) done();
          };
        });
      }
    } finally {
      unlock();
    }
    if (carried !== undefined && !(await carried()))
      throw new SessionError("the call ended before its approval was answered; the session's output waits for the next call");
    // Synchronous from here: no other call drains between this check and the drain.
    if (s.reported === true) throw this.unknown(id);
    const { text, bytes } = s.buffer.drain();
    if (s.exit === undefined) {
      if (this.live.get(s.id) === s) this.touch(s);
      return { output: text, bytes };
    }
    s.reported = true;
    this.forget(s, undefined);
    return { output: text + s.exit.trailer, bytes, exitCode: s.exit.exitCode, blocked: s.exit.blocked };
  }

  /** Codex's "Unknown process id N", with why when shellmcp ended it and the open sessions when there are any. */
  private unknown(id: number): SessionError {
    const why = this.ends.get(id);
    const running = this.live.size === 0 ? "" : ` (open sessions: ${this.describe()})`;
    return new SessionError(`Unknown process id ${id}${why === undefined ? "" : `: ${why}`}${running}`);
  }

  /** Kill every session and wait (at most `waitMs`) for their ends; later opens are refused. */
  async closeAll(waitMs = 5000): Promise<void> {
    this.closed = true;
    const procs = [...this.live.values()].map((s) => s.proc).filter((p): p is SessionProcess => p !== undefined);
    for (const s of [...this.live.values()]) this.forget(s, "the server shut down");
    for (const p of procs) p.kill();
    await Promise.race([Promise.allSettled(procs.map((p) => p.ended)), Bun.sleep(waitMs)]);
  }

  private touch(s: Session): void {
    s.lastCall = performance.now();
    if (s.idle !== undefined) clearTimeout(s.idle);
    s.idle = setTimeout(() => {
      const secs = Math.round(this.limits.idleTimeoutMs / 100) / 10;
      this.forget(
        s,
        `shellmcp ended this session after ${secs} s without an exec_command or write_stdin call for it (the idle limit; ` +
          `the user can raise it with serve --session-idle-timeout-ms or [shellmcp] session_idle_timeout_ms). Start it again with exec_command`,
      );
      s.proc?.kill();
    }, this.limits.idleTimeoutMs);
    s.idle.unref?.();
  }

  private forget(s: Session, why: string | undefined): void {
    if (s.idle !== undefined) clearTimeout(s.idle);
    this.live.delete(s.id);
    if (s.proc?.terminalFd !== undefined) {
      const fd = s.proc.terminalFd;
      // The master stays open until the process has ended: closing it first would hang up the terminal early.
      void s.proc.ended.finally(() => libc.closeQuiet(fd)).catch(() => undefined);
    }
    if (why !== undefined) {
      this.ends.set(s.id, why);
      if (this.ends.size > MAX_REMEMBERED_ENDS) this.ends.delete(this.ends.keys().next().value!);
    }
    s.wake();
  }
}

function oneLine(command: string): string {
  const l = command.replace(/\s+/g, " ").trim();
  return l.length > 80 ? `${l.slice(0, 77)}...` : l;
}

/** Bytes written to a terminal per write, each after poll says there is room. */
const TERMINAL_WRITE_PIECE = 256;
/** How long input may wait for room in the terminal, ms, before the write is given up. */
const TERMINAL_WRITE_WAIT_MS = 2000;

/**
 * Write all of `bytes` to `fd`, a terminal's blocking master, in pieces of {@link TERMINAL_WRITE_PIECE} bytes, each
 * after `poll` reports room (waiting at most {@link TERMINAL_WRITE_WAIT_MS} in all): a program that does not read
 * its input makes this throw (saying how much was written) instead of blocking the server.
 */
function writeAll(fd: number, bytes: Uint8Array): void {
  let off = 0;
  const deadline = performance.now() + TERMINAL_WRITE_WAIT_MS;
  while (off < bytes.byteLength) {
    const left = Math.max(0, Math.ceil(deadline - performance.now()));
    const [ready] = libc.poll([{ fd, events: libc.POLL.OUT }], Math.min(left, 50));
    if ((ready! & libc.POLL.OUT) === 0) {
      if (left === 0) throw new Error(`the program is not reading its input: ${off} of ${bytes.byteLength} bytes were written`);
      continue;
    }
    off += writeSync(fd, bytes, off, Math.min(TERMINAL_WRITE_PIECE, bytes.byteLength - off));
  }
}
