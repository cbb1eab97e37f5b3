/**
 * Escalation worker: a Worker thread that owns every escalation socket and blocks in `poll(2)`, so Bun's main
 * event loop never blocks (Bun has no fd-passing API; recvmsg with SCM_RIGHTS is FFI and synchronous).
 *
 * Inputs, all multiplexed by one poll:
 * - the control socket (main → worker commands, length-prefixed JSON, see {@link Command});
 * - one datagram socket per listener (a shell run): handshakes carrying one stream fd each;
 * - one stream socket per session (an intercepted exec): `EscalateRequest`, then `SuperExecMessage`;
 * - one pidfd per escalated child: readable when it exits.
 * Outputs to main are `postMessage` calls ({@link WorkerEvent}); main answers decisions over the control socket.
 *
 * No session can stall another (docs: "escalation server bounds"):
 * - every socket is non-blocking; answers are queued and written when poll says the peer can take them;
 * - a session has {@link SESSION_IO_TIMEOUT_MS} for each step that depends on its peer (sending the request,
 *   reading the answer, sending the SuperExecMessage, reading the exit status); past it the session is closed
 *   and its wrapper fails closed. Waiting for a decision (a human) or for an escalated child has no deadline of
 *   its own: the call's timeout closes the listener;
 * - a request frame may hold {@link MAX_REQUEST_BYTES}; a listener may buffer {@link MAX_LISTENER_BUFFERED_BYTES}
 *   across its sessions and hold {@link MAX_SESSIONS_PER_LISTENER} sessions; the worker holds at most
 *   {@link MAX_SESSIONS} — past a bound the offending session (or handshake) is refused, with a logged reason;
 * - an fd is never polled, read or written after it was closed: every poll entry checks, before it runs, that
 *   its owner still holds that fd in the same state.
 *
 * Escalated children are started here with `posix_spawn` (fds from the wrapper on 0/1/2, /dev/null for any the
 * wrapper did not send, every other fd closed, signals reset, their own process group), moved into their
 * call's cgroup when it has one, signalled through their pidfd, and reaped here.
 */
import { existsSync, writeFileSync } from "node:fs";
import * as libc from "../../ffi/libc.ts";
import { ShellmcpError } from "../errors.ts";
import {
  decodeRequest,
  decodeSuperExec,
  encodeFrame,
  encodeResponse,
  encodeResult,
  FrameDecoder,
  type EscalateAction,
  type EscalateRequest,
} from "./protocol.ts";

/** How main asks for an escalated program to be started. */
export interface EscalateSpawn {
  path: string;
  argv: string[];
  env: string[];
  cwd: string;
}

/** Commands main sends to the worker. `cgroupProcs`: the call's `cgroup.procs` file, for escalated children. */
export type Command =
  | { t: "listen"; lid: number; fd: number; cgroupProcs?: string }
  | { t: "unlisten"; lid: number; killChildren: boolean }
  | { t: "decision"; sid: number; action: EscalateAction; spawn?: EscalateSpawn }
  | { t: "kill"; lid: number; signal: number }
  | { t: "stop" };

/** Events the worker posts to main. */
export type WorkerEvent =
  | { t: "ready" }
  | { t: "request"; lid: number; sid: number; request: EscalateRequest }
  | { t: "spawned"; lid: number; sid: number; pid: number }
  | { t: "exited"; lid: number; sid: number; pid: number; exitCode: number }
  | { t: "session-error"; lid: number; sid: number; message: string }
  | { t: "unlistened"; lid: number }
  | { t: "stopped" };

/** Largest `EscalateRequest` frame, bytes. Codex's requests carry the whole environment (≤ ARG_MAX, 2 MiB by default). */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** Bytes one listener (shell run) may hold in partly received frames, across all its sessions. */
export const MAX_LISTENER_BUFFERED_BYTES = 8 * 1024 * 1024;
/** Sessions (intercepted execs in flight) one listener may hold. */
export const MAX_SESSIONS_PER_LISTENER = 128;
/** Sessions the worker holds across all listeners (each is an fd; RLIMIT_NOFILE is the hard wall). */
export const MAX_SESSIONS = 4096;
/** Time a peer has for each step it owes (send the request, read the answer, …), ms. */
export const SESSION_IO_TIMEOUT_MS = 10_000;
const RECV_CHUNK = 256 * 1024;

/** The host's bash, used as a trampoline into a call's cgroup (it can exec with a chosen argv[0]). */
const TRAMPOLINE_BASH = "/bin/bash";

/**
 * argv for `/bin/bash` that joins the cgroup (`procs`) first and then execs `spec.path` with `spec.argv` exactly
 * (argv[0] included): the escalated program is in its call's cgroup before its first instruction, so nothing it
 * forks can start outside. `--norc --noprofile` and a fixed script: nothing from the environment is run. A
 * failed write stops it (exit 126) rather than running it unaccounted.
 */
