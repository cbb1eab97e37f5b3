/**
 * How large a bubblewrap command may be (docs/sandbox.md, "How large a sandbox can be"): the limits a bwrap argv
 * meets before any mount is made, counted ({@link argvSize}) and checked ({@link refuseOversizeBwrap}) so that a plan
 * too large to start is refused with what to do, not left to fail later with E2BIG or bwrap's own message.
 *
 * The limits, in the order they would fail:
 * - The kernel's, at execve (fs/exec.c): every argument or environment string, its NUL included, at most
 *   MAX_ARG_STRLEN (32 pages: 131,072 bytes with 4 KiB pages); all of them together, the executable's path
 *   included, plus one 8-byte pointer per string, at most a quarter of the stack limit (`ulimit -s`), capped at
 *   3/4 of 8 MiB (6 MiB) and never below 32 pages (128 KiB) (`bprm_stack_limits`); at most MAX_ARG_STRINGS
 *   (0x7FFFFFFF) strings, which the byte limit keeps out of reach. execve then fails with E2BIG.
 * - bubblewrap's: at most 9,000 arguments after its own name, the command after `--` included (bwrap 0.8:
 *   "Exceeded maximum number of arguments 9000"). bwrap counts arguments read from `--args FD` against the same
 *   9,000, so passing them through a descriptor (which shellmcp does not do) would lift only the kernel's limits.
 */
import { readFileSync } from "node:fs";
import { ShellmcpError } from "../../errors.ts";

/** Size of a list of strings as execve counts it. */
export interface ArgvSize {
  /** How many strings. */
  strings: number;
  /** Their UTF-8 bytes, one NUL per string included (bytes). */
  bytes: number;
  /** The largest one, its NUL included (bytes); 0 for no strings. */
  largest: number;
  /** Index of the largest one in the list; -1 for no strings. */
  largestAt: number;
}

/** The kernel's and bubblewrap's limits on one bwrap start (see the file's header). */
export interface ExecLimits {
  /** Most bytes of one argument or environment string, its NUL included (MAX_ARG_STRLEN; bytes). */
  argStrlen: number;
  /** Most bytes of all strings plus their pointers at one execve (bytes). */
  total: number;
  /** The stack limit `total` was derived from (bytes); undefined when unlimited or unknown. */
  stackLimit: number | undefined;
  /** Most arguments bubblewrap accepts after its own name (count). */
  bwrapArgs: number;
}

/** Page size the kernel's argument limits are counted in (bytes): 4 KiB, the smallest Linux uses (so never too lax). */
const PAGE = 4096;
/** MAX_ARG_STRLEN (include/uapi/linux/binfmts.h): 32 pages (bytes). */
export const MAX_ARG_STRLEN = 32 * PAGE;
/** ARG_MAX: the least total the kernel allows whatever the stack limit, 32 pages (bytes). */
const ARG_MAX_FLOOR = 32 * PAGE;
/** 3/4 of _STK_LIM (8 MiB): the most the kernel allows whatever the stack limit (bytes). */
const ARG_TOTAL_CAP = (8 * 1024 * 1024 * 3) / 4;
/** Bytes of one argv or envp pointer on the 64-bit kernels shellmcp runs on. */
const POINTER = 8;
/** bubblewrap's MAX_ARGS (bubblewrap.c): arguments after its own name, `--args FD`'s included (count). */
export const BWRAP_MAX_ARGS = 9000;
/**
 * Room kept for what a launch puts before bwrap's argv and into its environment after planning (the loopback
 * launcher's `--join-ns` words and bwrap's path again, ./loopback-net.ts; the call's few added variables): strings
 * (count) and bytes.
 */
export const LAUNCH_RESERVE = { strings: 16, bytes: 4096 };

/** The size of `list` as execve counts it: each string's UTF-8 bytes and its NUL. */
export function argvSize(list: readonly string[]): ArgvSize {
  let bytes = 0;
  let largest = 0;
  let largestAt = -1;
  list.forEach((s, i) => {
    const n = Buffer.byteLength(s, "utf8") + 1;
    bytes += n;
    if (n > largest) {
      largest = n;
      largestAt = i;
    }
  });
  return { strings: list.length, bytes, largest, largestAt };
}

