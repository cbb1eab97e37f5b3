/**
 * Debug-only per-step timings of a call (issue 40, "Measure first"; read by bench/call.ts). Off unless
 * `SHELLMCP_TRACE_STEPS` names a file when the process starts: then {@link traceStep} appends one JSON line per step,
 * `{"step":"<name>","t":<ms>}`, `t` on this process's `performance.now()` clock (ms since it started, fractional).
 * A step marks the moment a phase ended; the bench takes the differences of consecutive marks.
 *
 * Zero cost when off: {@link TRACE_STEPS} is a constant read once, and every hook is `if (TRACE_STEPS) traceStep(…)`
 * or a call that returns at once. Lines are kept in memory and written (synchronously, `O_APPEND`) when a step
 * named `result` is marked or 64 lines are pending, so the write does not sit between two steps of the same call.
 * The file is opened once, created 0600; a file that cannot be opened turns tracing off (never an error).
 */
import { closeSync, constants, openSync, writeSync } from "node:fs";

/** Whether tracing is on (`SHELLMCP_TRACE_STEPS` set to a path when the process started). */
export const TRACE_STEPS: boolean = (process.env.SHELLMCP_TRACE_STEPS ?? "") !== "";

let fd: number | undefined;
let pending: string[] = [];

function open(): number | undefined {
  if (fd !== undefined) return fd;
  try {
    fd = openSync(
      process.env.SHELLMCP_TRACE_STEPS!,
      constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      0o600,
    );
  } catch {
    fd = -1;
  }
  return fd;
}

/**
 * Mark that step `step` (a short fixed name such as `plan`, `git-snapshot`, `spawn`; never text the model chose)
 * ended now; `extra`: numbers to add to the line (counts, sizes). Does nothing when {@link TRACE_STEPS} is off.
 */
export function traceStep(step: string, extra?: Record<string, number>): void {
  if (!TRACE_STEPS) return;
  pending.push(JSON.stringify({ step, t: performance.now(), ...extra }));
  if (step === "result" || pending.length >= 64) flushTrace();
}

/** Write the pending lines now (also done at `result`). */
export function flushTrace(): void {
  if (!TRACE_STEPS || pending.length === 0) return;
  const lines = pending.join("\n") + "\n";
  pending = [];
  const f = open();
  if (f === undefined || f < 0) return;
  try {
    writeSync(f, lines);
  } catch {
    closeSync(f);
    fd = -1;
  }
}