function trampolineArgv(procs: string, spec: EscalateSpawn): string[] {
  return [
    TRAMPOLINE_BASH,
    "--norc",
    "--noprofile",
    "-c",
    'echo $$ > "$0" || exit 126; exec -a "$1" "$2" "${@:3}"',
    procs,
    spec.argv[0]!,
    spec.path,
    ...spec.argv.slice(1),
  ];
}

/** The worker's global scope (bun-types does not declare `self` without the DOM lib). */
const scope = globalThis as unknown as { postMessage(m: unknown): void; onmessage: ((ev: MessageEvent) => void) | null };
const post = (e: WorkerEvent) => scope.postMessage(e);

const { MSG_DONTWAIT } = libc.SOCK;
const SEND_FLAGS = MSG_DONTWAIT | libc.SOCK.MSG_NOSIGNAL;
const isEagain = (e: unknown) => e instanceof ShellmcpError && (e.data.errname === "EAGAIN" || e.data.errname === "EWOULDBLOCK");

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
}

interface Listener {
  fd: number;
  sessions: number;
  /** Bytes held in its sessions' frame decoders. */
  buffered: number;
  /** Handshakes refused over a bound (reported once when it starts, and in total when the listener closes). */
  refused: number;
  cgroupProcs?: string;
}

class EscalationWorker {
  private readonly listeners = new Map<number, Listener>();
  private readonly sessions = new Map<number, Session>();
  private readonly control = new FrameDecoder();
  private nextSid = 1;
  private running = true;

  constructor(private readonly controlFd: number) {
    libc.setNonblock(controlFd, true);
  }

  run(): void {
    post({ t: "ready" });
    while (this.running) {
      type Entry = { fd: number; events: number; on: (revents: number) => void };
      const entries: Entry[] = [{ fd: this.controlFd, events: libc.POLL.IN, on: () => this.onControl() }];
      for (const [lid, l] of this.listeners) {
        const fd = l.fd;
        entries.push({ fd, events: libc.POLL.IN, on: () => this.listeners.get(lid)?.fd === fd && this.onListener(lid, l) });
      }
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
      const timeout = next === Infinity ? -1 : Math.max(0, Math.ceil(next - performance.now()));
      const revents = libc.poll(entries, timeout);
      entries.forEach((e, i) => {
        if (revents[i]! !== 0) e.on(revents[i]!);
      });
      this.expireDeadlines();
    }
    // Shutting down: nothing may outlive the server.
    for (const s of [...this.sessions.values()]) {
      this.signalChild(s, 9);
      this.endSession(s);
    }
    for (const l of this.listeners.values()) libc.closeQuiet(l.fd);
    libc.closeQuiet(this.controlFd);
    post({ t: "stopped" });
  }