/** The environment `env` as execve's envp (`KEY=value` strings; undefined values left out), sized by {@link argvSize}. */
export function envSize(env: Record<string, string | undefined>): ArgvSize {
  return argvSize(Object.entries(env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`])));
}

/**
 * This process's soft stack limit (`ulimit -s`, inherited by what it starts), bytes, from /proc/self/limits;
 * undefined when unlimited or unreadable. Read once per process (every bubblewrap call and escalation room checks
 * against it; only this process could change it, and shellmcp never does).
 */
export function stackLimit(): number | undefined {
  if (stackRead === undefined) {
    try {
      const m = /^Max stack size\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
      const n = m === null ? NaN : Number(m[1]);
      stackRead = { bytes: Number.isFinite(n) ? n : undefined };
    } catch {
      stackRead = { bytes: undefined };
    }
  }
  return stackRead.bytes;
}
let stackRead: { bytes: number | undefined } | undefined;

/**
 * The limits one bwrap start meets with a stack limit of `stack` bytes (`"unlimited"`; default: this process's,
 * {@link stackLimit}, unlimited when unknown), as fs/exec.c `bprm_stack_limits` derives them: a quarter of the stack
 * limit, at most 6 MiB, at least 128 KiB.
 */
export function execLimits(stack: number | "unlimited" = stackLimit() ?? "unlimited"): ExecLimits {
  const quarter = stack === "unlimited" ? ARG_TOTAL_CAP : Math.floor(stack / 4);
  return {
    argStrlen: MAX_ARG_STRLEN,
    total: Math.max(Math.min(ARG_TOTAL_CAP, quarter), ARG_MAX_FLOOR),
    stackLimit: stack === "unlimited" ? undefined : stack,
    bwrapArgs: BWRAP_MAX_ARGS,
  };
}

/** What the refusal of {@link refuseOversizeBwrap} names: the plan's mounts and where they come from. */
export interface MountCounts {
  /** bubblewrap mount operations in the argv (`--bind`, `--ro-bind`, `--tmpfs`…; count). */
  mounts: number;
  /** Writable roots of the plan (count). */
  writableRoots: number;
  /** Denied paths of the plan (count). */
  deniedPaths: number;
}

/**
 * What a refusal is about: `call` (the call's own sandbox: nothing runs) or `room` (an escalation room,
 * src/escalate/rooms/build.ts: no room is built, and the program runs inside the call's sandbox instead).
 */
export type OversizeSubject = "call" | "room";

/** The words of a refusal about `subject`: what could not start, and what happens instead. */
function subjectWords(subject: OversizeSubject): { what: string; instead: string } {
  return subject === "call"
    ? { what: "this sandbox", instead: "Nothing was run" }
    : { what: "this escalation room", instead: "No room was built (the program runs inside the call's sandbox instead)" };
}

/** The bubblewrap mount operations among `argv`'s options (every `--` option but `--perms`, which modifies the next). */
export function countMounts(argv: readonly string[]): number {
  return argv.filter((a) => a.startsWith("--") && a !== "--perms").length;
}

/**
 * Refuse (throw `SANDBOX_UNAVAILABLE`, with `limit`, `arguments`, `bytes` and the counts in its data) a bwrap
 * `argv` that could not start with the environment `env` under `limits`: one string over MAX_ARG_STRLEN, the
 * strings and their pointers over the kernel's total (with {@link LAUNCH_RESERVE} kept free), or more arguments than
 * bubblewrap takes, checked in that order (the order they would fail in). The message says how many mounts,
 * arguments and bytes, which limit, that nothing was run, and what to do (fewer writable roots or denied paths; a
 * shorter command, a larger stack limit where those help). `subject`: a call's sandbox (default) or an escalation
 * room, which the message names with what happens instead. Returns the argv's size when it fits.
 */
export function refuseOversizeBwrap(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  counts: MountCounts,
  limits: ExecLimits = execLimits(),
  subject: OversizeSubject = "call",
): ArgvSize {
  const a = argvSize(argv);
  const head =
    `the bubblewrap command for ${subjectWords(subject).what} is too large to start: its ${counts.mounts} mounts (${counts.writableRoots} ` +
    `writable roots, ${counts.deniedPaths} denied paths) make ${a.strings} arguments of ${a.bytes} bytes`;
  return refuseOversize(argv, a, env, () => ({ head, counts: { ...counts } }), true, limits, subject);
}

/**
 * As {@link refuseOversizeBwrap}, for the command line that starts the sandbox helper (this binary as
 * `codex-linux-sandbox`, ./backend.ts), whose `--sandbox-policy` or `--permission-profile` JSON lists every writable
 * root and denied path in one string: the kernel's limits only (it is not bwrap). `countsOf`: the plan's writable roots
 * and denied paths, asked for only when refusing.
 */
export function refuseOversizeHelper(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  countsOf: () => Omit<MountCounts, "mounts">,
  limits: ExecLimits = execLimits(),
  subject: OversizeSubject = "call",
): ArgvSize {
  const a = argvSize(argv);
  const describe = () => {
    const counts = countsOf();
    const head =
      `the sandbox helper's command line for ${subjectWords(subject).what} is too large to start: its policy's ${counts.writableRoots} ` +
      `writable roots and ${counts.deniedPaths} denied paths make ${a.strings} arguments of ${a.bytes} bytes`;
    return { head, counts: { ...counts } };
  };
  return refuseOversize(argv, a, env, describe, false, limits, subject);
}

/**
 * The checks of {@link refuseOversizeBwrap} (bubblewrap's count only when `bwrap`); a refusal's message starts with
 * `describe().head` and its data holds `describe().counts`.
 */
function refuseOversize(
  argv: readonly string[],
  a: ArgvSize,
  env: Record<string, string | undefined>,
  describe: () => { head: string; counts: Record<string, number> },
  bwrap: boolean,
  limits: ExecLimits,
  subject: OversizeSubject,
): ArgvSize {
  const e = envSize(env);
  const refuse = (limit: string, why: string, fix = ""): never => {
    const { head, counts } = describe();
    throw new ShellmcpError(
      "SANDBOX_UNAVAILABLE",
      `${head}, ${why}. ${subjectWords(subject).instead}: use fewer writable roots (--add-dir, writable_roots) or denied paths${fix}`,
      { limit, arguments: a.strings, bytes: a.bytes, envBytes: e.bytes, ...counts },
    );
  };
  const largest = Math.max(a.largest, e.largest);
  if (largest > limits.argStrlen) {
    const s = a.largest >= e.largest ? argv[a.largestAt]! : "an environment variable";
    const named = s.length > 48 ? `${s.slice(0, 48)}…` : s;
    refuse(
      "MAX_ARG_STRLEN",
      `and one of its strings (${named}) is ${largest} bytes, more than the kernel takes in one argument ` +
        `(MAX_ARG_STRLEN: ${limits.argStrlen} bytes with its NUL; execve would fail with E2BIG)`,
      ", or a shorter command",
    );
  }
  // The executable's path is copied first (bprm->filename): argv[0], once more.
  const strings = a.strings + e.strings + LAUNCH_RESERVE.strings;
  const path = a.strings > 0 ? Buffer.byteLength(argv[0]!, "utf8") + 1 : 0;
  const total = a.bytes + e.bytes + path + LAUNCH_RESERVE.bytes + POINTER * strings;
  if (total > limits.total) {
    const stack = limits.stackLimit === undefined ? "unlimited" : `${limits.stackLimit} bytes`;
    refuse(
      "ARG_MAX",
      `which with the environment (${e.bytes} bytes) and a pointer per string come to ${total} bytes, more than the ` +
        `kernel takes in one execve (${limits.total} bytes: a quarter of the stack limit of ${stack}, at least ` +
        `128 KiB, at most 6 MiB; execve would fail with E2BIG)`,
      limits.total < ARG_TOTAL_CAP ? ", or raise the stack limit (ulimit -s)" : "",
    );
  }
  // bwrap's own argv is `argv` whatever starts it (a launcher before it passes it on as is).
  if (bwrap && a.strings - 1 > limits.bwrapArgs)
    refuse(
      "bwrap MAX_ARGS",
      `more than the ${limits.bwrapArgs} arguments bubblewrap accepts after its name (it would stop with ` +
        `"Exceeded maximum number of arguments")`,
    );
  return a;
}
