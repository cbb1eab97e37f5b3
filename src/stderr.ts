import { writeSync } from "node:fs";

/**
 * Write `text` to fd 2 synchronously. Use this instead of `process.stderr.write` on hot paths: touching
 * `process.stderr` builds Bun's Node-stream machinery, which costs ~7 ms per process (measured with
 * bench/startup.ts), and the exec wrapper runs once per program the shell starts. EAGAIN/EPIPE are ignored:
 * a diagnostic must never turn into a crash.
 */
export function writeStderr(text: string): void {
  try {
    writeSync(2, text);
  } catch {
    // stderr closed or non-blocking and full: nothing better to do.
  }
}
