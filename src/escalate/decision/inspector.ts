/**
 * The decision inspector: a Worker thread that does every filesystem inspection an `Escalate` decision needs (issue
 * 34, item 1) — the escalation boundary's checks (./boundary.ts: program identity, `#!` chain, git's repository,
 * config, submodules) and the room's plan (../rooms/plan.ts: repository layout, control paths, local remotes).
 *
 * Those read files a sandboxed command chose or wrote. They go through ../../untrusted-fs.ts (never blocking
 * on a FIFO, never following a planted link, capped), and they run here, off the main thread, under a deadline
 * that ./inspector-client.ts enforces: even a read that blocks where no read should (a hung network filesystem)
 * costs one decision — which fails closed — never the server.
 *
 * Messages: main → worker {@link InspectRequest}; worker → main {@link InspectReply}. Embedded in the executable
 * by build.ts; started lazily by ./inspector-client.ts.
 */
import { prepareRoom, type PreparedRoom } from "../rooms/plan.ts";
import { checkEscalation, type EscalationBoundary, type EscalationCheck, type Grant } from "./boundary.ts";
import { basename } from "node:path";
import { discoverRepository } from "../../sandbox/git/layout.ts";
import { originalKey, type TaintContext } from "../../sandbox/git/taint.ts";

/** One inspection: what {@link checkEscalation} and, when it passes and rooms apply, {@link prepareRoom} need. */
export interface InspectRequest {
  id: number;
  boundary: EscalationBoundary;
  request: { file: string; argv: string[]; workdir: string };
  /** The escalated program's environment (./escalated-env.ts `escalatedEnv`). */
  env: Record<string, string>;
  grant?: Grant;
  /** What this server's sandboxes could have written so far (../../sandbox/git/taint.ts); git's control files are judged by it. */
  taint?: TaintContext;
}

/** The answer to {@link InspectRequest} `id`: the boundary's verdict and the room's plan, or an error message. */
export type InspectReply =
  | {
      id: number;
      ok: true;
      check: EscalationCheck;
      prepared?: PreparedRoom;
      /**
       * The git dirs of the repository the program runs in (the room's, or an escalated git's on the host) that the
       * boundary trusted, as original ones (../../sandbox/git/taint.ts `originalKey`): that git changes their
       * folders, which must not make them look moved in.
       */
      original?: string[];
    }
  | { id: number; ok: false; error: string };

/** Run one inspection (exported for tests and for the in-thread fallback). Never throws. */
export function inspect(req: InspectRequest): InspectReply {
  try {
    const check = checkEscalation(req.boundary, req.request, req.env, req.grant, req.taint);
    if (!check.ok) return { id: req.id, ok: true, check };
    // The repository an escalated git runs in, which the boundary trusted, stays trusted when that git changes its
    // git dir's folder (on the host, or in a room: then the room's repository below).
    const hostGit = req.taint === undefined || basename(check.path) !== "git" ? [] : originalKeys(req.taint, check.cwd);
    if (req.boundary.room === undefined) return { id: req.id, ok: true, check, ...(hostGit.length > 0 ? { original: hostGit } : {}) };
    const entries = Object.entries(req.env).map(([k, v]) => `${k}=${v}`);
    const prepared = prepareRoom(req.boundary.room, check.path, check.cwd, entries, [req.request.file, req.request.argv[0]]);
    const taint = req.taint;
    const repo = prepared.kind === "room" ? prepared.room.repository : undefined;
    const original =
      taint === undefined || repo === undefined
        ? hostGit
        : repo.gitDirs.map((d) => originalKey(taint, d)).filter((k): k is string => k !== undefined);
    return { id: req.id, ok: true, check, prepared, ...(original.length > 0 ? { original } : {}) };
  } catch (e) {
    return { id: req.id, ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}

/** {@link originalKey} of each git dir of the repository `cwd` lies in (none when its layout is not trusted). */
function originalKeys(taint: TaintContext, cwd: string): string[] {
  const found = discoverRepository(cwd);
  if (found.kind !== "repository") return [];
  return found.repository.gitDirs.map((d) => originalKey(taint, d)).filter((k): k is string => k !== undefined);
}

declare const self: Worker;
if (!Bun.isMainThread) self.onmessage = (ev: MessageEvent<InspectRequest>) => self.postMessage(inspect(ev.data));
