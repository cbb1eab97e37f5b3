/**
 * Refusals the kernel made (./report.ts layers `sandbox-write`, `protected-path`, `network`), recognised in a call's
 * output. The kernel says only an errno, so a line is reported only when everything says the sandbox caused it:
 *
 * - writes: the line carries the errno the backend's refusal produces (bubblewrap: `Read-only file system`, its
 *   read-only binds; Landlock: `Permission denied`; Seatbelt: `Operation not permitted`) and names a path that the
 *   call's writable view (../sandbox/writable.ts) does not let it write, and that this server — unconfined, the same
 *   user — could write (access(2) `W_OK` on the path or its nearest existing folder). A program's own permission
 *   error (a mode-000 file in the workspace, a root-owned file for a normal user, a read-only host mount) and a
 *   missing file are never reported.
 * - network: the call's sandbox has no network (and no proxy), and the line is a resolver failure naming a host
 *   (`Could not resolve host: H`, `getaddrinfo ENOTFOUND H`, …), a generic resolver failure, or a socket refused with
 *   `Operation not permitted` (the seccomp filter's EPERM: for internet sockets, AF_UNIX datagram sockets, new AF_UNIX
 *   sockets in proxy mode, and connect/bind/listen on any socket with the network off). The target says the family
 *   the output names for it — `unix socket`, `internet socket` — or `socket` when it names none (the errno does not
 *   tell).
 *
 * Measured on Linux 6.18 (docs/blocked-actions.md): Landlock's audit records (6.15+) go to the audit subsystem,
 * readable only with CAP_AUDIT_READ, so an unprivileged server cannot use them; the output is what every backend has.
 */
import { accessSync, constants, existsSync } from "node:fs";
import { dirname, isAbsolute, normalize, resolve } from "node:path";
import { canonicalPath, canWrite, type WritableView } from "../sandbox/writable.ts";
import { isUnder } from "../sandbox/paths.ts";
import { protectedConfigDirs } from "../sandbox/protected-config.ts";
import type { BlockedAction } from "./report.ts";
import { networkOffRemedy, protectedPathRemedy, sandboxWriteRemedy } from "./remedies.ts";

/** What the call's sandbox was, for reading its output. */
export interface KernelContext {
  /** Which kernel mechanism enforced writes: its refusals' errno differs (`seatbelt`: macOS). */
  backend: "bwrap" | "landlock" | "seatbelt";
  /** What the call's shell could write (taken when it started). */
  view: WritableView;
  /** The call's working folder: relative paths in messages are resolved against it. */
  workdir: string;
  /** The call's sandbox had no network and no proxy. */
  networkOff: boolean;
  /**
   * Whether this server (unconfined) could write `path` — or create it, when it does not exist. Default: access(2)
   * `W_OK` on the path or its nearest existing ancestor. Injectable for tests.
   */
  hostCanWrite?: (path: string) => boolean;
}

/** The error text of the backend's write refusal. */
const WRITE_ERRNO: Record<KernelContext["backend"], string> = {
  bwrap: "Read-only file system",
  landlock: "Permission denied",
  seatbelt: "Operation not permitted",
};

/** Most output lines looked at (a flood of errors is not parsed whole). */
const MAX_LINES_SCANNED = 20_000;

/** Default {@link KernelContext.hostCanWrite}. */
export function hostCanWrite(path: string): boolean {
  let p = normalize(path);
  for (let i = 0; i < 64; i++) {
    if (existsSync(p)) {
      try {
        accessSync(p, constants.W_OK);
        return true;
      } catch {
        return false;
      }
    }
    const parent = dirname(p);
    if (parent === p) return false;
    p = parent;
  }
  return false;
}

/**
 * The path a write-error line names, when it names one: a quoted path (`'x'`, `‘x’`, `"x"`, Python's `: 'x'`), else
 * the path after `<error>: ` (zsh's `zsh:1: read-only file system: x`), else the last word before `: <error>` (bash's
 * `bash: line 1: x: Read-only file system`, git's `… file x: Permission denied`). `error` matches in any case.
 */
export function pathOfErrorLine(line: string, error: string): string | undefined {
  const at = line.toLowerCase().indexOf(error.toLowerCase());
  if (at < 0) return undefined;
  const quoted = [...line.matchAll(/'([^']+)'|‘([^’]+)’|"([^"]+)"/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
  const pathLike = quoted.filter((q) => q.includes("/") || !/\s/.test(q));
  if (pathLike.length > 0) return pathLike[pathLike.length - 1];
  const after = /^: (\S.*)$/.exec(line.slice(at + error.length));
  if (after !== null) return after[1];
  const before = line.slice(0, at).replace(/:\s*$/, "");
  const word = before.split(/:\s|\s/).pop();
  if (word === undefined || word === "" || /^(line|\d+)$/.test(word)) return undefined;
  return word;
}

/** Most distinct paths looked up on disk per call (a flood of refusals of the same few paths costs one each). */
export const MAX_PATHS_CHECKED = 64;

/** Words without which no line of an output can be a network refusal. */
const NETWORK_WORDS = /resolve|ENOTFOUND|EAI_AGAIN|name resolution|name or service|unreachable|not permitted/i;

