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
 * Escalated children are started here with `posix_spawn` (fds from the wrapper on 0/1/2, /dev/null for any the
 * wrapper did not send, every other fd closed, signals reset, their own process group) and reaped here.
 */
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

/** Commands main sends to the worker. */
export type Command =
  | { t: "listen"; lid: number; fd: number }
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

type SessionState = "request" | "deciding" | "superexec" | "running" | "orphaned" | "done";

interface Session {
  sid: number;
  lid: number;
  fd: number;
  state: SessionState;
  decoder: FrameDecoder;
  fds: number[];
  spawn?: EscalateSpawn;
  pid?: number;
  pidfd?: number;
}

/** Largest EscalateRequest accepted (argv + env are bounded by ARG_MAX; this is far above it). */
const MAX_REQUEST_BYTES = 16 * 1024 * 1024;
const RECV_CHUNK = 256 * 1024;

/** The worker's global scope (bun-types does not declare `self` without the DOM lib). */
const scope = globalThis as unknown as { postMessage(m: unknown): void; onmessage: ((ev: MessageEvent) => void) | null };
const post = (e: WorkerEvent) => scope.postMessage(e);

const { MSG_DONTWAIT } = libc.SOCK;
const isEagain = (e: unknown) => e instanceof ShellmcpError && e.data.errname === "EAGAIN";

