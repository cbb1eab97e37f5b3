/**
 * A pipe whose read end holds given bytes ({@link bytesPipe}): how a launcher is handed data it reads from an fd
 * (the seccomp program bubblewrap reads, sandbox-exec's plan, an escalation room's filter). Platform-neutral: a
 * pipe and a write, no sandbox mechanism.
 */
import { writeSync } from "node:fs";
import * as libc from "../../ffi/libc.ts";
import { ShellmcpError } from "../errors.ts";

/** `fcntl(F_SETPIPE_SZ)`: a pipe's capacity, bytes. */
const F_SETPIPE_SZ = 1031;

/**
 * A pipe whose read end holds `bytes` and then EOF (a seccomp program for bwrap, sandbox-exec's plan). CLOEXEC; close
 * it after use. Written before anyone reads it, so the pipe is first made large enough (a Landlock plan listing the
 * entries beside hidden credential stores can pass the default 64 KiB: the write then blocked forever) and written
 * non-blocking: bytes that do not fit throw `SANDBOX_UNAVAILABLE` (the call is refused, never hung).
 */
export function bytesPipe(bytes: Uint8Array): number {
  const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
  try {
    if (bytes.byteLength > 65536) {
      try {
        libc.fcntl(w, F_SETPIPE_SZ, bytes.byteLength);
      } catch {
        // above this user's limit (/proc/sys/fs/pipe-max-size): the write below says so
      }
    }
    libc.setNonblock(w, true);
    let off = 0;
    try {
      while (off < bytes.byteLength) off += writeSync(w, bytes, off);
    } catch (e) {
      throw new ShellmcpError(
        "SANDBOX_UNAVAILABLE",
        `the sandbox's plan is ${bytes.byteLength} bytes, more than a pipe of this user holds (/proc/sys/fs/pipe-max-size): ` +
          `hide fewer paths or raise that limit`,
        { bytes: bytes.byteLength },
        { cause: e },
      );
    }
  } catch (e) {
    libc.closeQuiet(r);
    throw e;
  } finally {
    libc.closeQuiet(w);
  }
  return r;
}
