/**
 * The server's loopback network (issue 41, "dev servers across calls"): one private network namespace per `serve`
 * process, with nothing in it but `lo`, that every bubblewrap call of that server with the network off joins instead
 * of a fresh `--unshare-net` of its own. A dev server one call (a session) starts on 127.0.0.1 is then reachable from
 * the server's later calls, and from nothing else: not from the host (its sockets are in no namespace of the host),
 * not from another server's calls (each has its own), and it has no route out (no interface but `lo`).
 *
 * Made once, on first use ({@link serverLoopback}): a bubblewrap with `--unshare-user --unshare-net` (bwrap brings
 * `lo` up) runs a shell that prints its pid and waits on a pipe; this process opens that shell's
 * `/proc/PID/ns/{user,net}`, checks that the network namespace is new and holds `lo` only, and closes the pipe (the
 * shell and bwrap end at once). The two fds (close-on-exec) are all that keep the namespaces alive: there is no holder
 * process, and when the server ends, whatever kills it, the kernel closes them and frees the namespaces once the last
 * sandboxed process in them has ended (the lifeline guards kill those: ./lifeline.ts). Nothing is left behind.
 *
 * A call joins through the room launcher's `--join-ns` mode (patches/room-launcher.c): a single-threaded process that
 * setns()es into the user namespace and then the network namespace and execs bwrap in place (this process cannot:
 * joining a user namespace needs a single-threaded caller). bwrap then nests the call's own user namespace in it and
 * leaves the network as it is. Inside, the call's seccomp filter is the proxy mode's (./seccomp.ts: AF_INET/AF_INET6
 * streams may be created, bound, listened on and connected; no new AF_UNIX socket, so no host daemon's socket can be
 * reached through the filesystem; no UDP, raw or netlink socket; ptrace and io_uring denied) instead of the
 * network-off one, which refuses every socket but AF_UNIX and every bind/connect.
 *
 * Not joined (a fresh `--unshare-net` with the network-off filter, as before): calls with the network on or through
 * the network proxy, calls whose plan needs our inner stage (restricted reads), the escalation rooms (their own
 * network rules), Landlock and Codex's helper, a server without the room launcher, and `SHELLMCP_SERVER_LOOPBACK=off`.
 * When the namespace cannot be made, the reason is logged once and calls keep their fresh namespaces.
 */
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import * as libc from "../../../ffi/libc.ts";
import { writeStderr } from "../../stderr.ts";
import { launcherBinary } from "./room-launcher.ts";

/** fd number of the loopback network's user namespace in the process that joins it (the room launcher's `--join-ns`). */
export const LOOPBACK_USERNS_FD = 9;
/** fd number of the loopback network namespace in the process that joins it. */
export const LOOPBACK_NETNS_FD = 10;
/** Environment variable that turns the shared loopback network off (`off`: every call gets a fresh one, as before). */
export const LOOPBACK_ENV = "SHELLMCP_SERVER_LOOPBACK";

/** The server's loopback network: fds of its user and network namespaces (close-on-exec, held for the process's life). */
export interface ServerLoopback {
  userFd: number;
  netFd: number;
  /** The network namespace's inode number (`/proc/PID/ns/net` → `net:[INODE]`), for messages and tests. */
  netInode: number;
}

let made: ServerLoopback | { error: string } | undefined;

/**
 * This server's loopback network, made on first use with the bubblewrap at `bwrap` (then kept: the same one for every
 * later call) and tried once: a bubblewrap sandbox like a call's (without `/proc` when `noProc`) started in it
 * through the room launcher must run `true`. `{ error }` when it cannot be had: turned off ({@link LOOPBACK_ENV}), no
 * room launcher to join it with, bwrap failed, or the trial did (the reason is then written to stderr once): calls
 * then keep a network of their own each. Never throws.
 */
