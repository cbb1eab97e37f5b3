/**
 * Reading what a sandbox could have written (issue 34, docs/escalation.md, "What a decision reads"): the one module
 * through which the server reads a file whose path or content a sandboxed command (or an escalation room) may
 * have chosen — work trees, git dirs and their pointer files (`.git` files, `commondir`, `gitdir`), `.gitmodules`,
 * git's index and config, `#!` lines, CODEX_HOME, a project's `.codex/`.
 *
 * Such a file can be a FIFO (an `open(2)` for reading blocks until a writer comes: a `mkfifo .gitmodules` froze the
 * whole server), a device, a symlink swapped after a check, or a file of gigabytes. So every read here:
 * - opens with `O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`: a FIFO opens at once instead of waiting for a
 *   writer, and a symlink as the last component is refused (ELOOP) unless the caller asks to follow links, in
 *   which case the canonical path is opened the same way;
 * - `fstat`s the open file and accepts only a regular file, so the read that follows cannot wait on a pipe or a
 *   device;
 * - reads at most `maxBytes` (default {@link MAX_UNTRUSTED_BYTES}); a larger file is refused, never truncated
 *   silently.
 * Every outcome other than the file's bytes is a value, never a throw, so a caller decides in one place to fail
 * closed. The decisions built on these reads run off the main thread with a deadline as well
 * (src/escalate/decision/inspector.ts), so even a read that blocks where no read should (a hung network filesystem) costs
 * one decision, not the server.
 *
 * Code outside this module must not read a call-derived path synchronously: test/unit/untrusted-reads.test.ts
 * fails on a synchronous read API anywhere else in `src/` that its allow-list does not name with a reason.
 */
import { closeSync, constants, fstatSync, openSync, readSync, realpathSync } from "node:fs";

/** Default size cap of one read, bytes (1 MiB: larger than any pointer, config or `#!` line git or we need). */
export const MAX_UNTRUSTED_BYTES = 1 << 20;

/** Size cap for git's index (it grows with the work tree; 64 MiB holds ~500k entries). */
export const MAX_INDEX_BYTES = 64 << 20;

/** `O_CLOEXEC` (Node's `constants` lacks it): Linux's value, or macOS's. */
const O_CLOEXEC = process.platform === "darwin" ? 0x01000000 : 0o2000000;

/** Flags of every open here. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW | O_CLOEXEC;

/** Why a read gave no content. `missing`: no such file (ENOENT/ENOTDIR), the one outcome callers may treat as "absent". */
export type UntrustedFailure = "missing" | "symlink" | "not-regular" | "too-large" | "error";

/** Outcome of {@link readUntrusted}: the bytes, or why there are none (with a sentence naming the path). */
export type UntrustedRead = { ok: true; data: Buffer } | { ok: false; why: UntrustedFailure; reason: string };

/** Outcome of {@link readUntrustedText}: the text (UTF-8), or why there is none. */
export type UntrustedText = { ok: true; text: string } | { ok: false; why: UntrustedFailure; reason: string };

/** Options of {@link readUntrusted}. */
export interface UntrustedReadOptions {
  /** Largest accepted file, bytes (default {@link MAX_UNTRUSTED_BYTES}). */
  maxBytes?: number;
  /**
   * Follow symlinks (default false): the canonical path is opened instead, still with `O_NOFOLLOW`, so a link
   * swapped between the two steps is refused rather than followed. For files git itself follows (a config kept
   * in a dotfiles repository); pointer files are never followed.
   */
  follow?: boolean;
  /** At most this many bytes from the start (`#!` lines): a larger file is not refused, only its head is read. */
  head?: number;
}

/**
 * Read the regular file at `path` without ever blocking on it (see the module's docs). Never throws.
 * Errors: `missing` (ENOENT, ENOTDIR), `symlink` (the last component is a link and `follow` is off),
 * `not-regular` (a FIFO, socket, device or directory), `too-large` (over `maxBytes`), `error` (anything else:
 * EACCES, EIO…).
 */
export function readUntrusted(path: string, options: UntrustedReadOptions = {}): UntrustedRead {
  const max = options.maxBytes ?? MAX_UNTRUSTED_BYTES;
  let target = path;
  if (options.follow === true) {
    try {
      target = realpathSync(path);
    } catch (e) {
      return failure(path, e);
    }
  }
  let fd: number;
  try {
    fd = openSync(target, OPEN_FLAGS);
  } catch (e) {
    return failure(path, e);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { ok: false, why: "not-regular", reason: `${path} is not a regular file (${kindOf(st)})` };
    const limit = options.head !== undefined ? Math.min(options.head, max) : max;
    if (options.head === undefined && st.size > max)
      return { ok: false, why: "too-large", reason: `${path} is larger than ${max} bytes (${st.size})` };
    // Read one byte past the limit: a file that grew since fstat is refused too.
    const buf = Buffer.alloc(Math.min(limit, Math.max(st.size, 0)) + 1);
    let n = 0;
    while (n < buf.length) {
      const r = readSync(fd, buf, n, buf.length - n, null);
      if (r === 0) break;
      n += r;
    }
    if (n > limit) {
      if (options.head !== undefined) return { ok: true, data: buf.subarray(0, limit) };
      return { ok: false, why: "too-large", reason: `${path} is larger than ${max} bytes` };
    }
    return { ok: true, data: buf.subarray(0, n) };
  } catch (e) {
    return failure(path, e);
  } finally {
    closeSync(fd);
  }
}

/** {@link readUntrusted}, decoded as UTF-8. */
export function readUntrustedText(path: string, options: UntrustedReadOptions = {}): UntrustedText {
  const r = readUntrusted(path, options);
  return r.ok ? { ok: true, text: r.data.toString("utf8") } : r;
}

/**
 * The text of `path`, `undefined` when it does not exist, or a thrown {@link UntrustedFileError} for anything
 * else (a FIFO, a link, a huge file): for callers whose only fail-closed answer is to stop.
 */
export function readUntrustedTextOrAbsent(path: string, options: UntrustedReadOptions = {}): string | undefined {
  const r = readUntrustedText(path, options);
  if (r.ok) return r.text;
  if (r.why === "missing") return undefined;
  throw new UntrustedFileError(r.why, r.reason);
}

/** A file the server would have read was not a plain, small, regular file (see {@link readUntrusted}). */
export class UntrustedFileError extends Error {
  constructor(
    readonly why: UntrustedFailure,
    message: string,
  ) {
    super(message);
    this.name = "UntrustedFileError";
  }
}

function failure(path: string, e: unknown): { ok: false; why: UntrustedFailure; reason: string } {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR") return { ok: false, why: "missing", reason: `${path} does not exist` };
  if (code === "ELOOP") return { ok: false, why: "symlink", reason: `${path} is a symbolic link` };
  if (code === "ENXIO") return { ok: false, why: "not-regular", reason: `${path} is not a regular file (a socket or device)` };
  return { ok: false, why: "error", reason: `cannot read ${path}: ${(e as Error).message}` };
}

function kindOf(st: import("node:fs").Stats): string {
  if (st.isFIFO()) return "a FIFO";
  if (st.isDirectory()) return "a directory";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  return "not a file";
}
