/**
 * The escalation worker's session state machine: its listeners (one seqpacket socket per shell run, taking
 * handshakes) and sessions (one stream socket per intercepted exec), each step of a session (request, decision,
 * answer, SuperExecMessage, running child, exit status), the bounds of ./messages.ts, and the poll
 * entries that drive them. The poll loop and the control socket are in ./worker.ts; starting and reaping the
 * escalated children is in ./escalated-child.ts.
 */
import { writeFileSync } from "node:fs";
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { reapExitCode, signalChild, signalDescendants, spawnEscalated, superviseChild } from "./escalated-child.ts";
import { KeptRooms } from "./kept-rooms.ts";
import {
  decodeRequest,
  decodeSuperExec,
  encodeFrame,
  encodeResponse,
  encodeResult,
  FrameDecoder,
  type EscalateAction,
} from "../protocol/wire.ts";
import {
  MAX_LISTENER_BUFFERED_BYTES,
  MAX_REQUEST_BYTES,
  MAX_SESSIONS,
  MAX_SESSIONS_PER_LISTENER,
  RECV_CHUNK,
  SESSION_IO_TIMEOUT_MS,
  type WorkerEvent,
} from "./messages.ts";
import type { OutputGates } from "./output-gate.ts";
import type { EscalateSpawn } from "../rooms/keep.ts";

const { MSG_DONTWAIT } = libc.SOCK;
const SEND_FLAGS = MSG_DONTWAIT | libc.SOCK.MSG_NOSIGNAL;

/** Whether `e` is a non-blocking socket call's "try again later" (`EAGAIN`/`EWOULDBLOCK` from ffi/libc.ts). */
export const isEagain = (e: unknown) => e instanceof ShellmcpError && (e.data.errname === "EAGAIN" || e.data.errname === "EWOULDBLOCK");

/** One fd to poll and what to do when it is ready (`revents` as poll(2) returned them). */
export interface PollEntry {
  fd: number;
  events: number;
  on: (revents: number) => void;
}

/**
 * - `request`: reading the EscalateRequest (deadline) · `deciding`: main is deciding (no I/O) ·
 * - `answering`: writing the EscalateResponse (deadline), then `superexec` or done ·
 * - `superexec`: reading the SuperExecMessage with fds (deadline) · `running`: the escalated child runs ·
 * - `reporting`: writing the exit status (deadline) · `orphaned`: the wrapper is gone, the child still runs ·
 * - `done`: closed.
 */
type SessionState = "request" | "deciding" | "answering" | "superexec" | "running" | "reporting" | "orphaned" | "done";

interface Session {
  sid: number;
  lid: number;
  fd: number;
  state: SessionState;
  decoder: FrameDecoder;
  /** fds received with SCM_RIGHTS, not yet used. */
  fds: number[];
  /** Bytes still to write, and the state after they are written. */
  out?: Uint8Array;
  afterOut?: "superexec" | "done";
  /** When the peer's current step times out (performance.now() ms); undefined = no deadline. */
  deadline?: number;
  spawn?: EscalateSpawn;
  pid?: number;
  pidfd?: number;
  /** `pid` is the program's lifeline guard (src/sandbox/linux/lifeline.ts), the program (bubblewrap, when contained) its child. */
  guarded?: boolean;
  /** The kept room its program runs in (instead of `pid`/`pidfd`). */
  inRoom?: number;
}

interface Listener {
  fd: number;
  sessions: number;
  /** Bytes held in its sessions' frame decoders. */
  buffered: number;
  /** Handshakes refused over a bound (reported once when it starts, and in total when the listener closes). */
  refused: number;
  cgroupProcs?: string;
  /** Write end of the call's output pipe (terminal stdout/stderr of escalated programs go there instead). */
  outputFd?: number;
  /** Its slot in the {@link OutputGates} shared with main (main may close it): borrowed for each use. */
  gate?: number;
  /** Every client end is closed (seqpacket EOF): the listener is no longer polled (it would stay readable). */
  hungUp?: boolean;
}

/**
 * The worker's one read buffer ({@link RECV_CHUNK} bytes; what arrives is copied out of it): a read no longer
 * allocates and zeroes a chunk of its own (two per control message, one more at EAGAIN; issue 40). The worker is one
 * thread and copies each read out before the next, so one buffer serves every socket it reads. Made in the worker
 * only (this module is the worker's).
 */
export const RECV_SCRATCH = new Uint8Array(RECV_CHUNK);

/**
 * Every listener and session of the worker. `post` sends a {@link WorkerEvent} to main. The methods are called
 * from the worker's poll loop only (one thread); none blocks, and none throws for a session's fault (the session
 * is failed instead, with a `session-error` event).
 */