export function serverLoopback(bwrap: string, noProc = false): ServerLoopback | { error: string } {
  if (made !== undefined) return made;
  if (process.platform !== "linux") return (made = { error: "not Linux" });
  if (process.env[LOOPBACK_ENV] === "off") return (made = { error: `${LOOPBACK_ENV}=off` });
  const launcher = launcherBinary();
  if ("error" in launcher) return (made = { error: `no room launcher to join it with: ${launcher.error}` });
  try {
    const lo = makeLoopback(bwrap);
    try {
      tryJoin(lo, bwrap, noProc);
    } catch (e) {
      closeSync(lo.userFd);
      closeSync(lo.netFd);
      throw e;
    }
    made = lo;
  } catch (e) {
    made = { error: (e as Error).message };
    writeStderr(
      `shellmcp: cannot make this server's loopback network (${made.error}); each call gets a network of its own, so a server one call starts cannot be reached from the next\n`,
    );
  }
  return made;
}

/**
 * Tests only: what {@link serverLoopback} returns from now on (`undefined`: made again on next use), so that launch
 * argv can be pinned without making namespaces (test/unit/golden-launch-argv.test.ts). Returns the one replaced.
 */
export function setServerLoopbackForTest(
  value: ServerLoopback | { error: string } | undefined,
): ServerLoopback | { error: string } | undefined {
  const old = made;
  made = value;
  return old;
}

/**
 * `argv` (bwrap's, planned without `--unshare-net`) started inside `loopback`: the room launcher's `--join-ns` in front,
 * and the fds the started process must have ({@link LOOPBACK_USERNS_FD}, {@link LOOPBACK_NETNS_FD}), as
 * `[fd number in the started process, fd of this process]` (this module keeps them open). Throws when there is no room
 * launcher (callers check {@link serverLoopback} first, which refuses then).
 */
export function joinLoopbackArgv(loopback: ServerLoopback, argv: readonly string[]): { argv: string[]; fds: [number, number][] } {
  const launcher = launcherBinary();
  if ("error" in launcher) throw new Error(`no room launcher: ${launcher.error}`);
  return {
    argv: [launcher.path, "--join-ns", String(LOOPBACK_USERNS_FD), String(LOOPBACK_NETNS_FD), "--", argv[0]!, ...argv],
    fds: [
      [LOOPBACK_USERNS_FD, loopback.userFd],
      [LOOPBACK_NETNS_FD, loopback.netFd],
    ],
  };
}

/**
 * Start `true` in a bubblewrap sandbox like a call's (new user, pid and ipc namespaces, `/proc` unless `noProc`, no
 * capabilities) inside `lo`, as calls will be started: joining can fail where making did not (a chroot, a seccomp
 * policy that refuses setns, a limit on nested user namespaces). Throws an `Error` with bwrap's or the launcher's words.
 */
function tryJoin(lo: ServerLoopback, bwrap: string, noProc: boolean): void {
  const tru = ["/usr/bin/true", "/bin/true"].find((p) => existsSync(p)) ?? "/bin/true";
  const sandbox = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-user", "--unshare-pid", "--unshare-ipc"];
  if (!noProc) sandbox.push("--proc", "/proc");
  sandbox.push("--cap-drop", "ALL", "--die-with-parent", "--", tru);
  const joined = joinLoopbackArgv(lo, sandbox);
  const stdio: (number | "ignore" | "pipe")[] = ["ignore", "ignore", "pipe"];
  for (const [at, fd] of joined.fds) {
    for (let i = 0; i < at; i++) stdio[i] ??= "ignore";
    stdio[at] = fd;
  }
  const r = Bun.spawnSync(joined.argv, { stdio: stdio as never, env: { PATH: "/usr/bin:/bin" } });
  if (r.exitCode !== 0) {
    const why = (r.stderr?.toString() ?? "").trim().split("\n").pop() || `exit ${r.exitCode ?? r.signalCode}`;
    throw new Error(`a sandbox cannot be started in it: ${why}`);
  }
}

