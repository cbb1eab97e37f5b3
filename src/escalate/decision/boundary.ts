/**
 * The escalation boundary: what an `Escalate` decision may run outside the sandbox (docs/security.md).
 *
 * An allow rule (or a human's approval) grants one program with the argv the rules judged, and nothing else:
 * - **Environment**: the escalated program gets the environment the shell was started with (after
 *   `shell_environment_policy`), plus only the request's changes listed in {@link HARMLESS_ENV}: an allow-list,
 *   so loader (`LD_*`, `DYLD_*`), interpreter (`PYTHONPATH`, `NODE_OPTIONS`, `PERL5LIB`, `BASH_ENV`, `ENV`, …),
 *   git (`GIT_CONFIG_*`, `GIT_EXEC_PATH`, `GIT_DIR`, …) and any other variable not known to be harmless never
 *   pass. `PATH` comes from the shell's start, without entries the sandbox can write. (Codex overlays the
 *   request's whole environment on the server's.)
 * - **Program**: the program file (after resolving symlinks), each `#!` interpreter in its chain, and the
 *   program `/usr/bin/env` would look up, must lie where the sandboxed command cannot write; the program is
 *   started by its canonical path, so a link swapped after the check changes nothing.
 * - **Git**: `git` reads its repository's config and hooks, which run commands: when the repository's git dir,
 *   its config or hooks, a config file git reads (system, global, included, `core.hooksPath`), or a place where the
 *   sandbox could create a nearer `.git`, is writable by the sandbox, git is not escalated. Nor when one of those
 *   files changed while this server ran, where one of its sandboxes or rooms could write (../../sandbox/git/taint.ts): an earlier
 *   call may have written it, even if this call's sandbox cannot.
 * A refused escalation runs the program inside the sandbox instead (the caller turns it into `Run`); `forbidden`
 * still denies.
 *
 * This file holds the check ({@link checkEscalation}) and its inputs; the parts are the environment
 * (./escalated-env.ts), the program's identity and `#!` chain (./program-identity.ts) and git's control files
 * (../../sandbox/git/host-git.ts).
 */
import { realpathSync } from "node:fs";
import { basename } from "node:path";
import type { RoomSpec } from "../rooms/plan.ts";
import type { WritableView } from "../../sandbox/writable.ts";
import { gitWritable } from "../../sandbox/git/host-git.ts";
import type { TaintContext } from "../../sandbox/git/taint.ts";
import { identityMismatch, interpreterChain, replaceableEntry } from "./program-identity.ts";

/**
 * What a rule granted, judged against what will really run (issue 21, "identity"): the rule's program token
 * (`git`, or a path rule's `/usr/bin/git`) and, when `host_executable` lists paths for that name, those paths.
 * An escalated exec must run the file the token resolves to through the trusted PATH (or one of those paths),
 * named by `argv[0]` = the token, that file's path or its base name.
 */
export interface Grant {
  /** The first token of the rule that allowed (or prompted for) the exec. */
  program: string;
  /** `host_executable` paths for the program's name, when the policy lists any. */
  hostExecutables?: readonly string[];
}

/** What the escalation server knows of the sandbox one shell runs in. */
export interface EscalationBoundary {
  /** The environment the shell was started with (after `shell_environment_policy`; no protocol variables). */
  baseEnv: Record<string, string>;
  /** Where that shell's sandbox can write. */
  writable: WritableView;
  /**
   * How escalated programs are confined (../rooms/plan.ts). Undefined: they run on the host (Codex's meaning;
   * what `escalation = "host"` asks for).
   */
  room?: RoomSpec;
}

/** Outcome of {@link checkEscalation}: the canonical program and cwd to start, or why it must stay inside. */
export type EscalationCheck = { ok: true; path: string; cwd: string } | { ok: false; reason: string };

/** Kernel-ish paths that name different things inside the sandbox and on the host. */
const NAMESPACE_DEPENDENT = ["/proc", "/dev"];

/**
 * Whether the program of an escalated request may run outside the sandbox. `file` and `workdir` are absolute
 * (as the escalation server resolved them); `env` is the environment it would get ({@link escalatedEnv}).
 * `taint`: what this server's sandboxes could have written before this call (../../sandbox/git/taint.ts); without it, git's
 * control files are judged by this call's sandbox alone.
 */
export function checkEscalation(
  b: EscalationBoundary,
  req: { file: string; argv: readonly string[]; workdir: string },
  env: Record<string, string>,
  grant?: Grant,
  taint?: TaintContext,
): EscalationCheck {
  const w = b.writable;
  for (const [what, p] of [
    ["program", req.file],
    ["working directory", req.workdir],
  ] as const) {
    if (NAMESPACE_DEPENDENT.some((d) => p === d || p.startsWith(d + "/")))
      return { ok: false, reason: `the ${what} ${p} names something else outside the sandbox` };
  }
  let path: string;
  let cwd: string;
  try {
    path = realpathSync(req.file);
    cwd = realpathSync(req.workdir);
  } catch (e) {
    return { ok: false, reason: `cannot resolve the program or working directory: ${(e as Error).message}` };
  }
  if (grant !== undefined) {
    const why = identityMismatch(b, req, path, grant);
    if (why !== undefined) return { ok: false, reason: why };
  }
  if (w.full) return { ok: true, path, cwd };
  const named = replaceableEntry(w, req.file);
  if (named !== undefined)
    return { ok: false, reason: `${named}, on the program's path as the command named it, can be replaced by the sandboxed command` };
  const chain = interpreterChain(w, path, env);
  if (typeof chain === "string") return { ok: false, reason: chain };
  if (chain.some((p) => basename(p) === "git")) {
    const why = gitWritable(w, req.argv, cwd, env, taint);
    if (why !== undefined) return { ok: false, reason: why };
  }
  return { ok: true, path, cwd };
}
