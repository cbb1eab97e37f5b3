/**
 * Where an escalated exec runs (docs/escalation.md, "Rooms: what a room reaches and reads"): the one object the
 * escalation server (./server.ts) asks, once per `Escalate` decision, through {@link Placement.prepareEscalatedExec}
 * — as Codex's `shell-escalation` server asks its executor's `prepare_escalated_exec` for the command, folder and
 * environment an escalated exec runs with. The server itself knows no environment policy, inspection, git taint or
 * room: tests give it a deterministic fake (test/unit/escalation-server-placement.test.ts).
 *
 * The production placement is {@link BoundaryPlacement}: the escalated environment (./decision/escalated-env.ts),
 * the boundary's checks and the room's plan (off the main thread, ./decision/inspector-client.ts), the git taint
 * notes (../sandbox/git/taint.ts), then a room (./rooms/keep.ts) or, for a listener without rooms
 * (`--escalation host`, Codex's meaning), the bare host.
 */
import { log } from "../log.ts";
import { noteOriginal, noteWritable, taintContext } from "../sandbox/git/taint.ts";
import type { EscalationBoundary, Grant } from "./decision/boundary.ts";
import { escalatedEnv } from "./decision/escalated-env.ts";
import { Inspector } from "./decision/inspector-client.ts";
import type { ResolvedRequest } from "./decision/request.ts";
import { RoomsInUse, type EscalateSpawn } from "./rooms/keep.ts";

/** One `Escalate` decision to place: which exec it is, what was decided about, and the call's boundary. */
export interface EscalatedExec {
  /** The listener (one shell run) the exec came from. */
  listener: number;
  /** The session (one intercepted exec) of that listener. */
  session: number;
  /** The request the decision was about, `file` and `workdir` resolved. */
  request: ResolvedRequest;
  /** The sandbox the shell runs in: what an escalated program may be, and its environment. */
  boundary: EscalationBoundary;
  /** The rule behind the decision (absent: checked without identity rules). */
  grant?: Grant;
}

/**
 * Where a placement put an escalated exec: `spawn`, what the worker starts outside the call's sandbox; or `inside`,
 * the reason it runs inside the call's sandbox instead (the boundary refused the program, the inspection failed, no
 * room could be built): the server answers `Run` and tells the call's result that reason.
 */
export type Placed = { spawn: EscalateSpawn } | { inside: string };

/**
 * What happened to what a placement placed, as the server learns it: a listener opened with its `boundary`, a
 * session's program ended, a kept room ended, a listener closed, the server began stopping, the worker parked (the
 * server is idle), the worker stopped.
 */
export type PlacementEvent =
  | { t: "listening"; boundary: EscalationBoundary }
  | { t: "program-ended"; session: number }
  | { t: "room-ended"; listener: number; room: number }
  | { t: "listener-closed"; listener: number }
  | { t: "stopping" }
  /** The escalation worker parked (the server is idle: ./worker/port.ts); nothing is open. */
  | { t: "parked" }
  | { t: "stopped" };

/** Where escalated execs run: given to the escalation server (./server.ts `EscalationServer.start`). */
export interface Placement {
  /**
   * Place one `Escalate` decision: resolves to the spawn, or to the reason it runs inside the sandbox. A rejection is
   * a refusal: the server denies the exec with `escalation policy error: <message>` (fail closed). Asked exactly once
   * per `Escalate` decision, never for `Run` or `Deny`.
   */
  prepareEscalatedExec(exec: EscalatedExec): Promise<Placed>;
  /** Told what became of what was placed ({@link PlacementEvent}); a placement without state may leave it out. */
  observe?(e: PlacementEvent): void;
}

/**
 * The production {@link Placement}: the boundary's checks, the git taint notes, then a room or the host. One per
 * server; main-thread only.
 */
export class BoundaryPlacement implements Placement {
  /** The rooms in use: where each escalated program goes, and what to check when it ends (./rooms/keep.ts). */
  private readonly rooms = new RoomsInUse();

  /** Inspects each `Escalate` decision off the main thread (./decision/inspector-client.ts). */
  private readonly inspector = new Inspector();

  /**
   * The escalated environment, the boundary's checks and the room's plan (off this thread), then where the program
   * runs (on the host without a room, else ./rooms/keep.ts). A check or a room that fails places it `inside`.
   */
  async prepareEscalatedExec(exec: EscalatedExec): Promise<Placed> {
    const { request, boundary, grant } = exec;
    const { env, dropped } = escalatedEnv(boundary, request.env);
    if (dropped.length > 0) log.info("escalated program: environment changes not passed on", { file: request.file, dropped });
    this.rooms.sweep();
    // Every file the decision reads is read by the inspector, off this thread and under a deadline.
    const inspected = await this.inspector.inspect({
      boundary,
      request,
      env,
      taint: taintContext(),
      ...(grant !== undefined ? { grant } : {}),
    });
    const check = inspected.ok ? inspected.check : { ok: false as const, reason: inspected.error };
    if (!check.ok) {
      log.notice("not escalated: runs inside the sandbox instead", { file: request.file, argv: request.argv, reason: check.reason });
      return { inside: check.reason };
    }
    const entries = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    // The repository's git dirs the boundary trusted stay trusted when the escalated git changes their folders.
    if (inspected.ok && inspected.original !== undefined) noteOriginal(inspected.original);
    if (boundary.room === undefined) {
      log.notice("escalated", { file: request.file, argv: request.argv, room: "none" });
      return { spawn: { path: check.path, argv: request.argv, env: entries, cwd: check.cwd } };
    }
    const prepared = inspected.ok ? inspected.prepared : undefined; // planned whenever rooms apply and the check passed
    // What the room may write counts as written by a sandbox of this server from now on (../sandbox/git/taint.ts).
    if (prepared?.kind === "room") noteWritable({ full: false, roots: prepared.room.plan.writableRoots.map((r) => r.root) });
    const program = { program: check.path, argv: request.argv, cwd: check.cwd, env: entries, named: request.file };
    const placed = this.rooms.place(exec.listener, exec.session, boundary.room, prepared!, program);
    if ("unavailable" in placed) {
      log.warn("no escalation room: runs inside the sandbox instead", { file: request.file, reason: placed.unavailable });
      return { inside: `no escalation room: ${placed.unavailable}` };
    }
    const kept = placed.kept !== undefined ? { kept: placed.kept } : {};
    log.notice("escalated", { file: request.file, argv: request.argv, room: boundary.room.backend.kind, ...kept });
    return { spawn: placed.spawn };
  }

  /**
   * A listener's boundary: where its sandbox can write, a git control file changed there from now on is not trusted
   * (../sandbox/git/taint.ts). The rooms settle as their programs, kept rooms and listeners end; stopping stops the
   * inspector, and the worker's park parks it (its thread ends until the next escalation).
   */
  observe(e: PlacementEvent): void {
    switch (e.t) {
      case "listening":
        noteWritable(e.boundary.writable);
        return;
      case "program-ended":
        this.rooms.programEnded(e.session);
        return;
      case "room-ended":
        this.rooms.keptRoomEnded(e.listener, e.room);
        return;
      case "listener-closed":
        this.rooms.listenerClosed(e.listener);
        return;
      case "stopping":
        this.inspector.stop();
        return;
      case "parked":
        this.inspector.park();
        return;
      case "stopped":
        this.rooms.closeAll();
        return;
    }
  }
}
