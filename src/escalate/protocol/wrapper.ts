/**
 * arg0 role `codex-execve-wrapper`: the exec wrapper the patched shell runs instead of every program
 * (docs/escalation.md, "Wire protocol" and "Patched shells: the argv contract").
 *
 * Argv contract: `[WRAPPER, TARGET_PATH, ORIG_ARGV0, ORIG_ARGV1, …]`, so `args` here is
 * `[TARGET_PATH, ORIG_ARGV0, …]`. There is no option parsing: argv[0] may start with `-` (`exec -l`), which
 * the Rust wrapper mistook for an option.
 *
 * Flow: send a 1-byte datagram carrying one end of a new stream socketpair on `CODEX_ESCALATE_SOCKET`, send the
 * `EscalateRequest` on the stream, then act on the answer:
 * - `Run`: reset signal dispositions and mask, `execve` the target in place (inside the sandbox); on ENOEXEC run
 *   it with a shell, as bash would have.
 * - `Escalate`: send fds 0, 1, 2 (`SuperExecMessage`), wait for `SuperExecResult`, exit with its code.
 * - `Deny`: `Execution denied: <reason>` on stderr, exit 1.
 * Every protocol failure fails closed: a message on stderr and exit 1; the program is never run unasked.
 *
 * Hot path: imported by the wrapper role only; keep imports to ffi/, protocol, socket and stderr.
 */
import { existsSync, readFileSync, readlinkSync } from "node:fs";
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { writeStderr } from "../../stderr.ts";
import { decodeResponse, decodeResult, encodeRequest, encodeSuperExec, PROTOCOL_ENV_VARS, type EscalateRequest } from "./wire.ts";
import { ESCALATE_SOCKET_ENV_VAR, keepEscalationSocketAcrossExec } from "../../escalation-socket.ts";
import { recvFrame, sendFrame } from "./socket.ts";

/** Exit status for a call without a target path (Codex's clap usage error is 2 as well). */
export const WRAPPER_USAGE_EXIT = 2;
/** Exit status for Deny and for every protocol failure, as Codex. */
export const WRAPPER_FAILURE_EXIT = 1;
/** Largest response frame the wrapper accepts (responses are tiny). */
const MAX_RESPONSE_BYTES = 1 << 20;

class WrapperFailure extends Error {}

function fail(message: string): never {
  throw new WrapperFailure(message);
}

function causeOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Parse `CODEX_ESCALATE_SOCKET` into an fd number, with Codex-like messages for bad values. */
export function parseSocketFd(value: string | undefined): number {
  if (value === undefined) {
    fail(`${ESCALATE_SOCKET_ENV_VAR} is not set (the wrapper must be started by a shell that shellmcp serve launched)`);
  }
  if (!/^\d{1,9}$/.test(value)) fail(`${ESCALATE_SOCKET_ENV_VAR} is not a valid file descriptor: ${JSON.stringify(value)}`);
  return Number(value);
}

const REPLACEMENT = "\uFFFD";

/**
 * The target's argv and environment as raw bytes when the JS strings lost information (invalid UTF-8 shows
 * up as U+FFFD in `process.argv`/`process.env`), read from /proc/self/cmdline and /proc/self/environ;
 * otherwise the strings themselves. The request JSON keeps the lossy strings (JSON has no bytes); `Run` execs
 * the exact bytes the shell gave us.
 */
function execArgs(file: string, argv: string[]): { file: libc.CStr; argv: libc.CStr[]; env: libc.CStr[] } {
  let rawFile: libc.CStr = file;
  let rawArgv: libc.CStr[] = argv;
  if (file.includes(REPLACEMENT) || argv.some((a) => a.includes(REPLACEMENT))) {
    const fields = splitNul(readFileSync("/proc/self/cmdline"));
    // cmdline = [WRAPPER, FILE, ARGV0, …]; trust it only if its shape matches what we were given.
    if (fields.length === argv.length + 2) {
      rawFile = fields[1]!;
      rawArgv = fields.slice(2);
    }
  }
  const envStrings = Object.entries(process.env).map(([k, v]) => `${k}=${v ?? ""}`);
  const env: libc.CStr[] = envStrings.some((e) => e.includes(REPLACEMENT)) ? splitNul(readFileSync("/proc/self/environ")) : envStrings;
  return { file: rawFile, argv: rawArgv, env };
}

function splitNul(b: Buffer): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < b.length) {
    const end = b.indexOf(0, at);
    const stop = end < 0 ? b.length : end;
    out.push(new Uint8Array(b.subarray(at, stop)));
    at = stop + 1;
  }
  return out;
}

/**
 * Interpreter for a target that failed with ENOEXEC (an executable text file without `#!`): bash runs such
 * files itself, zsh hands them to /bin/sh. We look at the shell that exec'd us (our parent) and do the same.
 * When the parent is not a shell (bash execs the last command of `-c` in place, so our parent is then the
 * shell's parent), we use a patched bash, so that the script's own commands are still intercepted: the one installed
 * beside this binary (`<dir>/shells/bash`, a checkout or scripts/install.sh), else the carried one `serve` installed
 * (src/carried/portable-shells.ts: an executable alone, as npm installs it), else /bin/sh. Only on this rare path:
 * the carried one's lookup hashes the embedded shell (a few ms), and its module is loaded only here.
 */