/** Read `fd` until a newline or EOF (at most 4 KiB): the text before the newline. */
function readLine(fd: number): string {
  const buf = Buffer.alloc(4096);
  let len = 0;
  while (len < buf.length) {
    const n = readSync(fd, buf, len, buf.length - len, null);
    if (n === 0) break;
    len += n;
    if (buf.subarray(0, len).includes(10)) break;
  }
  const text = buf.subarray(0, len).toString();
  const nl = text.indexOf("\n");
  return nl < 0 ? text : text.slice(0, nl);
}

/** Reap `pid` (bwrap, about to end) without blocking this thread: polled until it has ended. */
function reapLater(pid: number, delay = 1): void {
  let st: libc.WaitStatus | undefined;
  try {
    st = libc.waitpidNoHang(pid);
  } catch {
    return; // not ours to reap any more
  }
  if (st === undefined) setTimeout(() => reapLater(pid, Math.min(delay * 2, 100)), delay).unref();
}

/**
 * Make the namespaces (see the module): a bwrap whose shell prints its pid and then waits on our pipe; its namespaces
 * opened by that pid while it waits; the pipe closed. Throws an `Error` saying what failed; checks that the network
 * namespace is not this process's and holds no interface but `lo`.
 */
function makeLoopback(bwrap: string): ServerLoopback {
  const [holdR, holdW] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
  let outR: number, outW: number;
  try {
    [outR, outW] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
  } catch (e) {
    libc.closeQuiet(holdR);
    libc.closeQuiet(holdW);
    throw e;
  }
  // Our copies of the child's ends, closed once it has started (or has failed to).
  const childEnds = [holdR, outW];
  const closeChildEnds = () => {
    for (const fd of childEnds.splice(0)) libc.closeQuiet(fd);
  };
  let pid: number | undefined;
  try {
    const sh = ["/bin/sh", "/usr/bin/sh"].find((p) => {
      try {
        return statSync(p).isFile();
      } catch {
        return false;
      }
    });
    if (sh === undefined) throw new Error("no /bin/sh for its holder");
    const argv = [
      bwrap,
      "--unshare-user",
      "--unshare-net",
      "--die-with-parent",
      "--ro-bind",
      "/",
      "/",
      "--cap-drop",
      "ALL",
      "--",
      sh,
      "-c",
      'echo "$$"; read -r _',
    ];
    pid = libc.spawn({
      path: bwrap,
      argv,
      env: [`PATH=/usr/bin:/bin`],
      fdMap: [
        [holdR, 0],
        [outW, 1],
        [outW, 2],
      ],
      closeFrom: 3,
    });
    closeChildEnds();
    const line = readLine(outR).trim();
    if (!/^[1-9][0-9]*$/.test(line)) throw new Error(`bubblewrap: ${line || "exited"}`);
    const userFd = openSync(`/proc/${line}/ns/user`, "r");
    let netFd: number;
    try {
      netFd = openSync(`/proc/${line}/ns/net`, "r");
    } catch (e) {
      closeSync(userFd);
      throw e;
    }
    try {
      const net = fstatSync(netFd).ino;
      if (net === statSync("/proc/self/ns/net").ino) throw new Error("its network namespace is this process's");
      if (fstatSync(userFd).ino === statSync("/proc/self/ns/user").ino) throw new Error("its user namespace is this process's");
      // /proc/net/dev: two header lines, then one line per interface ("  lo: …").
      const ifaces = readFileSync(`/proc/${line}/net/dev`, "utf8")
        .split("\n")
        .slice(2)
        .map((l) => l.split(":")[0]!.trim())
        .filter((n) => n !== "");
      if (ifaces.join(",") !== "lo") throw new Error(`its network has interfaces ${ifaces.join(", ")} (only lo expected)`);
      return { userFd, netFd, netInode: net };
    } catch (e) {
      closeSync(userFd);
      closeSync(netFd);
      throw e;
    }
  } finally {
    closeChildEnds();
    libc.closeQuiet(holdW); // the holder shell reads EOF and ends, and bwrap with it
    libc.closeQuiet(outR);
    if (pid !== undefined) reapLater(pid);
  }
}
