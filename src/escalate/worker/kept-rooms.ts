/**
 * The escalation worker's kept rooms (src/sandbox/linux/room-launcher.ts says what a kept room is): each is one
 * process started like an escalated program (bubblewrap, or the Landlock helper, with the room launcher as its
 * program) plus a stream socket to the launcher. Programs of the room are started by a spawn frame carrying their
 * fds; their exit comes back as a record. Rooms are named by listener and room id (main picks the id when it plans
 * the room, src/escalate/server.ts); the worker never restarts a room that has ended.
 *
 * Lifetime: a room is opened when main's decision that first names it arrives (before its program's fds do, so two
 * programs deciding at once cannot race to open it); closed (its socket shut: the launcher kills whatever is left
 * in it and exits) when its listener has closed and none of its programs runs, or at once when the listener's
 * children are killed (a call's timeout or cancel) or the worker stops (see {@link KeptRooms.kill}). When the room's process
 * has ended, every program still counted in it ends with 126 and main hears `room-ended` (to give back its mount
 * points and check its git control files).
 */
import { writeFileSync } from "node:fs";
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import {
  exitCodeOf,
  killFrame,
  LAUNCHER_SOCKET_FD,
  LauncherRecordReader,
  spawnFrame,
  type LauncherRecord,
} from "../../sandbox/linux/room-launcher.ts";
import { reapExitCode, roomProgramFds, spawnEscalated, superviseChild } from "./escalated-child.ts";
import type { RoomStart } from "../rooms/keep.ts";
import type { WorkerEvent } from "./messages.ts";

const SEND_FLAGS = libc.SOCK.MSG_DONTWAIT | libc.SOCK.MSG_NOSIGNAL;

/** One poll entry (as ./sessions.ts's). */
interface Entry {
  fd: number;
  events: number;
  on: (revents: number) => void;
}

interface Room {
  lid: number;
  rid: number;
  /** The socket to the launcher (non-blocking); -1 once closed. */
  fd: number;
  pid: number;
  pidfd: number;
  /** Frames not yet written; `fds` go with the first byte written and are closed here once sent. */
  out: { bytes: Uint8Array; fds: number[] }[];
  reader: LauncherRecordReader;
  /** Programs running in the room, by session id. */
  programs: Set<number>;
  /** Its listener has closed: the room closes once no program runs. */
  closing: boolean;
  /** A pid namespace of its own (bubblewrap): SIGKILL to its process ends everything in it. */
  contained: boolean;
}

const keyOf = (lid: number, rid: number) => `${lid}:${rid}`;

/**
 * Every kept room of the worker. `post` sends a {@link WorkerEvent} to main; `ended(sid, exitCode)` is told when a
 * program started with {@link start} has ended (its exit code as a shell reports it). Called from the worker's
 * poll loop only; nothing here blocks.
 */
export class KeptRooms {
  private readonly rooms = new Map<string, Room>();
  private readonly endedRooms = new Set<string>();

  constructor(
    private readonly post: (e: WorkerEvent) => void,
    private readonly ended: (sid: number, exitCode: number) => void,
  ) {}