/** The address family a line names: `unix` (AF_UNIX, a socket file), `internet` (AF_INET/AF_INET6, TCP, UDP). */
type SocketFamily = "unix" | "internet";

/** The target of a socket refusal, by the family the output names (`unknown`: it names none). */
const SOCKET_TARGET: Record<SocketFamily | "unknown", string> = {
  unix: "unix socket",
  internet: "internet socket",
  unknown: "socket",
};

/**
 * The family `line` names, if it names exactly one: `AF_UNIX`/`AF_LOCAL`/`PF_UNIX`, the word `unix` or a `*.sock`
 * path; `AF_INET`/`AF_INET6`/`PF_INET*`, `inet`, `TCP`, `UDP` or `IPv4`/`IPv6`; undefined otherwise.
 */
function socketFamily(line: string): SocketFamily | undefined {
  const unix = /\b[AP]F_(?:UNIX|LOCAL)\b|\bunix\b|\.sock\b/i.test(line);
  const internet = /\b[AP]F_INET6?\b|\binet6?\b|\b(?:TCP|UDP)\b|\bIPv[46]\b/i.test(line);
  return unix === internet ? undefined : unix ? "unix" : "internet";
}

/** `s` as a case-insensitive pattern that matches it literally. */
function literal(s: string): RegExp {
  return new RegExp(s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i");
}

/**
 * Refusals of the call's sandbox recognised in `output` (see the module comment), in order of appearance, each
 * (layer, target) once. Cost: one case-insensitive search of the output per kind; lines are split and
 * looked at only when the output holds one of the words, and at most {@link MAX_PATHS_CHECKED} distinct paths are
 * looked up on disk (docs/blocked-actions.md has the figures). Never throws.
 */
export function detectKernelBlocks(output: string, ctx: KernelContext): BlockedAction[] {
  const found: BlockedAction[] = [];
  const seen = new Set<string>();
  const add = (a: BlockedAction) => {
    const k = `${a.layer}\0${a.target}`;
    if (!seen.has(k)) {
      seen.add(k);
      found.push(a);
    }
  };
  const can = ctx.hostCanWrite ?? hostCanWrite;
  const errno = WRITE_ERRNO[ctx.backend];
  const errnoWord = literal(errno);
  const writes = !ctx.view.full && errnoWord.test(output);
  const network = ctx.networkOff && NETWORK_WORDS.test(output);
  if (!writes && !network) return found;
  const checked = new Map<string, BlockedAction | undefined>();
  const judge = (named: string): BlockedAction | undefined => {
    const abs = isAbsolute(named) ? normalize(named) : resolve(ctx.workdir, named);
    if (checked.has(abs)) return checked.get(abs);
    if (checked.size >= MAX_PATHS_CHECKED) return undefined;
    let verdict: BlockedAction | undefined;
    try {
      const canon = canonicalPath(abs);
      if (!canWrite(ctx.view, canon) && can(canon))
        // Inside a root, or in a protected config folder (CODEX_HOME, /etc/codex), which no sandbox may ever write.
        verdict =
          ctx.view.roots.some((r) => isUnder(canon, r)) || protectedConfigDirs().some((d) => isUnder(canon, canonicalPath(d)))
            ? { layer: "protected-path", target: canon, remedy: protectedPathRemedy(canon) }
            : { layer: "sandbox-write", target: canon, remedy: sandboxWriteRemedy() };
    } catch {
      // a path that cannot be looked at is not reported
    }
    checked.set(abs, verdict);
    return verdict;
  };
  let socketMentioned = false;
  // The family the output last named on a line about a socket (the kernel's EPERM does not say which was refused).
  let family: SocketFamily | undefined;
  for (const line of output.split("\n", MAX_LINES_SCANNED)) {
    if (writes && errnoWord.test(line)) {
      const named = pathOfErrorLine(line, errno);
      const verdict = named === undefined ? undefined : judge(named);
      if (verdict !== undefined) add(verdict);
    }
    if (!network) continue;
    if (/socket/i.test(line)) {
      socketMentioned = true;
      family = socketFamily(line) ?? family;
    }
    if (!NETWORK_WORDS.test(line)) continue;
    const host =
      /Could not resolve host(?:name)?:? '?([^\s':]+)/.exec(line)?.[1] ??
      /getaddrinfo (?:ENOTFOUND|EAI_AGAIN) (\S+)/.exec(line)?.[1] ??
      /Failed to resolve '([^']+)'/.exec(line)?.[1];
    if (host !== undefined) add({ layer: "network", target: host, remedy: networkOffRemedy() });
    else if (/Temporary failure in name resolution|Name or service not known|Network is unreachable/.test(line))
      add({ layer: "network", target: "name resolution", remedy: networkOffRemedy() });
    else if (
      /Operation not permitted/.test(line) &&
      socketMentioned &&
      !(ctx.backend === "seatbelt" && pathOfErrorLine(line, errno) !== undefined)
    ) {
      add({ layer: "network", target: SOCKET_TARGET[socketFamily(line) ?? family ?? "unknown"], remedy: networkOffRemedy() });
      family = undefined; // a later refusal is labelled by what is said about it
    }
  }
  return found;
}