class EscalationWorker {
  private readonly listeners = new Map<number, number>(); // lid → dgram fd
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
      const entries: { fd: number; events: number; on: (revents: number) => void }[] = [{ fd: this.controlFd, events: libc.POLL.IN, on: () => this.onControl() }];
      for (const [lid, fd] of this.listeners) entries.push({ fd, events: libc.POLL.IN, on: () => this.onListener(lid, fd) });
      for (const s of this.sessions.values()) {
        if (s.state === "request" || s.state === "superexec") entries.push({ fd: s.fd, events: libc.POLL.IN, on: () => this.onSession(s) });
        if ((s.state === "running" || s.state === "orphaned") && s.pidfd !== undefined) entries.push({ fd: s.pidfd, events: libc.POLL.IN, on: () => this.onChildExit(s) });
      }
      const revents = libc.poll(entries, -1);
      entries.forEach((e, i) => {
        if (revents[i]! !== 0) e.on(revents[i]!);
      });
    }
    // Shutting down: nothing may outlive the server.
    for (const s of [...this.sessions.values()]) {
      if (s.pid !== undefined) libc.kill(-s.pid, 9);
      this.endSession(s);
    }
    for (const fd of this.listeners.values()) libc.closeQuiet(fd);
    libc.closeQuiet(this.controlFd);
    post({ t: "stopped" });
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
        this.listeners.set(c.lid, c.fd);
        return;
      case "unlisten": {
        const fd = this.listeners.get(c.lid);
        if (fd !== undefined) libc.closeQuiet(fd);
        this.listeners.delete(c.lid);
        for (const s of this.sessions.values()) {
          if (s.lid !== c.lid) continue;
          if (c.killChildren && s.pid !== undefined) libc.kill(-s.pid, 9);
          // Sessions still waiting for a request or decision belong to a finished run: fail them closed.
          if (s.state === "request" || s.state === "superexec") this.endSession(s);
        }
        post({ t: "unlistened", lid: c.lid });
        return;
      }
      case "kill":
        for (const s of this.sessions.values()) if (s.lid === c.lid && s.pid !== undefined) libc.kill(-s.pid, c.signal);
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

  private onListener(lid: number, fd: number): void {
    for (;;) {
      let r: libc.Received;
      try {
        r = libc.recvmsg(fd, 8192, libc.MAX_FDS_PER_MESSAGE, MSG_DONTWAIT);
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
      libc.setNonblock(sfd, true);
      const s: Session = { sid: this.nextSid++, lid, fd: sfd, state: "request", decoder: new FrameDecoder(MAX_REQUEST_BYTES), fds: [] };
      this.sessions.set(s.sid, s);
    }
  }

  // --- sessions ------------------------------------------------------------------------------------------

  private onSession(s: Session): void {
    try {
      for (;;) {
        let r: libc.Received;
        try {
          r = libc.recvmsg(s.fd, RECV_CHUNK, s.state === "superexec" ? libc.MAX_FDS_PER_MESSAGE : 0, MSG_DONTWAIT);
        } catch (e) {
          if (isEagain(e)) break;
          throw e;
        }
        s.fds.push(...r.fds);
        if (r.bytes.byteLength === 0) {
          this.endSession(s); // the wrapper went away
          return;
        }
        s.decoder.push(r.bytes);
        const payload = s.decoder.next();
        if (payload === undefined) continue;
        if (s.state === "request") {
          const request = decodeRequest(payload);
          if (request.argv.length === 0) throw new ShellmcpError("PROTOCOL", "EscalateRequest: empty argv");
          s.state = "deciding";
          post({ t: "request", lid: s.lid, sid: s.sid, request });
          return;
        }
        if (s.state === "superexec") {
          this.startEscalated(s, decodeSuperExec(payload).fds);
          return;
        }
      }
    } catch (e) {
      this.failSession(s, e);
    }
  }

  private onDecision(sid: number, action: EscalateAction, spawn?: EscalateSpawn): void {
    const s = this.sessions.get(sid);
    if (s === undefined || s.state !== "deciding") return; // session already gone
    try {
      this.send(s, encodeResponse(action));
      if (action.kind === "Escalate") {
        if (spawn === undefined) throw new ShellmcpError("PROTOCOL", "Escalate decision without a spawn spec");
        s.spawn = spawn;
        s.state = "superexec";
        // Bytes (and fds) may already be buffered.
        this.onSession(s);
      } else {
        this.endSession(s);
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
      throw new ShellmcpError("PROTOCOL", `mismatched number of fds in SuperExecMessage: ${dests.length} in the message, ${received.length} from the control message`);
    }
    // A received fd whose number is also a destination would be overwritten by an earlier dup2 in the child:
    // move such fds above every destination first (Codex 0.97 rejected this case; later versions handle it).
    const top = Math.max(2, ...dests) + 1;
    const sources = received.map((fd) => (dests.includes(fd) ? libc.fcntl(fd, 1030 /* F_DUPFD_CLOEXEC */, top) : fd));
    const spec = s.spawn!;
    let pid: number;
    try {
      pid = libc.spawn({
        path: spec.path,
        argv: spec.argv,
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
    post({ t: "spawned", lid: s.lid, sid: s.sid, pid });
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
      this.sessions.delete(s.sid);
      return;
    }
    try {
      this.send(s, encodeResult({ exit_code: exitCode }));
    } catch {
      // the wrapper is gone; nothing to tell
    }
    this.endSession(s);
  }

  private send(s: Session, payload: Uint8Array): void {
    const frame = encodeFrame(payload);
    let sent = 0;
    while (sent < frame.byteLength) {
      try {
        sent += libc.sendmsg(s.fd, frame.subarray(sent), [], MSG_DONTWAIT | libc.SOCK.MSG_NOSIGNAL);
      } catch (e) {
        if (!isEagain(e)) throw e;
        libc.poll([{ fd: s.fd, events: libc.POLL.OUT }], 1000);
      }
    }
  }

  private failSession(s: Session, e: unknown): void {
    post({ t: "session-error", lid: s.lid, sid: s.sid, message: e instanceof Error ? e.message : String(e) });
    this.endSession(s);
  }

  private endSession(s: Session): void {
    if (s.state === "done" || s.state === "orphaned") return;
    s.fds.forEach(libc.closeQuiet);
    s.fds = [];
    libc.closeQuiet(s.fd);
    if (s.pid !== undefined) {
      // The wrapper that waits for this child is gone (killed, e.g. by `timeout`): pass the termination on to
      // the child's process group, and keep polling its pidfd so it is reaped when it ends.
      libc.kill(-s.pid, 15);
      s.state = "orphaned";
      return;
    }
    s.state = "done";
    this.sessions.delete(s.sid);
  }
}

scope.onmessage = (ev: MessageEvent<{ controlFd: number }>) => {
  new EscalationWorker(ev.data.controlFd).run();
  process.exit(0);
};
