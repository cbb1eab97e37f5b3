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
import { callSandboxFor, sandboxedArgv, type ExecSandbox } from "./sandbox.ts";

/** Helper answer on stdout. */
export type FsHelperAnswer =
  | { status: "ok"; payload: { operation: string; response: Record<string, unknown> } }
  | { status: "error"; payload: { code: number; message: string } };

/** Run `method` with `params` in the helper under `sb`; resolves with the result or rejects with its JSON-RPC error. */
export async function runFsInSandbox(sb: ExecSandbox, method: FsMethod, params: unknown): Promise<Record<string, unknown>> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
  for (const k of ["TMPDIR", "TEMP", "TMP"]) if (process.env[k] !== undefined) env[k] = process.env[k]!;
  const proc = Bun.spawn(sandboxedArgv(callSandboxFor(sb, env), [...selfCommand(), "--codex-run-as-fs-helper"]), {
    cwd: sb.cwd,
    env,
    stdin: new TextEncoder().encode(JSON.stringify({ operation: method, params })),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, status] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
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