export class SessionTable {
  private readonly listeners = new Map<number, Listener>();
  private readonly sessions = new Map<number, Session>();
  private nextSid: number;
  private readonly rooms: KeptRooms;

  /**
   * `firstSid`: the first session id to give out (a worker started after a park goes on from where the parked one
   * stopped, ./port.ts: a session id names one session for the life of the server, whatever worker holds it).
   */
  constructor(
    private readonly post: (e: WorkerEvent) => void,
    private readonly gates?: OutputGates,
    firstSid = 1,
  ) {
    this.nextSid = firstSid;
    this.rooms = new KeptRooms(post, (sid, exitCode) => {
      const s = this.sessions.get(sid);
      if (s?.inRoom !== undefined) this.childEnded(s, exitCode, -1);
    });
  }

  /**
   * The poll entries of every listener and session for one round, and the earliest session deadline
   * (performance.now() ms; Infinity = none).
   */
  pollEntries(): { entries: PollEntry[]; next: number } {
    const entries: PollEntry[] = [];
    for (const [lid, l] of this.listeners) {
      const fd = l.fd;
      if (l.hungUp) continue; // every client end is closed: nothing more can arrive
      entries.push({ fd, events: libc.POLL.IN, on: (r) => this.listeners.get(lid)?.fd === fd && this.onListener(lid, l, r) });
    }
    entries.push(...this.rooms.pollEntries());
    let next = Infinity;
    for (const s of this.sessions.values()) {
      const { state, fd } = s;
      // Each entry runs only if the session still holds this fd in this state (an earlier entry of the same
      // round may have closed it, and the number may already belong to someone else).
      const current = () => this.sessions.get(s.sid) === s && s.state === state && s.fd === fd;
      if (state === "request" || state === "superexec")
        entries.push({ fd, events: libc.POLL.IN, on: () => current() && this.onReadable(s) });
      if (state === "answering" || state === "reporting")
        entries.push({ fd, events: libc.POLL.OUT, on: (r) => current() && this.onWritable(s, r) });
      // While the child runs, the wrapper only waits for its result: readable means it died (EOF) or broke
      // the protocol; either way the child gets SIGTERM (endSession) and stays polled through its pidfd.
      if (state === "running") entries.push({ fd, events: libc.POLL.IN, on: () => current() && this.endSession(s) });
      if ((state === "running" || state === "orphaned") && s.pidfd !== undefined) {
        const pidfd = s.pidfd;
        entries.push({
          fd: pidfd,
          events: libc.POLL.IN,
          on: () => this.sessions.get(s.sid) === s && s.pidfd === pidfd && this.onChildExit(s),
        });
      }
      if (s.deadline !== undefined && s.deadline < next) next = s.deadline;
    }
    return { entries, next };
  }

  /** Fail every session whose peer missed its deadline (its wrapper then fails closed). */
  expireDeadlines(): void {
    const now = performance.now();
    for (const s of [...this.sessions.values()]) {
      if (s.deadline !== undefined && s.deadline <= now) {
        this.failSession(
          s,
          new ShellmcpError(
            "PROTOCOL",
            `the exec wrapper did not ${s.state === "answering" || s.state === "reporting" ? "read its answer" : "send its message"} within ${SESSION_IO_TIMEOUT_MS} ms`,
          ),
        );
      }
    }
  }

  /** Take `fd` (a shell run's seqpacket socket) as listener `lid`; it is made non-blocking. */
  listen(lid: number, fd: number, cgroupProcs: string | undefined, outputFd?: number, gate?: number): void {
    libc.setNonblock(fd, true);
    const shared = outputFd !== undefined && gate !== undefined && this.gates !== undefined;
    this.listeners.set(lid, { fd, sessions: 0, buffered: 0, refused: 0, cgroupProcs, outputFd, ...(shared ? { gate } : {}) });
  }

  /**
   * Close listener `lid`'s copy of the call's output pipe (the shell has exited: its reader waits for EOF); a
   * shared one through its gate (main may have closed it already).
   */
  releaseOutput(lid: number): void {
    const l = this.listeners.get(lid);
    if (l?.outputFd === undefined) return;
    if (l.gate !== undefined) this.gates!.release(l.gate, l.outputFd);
    else libc.closeQuiet(l.outputFd);
    l.outputFd = undefined;
  }

