/**
 * How the exec-server starts a process (./process.ts): the program looked up and checked as execve would, the cwd
 * checked, the cgroup trampoline, and the wait status the lifeline guard reports on its status pipe. Errors are
 * −32603 with the OS text, as Codex answers a failed spawn.
 */
import { statSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { join } from "node:path";
import * as libc from "../../ffi/libc.ts";
import { findExecutable } from "../find-executable.ts";
import { errnoOf, osErrorText } from "./fs-ops.ts";
import type { StartSpec } from "./process.ts";
import { rpcError, RPC } from "./rpc.ts";

/**
 * The fd number of the lifeline guard's status pipe in the guard: after the lifeline's 7, the executable's 8 and the
 * loopback network's namespaces at 9 and 10 that a direct bubblewrap launch passes through (../sandbox/linux/loopback-net.ts).
 */
export const STATUS_FD = 11;

/**
 * Read the 4-byte wait status the lifeline guard writes on `fd` (the read end of its status pipe; closed here) when
 * its program ends: the exit code, or the name of the signal that ended it. Undefined when the pipe closes with
 * anything else (the guard never started the program).
 */
export async function readWaitStatus(fd: number): Promise<{ code: number | null; signal: string | null } | undefined> {
  const bytes: number[] = [];
  const reader = Bun.file(fd).stream().getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      bytes.push(...value);
    }
  } catch {
    return undefined;
  } finally {
    libc.closeQuiet(fd);
  }
  if (bytes.length !== 4) return undefined;
  const w = new DataView(Uint8Array.from(bytes).buffer).getInt32(0, true);
  const sig = w & 0x7f;
  if (sig === 0) return { code: (w >> 8) & 0xff, signal: null };
  const name = Object.entries(osConstants.signals).find(([, n]) => n === sig)?.[0];
  return { code: null, signal: name ?? null };
}

/** Resolve `name` like execvp with the child's PATH (libc default `/bin:/usr/bin` when it has none). */
export function resolveProgram(name: string, path: string | undefined): string | undefined {
  return findExecutable(name, path ?? "/bin:/usr/bin");
}

/**
 * `argv` started through `/bin/sh`, which joins the cgroup (`procs`) before the program's first instruction and then
 * execs it — serve's trampoline (src/shell/spawn-plan.ts `joinCgroupFirst`), except that the `PWD` dash exports is
 * removed again unless the child's env set it (the child env must be exactly what was asked for).
 */
export function cgroupTrampoline(procs: string, argv: string[], keepPwd: boolean): string[] {
  return ["/bin/sh", "-c", `echo $$ > "$0" || exit 126; ${keepPwd ? "" : "unset PWD; "}exec "$@"`, procs, ...argv];
}

/** −32603 with the OS text of errno `code` (e.g. "ENOENT" → "No such file or directory (os error 2)"). */
function osError(code: string): Error {
  return rpcError(RPC.INTERNAL, osErrorText((osConstants.errno as Record<string, number>)[code]!));
}

/** A thrown OS error as −32603 with its OS text (other errors unchanged). */
function asOsError(e: unknown): unknown {
  const n = errnoOf(e);
  return n === undefined ? e : rpcError(RPC.INTERNAL, osErrorText(n));
}

/** Throws −32603 with the OS text when `cwd` is missing or no directory. */
export function checkCwd(cwd: string): void {
  try {
    if (!statSync(cwd).isDirectory()) throw osError("ENOTDIR");
  } catch (e) {
    throw asOsError(e);
  }
}

/**
 * An unsandboxed launch's argv: the program resolved on the request's `PATH`, checked as execve would (−32603
 * ENOENT, EACCES with the OS text, before the trampoline could turn it into an exit status); `argv0` the
 * request's `arg0` or its `argv[0]`.
 */
export function directArgv(spec: StartSpec): { argv: string[]; argv0: string | undefined } {
  const program = resolveProgram(spec.argv[0]!, spec.env.PATH);
  if (program === undefined) throw osError("ENOENT");
  try {
    const st = statSync(program.startsWith("/") ? program : join(spec.cwd, program));
    if (st.isDirectory() || (st.mode & 0o111) === 0) throw osError("EACCES");
  } catch (e) {
    throw asOsError(e);
  }
  return { argv: [program, ...spec.argv.slice(1)], argv0: spec.arg0 ?? spec.argv[0] };
}
