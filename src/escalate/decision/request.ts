/**
 * One intercepted exec as the decision sees it, and what a decision says about it: the request with its `file` and
 * `workdir` resolved ({@link ResolvedRequest}, {@link resolveRequest}) and the decided action ({@link Decided}).
 * Shared by the decision (./decide.ts), the placement (../placement.ts) and the server (../server.ts), which is why
 * it sits at the bottom of the three.
 */
import { isAbsolute, normalize, resolve } from "node:path";
import type { EscalateAction, EscalateRequest } from "../protocol/wire.ts";
import type { Grant } from "./boundary.ts";

/** Request as seen by `decide`: `file` and `workdir` resolved and normalised (relative `file` against `workdir`). */
export interface ResolvedRequest extends EscalateRequest {
  /** Absolute, lexically normalised program path. */
  file: string;
  /** Absolute, lexically normalised working directory. */
  workdir: string;
  /** `file` exactly as the wrapper sent it. */
  rawFile: string;
}

/**
 * A decision as `decide` returns it: the wire's {@link EscalateAction}, and for `Escalate` the {@link Grant} of the
 * rule behind it (never sent on the wire). An `Escalate` without a grant is checked without identity rules (tests,
 * embedders that decide by other means).
 */
export type Decided = EscalateAction & { grant?: Grant };

/**
 * Resolve a request's `file`/`workdir` like later Codex (`shell-escalation`'s server resolves the program against the
 * request's workdir): a relative `workdir` against this process's, a relative `file` against the request's `workdir`;
 * both lexically normalised (no symlink is followed). Never throws.
 */
export function resolveRequest(r: EscalateRequest): ResolvedRequest {
  const workdir = normalize(isAbsolute(r.workdir) ? r.workdir : resolve(r.workdir));
  const file = normalize(isAbsolute(r.file) ? r.file : resolve(workdir, r.file));
  return { ...r, file, workdir, rawFile: r.file };
}