  /**
   * Run `use` with listener `l`'s output fd (undefined when it has none or main has released it), held open for
   * the length of the synchronous `use` (./output-gate.ts).
   */
  private withOutput<T>(l: Listener | undefined, use: (outputFd: number | undefined) => T): T {
    const fd = l?.outputFd;
    if (fd === undefined || l!.gate === undefined) return use(fd);
    if (!this.gates!.borrow(l!.gate)) {
      l!.outputFd = undefined; // released by main: closed
      return use(undefined);
    }
    try {
      return use(fd);
    } finally {
      this.gates!.giveBack(l!.gate, fd);
    }
  }

  /**
   * Close listener `lid` (reporting its refusals in total when more than one); its sessions not waiting for a
   * child are failed closed, and with `killChildren` its escalated children get SIGKILL.
   */
  unlisten(lid: number, killChildren: boolean): void {
    const l = this.listeners.get(lid);
    if (l !== undefined) libc.closeQuiet(l.fd);
    this.releaseOutput(lid);
    if (l !== undefined && l.refused > 1)
      this.post({
        t: "session-error",
        lid,
        sid: 0,
        message: `refused ${l.refused} execs of this shell run in all (too many waiting)`,
      });
    this.listeners.delete(lid);
    for (const s of [...this.sessions.values()]) {
      if (s.lid !== lid) continue;
      if (killChildren) this.signalChild(s, 9);
      // Sessions not waiting for a child belong to a finished run: fail them closed.
      if (s.state !== "running" && s.state !== "orphaned") this.endSession(s);
    }
    this.rooms.closeListener(lid, killChildren);
  }

  /** Send `signal` to every escalated child of listener `lid`. */
  kill(lid: number, signal: number): void {
    for (const s of this.sessions.values()) if (s.lid === lid) this.signalChild(s, signal);
  }

  /**
   * Whether nothing is open: no listener, no session (an escalated child still running counts, its call ended or
   * not), no kept room (one still ending counts). Only then may the worker park (./worker.ts).
   */
  idle(): boolean {
    return this.listeners.size === 0 && this.sessions.size === 0 && this.rooms.empty;
  }

  /** The first session id not given out yet. */
  get nextSessionId(): number {
    return this.nextSid;
  }

  /** Shutting down: every child gets SIGKILL, every session and listener is closed. Nothing may outlive the server. */
  shutdown(): void {
    for (const s of [...this.sessions.values()]) {
      this.signalChild(s, 9);
      this.endSession(s);
    }
    this.rooms.shutdown();
    for (const l of this.listeners.values()) libc.closeQuiet(l.fd);
  }

  // --- handshakes ----------------------------------------------------------------------------------------

  private onListener(lid: number, l: Listener, revents = 0): void {
    // Bounded per readiness: a flood of handshakes cannot keep the loop here.
    for (let i = 0; i < 64; i++) {
      let r: libc.Received;
      try {
        r = libc.recvmsg(l.fd, 8192, libc.MAX_FDS_PER_MESSAGE, MSG_DONTWAIT);
      } catch (e) {
        if (isEagain(e)) return;
        if (e instanceof ShellmcpError && e.code === "PROTOCOL") continue; // bad datagram: fds already closed
        throw e;
      }
      if (r.fds.length !== 1) {
        r.fds.forEach(libc.closeQuiet);
        if (r.bytes.byteLength === 0 && r.fds.length === 0) {
          // A seqpacket socket reads 0 at end of file: every client end (the shell and its children) is closed.
          // (A 0-byte message without POLLHUP is just a malformed handshake.)
          if ((revents & libc.POLL.HUP) !== 0) l.hungUp = true;
          return;
        }
        this.post({ t: "session-error", lid, sid: 0, message: `expected 1 fd in datagram handshake, got ${r.fds.length}` });
        continue;
      }
      const sfd = r.fds[0]!;
      if (l.sessions >= MAX_SESSIONS_PER_LISTENER || this.sessions.size >= MAX_SESSIONS) {
        libc.closeQuiet(sfd); // the wrapper reads EOF and fails closed
        if (l.refused++ === 0) {
          const which =
            l.sessions >= MAX_SESSIONS_PER_LISTENER ? `${MAX_SESSIONS_PER_LISTENER} for one shell run` : `${MAX_SESSIONS} for the server`;
          this.post({
            t: "session-error",
            lid,
            sid: 0,
            message: `refused an exec: too many execs waiting (${which}); further refusals of this shell run are counted`,
          });
        }
        continue;
      }
      libc.setNonblock(sfd, true);
      const s: Session = {
        sid: this.nextSid++,
        lid,
        fd: sfd,
        state: "request",
        decoder: new FrameDecoder(MAX_REQUEST_BYTES),
        fds: [],
        deadline: performance.now() + SESSION_IO_TIMEOUT_MS,
      };
      l.sessions++;
      this.sessions.set(s.sid, s);
    }
  }

