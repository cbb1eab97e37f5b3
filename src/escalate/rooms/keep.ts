/**
 * Where each escalated program of a room goes, and the rooms in use (main-thread side; the worker side of a kept
 * room is ../worker/kept-rooms.ts, its launcher ../../sandbox/linux/room-launcher.ts). A program gets a kept room —
 * the open one with exactly its walls (the plan's key, ./plan.ts `prepareRoom`), or a new one started with it —
 * where rooms are kept ({@link RoomsInUse.place}); otherwise a room of its own (./build.ts `roomLaunch`). Every room
 * in use is checked (./check.ts) when its program or the kept room ends, and before every later decision.
 *
 * Also here: {@link EscalateSpawn}, what the worker is told to start for one escalated program.
 */
import { keepsRooms, launcherArgv, MAX_KEPT_ROOMS_PER_CALL, roomLauncherPath } from "../../sandbox/linux/room-launcher.ts";
import { buildRoom, roomLaunch } from "./build.ts";
import { removeAppearedControlFiles, settleRoom, type RoomToSettle } from "./check.ts";
import type { PreparedRoom, RoomSpec } from "./plan.ts";

/**
 * How main asks for an escalated program to be started: `path` exec'd with `argv` (argv[0] included), `env`
 * (KEY=VALUE) and `cwd`.
 * - `setsid`: a new session without a controlling terminal (the escalation room); else a new process group.
 * - `contained`: the program runs in a pid namespace of its own (a bwrap room): it is moved into the call's cgroup
 *   after it starts, with no trampoline (nothing it starts can escape the namespace meanwhile).
 * - `noTerminals`: received fds 0–2 that are terminals are not passed: stdin becomes /dev/null, stdout/stderr the
 *   call's output pipe (the listener's `outputFd`), or /dev/null once that is released.
 */
export interface EscalateSpawn {
  path: string;
  argv: string[];
  env: string[];
  cwd: string;
  setsid?: boolean;
  contained?: boolean;
  noTerminals?: boolean;
  /**
   * More fds for the child, `[fd in this process, fd number in the child]`: the call's network proxy bridge for a
   * room in proxy mode (../../network/bridge.ts). The source fds belong to the call and stay open here.
   */
  extraFds?: [number, number][];
  /**
   * Run the program in kept room `rid` of its listener (../worker/kept-rooms.ts) instead of starting `path`
   * itself: `path`, `argv`, `env` and `cwd` are then the program's, exec'd by the room's launcher. `start` comes with
   * the first decision that names the room, which opens it.
   */
  room?: { rid: number; start?: RoomStart };
}

/** How to start a kept room: `path` (bwrap, or the sandbox helper) with `argv` ending in the room launcher. */
export interface RoomStart {
  path: string;
  argv: string[];
  env: string[];
  cwd: string;
  /** A pid namespace of its own (bubblewrap): moved into the call's cgroup once started. */
  contained: boolean;
  /** More fds for the room (`[fd here, fd in the room]`): the proxy bridge. */
  extraFds?: [number, number][];
}

/** An escalated program the boundary let out: its canonical path, judged argv, folder, environment and named path. */
export interface PlacedProgram {
  /** Canonical path of the program (the boundary's `path`). */
  program: string;
  /** The argv judged, argv[0] included. */
  argv: string[];
  /** Canonical working directory (the boundary's `cwd`). */
  cwd: string;
  /** The escalated environment, KEY=VALUE. */
  env: string[];
  /** The path the command named the program by (the request's file). */
  named: string;
}

/** Where {@link RoomsInUse.place} put a program: the spawn for the worker, and the kept room's id when it has one. */
export type RoomPlaced = { spawn: EscalateSpawn; kept?: number } | { unavailable: string };

/** A program in a kept room: the spawn names the room (and starts it, the first time). */
type KeptSpawn = EscalateSpawn & { room: NonNullable<EscalateSpawn["room"]> };

/**
 * The rooms of every listener (one per call) of an escalation server: rooms of one program by session id, kept
 * rooms by `lid:rid`, and each listener's kept rooms by plan key. Main-thread only; nothing here blocks.
 */
export class RoomsInUse {
  /** Rooms of running escalated programs, by session: what to give back and check once each has ended. */
  private readonly own = new Map<number, RoomToSettle & { lid: number }>();
  /** Kept rooms by `lid:rid`: what to give back and check once each has ended. */
  private readonly kept = new Map<string, RoomToSettle>();
  /** Each open listener's kept rooms: room id by plan key. */
  private readonly ids = new Map<number, Map<string, number>>();
  private nextRid = 1;