  /**
   * Start room `rid` of listener `lid` as `start` says, with the launcher's socket on fd 3 and into the call's
   * cgroup (`procs`) before it runs anything. Does nothing when the room is open; throws `ESCALATION_UNAVAILABLE`
   * when it has already ended, and what `spawnEscalated` throws when it cannot start.
   */
  open(lid: number, rid: number, start: RoomStart, procs: string | undefined): void {
    const key = keyOf(lid, rid);
    if (this.rooms.has(key)) return;
    if (this.endedRooms.has(key)) throw new ShellmcpError("ESCALATION_UNAVAILABLE", "the escalation room has already ended");
    const [mine, theirs] = libc.socketpair(libc.SOCK.AF_UNIX, libc.SOCK.SOCK_STREAM | libc.SOCK.SOCK_CLOEXEC);
    let pid: number;
    let viaTrampoline: boolean;
    try {
      ({ pid, viaTrampoline } = spawnEscalated([theirs], [LAUNCHER_SOCKET_FD], { ...start, setsid: true }, procs));
    } catch (e) {
      libc.closeQuiet(mine);
      // Never started: main gives back what it planned for it, and plans a new room for the next program.
      this.endedRooms.add(key);
      this.post({ t: "room-ended", lid, rid });
      throw e;
    }
    let pidfd: number;
    try {
      pidfd = superviseChild(pid); // the room is killed and reaped when it cannot be supervised
    } catch (e) {
      libc.closeQuiet(mine);
      this.endedRooms.add(key);
      this.post({ t: "room-ended", lid, rid });
      throw e;
    }
    libc.setNonblock(mine, true);
    const room: Room = {
      lid,
      rid,
      fd: mine,
      pid,
      pidfd,
      out: [],
      reader: new LauncherRecordReader(),
      programs: new Set(),
      closing: false,
      contained: start.contained,
    };
    this.rooms.set(key, room);
    if (procs !== undefined && !viaTrampoline) {
      try {
        writeFileSync(procs, String(pid));
      } catch (e) {
        // The call's cgroup is gone or refuses: nothing may run unaccounted.
        this.kill(room);
        throw new ShellmcpError(
          "ESCALATION_UNAVAILABLE",
          `cannot move the escalation room into its call's cgroup: ${(e as Error).message}`,
        );
      }
    }
  }

  /**
   * Start program `sid` in room `rid` of listener `lid`: `received` fds (owned from here on, closed on every path)
   * on `dests`, terminals replaced as for any room program (`outputFd`: the call's output pipe). Returns the room's
   * pid. Throws `ESCALATION_UNAVAILABLE` when the room is not open.
   */
  start(
    lid: number,
    rid: number,
    sid: number,
    received: number[],
    dests: number[],
    program: { path: string; argv: string[]; env: string[]; cwd: string },
    outputFd: number | undefined,
  ): number {
    const room = this.rooms.get(keyOf(lid, rid));
    if (room === undefined || room.fd < 0) {
      received.forEach(libc.closeQuiet);
      throw new ShellmcpError("ESCALATION_UNAVAILABLE", "the escalation room has ended");
    }
    const fds = roomProgramFds(received, dests, outputFd);
    let bytes: Uint8Array;
    try {
      bytes = spawnFrame(sid, fds.dests, program.path, program.cwd, program.argv, program.env);
    } catch (e) {
      fds.fds.forEach(libc.closeQuiet);
      throw new ShellmcpError("PROTOCOL", (e as Error).message);
    }
    room.out.push({ bytes, fds: fds.fds });
    room.programs.add(sid);
    this.flush(room);
    return room.pid;
  }

  /** Send `signal` to program `sid`'s process group in its room (nothing when the room is gone). */
  signal(lid: number, rid: number, sid: number, signal: number): void {
    const room = this.rooms.get(keyOf(lid, rid));
    if (room === undefined || room.fd < 0 || !room.programs.has(sid)) return;
    room.out.push({ bytes: killFrame(sid, signal), fds: [] });
    this.flush(room);
  }

  /** Listener `lid` has closed: with `kill`, its rooms end now (SIGKILL); else each once no program runs in it. */
  closeListener(lid: number, kill: boolean): void {
    for (const key of this.endedRooms) if (key.startsWith(`${lid}:`)) this.endedRooms.delete(key);
    for (const room of this.rooms.values()) {
      if (room.lid !== lid) continue;
      room.closing = true;
      if (kill) this.kill(room);
      else if (room.programs.size === 0) this.shut(room);
    }
  }

  /** Whether no room is open or still ending (the worker may then park: ./worker.ts). */
  get empty(): boolean {
    return this.rooms.size === 0;
  }

  /** The worker stops: every room ends now. */
  shutdown(): void {
    for (const room of this.rooms.values()) this.kill(room);
  }

  /** Poll entries: each open socket (readable; writable while frames wait) and each room's pidfd. */
  pollEntries(): Entry[] {
    const entries: Entry[] = [];
    for (const room of this.rooms.values()) {
      const { fd, pidfd } = room;
      if (fd >= 0)
        entries.push({
          fd,
          events: libc.POLL.IN | (room.out.length > 0 ? libc.POLL.OUT : 0),
          on: (r) => room.fd === fd && this.onSocket(room, r),
        });
      entries.push({ fd: pidfd, events: libc.POLL.IN, on: () => this.rooms.get(keyOf(room.lid, room.rid)) === room && this.onExit(room) });
    }
    return entries;
  }

