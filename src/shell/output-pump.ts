/**
 * The call's output, read while the shell runs ({@link pump}): stdout and stderr share one pipe (or a session's
 * terminal), escalated programs' output is merged in, every chunk goes to the capped output and the caller's tap.
 * After the shell exits the pipe gets {@link DRAIN_MS} to reach EOF (background jobs may hold it); what was read is
 * kept either way (Codex discarded it).
 */
import type { Acquired } from "./call-acquire.ts";
import type { CallResources } from "./call-resources.ts";
import type { CappedOutput } from "./output.ts";
import type { RunCommandOptions } from "./run-options.ts";
import { TRACE_STEPS, traceStep } from "../trace-steps.ts";

/** Time the output pipe may stay open after the shell exited, ms. */
export const DRAIN_MS = 2000;
/** Interval of progress notifications, ms. */
export const PROGRESS_INTERVAL_MS = 5000;

/**
 * Read `readEnd` (the call's own output pipe or terminal master, an fd) until EOF, giving each chunk to `push`: a pipe through Bun's file stream, a terminal's master through a
 * `tty.ReadStream` (Bun's file stream uses positioned reads, which a terminal refuses; the stream owns the fd and
 * closes it, and the slave's last close reads as EIO, taken as EOF). `cancel` stops reading.
 */
function readOutput(
  readEnd: number,
  terminal: boolean,
  push: (chunk: Uint8Array) => void,
): { done: Promise<void>; cancel: () => Promise<void> } {
  if (terminal) {
    const stream = new (require("node:tty") as typeof import("node:tty")).ReadStream(readEnd);
    const done = new Promise<void>((res) => {
      stream.on("data", (d: Buffer) => push(new Uint8Array(d)));
      stream.on("error", () => undefined); // EIO: every slave fd is closed
      stream.on("close", () => res());
    });
    return {
      done,
      cancel: async () => {
        stream.destroy();
        await done;
      },
    };
  }
  const reader = Bun.file(readEnd).stream().getReader();
  const done = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        push(value);
      }
    } catch {
      // the fd was closed under us after the drain deadline
    }
  })();
  return { done, cancel: () => reader.cancel().catch(() => undefined) };
}

/**
 * Read the output until EOF while the shell runs; after it exits, escalated programs keep their grace (when killed),
 * everything left of the call is killed (its cgroup), and the pipe gets {@link DRAIN_MS} more to reach EOF.
 * Resolves with the shell's exit status once the reading has stopped.
 */
export async function pump(o: RunCommandOptions, res: CallResources, a: Acquired, out: CappedOutput, t0: number): Promise<number> {
  const { control } = a;
  const onAbort = () => control.stop("cancel");
  o.signal?.addEventListener("abort", onAbort);
  res.hold(() => o.signal?.removeEventListener("abort", onAbort));
  if (o.signal?.aborted) onAbort();
  if (o.onProgress !== undefined) {
    const progress = setInterval(() => o.onProgress!(performance.now() - t0, out.total), PROGRESS_INTERVAL_MS);
    res.hold(() => clearInterval(progress));
  }
  const take = (chunk: Uint8Array) => {
    if (TRACE_STEPS && out.total === 0) traceStep("first-byte");
    out.push(chunk);
    o.onOutput?.(chunk);
  };
  // A terminal's reader owns (and closes) its copy of the master.
  const readers = [readOutput(a.terminal ? a.readEnd.handOver() : a.readEnd.fd, a.terminal, take)];
  if (a.escalatedRead !== undefined) readers.push(readOutput(a.escalatedRead.fd, false, take));
  let eof = false;
  const drained = Promise.all(readers.map((r) => r.done)).then(() => (eof = true));
  const exitCode = await control.proc!.exited;
  if (TRACE_STEPS) traceStep("exit");
  // Reaped: from now on its pid (the session's id) may be reused by any new process, so it is no longer tracked.
  o.track?.(control.proc!.pid, false);
  // The shell is gone: the worker lets go of its copy of the pipe (later escalations of leftovers get /dev/null).
  a.listener.releaseOutput();
  // Killed (timeout, cancel): escalated programs have their grace period, unless they end (and close the pipe) first.
  if (control.graceOver !== undefined) await Promise.race([drained, control.graceOver]);
  // Everything the call started ends with it (background jobs, detached or not); their end closes the pipe.
  a.cgroup?.kill();
  await Promise.race([drained, Bun.sleep(DRAIN_MS)]);
  if (!eof) await Promise.all(readers.map((r) => r.cancel()));
  if (TRACE_STEPS) traceStep("drained");
  return exitCode;
}
