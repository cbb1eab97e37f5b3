/**
 * Is the process at the other end of an approver socket inside a sandbox? (docs/approvals.md, "Who may answer").
 * The approver's socket is a pathname socket: a sandboxed command with the network on can `connect(2)` to it (a
 * read-only mount does not stop a connect, Landlock's filesystem rules do not cover it; network-off and proxy-mode
 * calls cannot, their seccomp filter refuses the `connect` or the `AF_UNIX` socket). So every connection is judged
 * by who made it, from what the kernel says about that process, compared with this process (the judge):
 *
 * - the uid `SO_PEERCRED` recorded must be this process's;
 * - its user, mount, pid and network namespaces must be this process's (a bubblewrap sandbox has its own user, pid
 *   and mount namespaces; a container too);
 * - its `NoNewPrivs` may not exceed this process's (every Landlock sandbox, ours or Codex's, sets no_new_privs);
 * - its number of seccomp filters (`Seccomp_filters`, else the `Seccomp` mode) may not exceed this process's (every
 *   sandbox of ours adds a filter; filters are inherited and cannot be removed);
 * - it may not run in a shellmcp call's cgroup (`…/shellmcp-<pid>/call-<n>`), which no sandboxed process can leave;
 * - for the server judging a client: it may not be a descendant of the server (a command, or a process it left
 *   behind that was not reparented yet).
 * The facts are read from `/proc/<pid>` while a pidfd of the peer is held (`SO_PEERPIDFD`, Linux ≥ 6.5; before,
 * `pidfd_open` of the recorded pid) and the peer is checked alive afterwards, so a pid reused by another process
 * after the peer ended is not judged in its place. A fact that cannot be read refuses the peer.
 */
import { readFile, readlink } from "node:fs/promises";
import { closeQuiet, ERRNO, syscall, syscallNumber } from "../../ffi/libc.ts";
import { peerCredentials, peerPidfd } from "../../ffi/peercred.ts";
import { ShellmcpError } from "../errors.ts";

/** Namespaces compared. */
const NAMESPACES = ["user", "mnt", "pid", "net"] as const;

/** What the kernel says about one process, for {@link judgePeer}. */
export interface ProcessFacts {
  pid: number;
  uid: number;
  /**
   * `readlink /proc/<pid>/ns/<kind>`, e.g. `user:[4026531837]`; {@link HIDDEN} where the kernel refused it (the
   * process is not dumpable, as `serve` makes itself) and the caller allowed that.
   */
  ns: Record<(typeof NAMESPACES)[number], string>;
  /** How many pid namespaces the process is in, as seen from this one (the entries of `NSpid`; 0 when not shown). */
  pidDepth: number;
  /** `NoNewPrivs` of /proc/<pid>/status. */
  noNewPrivs: number;
  /** `Seccomp` mode (0 none, 1 strict, 2 filter). */
  seccomp: number;
  /** `Seccomp_filters` (Linux ≥ 5.9), undefined when the kernel does not show it. */
  seccompFilters?: number;
  /** /proc/<pid>/cgroup, as read. */
  cgroup: string;
  /** Parent pids up to pid 1 (nearest first), at most 256. */
  ancestors: number[];
}

/** A shellmcp call's cgroup (src/shell/cgroup.ts: `<own cgroup>/shellmcp-<pid>/call-<n>`). */
const CALL_CGROUP = /\/shellmcp-\d+\/call-\d+(\/|$)/m;

function statusField(status: string, name: string): number | undefined {
  const m = new RegExp(`^${name}:\\s*(\\d+)`, "m").exec(status);
  return m === null ? undefined : Number(m[1]);
}

/** A namespace the kernel would not show (see {@link ProcessFacts}). */
export const HIDDEN = "hidden";

/**
 * Read {@link ProcessFacts} of `pid` (`"self"` for this process). Throws when one cannot be read, except, with
 * `hiddenNamespaces`, namespaces the kernel refuses to show (EACCES: a non-dumpable process such as `serve`, judged
 * by `shellmcp approvals`), which are {@link HIDDEN}.
 */
export async function processFacts(pid: number | "self", uid: number, hiddenNamespaces = false): Promise<ProcessFacts> {
  const base = `/proc/${pid}`;
  const status = await readFile(`${base}/status`, "utf8");
  const ns = {} as ProcessFacts["ns"];
  for (const k of NAMESPACES) {
    try {
      ns[k] = await readlink(`${base}/ns/${k}`);
    } catch (e) {
      if (!hiddenNamespaces || (e as NodeJS.ErrnoException).code !== "EACCES") throw e;
      ns[k] = HIDDEN;
    }
  }
  const nspid = /^NSpid:\s*(.*)$/m.exec(status);
  const noNewPrivs = statusField(status, "NoNewPrivs");
  const seccomp = statusField(status, "Seccomp");
  if (noNewPrivs === undefined || seccomp === undefined) throw new Error(`${base}/status shows no NoNewPrivs or Seccomp line`);
  const ancestors: number[] = [];
  let p = statusField(status, "PPid") ?? 0;
  while (p > 1 && ancestors.length < 256) {
    ancestors.push(p);
    try {
      p = statusField(await readFile(`/proc/${p}/status`, "utf8"), "PPid") ?? 0;
    } catch {
      break; // it ended meanwhile: the chain above it is gone too
    }
  }
  return {
    pid: pid === "self" ? process.pid : pid,
    uid,
    ns,
    pidDepth: nspid === null ? 0 : nspid[1]!.trim().split(/\s+/).length,
    noNewPrivs,
    seccomp,
    seccompFilters: statusField(status, "Seccomp_filters"),
    cgroup: await readFile(`${base}/cgroup`, "utf8"),
    ancestors,
  };
}

