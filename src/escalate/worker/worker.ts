/**
 * Escalation worker: a Worker thread that owns every escalation socket and blocks in `poll(2)`, so Bun's main
 * event loop never blocks (Bun has no fd-passing API; recvmsg with SCM_RIGHTS is FFI and synchronous).
 *
 * Inputs, all multiplexed by one poll:
 * - the control socket (main → worker commands, length-prefixed JSON, see {@link Command});
 * - one seqpacket socket per listener (a shell run): handshakes carrying one stream fd each;
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
 *
 * This file is the Worker's entry (embedded in the executable by build.ts; ../server.ts starts it by this path)
 * and holds the poll loop and the control socket. The session state machine is in ./sessions.ts, the
 * escalated children in ./escalated-child.ts, the messages and bounds in ./messages.ts.
 */
import * as libc from "../../../ffi/libc.ts";
import { OutputGates } from "./output-gate.ts";
import { closeLifeline } from "../../sandbox/linux/lifeline.ts";
import { closeSelfExe } from "../../self.ts";
import { FrameDecoder } from "../protocol/wire.ts";
import {
  MAX_LISTENER_BUFFERED_BYTES,
  MAX_REQUEST_BYTES,
  MAX_SESSIONS,
  MAX_SESSIONS_PER_LISTENER,
  RECV_CHUNK,
  SESSION_IO_TIMEOUT_MS,
  type Command,
  type WorkerEvent,
} from "./messages.ts";
import { isEagain, RECV_SCRATCH, SessionTable, type PollEntry } from "./sessions.ts";

/** The worker's global scope (bun-types does not declare `self` without the DOM lib). */
const scope = globalThis as unknown as { postMessage(m: unknown): void; onmessage: ((ev: MessageEvent) => void) | null };
const post = (e: WorkerEvent) => scope.postMessage(e);

const { MSG_DONTWAIT } = libc.SOCK;

class EscalationWorker {
  private readonly table: SessionTable;
  private readonly control = new FrameDecoder();
  private running = true;
  /** A `park` command found nothing open: {@link loop} ends the worker as `parked`, not `stopped`. */
  private parking = false;
  /** A `release-heap` command arrived: {@link loop} returns to the event loop once to release. */
  private releasing = false;

  constructor(
    private readonly controlFd: number,
    gates: OutputGates | undefined,
    firstSid: number,
  ) {
    libc.setNonblock(controlFd, true);
    this.table = new SessionTable(post, gates, firstSid);
  }

  /** Say ready, then poll until stopped ({@link loop}). */
  run(): void {
    post({ t: "ready" });
    this.loop();
  }

  /**
   * The poll loop. Left for a moment after a `release-heap` command ({@link releasing}): JavaScriptCore runs the
   * work of `Bun.shrink()` (dropping compiled code, a full collection, giving free memory back) only once this
   * thread's JavaScript has returned to its event loop, which the loop otherwise never does; it is resumed by a
   * timer of 0 ms, the sockets holding whatever arrives meanwhile. Once stopped: ends every session and exits the
   * worker.
   */
  private loop(): void {
    while (this.running) {
      const { entries: own, next } = this.table.pollEntries();
      const entries: PollEntry[] = [{ fd: this.controlFd, events: libc.POLL.IN, on: () => this.onControl() }, ...own];
      const timeout = next === Infinity ? -1 : Math.max(0, Math.ceil(next - performance.now()));
      const revents = libc.poll(entries, timeout);
      entries.forEach((e, i) => {
        if (revents[i]! !== 0) e.on(revents[i]!);
      });
      this.table.expireDeadlines();
      if (this.releasing && this.running) {
        this.releasing = false;
        Bun.gc(true);
        Bun.shrink(); // runs once this function has returned to the event loop
        setTimeout(() => {
          post({ t: "heap-released" }); // the shrink has run: main may now release the code pages
          this.loop();
        }, 0);
        return;
      }
    }
    // Shutting down: nothing may outlive the server.
    this.table.shutdown();
    libc.closeQuiet(this.controlFd);
    // Parked: nothing of this thread runs (no session, no room), so no guard holds its lifeline: both ends close
    // here, or each park would leave two fds behind (a thread's fds are the process's).
    // The same for its fd of this executable (a Landlock room's helper is exec'd from it: ./escalated-child.ts).
    if (this.parking) {
      closeLifeline();
      closeSelfExe();
    }
    post(this.parking ? { t: "parked", nextSid: this.table.nextSessionId } : { t: "stopped" });
    process.exit(0);
  }

  // --- control -------------------------------------------------------------------------------------------

  private onControl(): void {
    for (;;) {
      let r: libc.Received;
      try {
        r = libc.recvmsg(this.controlFd, RECV_CHUNK, 0, MSG_DONTWAIT, RECV_SCRATCH);
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
        this.table.listen(c.lid, c.fd, c.cgroupProcs, c.outputFd, c.gate);
        return;
      case "release-output":
        this.table.releaseOutput(c.lid);
        return;
      case "unlisten":
        this.table.unlisten(c.lid, c.killChildren);
        post({ t: "unlistened", lid: c.lid });
        return;
      case "kill":
        this.table.kill(c.lid, c.signal);
        return;
      case "decision":
        this.table.onDecision(c.sid, c.action, c.spawn);
        return;
      case "release-heap":
        // The server is idle (../../serve.ts `releaseHeap`): this thread's heap gives back what calls left behind,
        // once the commands read now are handled ({@link loop}).
        this.releasing = true;
        return;
      case "park":
        // The server is idle (./port.ts): end only if nothing is open; commands after this one are held by
        // main until it has the answer, so none is lost in a socket closed here.
        if (!this.table.idle()) return post({ t: "park-refused" });
        this.parking = true;
        this.running = false;
        return;
      case "stop":
        this.running = false;
        return;
    }
  }
}

scope.onmessage = (ev: MessageEvent<{ controlFd: number; gates?: SharedArrayBuffer; firstSid?: number }>) => {
  const { controlFd, gates, firstSid } = ev.data;
  new EscalationWorker(controlFd, gates === undefined ? undefined : new OutputGates(gates), firstSid ?? 1).run();
};