  private expireDeadlines(): void {
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

  // --- control -------------------------------------------------------------------------------------------

  private onControl(): void {
    for (;;) {
      let r: libc.Received;
      try {
        r = libc.recvmsg(this.controlFd, RECV_CHUNK, 0, MSG_DONTWAIT);
      } catch (e) {
        if (isEagain(e)) break;
        throw e;
      }
      if (r.bytes.byteLength === 0) {
        this.running = false; // main closed its end: shut down
        return;
      }
      this.control.push(r.bytes);
    }
    for (let p = this.control.next(); p !== undefined; p = this.control.next()) {
      this.onCommand(JSON.parse(new TextDecoder().decode(p)) as Command);
    }
  }

  private onCommand(c: Command): void {
    switch (c.t) {
      case "listen":
        libc.setNonblock(c.fd, true);
        this.listeners.set(c.lid, { fd: c.fd, sessions: 0, buffered: 0, refused: 0, cgroupProcs: c.cgroupProcs });
        return;
      case "unlisten": {
        const l = this.listeners.get(c.lid);
        if (l !== undefined) libc.closeQuiet(l.fd);
        if (l !== undefined && l.refused > 1)
          post({
            t: "session-error",
            lid: c.lid,
            sid: 0,
            message: `refused ${l.refused} execs of this shell run in all (too many waiting)`,
          });
        this.listeners.delete(c.lid);
        for (const s of [...this.sessions.values()]) {
          if (s.lid !== c.lid) continue;
          if (c.killChildren) this.signalChild(s, 9);
          // Sessions not waiting for a child belong to a finished run: fail them closed.
          if (s.state !== "running" && s.state !== "orphaned") this.endSession(s);
        }
        post({ t: "unlistened", lid: c.lid });
        return;
      }
      case "kill":
        for (const s of this.sessions.values()) if (s.lid === c.lid) this.signalChild(s, c.signal);
        return;
      case "decision":
        this.onDecision(c.sid, c.action, c.spawn);
        return;
      case "stop":
        this.running = false;
        return;
    }
  }

  // --- handshakes ----------------------------------------------------------------------------------------

  private onListener(lid: number, l: Listener): void {
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
        if (r.bytes.byteLength === 0 && r.fds.length === 0) return;
        post({ t: "session-error", lid, sid: 0, message: `expected 1 fd in datagram handshake, got ${r.fds.length}` });
        continue;
      }
      const sfd = r.fds[0]!;
      if (l.sessions >= MAX_SESSIONS_PER_LISTENER || this.sessions.size >= MAX_SESSIONS) {
        libc.closeQuiet(sfd); // the wrapper reads EOF and fails closed
        if (l.refused++ === 0) {
          const which =
            l.sessions >= MAX_SESSIONS_PER_LISTENER ? `${MAX_SESSIONS_PER_LISTENER} for one shell run` : `${MAX_SESSIONS} for the server`;
          post({
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
          r = libc.recvmsg(s.fd, RECV_CHUNK, s.state === "superexec" ? libc.MAX_FDS_PER_MESSAGE : 0, MSG_DONTWAIT);
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
          post({ t: "request", lid: s.lid, sid: s.sid, request });
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

  private onDecision(sid: number, action: EscalateAction, spawn?: EscalateSpawn): void {
    const s = this.sessions.get(sid);
    if (s === undefined || s.state !== "deciding") return; // session already gone
    try {
      if (action.kind === "Escalate") {
        if (spawn === undefined) throw new ShellmcpError("PROTOCOL", "Escalate decision without a spawn spec");
        s.spawn = spawn;
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
    if (received.length !== dests.length) {
      received.forEach(libc.closeQuiet);
      throw new ShellmcpError(
        "PROTOCOL",
        `mismatched number of fds in SuperExecMessage: ${dests.length} in the message, ${received.length} from the control message`,
      );
    }
    // A received fd whose number is also a destination would be overwritten by an earlier dup2 in the child:
    // move such fds above every destination first (Codex 0.97 rejected this case; later versions handle it).
    const top = Math.max(2, ...dests) + 1;
    const sources = received.map((fd) => (dests.includes(fd) ? libc.fcntl(fd, libc.SOCK.F_DUPFD_CLOEXEC, top) : fd));
    const spec = s.spawn!;
    const procs = this.listeners.get(s.lid)?.cgroupProcs;
    const viaTrampoline = procs !== undefined && existsSync(TRAMPOLINE_BASH);
    let pid: number;
    try {
      pid = libc.spawn({
        ...(viaTrampoline ? { path: TRAMPOLINE_BASH, argv: trampolineArgv(procs, spec) } : { path: spec.path, argv: spec.argv }),
        env: spec.env,
        cwd: spec.cwd,
        fdMap: sources.map((src, i) => [src, dests[i]!] as const),
        devNullStdio: true,
        closeFrom: top,
        pgroup: 0,
      });
    } finally {
      new Set([...received, ...sources]).forEach(libc.closeQuiet);
    }
    s.pid = pid;
    s.pidfd = libc.pidfdOpen(pid);
    s.state = "running";
    if (procs !== undefined && !viaTrampoline) {
      try {
        writeFileSync(procs, String(pid));
      } catch (e) {
        // The call's cgroup is gone (the call ended) or refuses: the child must not run unaccounted.
        this.signalChild(s, 9);
        post({
          t: "session-error",
          lid: s.lid,
          sid: s.sid,
          message: `cannot move the escalated program into its call's cgroup: ${(e as Error).message}`,
        });
      }
    }
    post({ t: "spawned", lid: s.lid, sid: s.sid, pid });
  }

  /**
   * Signal an escalated child's process group, only while the child is unreaped (so its pid, and so its group
   * id, cannot have been reused); the child itself through its pidfd.
   */
  private signalChild(s: Session, signal: number): void {
    if (s.pid === undefined || s.pidfd === undefined) return;
    try {
      libc.pidfdSendSignal(s.pidfd, signal);
      libc.kill(-s.pid, signal);
    } catch {
      // already gone
    }
  }

  private onChildExit(s: Session): void {
    const st = libc.waitpidNoHang(s.pid!);
    if (st === undefined) return;
    // 128 + signal for a signal death, as a shell reports it (Codex 0.97 said 127).
    const exitCode = st.signal !== undefined ? 128 + st.signal : st.code;
    post({ t: "exited", lid: s.lid, sid: s.sid, pid: s.pid!, exitCode });
    libc.closeQuiet(s.pidfd!);
    s.pidfd = undefined;
    s.pid = undefined;
    if (s.state === "orphaned") {
      this.forget(s);
      return;
    }
    this.queue(s, encodeResult({ exit_code: exitCode }), "reporting", "done");
  }

  private failSession(s: Session, e: unknown): void {
    post({ t: "session-error", lid: s.lid, sid: s.sid, message: e instanceof Error ? e.message : String(e) });
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
    if (s.pid !== undefined) {
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

scope.onmessage = (ev: MessageEvent<{ controlFd: number }>) => {
  new EscalationWorker(ev.data.controlFd).run();
  process.exit(0);
};