/**
 * Why `peer` must not be trusted as an unsandboxed process of this user, judged against `self` (see the module
 * comment), or undefined when nothing says it is sandboxed. `server`: the pid of a server judging one of its
 * clients, refused when it is one of the client's ancestors.
 */
export function judgePeer(peer: ProcessFacts, self: ProcessFacts, server?: number): string | undefined {
  if (peer.uid !== self.uid) return `it runs as uid ${peer.uid}, not as this user (uid ${self.uid})`;
  for (const k of NAMESPACES) {
    if (peer.ns[k] === HIDDEN) continue; // judged by its pid namespace depth below
    if (peer.ns[k] !== self.ns[k])
      return `its ${k} namespace (${peer.ns[k]}) is not this process's (${self.ns[k]}): a sandbox or a container`;
  }
  if (peer.pidDepth !== self.pidDepth)
    return `it is in ${peer.pidDepth} nested pid namespaces, this process in ${self.pidDepth}: a sandbox or a container`;
  if (peer.noNewPrivs > self.noNewPrivs) return "it runs with no_new_privs, as every sandboxed command does, and this process does not";
  if (peer.seccompFilters !== undefined && self.seccompFilters !== undefined) {
    if (peer.seccompFilters > self.seccompFilters)
      return `it runs under ${peer.seccompFilters} seccomp filters, more than this process's ${self.seccompFilters}: every sandbox adds one`;
  } else if (peer.seccomp > self.seccomp) return `its seccomp mode (${peer.seccomp}) is stricter than this process's (${self.seccomp})`;
  if (CALL_CGROUP.test(peer.cgroup)) return "it runs in the cgroup of a shellmcp call";
  if (server !== undefined && peer.ancestors.includes(server))
    return `it was started by the server (pid ${server}): a command of one of its calls`;
  return undefined;
}

/** Whether the process behind `pidfd` has not been reaped yet (so its pid still names it). */
function alive(pidfd: number): boolean {
  try {
    syscall("pidfd_send_signal", syscallNumber("pidfd_send_signal"), pidfd, 0, 0, 0);
    return true;
  } catch (e) {
    if (e instanceof ShellmcpError && e.data.errno === ERRNO.ESRCH) return false;
    throw e;
  }
}

/** The pid a pidfd refers to (`Pid:` of its fdinfo; -1 once reaped). */
async function pidOfPidfd(pidfd: number): Promise<number> {
  const info = await readFile(`/proc/self/fdinfo/${pidfd}`, "utf8");
  const m = /^Pid:\s*(-?\d+)/m.exec(info);
  return m === null ? -1 : Number(m[1]);
}

/** The verdict on the peer of a connected socket: its pid, and why it is refused (undefined: accepted). */
export interface PeerVerdict {
  pid: number;
  refused?: string;
}

/**
 * Judge the peer of the connected `AF_UNIX` socket `fd` (see the module comment); `server`: this process's pid
 * when it is the server judging a client. Never throws: a fact that cannot be read refuses the peer.
 */
export async function checkPeer(fd: number, server?: number): Promise<PeerVerdict> {
  // A client judging a server: `serve` makes itself non-dumpable, so its namespaces are hidden from a client that
  // is not root; its pid namespace depth (NSpid), no_new_privs, seccomp filters and cgroup still speak.
  let pid = -1;
  let pidfd: number | undefined;
  try {
    const cred = peerCredentials(fd);
    pid = cred.pid;
    if (pid <= 0) return { pid, refused: "the kernel gives no process for it (another pid namespace)" };
    pidfd = peerPidfd(fd) ?? syscall("pidfd_open", syscallNumber("pidfd_open"), pid, 0);
    if ((await pidOfPidfd(pidfd)) !== pid) return { pid, refused: "it ended before it could be examined" };
    const self = await processFacts("self", process.getuid!());
    const peer = await processFacts(pid, cred.uid, server === undefined);
    // Still the same process now, so every fact above was its own (a pid is not reused before its process is reaped).
    if (!alive(pidfd)) return { pid, refused: "it ended while it was examined" };
    const why = judgePeer(peer, self, server);
    return why === undefined ? { pid } : { pid, refused: why };
  } catch (e) {
    return { pid, refused: `it could not be examined: ${(e as Error).message}` };
  } finally {
    if (pidfd !== undefined) closeQuiet(pidfd);
  }
}
