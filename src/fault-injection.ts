/**
 * Fault injection for tests of the early exits (issue 34, items 7d and 7e): `SHELLMCP_FAULT_INJECT=step[,step…]` in
 * the environment of `serve` (or of the process under test) makes each named step throw as if the resource it
 * acquires could not be had, so a test can check that whatever was acquired before it is released (cgroup
 * folders, mount points, bridge fds) and that nothing started runs on unsupervised. Unset (always, outside tests),
 * {@link failIfInjected} does nothing. It can only make the server refuse more, never allow anything.
 */
import { ShellmcpError } from "./errors.ts";

/** The environment variable naming the steps to fail (comma-separated {@link FaultStep}s). */
export const FAULT_ENV = "SHELLMCP_FAULT_INJECT";

/**
 * Steps that can be made to fail:
 * - `pidfd_open`: the escalation worker's pidfd of a child it has just started (an escalated program, a kept room);
 * - `call_bridge`: a call's start-up in proxy mode under bubblewrap, right after its two bridges were made;
 * - `call_grants`: a call's start-up, right after its rooms' grant proxies were started (after its mount points);
 * - `call_cgroup`: a call's start-up, right after its cgroup was created (after its bridges and mount points);
 * - `call_listen`: a call's start-up, right after its escalation listener was opened (and its output pipe);
 * - `call_expired`: a call's start-up, with everything acquired: its timeout counts as already over (status 124);
 * - `call_spawn`: starting the call's shell, after everything else was acquired;
 * - `bwrap_mounts`: planning bubblewrap (the call's sandbox), right after its host mount points were created.
 */
export type FaultStep =
  "pidfd_open" | "call_bridge" | "call_grants" | "call_cgroup" | "call_listen" | "call_expired" | "call_spawn" | "bwrap_mounts";

/** Depth of {@link withoutFaults} in this thread: while above 0, no step fails. */
let suspended = 0;

/**
 * Run `f` with no injected fault in this thread (`serve`'s start-up check of the shell, an ordinary call that must
 * not take the faults a test meant for the calls it makes). Calls wait for that check, so none runs meanwhile.
 */
export async function withoutFaults<T>(f: () => Promise<T>): Promise<T> {
  suspended++;
  try {
    return await f();
  } finally {
    suspended--;
  }
}

/** Whether `step` is named in {@link FAULT_ENV} (for a fault that is a condition rather than an error). */
export function isInjected(step: FaultStep, env: Record<string, string | undefined> = process.env): boolean {
  if (suspended > 0) return false;
  const v = env[FAULT_ENV];
  return v !== undefined && v !== "" && v.split(",").includes(step);
}

/** Throw `SYSCALL` (an injected fault, `data.injected: step`) when `step` is named in {@link FAULT_ENV}. */
export function failIfInjected(step: FaultStep, env: Record<string, string | undefined> = process.env): void {
  if (isInjected(step, env)) throw new ShellmcpError("SYSCALL", `${step}: injected fault (${FAULT_ENV})`, { injected: step });
}
