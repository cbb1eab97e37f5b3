/**
 * `shellmcp exec-server`: Codex's JSON-RPC exec-server (exec-server spec §1–§8, Codex 0.169 as observed).
 *
 * - Transports: Bun's websocket server (one JSON-RPC-lite message per frame, text or binary), or `--listen stdio`
 *   (one message per line on stdin/stdout; the server ends when stdin closes, as Codex's does). `"jsonrpc"` is never
 *   sent. Websocket upgrades: an `Origin` header is refused with HTTP 403 (a browser page must not drive it); the
 *   `Authorization: Bearer` credential (a token generated at start by default, or per `--ws-auth`; none only with
 *   `--ws-auth none`) is checked before the upgrade (../auth/bearer.ts, HTTP 401), so a refused client reaches no method; `GET /readyz` answers 200 (Codex's readiness probe, no auth); frames over
 *   {@link ServerOptions.maxMessageBytes} close the connection; output pumps pause while a connection has more than
 *   `OUTBOUND_HIGH_WATER_BYTES` (./session.ts) unsent.
 * - Requests are handled in arrival order, at most {@link ServerOptions.concurrentRequests} at once per connection
 *   (Codex's `--concurrent-requests`, default 1: strictly one at a time).
 * - Sessions: `initialize {clientName, resumeSessionId}` → `{sessionId}`; on disconnect the session detaches and its
 *   processes keep running for the detached TTL; resuming a live session gives −32010 (the code Codex 0.169 retries).
 * - Methods: `environment/info`, `process/start|read|write|terminate|signal`, `fs/readFile|writeFile|
 *   createDirectory|getMetadata|readDirectory|remove|copy`; every other method −32601 (Codex 0.169 tolerates that
 *   for `fs/watchMissing` and `environmentConfig/read`).
 *
 * This file starts a server: what a server SIGKILLed left is swept, per-process cgroups and their guardian, then
 * the parts: the transports (./transports.ts: websocket, stdio), each connection's queue and pump (./queue.ts), the
 * JSON-RPC envelope (./envelope.ts), the method table (./methods.ts), connections and sessions (./session.ts).
 */
import type { Server } from "bun";
import { log } from "../log.ts";
import { CgroupManager } from "../shell/cgroup.ts";
import { sweepMountMarkers } from "../sandbox/linux/mount-markers.ts";
import { sweepDeadApproverSockets } from "../approvals/server.ts";
import type { AuthRefusal } from "../auth/bearer.ts";
import { closeConn, messageHandler } from "./envelope.ts";
import { startGuardian, type Guardian } from "./guardian.ts";
import { connQueues } from "./queue.ts";
import { SessionRegistry, type ConnData } from "./session.ts";
import { startStdio, startWebsocket } from "./transports.ts";

/** Server settings. */
export interface ServerOptions {
  /** `"stdio"`: JSON lines on stdin/stdout; otherwise a websocket server on `hostname:port`. */
  transport?: "websocket" | "stdio";
  hostname: string;
  port: number;
  /**
   * Websocket authentication (undefined: none — main.ts sets it unless `--ws-auth none`): given the upgrade's
   * `Authorization` header (null when absent),
   * undefined to let it in or the refusal, answered before the upgrade (see ../auth/bearer.ts `authorizeUpgrade`).
   */
  authorize?: (authorization: string | null) => AuthRefusal | undefined;
  /** Requests handled at once per connection (≥ 1; Codex's default 1). */
  concurrentRequests: number;
  /** How long a detached session (and its processes) is kept for resume, ms. */
  detachedSessionTtlMs: number;
  /** How long a closed process stays readable, ms. */
  processRetentionMs: number;
  /** Largest inbound websocket message, bytes. */
  maxMessageBytes: number;
}

/** Defaults: Codex's current 30 s TTL and retention; 128 MiB messages (a whole file in `fs/writeFile`). */
export const DEFAULT_SERVER_OPTIONS: ServerOptions = {
  hostname: "127.0.0.1",
  port: 0,
  detachedSessionTtlMs: 30_000,
  processRetentionMs: 30_000,
  maxMessageBytes: 128 * 1024 * 1024,
  concurrentRequests: 1,
};

/** A running exec-server. */
export interface ExecServer {
  /** `ws://IP:PORT`, or `stdio` for the stdio transport. */
  url: string;
  /** The websocket server (undefined for stdio). */
  server?: Server<ConnData>;
  /** Resolves when the stdio transport's stdin reached EOF (never for websockets). */
  ended: Promise<void>;
  /**
   * Kill every process of every session, stop listening, and remove the per-process cgroups once the kernel has
   * emptied them (see {@link CgroupManager.shutdown}). Never rejects.
   */
  shutdown(): Promise<void>;
}

/** Start listening (or reading stdin). Throws when the address cannot be bound. */
export function startExecServer(opts: ServerOptions): ExecServer {
  const sessions = new SessionRegistry(opts.detachedSessionTtlMs);
  const { cgroups, ensureGuardian, stopGuardian } = processHousekeeping();
  const handle = messageHandler({
    methods: { sessions, cgroups, processRetentionMs: opts.processRetentionMs },
    sessions,
    beforeProcessStart: ensureGuardian,
  });
  const conns = connQueues({ concurrentRequests: opts.concurrentRequests, handle, close: (c) => closeConn(sessions, c) });
  const shutdownAll = async () => {
    sessions.killAll();
    await cgroups?.shutdown();
    stopGuardian();
  };
  if (opts.transport === "stdio") return startStdio(conns, sessions, shutdownAll);
  return startWebsocket(opts, conns, sessions, shutdownAll);
}

/**
 * What a server needs before its first process: what servers killed with SIGKILL left swept (bubblewrap's mount
 * points and deny folders, approver sockets; their cgroups: `CgroupManager.detect`), one cgroup per process (so
 * that terminate ends everything it started, see src/shell/cgroup.ts; undefined, with a warning, where there is
 * none), and the guardian that kills everything in those cgroups when this server dies (./guardian.ts) — started
 * by `ensureGuardian` with the first `process/start` (an idle server spawns nothing).
 */
function processHousekeeping(): { cgroups: CgroupManager | undefined; ensureGuardian: () => void; stopGuardian: () => void } {
  if (process.platform === "linux") sweepMountMarkers();
  void sweepDeadApproverSockets();
  const cg = CgroupManager.detect();
  const cgroups = cg instanceof CgroupManager ? cg : undefined;
  if (!(cg instanceof CgroupManager))
    log.warn(
      "exec-server: no per-process cgroups; terminate kills process groups and descendants only, and processes outlive a server killed with SIGKILL",
      { why: cg.error },
    );
  let guardian: Guardian | undefined;
  let guardianTried = false;
  return {
    cgroups,
    ensureGuardian() {
      if (guardianTried || cgroups === undefined) return;
      guardianTried = true;
      guardian = startGuardian(cgroups.base);
    },
    stopGuardian: () => guardian?.stop(),
  };
}