function scriptInterpreter(): string {
  try {
    const parent = readlinkSync(`/proc/${libc.getppid()}/exe`);
    if (/(^|\/)bash[^/]*$/.test(parent)) return parent;
    if (/(^|\/)zsh[^/]*$/.test(parent)) return "/bin/sh";
  } catch {
    // parent gone or unreadable: fall through
  }
  const exe = process.execPath;
  const besides = `${exe.slice(0, exe.lastIndexOf("/"))}/shells/bash`;
  if (existsSync(besides)) return besides;
  try {
    const { installedPortableShell } = require("../../carried/portable-shells.ts") as typeof import("../../carried/portable-shells.ts");
    return installedPortableShell("bash") ?? "/bin/sh";
  } catch {
    return "/bin/sh"; // the embedded shell unreadable (out of memory or fds): as before the carried bash was looked for
  }
}

function runInPlace(file: string, argv: string[]): never {
  const x = execArgs(file, argv);
  libc.resetSignals();
  try {
    libc.execve(x.file, x.argv, x.env);
  } catch (e) {
    if (e instanceof ShellmcpError && e.data.errno === libc.ERRNO.ENOEXEC) {
      const sh = scriptInterpreter();
      try {
        libc.execve(sh, [sh.slice(sh.lastIndexOf("/") + 1), x.file, ...x.argv.slice(1)], x.env);
      } catch (e2) {
        fail(`cannot run ${file} as a shell script: ${causeOf(e2)}`);
      }
    }
    const errno = e instanceof ShellmcpError ? (e.data.errno as number) : undefined;
    const text = errno === undefined ? causeOf(e) : `${libc.strerror(errno)} (os error ${errno})`;
    // Match the shell's own convention: 127 not found, 126 found but not executable.
    writeStderr(`${file}: ${text}\n`);
    process.exit(errno === libc.ERRNO.ENOENT ? 127 : 126);
  }
}

function openStdFds(): number[] {
  const open: number[] = [];
  for (const fd of [0, 1, 2]) {
    try {
      libc.fcntl(fd, libc.SOCK.F_GETFD);
      open.push(fd);
    } catch {
      // closed by the command line (`cmd <&-`): the escalated program gets /dev/null there
    }
  }
  return open;
}

function escalate(stream: number): number {
  const fds = openStdFds();
  try {
    sendFrame(stream, encodeSuperExec({ fds }), fds);
  } catch (e) {
    fail(`failed to send SuperExecMessage: ${causeOf(e)}`);
  }
  let code: number;
  try {
    code = decodeResult(recvFrame(stream, 0, MAX_RESPONSE_BYTES).payload).exit_code;
  } catch (e) {
    fail(`failed to receive SuperExecResult: ${causeOf(e)}`);
  }
  return code;
}

function wrapper(args: string[]): number {
  const file = args[0]!;
  const argv = args.length > 1 ? args.slice(1) : [file];
  const sock = parseSocketFd(process.env[ESCALATE_SOCKET_ENV_VAR]);

  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !(PROTOCOL_ENV_VARS as readonly string[]).includes(k)) env[k] = v;
  }
  let workdir: string;
  try {
    workdir = process.cwd();
  } catch (e) {
    fail(`cannot determine the working directory: ${causeOf(e)}`);
  }
  const request: EscalateRequest = { file, argv, workdir, env };

  const { AF_UNIX, SOCK_STREAM, SOCK_CLOEXEC } = libc.SOCK;
  let ours: number, theirs: number;
  try {
    [ours, theirs] = libc.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
  } catch (e) {
    fail(`failed to create a socketpair: ${causeOf(e)}`);
  }
  try {
    if (libc.sendmsg(sock, new Uint8Array([0]), [theirs]) !== 1) fail("failed to send handshake datagram: short write");
  } catch (e) {
    if (e instanceof WrapperFailure) throw e;
    fail(`failed to send handshake datagram: ${causeOf(e)}`);
  }
  libc.closeQuiet(theirs);

  try {
    sendFrame(ours, encodeRequest(request));
  } catch (e) {
    fail(`failed to send EscalateRequest: ${causeOf(e)}`);
  }
  let action;
  try {
    action = decodeResponse(recvFrame(ours, 0, MAX_RESPONSE_BYTES).payload);
  } catch (e) {
    fail(`failed to receive EscalateResponse: ${causeOf(e)}`);
  }
  switch (action.kind) {
    case "Run":
      libc.closeQuiet(ours);
      keepEscalationSocketAcrossExec();
      return runInPlace(file, argv);
    case "Escalate":
      return escalate(ours);
    case "Deny":
      writeStderr(action.reason === null ? "Execution denied\n" : `Execution denied: ${action.reason}\n`);
      return WRAPPER_FAILURE_EXIT;
  }
}

/** Run the wrapper role; returns the exit status when it does not exec. */
export function wrapperMain(args: string[]): number {
  if (args.length === 0) {
    writeStderr("usage: codex-execve-wrapper FILE [ARGV0 [ARG...]]\n");
    return WRAPPER_USAGE_EXIT;
  }
  try {
    return wrapper(args);
  } catch (e) {
    writeStderr(`Error: ${causeOf(e)}\n`);
    return WRAPPER_FAILURE_EXIT;
  }
}