  private onSocket(room: Room, revents: number): void {
    if ((revents & libc.POLL.OUT) !== 0) this.flush(room);
    if ((revents & (libc.POLL.IN | libc.POLL.HUP | libc.POLL.ERR)) === 0 || room.fd < 0) return;
    for (let i = 0; i < 16; i++) {
      let r: libc.Received;
      try {
        r = libc.recvmsg(room.fd, 4096, 0, libc.SOCK.MSG_DONTWAIT);
      } catch (e) {
        if (e instanceof ShellmcpError && (e.data.errname === "EAGAIN" || e.data.errname === "EWOULDBLOCK")) return;
        this.shut(room); // the launcher is gone: its process ending (pidfd) settles the rest
        return;
      }
      if (r.bytes.byteLength === 0) {
        this.shut(room);
        return;
      }
      let records: LauncherRecord[];
      try {
        records = room.reader.push(r.bytes);
      } catch (e) {
        this.post({ t: "session-error", lid: room.lid, sid: 0, message: (e as Error).message });
        this.kill(room);
        return;
      }
      for (const rec of records) this.onRecord(room, rec);
    }
  }

  private onRecord(room: Room, rec: LauncherRecord): void {
    if (rec.kind === "spawned") {
      if (rec.value < 0)
        this.post({ t: "session-error", lid: room.lid, sid: rec.id, message: `the room launcher could not fork (errno ${-rec.value})` });
      return;
    }
    if (!room.programs.delete(rec.id)) return;
    this.ended(rec.id, exitCodeOf(rec.value));
    if (room.closing && room.programs.size === 0) this.shut(room);
  }

  /** Write what the socket takes now (never blocks); frames that cannot be written wait for POLLOUT. */
  private flush(room: Room): void {
    while (room.fd >= 0 && room.out.length > 0) {
      const head = room.out[0]!;
      let n: number;
      try {
        n = libc.sendmsg(room.fd, head.bytes, head.fds, SEND_FLAGS);
      } catch (e) {
        if (e instanceof ShellmcpError && (e.data.errname === "EAGAIN" || e.data.errname === "EWOULDBLOCK")) return;
        this.shut(room);
        return;
      }
      head.fds.forEach(libc.closeQuiet); // in flight now: the kernel holds them for the launcher
      head.fds = [];
      head.bytes = head.bytes.subarray(n);
      if (head.bytes.byteLength === 0) room.out.shift();
    }
  }

  /** Close the socket: the launcher kills what is left in the room and exits (its pidfd then ends the room). */
  private shut(room: Room): void {
    if (room.fd < 0) return;
    libc.closeQuiet(room.fd);
    room.fd = -1;
    for (const o of room.out) o.fds.forEach(libc.closeQuiet);
    room.out = [];
  }

  /**
   * End the room now. A bubblewrap room: SIGKILL to bwrap takes its whole pid namespace. A Landlock room shares the
   * host's pid namespace, where killing the launcher would orphan the programs: its socket is closed instead (the
   * launcher kills and reaps everything it started, as their subreaper), with a SIGCONT in case a program of the
   * room stopped it. Either way the room's pidfd settles the rest.
   */
  private kill(room: Room): void {
    try {
      libc.pidfdSendSignal(room.pidfd, room.contained ? 9 : 18);
    } catch {
      // already gone
    }
    this.shut(room);
  }

  private onExit(room: Room): void {
    const status = reapExitCode(room.pid);
    if (status === undefined) return;
    this.shut(room);
    libc.closeQuiet(room.pidfd);
    const key = keyOf(room.lid, room.rid);
    this.rooms.delete(key);
    if (!room.closing) this.endedRooms.add(key); // main may still name it; after its listener closed, nobody can
    if (room.programs.size > 0)
      this.post({
        t: "session-error",
        lid: room.lid,
        sid: 0,
        message: `the escalation room ended (status ${status}) while ${room.programs.size} program(s) ran in it`,
      });
    for (const sid of room.programs) this.ended(sid, 126);
    room.programs.clear();
    this.post({ t: "room-ended", lid: room.lid, rid: room.rid });
  }
}
