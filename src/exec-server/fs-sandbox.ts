/**
 * Sandboxed fs operations: this binary's `codex-fs` role (`--codex-run-as-fs-helper`) run inside our Linux sandbox
 * helper with the request's sandbox (exec-server spec §6.3 step 5). One JSON request on stdin, one JSON answer on
 * stdout; the OS sandbox is the only gate (no path preflight), so a denied write fails with the OS error
 * (−32603 "Read-only file system (os error 30)", −32600 "Permission denied (os error 13)").
 *
 * Failures of the helper itself: non-zero exit → −32603 "fs sandbox helper failed with status N: <stderr>";
 * unparseable output → −32603 "failed to encode or decode fs sandbox helper message: <err>".
 */
import type { FsMethod } from "./fs-ops.ts";
import { rpcError, RPC } from "./rpc.ts";
import { selfCommand } from "../self.ts";
import { callSandboxFor, execGitGuard, sandboxedArgv, type ExecSandbox } from "./sandbox.ts";
import { GitCheck } from "../sandbox/git/call-check.ts";

/** Helper answer on stdout. */
export type FsHelperAnswer =
  | { status: "ok"; payload: { operation: string; response: Record<string, unknown> } }
  | { status: "error"; payload: { code: number; message: string } };

/** The fs methods that change files: run under the git guard (reads change nothing it watches). */
const WRITING: ReadonlySet<FsMethod> = new Set(["fs/writeFile", "fs/createDirectory", "fs/remove", "fs/copy"]);

/**
 * Run `method` with `params` in the helper under `sb`; resolves with the result or rejects with its JSON-RPC error.
 * A method that writes runs under the server's git guard (issue 39, "one launch path": as a `process/start` and
 * `serve`'s calls): a change to git's control files it made where the sandbox could not keep them read-only (the
 * Landlock backend: a `.git/config` with `core.fsmonitor`, a hook) is undone once the helper ended, and the method then
 * fails with −32603 and the guard's report instead of its result.
 */
export async function runFsInSandbox(sb: ExecSandbox, method: FsMethod, params: unknown): Promise<Record<string, unknown>> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
  for (const k of ["TMPDIR", "TEMP", "TMP"]) if (process.env[k] !== undefined) env[k] = process.env[k]!;
  const call = callSandboxFor(sb, env);
  let git: GitCheck | undefined;
  if (WRITING.has(method))
    try {
      git = GitCheck.take(execGitGuard(), call.writable(), call.enforcement === "landlock", method);
    } catch (e) {
      throw rpcError(RPC.INTERNAL, `cannot record the git control state to protect it: ${(e as Error).message}`);
    }
  let out: string, err: string, status: number;
  try {
    const proc = Bun.spawn(sandboxedArgv(call, [...selfCommand(), "--codex-run-as-fs-helper"]), {
      cwd: sb.cwd,
      env,
      stdin: new TextEncoder().encode(JSON.stringify({ operation: method, params })),
      stdout: "pipe",
      stderr: "pipe",
    });
    [out, err, status] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  } finally {
    // The helper has ended (or never started): check before anything is answered.
    const report = git?.checkNow().trim() ?? "";
    if (report !== "") throw rpcError(RPC.INTERNAL, report);
  }
  if (status !== 0) throw rpcError(RPC.INTERNAL, `fs sandbox helper failed with status ${status}: ${err.trim()}`);
  let answer: FsHelperAnswer;
  try {
    answer = JSON.parse(out) as FsHelperAnswer;
  } catch (e) {
    throw rpcError(RPC.INTERNAL, `failed to encode or decode fs sandbox helper message: ${(e as Error).message}`);
  }
  if (answer.status === "error") throw rpcError(answer.payload.code, answer.payload.message);
  if (answer.status !== "ok" || answer.payload?.operation !== method)
    throw rpcError(RPC.INTERNAL, `unexpected fs sandbox helper response for ${method}`);
  return answer.payload.response;
}