  // --- sessions ------------------------------------------------------------------------------------------

  /** Account for a change of `s`'s buffered bytes in its listener's total. */
  private account(s: Session, before: number): void {
    const l = this.listeners.get(s.lid);
    if (l !== undefined) l.buffered += s.decoder.pending - before;
  }

  private onReadable(s: Session): void {
    try {
      // Bounded per readiness, so one fast sender cannot keep the loop here.
      for (let i = 0; i < 16; i++) {
        let r: libc.Received;
        try {
          r = libc.recvmsg(s.fd, RECV_CHUNK, s.state === "superexec" ? libc.MAX_FDS_PER_MESSAGE : 0, MSG_DONTWAIT, RECV_SCRATCH);
        } catch (e) {
          if (isEagain(e)) return;
          throw e;
        }
        s.fds.push(...r.fds);
        if (r.fds.length > libc.MAX_FDS_PER_MESSAGE || s.fds.length > libc.MAX_FDS_PER_MESSAGE)
          throw new ShellmcpError("PROTOCOL", "too many fds");
        if (r.bytes.byteLength === 0) {
          this.endSession(s); // the wrapper went away
          return;
        }
        const before = s.decoder.pending;
        s.decoder.push(r.bytes);
        this.account(s, before);
        if ((this.listeners.get(s.lid)?.buffered ?? 0) > MAX_LISTENER_BUFFERED_BYTES) {
          throw new ShellmcpError("PROTOCOL", `this shell run has more than ${MAX_LISTENER_BUFFERED_BYTES} bytes of requests in flight`);
        }
        const held = s.decoder.pending;
        const payload = s.decoder.next();
        this.account(s, held);
        if (payload === undefined) continue;
        if (s.state === "request") {
          const request = decodeRequest(payload);
          if (request.argv.length === 0) throw new ShellmcpError("PROTOCOL", "EscalateRequest: empty argv");
          s.state = "deciding";
          s.deadline = undefined;
          this.post({ t: "request", lid: s.lid, sid: s.sid, request });
          return;
        }
        if (s.state === "superexec") {
          s.deadline = undefined;
          this.startEscalated(s, decodeSuperExec(payload).fds);
          return;
        }
      }
    } catch (e) {
      this.failSession(s, e);
    }
  }

  /** Queue `payload` as a frame; the session moves to `state` (answering/reporting) until it is written. */
  private queue(s: Session, payload: Uint8Array, state: "answering" | "reporting", after: "superexec" | "done"): void {
    s.out = encodeFrame(payload);
    s.afterOut = after;
    s.state = state;
    s.deadline = performance.now() + SESSION_IO_TIMEOUT_MS;
    this.flush(s);
  }

  private onWritable(s: Session, revents: number): void {
    if ((revents & (libc.POLL.ERR | libc.POLL.NVAL)) !== 0 && (revents & libc.POLL.OUT) === 0) {
      this.endSession(s);
      return;
    }
    this.flush(s);
  }

  /** Write what the socket takes now; when all is written, move on. Never blocks. */
  private flush(s: Session): void {
    try {
      while (s.out !== undefined && s.out.byteLength > 0) {
        let n: number;
        try {
          n = libc.sendmsg(s.fd, s.out, [], SEND_FLAGS);
        } catch (e) {
          if (isEagain(e)) return; // poll will tell when the peer reads
          throw e;
        }
        s.out = s.out.subarray(n);
      }
    } catch {
      this.endSession(s); // EPIPE and the like: the wrapper is gone
      return;
    }
    s.out = undefined;
    s.deadline = undefined;
    if (s.afterOut === "superexec") {
      s.state = "superexec";
      s.deadline = performance.now() + SESSION_IO_TIMEOUT_MS;
      this.onReadable(s); // bytes (and fds) may already be buffered
    } else {
      this.endSession(s);
    }
  }

  /**
   * Main's decision for session `sid` (ignored unless it is still `deciding`): the answer is queued; `Escalate`
   * needs `spawn` (else the session fails with `PROTOCOL`) and goes on to the SuperExecMessage.
   */
  onDecision(sid: number, action: EscalateAction, spawn?: EscalateSpawn): void {
    const s = this.sessions.get(sid);
    if (s === undefined || s.state !== "deciding") return; // session already gone
    try {
      if (action.kind === "Escalate") {
        if (spawn === undefined) throw new ShellmcpError("PROTOCOL", "Escalate decision without a spawn spec");
        s.spawn = spawn;
        // A kept room opens with the decision that first names it: before any program's fds can arrive for it.
        if (spawn.room?.start !== undefined)
          this.rooms.open(s.lid, spawn.room.rid, spawn.room.start, this.listeners.get(s.lid)?.cgroupProcs);
        this.queue(s, encodeResponse(action), "answering", "superexec");
      } else {
        this.queue(s, encodeResponse(action), "answering", "done");
      }
    } catch (e) {
      this.failSession(s, e);
    }
  }

