/**
 * Run one shell command for the `shell` tool: the patched shell (`-lc`/`-c`) in `workdir`, under the sandbox
 * policy (through this binary's `codex-linux-sandbox` role unless `danger-full-access`/`external-sandbox`), with
 * every exec going to the escalation server.
 *
 * - stdout and stderr share one pipe, so the output is interleaved in arrival order; capped (head + tail).
 * - The shell leads its own session/process group; timeout and cancellation SIGKILL that group and the
 *   escalated programs of this call (which run in groups of their own).
 * - The timeout is a pausable stopwatch: time waiting for a human does not count.
 * - After the shell exits, the pipe gets a drain time to reach EOF (background jobs may hold it); what was read is
 *   kept either way (Codex discarded it).
 * - {@link runCommand} is plan → acquire → run → settle: the call's sandbox (../sandbox/backend.ts `CallSandbox`)
 *   gives the launch, room and writable view; everything the call acquires is held by one `CallResources`.
 *
 * The parts, one idea each: the options and result (./run-options.ts), the resources (./call-resources.ts), what
 * the call acquires (./call-acquire.ts), its kill switches (./call-control.ts), proxy mode's wiring
 * (./call-proxy.ts), how the shell starts (./spawn-plan.ts), the output pump (./output-pump.ts).
 */
import { statSync } from "node:fs";
import { constants as osConstants } from "node:os";
import * as libc from "../../ffi/libc.ts";
import { isInjected } from "../fault-injection.ts";
import { TRACE_STEPS, traceStep } from "../trace-steps.ts";
import { acquire, type Acquired } from "./call-acquire.ts";
import { serveProxies } from "./call-proxy.ts";
import { CallResources, type OwnedFd } from "./call-resources.ts";
import { CappedOutput } from "./output.ts";
import { pump } from "./output-pump.ts";
import { notStarted, type RunCommandOptions, type RunCommandResult } from "./run-options.ts";
import { spawnShell } from "./spawn-plan.ts";

export type { RunCommandOptions, RunCommandResult } from "./run-options.ts";

/** Why `workdir` cannot be the shell's working folder (Codex's wording for a missing one), or undefined. */
function workdirProblem(workdir: string): string | undefined {
  try {
    return statSync(workdir).isDirectory() ? undefined : `workdir is not a directory: ${workdir}`;
  } catch (e) {
    const missing = (e as NodeJS.ErrnoException).code === "ENOENT";
    return `workdir ${workdir}: ${missing ? "No such file or directory (os error 2)" : (e as Error).message}`;
  }
}

/**
 * Once the shell runs: close this process's copies of what the shell now holds, and serve proxy mode's bridges
 * (./call-proxy.ts `serveProxies`). A failing call bridge ends the call; `bridgeError` then says why.
 */
function afterStart(o: RunCommandOptions, a: Acquired, s: { seccomp?: OwnedFd }): { bridgeError?: string } {
  a.writeEnd.close();
  s.seccomp?.close();
  a.listener.releaseClientFd();
  return serveProxies(o, a.proxy, a.grantProxies, a.control);
}

/**
 * Run the command to completion (or timeout/cancel): plan (the workdir), acquire (./call-acquire.ts `acquire`: every
 * resource held by one {@link CallResources}), run (spawn, then read the output until the shell and its leftovers are
 * gone), settle (release everything, last acquired first; the result's `settled` says when the late releases are
 * done). Never throws for command failures. A session (./session-manager.ts) runs it "detached": it does not await
 * it at once, gives a `terminal` and `onOutput`, a `signal` of its own (kill) and no practical timeout.
 */
export async function runCommand(o: RunCommandOptions): Promise<RunCommandResult> {
  const t0 = performance.now();
  await using res = new CallResources();
  // What the caller acquired for the call is ours from the start, released last: the git check waits for the rest.
  if (o.gitCheck !== undefined) res.holdGitCheck(o.gitCheck);
  if (o.networkProxy !== undefined) res.hold(() => o.networkProxy!.close());
  // The terminal's slave is ours from the start.
  const tty = o.terminal === undefined ? undefined : Object.assign(res.fd(o.terminal.slave), { master: o.terminal.master });
  // Plan.
  const bad = workdirProblem(o.workdir);
  if (bad !== undefined) return notStarted(t0, bad, o.sandbox.sandboxed);
  if (TRACE_STEPS) traceStep("workdir");
  // Acquire.
  const a = await acquire(o, res, t0, tty);
  if (!("launch" in a)) return a;
  const { control, launch } = a;
  const stopwatch = control.startStopwatch(res);
  // Time a person takes to answer a network question does not count against the timeout either.
  if (o.networkProxy !== undefined) o.networkProxy.pauseWhile = (f) => stopwatch.paused(f);
  if (stopwatch.expired || isInjected("call_expired"))
    return notStarted(t0, "", launch.sandboxed, { exitCode: 124, timedOut: true, spawnError: undefined });
  // Run.
  let spawn: ReturnType<typeof spawnShell>;
  try {
    spawn = spawnShell(o, a, res);
  } catch (e) {
    return notStarted(t0, `cannot start ${launch.argv[0]}: ${(e as Error).message}`, o.sandbox.sandboxed);
  }
  res.started = true;
  if (TRACE_STEPS) traceStep("spawn");
  const pid = spawn.proc.pid;
  o.track?.(pid, true);
  o.onStarted?.({
    interrupt: () => {
      if (!control.exited) libc.kill(-pid, 2);
    },
  });
  const bridge = afterStart(o, a, spawn);
  if (TRACE_STEPS) traceStep("after-start");
  const out = new CappedOutput(o.maxOutputBytes);
  const exitCode = await pump(o, res, a, out, t0);
  // Settle.
  await res[Symbol.asyncDispose]();
  if (TRACE_STEPS) traceStep("released");
  for (const text of control.late) out.push(Buffer.from(text));
  return settled(t0, spawn.proc, exitCode, out, bridge.bridgeError, a, res);
}

/**
 * The result of a call whose shell ran and whose resources are released: the exit status (128+N for a signal
 * death), the output (with the bridge's failure, when any, at its end), how it was ended, and `settled` for the late
 * releases.
 */
function settled(
  t0: number,
  proc: { signalCode: NodeJS.Signals | number | null | undefined },
  exitCode: number,
  out: CappedOutput,
  bridgeError: string | undefined,
  a: Acquired,
  res: CallResources,
): RunCommandResult {
  const sig = proc.signalCode === null || proc.signalCode === undefined ? undefined : String(proc.signalCode);
  return {
    exitCode: sig !== undefined ? 128 + (osConstants.signals[sig as NodeJS.Signals] ?? 0) : exitCode,
    output: bridgeError === undefined ? out.text() : out.text() + bridgeError,
    durationMs: performance.now() - t0,
    timedOut: a.control.killed === "timeout",
    cancelled: a.control.killed === "cancel",
    signal: sig,
    outputBytes: out.total,
    droppedBytes: out.dropped,
    sandboxed: a.launch.sandboxed,
    settled: Promise.all(res.settling.map((p) => p.catch(() => undefined))).then(() => undefined),
  };
}