  /**
   * Place program `p` of session `sid` of listener `lid` in a room under `spec`, as `prepared` planned it: a kept
   * room when one applies, else a room of its own. `{ unavailable }` with the reason when no room can be built (the
   * caller runs the program inside the call's sandbox). Throws nothing.
   */
  place(lid: number, sid: number, spec: RoomSpec, prepared: PreparedRoom, p: PlacedProgram): RoomPlaced {
    const kept = this.inKeptRoom(lid, spec, prepared, p);
    if (kept !== undefined) {
      if ("unavailable" in kept) return kept;
      // Checked after each program too (the room's own check comes when it ends).
      this.own.set(sid, { lid, release: () => {}, mustNotAppear: this.kept.get(`${lid}:${kept.room.rid}`)?.mustNotAppear ?? [] });
      return { spawn: kept, kept: kept.room.rid };
    }
    const launch = roomLaunch(spec, p.program, p.argv, p.cwd, p.env, p.named, prepared);
    if ("unavailable" in launch) return launch;
    this.own.set(sid, { lid, release: launch.release, mustNotAppear: launch.mustNotAppear });
    const spawn: EscalateSpawn = {
      path: launch.path,
      argv: launch.argv,
      env: launch.env,
      cwd: p.cwd,
      setsid: true,
      contained: launch.contained,
      noTerminals: true,
      ...(launch.extraFds !== undefined ? { extraFds: launch.extraFds } : {}),
    };
    return { spawn };
  }

  /**
   * The spawn that runs `p` in a kept room of listener `lid`: the room of the same walls when one is open, else a
   * new one (its start goes with this decision). Undefined when no kept room applies (no room launcher, a Landlock
   * kernel below ABI 6 (`keepsRooms`), the call holds {@link MAX_KEPT_ROOMS_PER_CALL} already, or no room at all):
   * the caller builds a room of its own, or runs on the host; `{ unavailable }` when the room cannot be built.
   */
  private inKeptRoom(
    lid: number,
    spec: RoomSpec,
    prepared: PreparedRoom,
    p: PlacedProgram,
  ): KeptSpawn | { unavailable: string } | undefined {
    const launcher = roomLauncherPath();
    if (launcher === undefined || (spec.backend.kind !== "bwrap" && spec.backend.kind !== "landlock") || !keepsRooms(spec.backend.kind))
      return undefined;
    if (prepared.kind === "unavailable") return { unavailable: prepared.reason };
    if (prepared.kind === "host") return undefined;
    const ids = this.ids.get(lid) ?? new Map<string, number>();
    this.ids.set(lid, ids);
    const base = { path: p.program, argv: p.argv, env: prepared.env, cwd: p.cwd, setsid: true, noTerminals: true };
    const rid = ids.get(prepared.key);
    if (rid !== undefined) return { ...base, room: { rid } };
    if (ids.size >= MAX_KEPT_ROOMS_PER_CALL) return undefined; // a room of its own (see the bound's docs)
    const built = buildRoom(spec, prepared.room, p.cwd, prepared.env, launcherArgv(launcher, spec.backend.kind === "bwrap"));
    if ("unavailable" in built) return built;
    const id = this.nextRid++;
    ids.set(prepared.key, id);
    this.kept.set(`${lid}:${id}`, { release: built.release, mustNotAppear: prepared.room.mustNotAppear });
    const start = {
      path: built.path,
      argv: built.argv,
      env: built.env,
      cwd: p.cwd,
      contained: built.contained,
      ...(built.extraFds ? { extraFds: built.extraFds } : {}),
    };
    return { ...base, room: { rid: id, start } };
  }

  /**
   * Once an escalated program has ended: give back its room's mount points, and remove any git control file it
   * created where none existed.
   */
  programEnded(sid: number): void {
    const r = this.own.get(sid);
    if (r === undefined) return;
    this.own.delete(sid);
    settleRoom(r);
  }

  /** Kept room `rid` of listener `lid` has ended: give back its mount points, check its control files, never name it again. */
  keptRoomEnded(lid: number, rid: number): void {
    const ids = this.ids.get(lid);
    for (const [key, id] of ids ?? []) if (id === rid) ids!.delete(key);
    const k = this.kept.get(`${lid}:${rid}`);
    if (k === undefined) return;
    this.kept.delete(`${lid}:${rid}`);
    settleRoom(k);
  }

  /** Listener `lid` has closed: its programs' rooms are settled, and no new program joins its kept rooms. */
  listenerClosed(lid: number): void {
    for (const [sid, r] of this.own) if (r.lid === lid) this.programEnded(sid);
    this.ids.delete(lid);
  }

  /** The worker has stopped: every room is settled. */
  closeAll(): void {
    for (const sid of [...this.own.keys()]) this.programEnded(sid);
    for (const key of [...this.kept.keys()]) this.keptRoomEnded(Number(key.split(":")[0]), Number(key.split(":")[1]));
  }

  /**
   * Remove, now, every git control file that a running room's program created where none existed (`mustNotAppear`
   * of the rooms in use): run before each decision, so no decision (nor a later git on the host) follows a
   * `commondir` a room program has just written, however long that program runs.
   */
  sweep(): void {
    for (const r of [...this.own.values(), ...this.kept.values()]) removeAppearedControlFiles(r.mustNotAppear);
  }
}