  private startEscalated(s: Session, dests: number[]): void {
    const received = s.fds;
    s.fds = [];
    const listener = this.listeners.get(s.lid);
    const room = s.spawn!.room;
    if (room !== undefined) {
      const pid = this.withOutput(listener, (out) => this.rooms.start(s.lid, room.rid, s.sid, received, dests, s.spawn!, out));
      s.inRoom = room.rid;
      s.state = "running";
      this.post({ t: "spawned", lid: s.lid, sid: s.sid, pid });
      return;
    }
    const procs = listener?.cgroupProcs;
    const { pid, viaTrampoline, guarded } = this.withOutput(listener, (out) => spawnEscalated(received, dests, s.spawn!, procs, out));
    s.pidfd = superviseChild(pid); // throws (the child killed and reaped) when it cannot be supervised
    s.pid = pid;
    s.guarded = guarded;
    s.state = "running";
    if (procs !== undefined && !viaTrampoline) {
      try {
        writeFileSync(procs, String(pid));
      } catch (e) {
        // The call's cgroup is gone (the call ended) or refuses: the child must not run unaccounted.
        this.signalChild(s, 9);
        this.post({
          t: "session-error",
          lid: s.lid,
          sid: s.sid,
          message: `cannot move the escalated program into its call's cgroup: ${(e as Error).message}`,
        });
      }
    }
    this.post({ t: "spawned", lid: s.lid, sid: s.sid, pid });
  }

  /** Signal `s`'s escalated child and its process group, while it is unreaped (see {@link signalChild}). */
  private signalChild(s: Session, signal: number): void {
    if (s.inRoom !== undefined) {
      this.rooms.signal(s.lid, s.inRoom, s.sid, signal);
      return;
    }
    // A contained child is bwrap's monitor: its death kills the room's whole pid namespace at once. A signal
    // that asks to end (SIGTERM) goes to what runs inside instead, so that the program has its grace period.
    if (s.spawn?.contained === true && signal !== 9 && s.pid !== undefined && s.pidfd !== undefined)
      signalDescendants(s.pid, signal, s.guarded === true ? 2 : 1);
    else signalChild(s.pid, s.pidfd, signal, s.guarded === true);
  }

  private onChildExit(s: Session): void {
    const pid = s.pid!;
    const exitCode = reapExitCode(pid);
    if (exitCode === undefined) return;
    libc.closeQuiet(s.pidfd!);
    s.pidfd = undefined;
    s.pid = undefined;
    this.childEnded(s, exitCode, pid);
  }

  /** `s`'s program has ended with `exitCode` (`pid`: its pid, −1 in a kept room): report it, unless orphaned. */
  private childEnded(s: Session, exitCode: number, pid: number): void {
    s.inRoom = undefined;
    this.post({ t: "exited", lid: s.lid, sid: s.sid, pid, exitCode });
    if (s.state === "orphaned") {
      this.forget(s);
      return;
    }
    this.queue(s, encodeResult({ exit_code: exitCode }), "reporting", "done");
  }

  private failSession(s: Session, e: unknown): void {
    this.post({ t: "session-error", lid: s.lid, sid: s.sid, message: e instanceof Error ? e.message : String(e) });
    this.endSession(s);
  }

  private endSession(s: Session): void {
    if (s.state === "done" || s.state === "orphaned") return;
    const held = s.decoder.pending;
    s.decoder = new FrameDecoder(0);
    this.account(s, held);
    s.fds.forEach(libc.closeQuiet);
    s.fds = [];
    s.out = undefined;
    s.deadline = undefined;
    libc.closeQuiet(s.fd);
    s.fd = -1;
    if (s.pid !== undefined || s.inRoom !== undefined) {
      // The wrapper that waits for this child is gone (killed, e.g. by `timeout`): pass the termination on to
      // the child's process group, and keep polling its pidfd so it is reaped when it ends.
      this.signalChild(s, 15);
      s.state = "orphaned";
      return;
    }
    this.forget(s);
  }

  private forget(s: Session): void {
    s.state = "done";
    if (this.sessions.delete(s.sid)) {
      const l = this.listeners.get(s.lid);
      if (l !== undefined) l.sessions--;
    }
  }
}
