/**
 * libc bindings through `bun:ffi`: the only module that calls into C.
 *
 * Every binding is synchronous and may block the calling thread (use a Worker for blocking socket I/O on
 * the server side). Failures throw {@link ShellmcpError} with code `SYSCALL` and data
 * `{ call, errno, errname }`; `EINTR` is retried where noted. The library is opened lazily on first use and
 * symbols are bound per group, so the exec wrapper (the hottest path) pays only for what it calls.
 *
 * Linux (glibc, x86_64 and aarch64) is the supported target. On darwin the same names bind to libSystem;
 * Landlock/seccomp/prctl are Linux-only and throw there.
 */
import { dlopen, FFIType, ptr, read, toArrayBuffer, CString, type ConvertFns, type Pointer } from "bun:ffi";
import { readdirSync, readFileSync } from "node:fs";
import { ShellmcpError } from "../src/errors.ts";
import { archLayout, cmsgLen, cmsgSpace, hostArch, maxSignal, type ArchLayout, type SyscallName } from "./layout.ts";

/** Layout table of the running architecture. */
export const L: ArchLayout = archLayout(hostArch());

/** Constants re-exported for callers. */
export const SOCK = L.sock;

const { i16, i32, i64, ptr: P, u32, u64 } = FFIType;

/** Symbol groups. Binding is lazy per group: `dlopen` compiles a trampoline per symbol, which costs start-up. */
const GROUPS = {
  core: {
    __errno_location: { args: [], returns: P },
    close: { args: [i32], returns: i32 },
    getpid: { args: [], returns: i32 },
    getppid: { args: [], returns: i32 },
    strerror: { args: [i32], returns: P },
  },
  socket: {
    socketpair: { args: [i32, i32, i32, P], returns: i32 },
    sendmsg: { args: [i32, P, i32], returns: i64 },
    recvmsg: { args: [i32, P, i32], returns: i64 },
    fcntl: { args: [i32, i32, i64], returns: i32 },
    poll: { args: [P, u64, i32], returns: i32 },
    getsockopt: { args: [i32, i32, i32, P, P], returns: i32 },
  },
  listen: {
    socket: { args: [i32, i32, i32], returns: i32 },
    bind: { args: [i32, P, u32], returns: i32 },
    listen: { args: [i32, i32], returns: i32 },
  },
  exec: {
    execve: { args: [P, P, P], returns: i32 },
    sigaction: { args: [i32, P, P], returns: i32 },
    sigprocmask: { args: [i32, P, P], returns: i32 },
    dup2: { args: [i32, i32], returns: i32 },
    chdir: { args: [P], returns: i32 },
    setsid: { args: [], returns: i32 },
  },
  file: {
    flock: { args: [i32, i32], returns: i32 },
    pipe2: { args: [P, i32], returns: i32 },
    isatty: { args: [i32], returns: i32 },
  },
  spawn: {
    posix_spawn: { args: [P, P, P, P, P, P], returns: i32 },
    posix_spawn_file_actions_init: { args: [P], returns: i32 },
    posix_spawn_file_actions_destroy: { args: [P], returns: i32 },
    posix_spawn_file_actions_adddup2: { args: [P, i32, i32], returns: i32 },
    posix_spawn_file_actions_addopen: { args: [P, i32, P, i32, u32], returns: i32 },
    posix_spawn_file_actions_addchdir_np: { args: [P, P], returns: i32 },
    posix_spawn_file_actions_addclose: { args: [P, i32], returns: i32 },
    posix_spawnattr_init: { args: [P], returns: i32 },
    posix_spawnattr_destroy: { args: [P], returns: i32 },
    posix_spawnattr_setflags: { args: [P, i16], returns: i32 },
    posix_spawnattr_setpgroup: { args: [P, i32], returns: i32 },
    posix_spawnattr_setsigdefault: { args: [P, P], returns: i32 },
    posix_spawnattr_setsigmask: { args: [P, P], returns: i32 },
    sigfillset: { args: [P], returns: i32 },
    sigemptyset: { args: [P], returns: i32 },
    waitpid: { args: [i32, P, i32], returns: i32 },
    kill: { args: [i32, i32], returns: i32 },
  },
  // glibc ≥ 2.34 only (bullseye has 2.31): bound on its own so that its absence leaves `spawn` working.
  spawnClosefrom: {
    posix_spawn_file_actions_addclosefrom_np: { args: [P, i32], returns: i32 },
  },
  pty: {
    posix_openpt: { args: [i32], returns: i32 },
    grantpt: { args: [i32], returns: i32 },
    unlockpt: { args: [i32], returns: i32 },
    ptsname_r: { args: [i32, P, u64], returns: i32 },
    open: { args: [P, i32], returns: i32 },
    ioctl: { args: [i32, u64, P], returns: i32 },
  },
  kernel: {
    prctl: { args: [i64, u64, u64, u64, u64], returns: i32 },
    // Variadic in C: declare all six argument slots so none is left holding garbage.
    syscall: { args: [i64, i64, i64, i64, i64, i64, i64], returns: i64 },
  },
} as const;

type Groups = typeof GROUPS;
type Bound<G extends keyof Groups> = ConvertFns<Groups[G]>;

const LIBC_PATH = process.platform === "darwin" ? "/usr/lib/libSystem.B.dylib" : "libc.so.6";
const bound: { [G in keyof Groups]?: Bound<G> } = {};

function sym<G extends keyof Groups>(g: G): Bound<G> {
  let s = bound[g] as Bound<G> | undefined;
  if (s === undefined) {
    s = dlopen(LIBC_PATH, GROUPS[g]).symbols as unknown as Bound<G>;
    (bound as Record<string, unknown>)[g] = s;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------------------
// errno

/** Common errno values (Linux numbering). */
export const ERRNO = {
  EPERM: 1,
  ENOENT: 2,
  EINTR: 4,
  EBADF: 9,
  EAGAIN: 11,
  EACCES: 13,
  EINVAL: 22,
  ENOEXEC: 8,
  EPIPE: 32,
  ENOSYS: 38,
  EOPNOTSUPP: 95,
  ECONNREFUSED: 111,
  ECHILD: 10,
  ESRCH: 3,
  ENOTCONN: 107,
  ENOTSOCK: 88,
} as const;

const ERRNAMES: Record<number, string> = Object.fromEntries(Object.entries(ERRNO).map(([k, v]) => [v, k]));

/** Current thread's `errno`. Read it immediately after the failing call. */
export function errno(): number {
  const p = sym("core").__errno_location();
  return p === null ? 0 : read.i32(p, 0);
}

/** `strerror(e)` from libc, e.g. `No such file or directory`. */
export function strerror(e: number): string {
  const p = sym("core").strerror(e);
  return p === null ? `errno ${e}` : new CString(p).toString();
}

/** Symbolic name (`ENOENT`) of an errno, or `E<number>` for ones not in {@link ERRNO}. */
export function errname(e: number): string {
  return ERRNAMES[e] ?? `E${e}`;
}

/** Build the `SYSCALL` error for a failed `call` with the current errno. */
export function sysError(call: string, e: number = errno()): ShellmcpError {
  return new ShellmcpError("SYSCALL", `${call}: ${strerror(e)} (os error ${e})`, { call, errno: e, errname: errname(e) });
}

function check(call: string, rc: number | bigint): number {
  const n = Number(rc);
  if (n < 0) throw sysError(call);
  return n;
}

// ---------------------------------------------------------------------------------------------------------
// process

/** `getpid()`. */
export function getpid(): number {
  return sym("core").getpid();
}

/** `getppid()`. */
export function getppid(): number {
  return sym("core").getppid();
}

/** `close(fd)`. EBADF throws; EINTR is treated as closed (Linux always releases the fd). */
export function close(fd: number): void {
  if (sym("core").close(fd) < 0) {
    const e = errno();
    if (e !== ERRNO.EINTR) throw sysError(`close(${fd})`, e);
  }
}

/** Close `fd`, ignoring every error (for cleanup paths). */
export function closeQuiet(fd: number): void {
  sym("core").close(fd);
}

// ---------------------------------------------------------------------------------------------------------
// fds and sockets

/** `socketpair(domain, type, 0)` → `[fd0, fd1]`. `type` may include `SOCK_CLOEXEC`/`SOCK_NONBLOCK`. */
export function socketpair(domain: number, type: number): [number, number] {
  const out = new Int32Array(2);
  check("socketpair", sym("socket").socketpair(domain, type, 0, out));
  return [out[0]!, out[1]!];
}

/** `fcntl(fd, cmd, arg)` → result. */
export function fcntl(fd: number, cmd: number, arg = 0): number {
  return check(`fcntl(${fd}, ${cmd})`, sym("socket").fcntl(fd, cmd, arg));
}

/** Set or clear `FD_CLOEXEC` on `fd`. */
export function setCloexec(fd: number, on: boolean): void {
  const flags = fcntl(fd, SOCK.F_GETFD);
  fcntl(fd, SOCK.F_SETFD, on ? flags | SOCK.FD_CLOEXEC : flags & ~SOCK.FD_CLOEXEC);
}

/** Whether `FD_CLOEXEC` is set on `fd`. */
export function getCloexec(fd: number): boolean {
  return (fcntl(fd, SOCK.F_GETFD) & SOCK.FD_CLOEXEC) !== 0;
}

/** Set or clear `O_NONBLOCK` on `fd`. */
export function setNonblock(fd: number, on: boolean): void {
  const flags = fcntl(fd, SOCK.F_GETFL);
  fcntl(fd, SOCK.F_SETFL, on ? flags | SOCK.O_NONBLOCK : flags & ~SOCK.O_NONBLOCK);
}

/** `dup2(oldfd, newfd)` → newfd (retries EINTR/EBUSY races are not retried: they throw). */
export function dup2(oldfd: number, newfd: number): number {
  return check(`dup2(${oldfd}, ${newfd})`, sym("exec").dup2(oldfd, newfd));
}

/** `AF_INET` (Linux and darwin). */
export const AF_INET = 2;

/**
 * A listening TCP socket on `127.0.0.1:port` (Linux `sockaddr_in` layout: family, big-endian port, address, zero
 * padding) with `backlog` pending connections; `SOCK_CLOEXEC`. Throws `SYSCALL` (e.g. `EADDRINUSE`); the socket
 * is closed on failure. Used inside a network namespace for the proxy bridge (src/network/bridge.ts).
 */
export function listenLoopbackTcp(port: number, backlog: number): number {
  const fd = check("socket", sym("listen").socket(AF_INET, SOCK.SOCK_STREAM | SOCK.SOCK_CLOEXEC, 0));
  try {
    const sa = new Uint8Array(16);
    const v = new DataView(sa.buffer);
    v.setUint16(0, AF_INET, true);
    v.setUint16(2, port, false);
    sa.set([127, 0, 0, 1], 4);
    check("bind", sym("listen").bind(fd, sa, 16));
    check("listen", sym("listen").listen(fd, backlog));
  } catch (e) {
    closeQuiet(fd);
    throw e;
  }
  return fd;
}

/** Maximum fds in one `SCM_RIGHTS` message, as Codex (`too many fds`). */
export const MAX_FDS_PER_MESSAGE = 16;

/**
 * `sendmsg(fd, [data], SCM_RIGHTS fds, flags)` → bytes sent (may be fewer than `data.length` on a stream
 * socket). `fds` must hold at most {@link MAX_FDS_PER_MESSAGE}. EINTR is retried; EAGAIN throws (callers using
 * non-blocking sockets catch `errname === "EAGAIN"`).
 */
export function sendmsg(fd: number, data: Uint8Array, fds: readonly number[] = [], flags: number = SOCK.MSG_NOSIGNAL): number {
  if (fds.length > MAX_FDS_PER_MESSAGE) {
    throw new ShellmcpError("PROTOCOL", `too many fds: ${fds.length}`, { fds: fds.length });
  }
  const iov = new Uint8Array(L.iovec.size);
  const iovView = new DataView(iov.buffer);
  // A zero-length buffer has no stable address; keep one byte behind it.
  const payload = data.byteLength === 0 ? new Uint8Array(1) : data;
  iovView.setBigUint64(L.iovec.offsets.iov_base!, BigInt(ptr(payload)), true);
  iovView.setBigUint64(L.iovec.offsets.iov_len!, BigInt(data.byteLength), true);

  const msg = new Uint8Array(L.msghdr.size);
  const mv = new DataView(msg.buffer);
  mv.setBigUint64(L.msghdr.offsets.msg_iov!, BigInt(ptr(iov)), true);
  writeSizeT(mv, L.msghdr.offsets.msg_iovlen!, 1, L.arch);

  let control: Uint8Array | undefined;
  if (fds.length > 0) {
    const dataBytes = fds.length * 4;
    control = new Uint8Array(cmsgSpace(L, dataBytes));
    const cv = new DataView(control.buffer);
    writeSizeT(cv, L.cmsghdr.offsets.cmsg_len!, cmsgLen(L, dataBytes), L.arch);
    cv.setInt32(L.cmsghdr.offsets.cmsg_level!, SOCK.SOL_SOCKET, true);
    cv.setInt32(L.cmsghdr.offsets.cmsg_type!, SOCK.SCM_RIGHTS, true);
    fds.forEach((f, i) => cv.setInt32(L.cmsgDataOffset + i * 4, f, true));
    mv.setBigUint64(L.msghdr.offsets.msg_control!, BigInt(ptr(control)), true);
    writeSizeT(mv, L.msghdr.offsets.msg_controllen!, control.byteLength, L.arch);
  }
  for (;;) {
    const rc = Number(sym("socket").sendmsg(fd, msg, flags));
    if (rc >= 0) {
      keepAlive(payload, iov, control);
      return rc;
    }
    const e = errno();
    if (e !== ERRNO.EINTR) throw sysError("sendmsg", e);
  }
}

/** Result of {@link recvmsg}: the bytes read (empty at EOF on a stream socket), received fds, `msg_flags`. */
export interface Received {
  bytes: Uint8Array;
  fds: number[];
  flags: number;
}

/**
 * `recvmsg(fd)` reading up to `maxBytes` and up to `maxFds` `SCM_RIGHTS` fds. Received fds get
 * `FD_CLOEXEC` atomically (`MSG_CMSG_CLOEXEC`) so they never leak into children by accident. If the control
 * data was truncated (`MSG_CTRUNC`) the fds that did arrive are closed and this throws `PROTOCOL`.
 * EINTR is retried; EAGAIN throws. `scratch` (at least `maxBytes` long): read into it and return a copy of what
 * arrived, instead of a view of a new `maxBytes` buffer (a loop reading large chunks then allocates, zeroes and
 * keeps alive only what it received; the escalation worker's reads: issue 40).
 */
export function recvmsg(fd: number, maxBytes: number, maxFds = 0, flags = 0, scratch?: Uint8Array): Received {
  const buf = scratch !== undefined && scratch.byteLength >= maxBytes ? scratch : new Uint8Array(Math.max(1, maxBytes));
  const iov = new Uint8Array(L.iovec.size);
  const iovView = new DataView(iov.buffer);
  iovView.setBigUint64(L.iovec.offsets.iov_base!, BigInt(ptr(buf)), true);
  iovView.setBigUint64(L.iovec.offsets.iov_len!, BigInt(maxBytes), true);

  const msg = new Uint8Array(L.msghdr.size);
  const mv = new DataView(msg.buffer);
  mv.setBigUint64(L.msghdr.offsets.msg_iov!, BigInt(ptr(iov)), true);
  writeSizeT(mv, L.msghdr.offsets.msg_iovlen!, 1, L.arch);
  // Always leave room for fds: a peer may send some we did not ask for; we must close them, not leak them.
  const control = new Uint8Array(cmsgSpace(L, Math.max(maxFds, MAX_FDS_PER_MESSAGE) * 4));
  mv.setBigUint64(L.msghdr.offsets.msg_control!, BigInt(ptr(control)), true);
  writeSizeT(mv, L.msghdr.offsets.msg_controllen!, control.byteLength, L.arch);

  let rc: number;
  for (;;) {
    rc = Number(sym("socket").recvmsg(fd, msg, flags | SOCK.MSG_CMSG_CLOEXEC));
    if (rc >= 0) break;
    const e = errno();
    if (e !== ERRNO.EINTR) throw sysError("recvmsg", e);
  }
  const msgFlags = mv.getInt32(L.msghdr.offsets.msg_flags!, true);
  const fds = parseRights(control, readSizeT(mv, L.msghdr.offsets.msg_controllen!, L.arch));
  keepAlive(buf, iov, control);
  if ((msgFlags & SOCK.MSG_CTRUNC) !== 0) {
    fds.forEach(closeQuiet);
    throw new ShellmcpError("PROTOCOL", "control data truncated: too many fds in one message", { fds: fds.length });
  }
  if (fds.length > maxFds) {
    fds.forEach(closeQuiet);
    throw new ShellmcpError("PROTOCOL", `unexpected fds in receive: ${fds.length}`, { fds: fds.length });
  }
  return { bytes: buf === scratch ? buf.slice(0, rc) : buf.subarray(0, rc), fds, flags: msgFlags };
}

function parseRights(control: Uint8Array, controlLen: number): number[] {
  const cv = new DataView(control.buffer, control.byteOffset, control.byteLength);
  const fds: number[] = [];
  let at = 0;
  while (at + L.cmsgDataOffset <= controlLen) {
    const len = readSizeT(cv, at + L.cmsghdr.offsets.cmsg_len!, L.arch);
    if (len < L.cmsgDataOffset) break;
    const level = cv.getInt32(at + L.cmsghdr.offsets.cmsg_level!, true);
    const type = cv.getInt32(at + L.cmsghdr.offsets.cmsg_type!, true);
    if (level === SOCK.SOL_SOCKET && type === SOCK.SCM_RIGHTS) {
      const n = Math.floor((len - L.cmsgDataOffset) / 4);
      for (let i = 0; i < n; i++) fds.push(cv.getInt32(at + L.cmsgDataOffset + i * 4, true));
    }
    at += Math.ceil(len / L.cmsgAlign) * L.cmsgAlign;
  }
  return fds;
}

/** poll(2) event bits. */
export const POLL = { IN: 0x1, PRI: 0x2, OUT: 0x4, ERR: 0x8, HUP: 0x10, NVAL: 0x20 } as const;

/**
 * `poll(fds, timeoutMs)` → `revents` per entry (0 when not ready). `timeoutMs` -1 blocks. EINTR returns all
 * zeros (the caller loops).
 */
export function poll(entries: readonly { fd: number; events: number }[], timeoutMs: number): number[] {
  const size = L.pollfd.size;
  const buf = new Uint8Array(Math.max(1, entries.length * size));
  const v = new DataView(buf.buffer);
  entries.forEach((e, i) => {
    v.setInt32(i * size + L.pollfd.offsets.fd!, e.fd, true);
    v.setInt16(i * size + L.pollfd.offsets.events!, e.events, true);
  });
  const rc = sym("socket").poll(buf, entries.length, timeoutMs);
  if (rc < 0) {
    const e = errno();
    if (e === ERRNO.EINTR) return entries.map(() => 0);
    throw sysError("poll", e);
  }
  return entries.map((_, i) => v.getUint16(i * size + L.pollfd.offsets.revents!, true));
}

// ---------------------------------------------------------------------------------------------------------
// signals and exec

const SIG_SETMASK = process.platform === "darwin" ? 3 : 2;
const SIGKILL = 9;
const SIGSTOP = process.platform === "darwin" ? 17 : 19;

/**
 * Reset every signal disposition to `SIG_DFL` and unblock every signal, for the calling thread. Run right
 * before `execve` of a user program: Bun ignores `SIGPIPE` (and may block others), and ignored dispositions
 * and the mask survive `execve` (so `yes | head -1` would never die of SIGPIPE).
 * Signals libc refuses (SIGKILL, SIGSTOP, glibc's internal 32/33) are skipped.
 */
export function resetSignals(): void {
  const s = sym("exec");
  const act = new Uint8Array(L.sigaction.size); // handler = SIG_DFL (0), empty mask, no flags
  for (let sig = 1; sig <= maxSignal(L.arch); sig++) {
    if (sig === SIGKILL || sig === SIGSTOP) continue;
    s.sigaction(sig, act, null); // EINVAL for reserved signals: nothing to reset
  }
  const empty = new Uint8Array(L.sigsetBytes);
  if (s.sigprocmask(SIG_SETMASK, empty, null) < 0) throw sysError("sigprocmask");
}

/** A C string argument: a JS string (UTF-8 encoded) or raw bytes (no NUL). */
export type CStr = string | Uint8Array;

function cstr(s: CStr, what: string): Buffer {
  const b = typeof s === "string" ? Buffer.from(s, "utf8") : Buffer.from(s);
  if (b.includes(0)) throw new ShellmcpError("USAGE", `${what} contains a NUL byte`, { what });
  return Buffer.concat([b, Buffer.from([0])]);
}

function cstrArray(items: readonly CStr[], what: string): { array: BigUint64Array; keep: Buffer[] } {
  const keep = items.map((s) => cstr(s, what));
  const array = new BigUint64Array(keep.length + 1);
  keep.forEach((b, i) => (array[i] = BigInt(ptr(b))));
  return { array, keep };
}

/**
 * `execve(path, argv, env)`: replaces the process image; returns only by throwing the `SYSCALL` error
 * (data.errno, e.g. ENOENT, EACCES, ENOEXEC). `env` is a list of `KEY=VALUE` entries or a record.
 * Does not reset signals: call {@link resetSignals} first.
 */
export function execve(path: CStr, argv: readonly CStr[], env: readonly CStr[] | Record<string, string>): never {
  const envList: CStr[] = Array.isArray(env) ? (env as CStr[]) : Object.entries(env).map(([k, v]) => `${k}=${v}`);
  const p = cstr(path, "path");
  const a = cstrArray(argv, "argv");
  const e = cstrArray(envList, "env");
  sym("exec").execve(p, a.array, e.array);
  const err = errno();
  keepAlive(p, a.keep, e.keep);
  throw sysError(`execve(${typeof path === "string" ? path : Buffer.from(path).toString()})`, err);
}

// ---------------------------------------------------------------------------------------------------------
// Linux kernel interfaces

/** `prctl` options used by shellmcp. */
export const PR = {
  SET_PDEATHSIG: 1,
  SET_DUMPABLE: 4,
  GET_NO_NEW_PRIVS: 39,
  SET_NO_NEW_PRIVS: 38,
  SET_SECCOMP: 22,
  CAPBSET_DROP: 24,
  SET_CHILD_SUBREAPER: 36,
  CAP_AMBIENT: 47,
} as const;

/** `PR_CAP_AMBIENT_CLEAR_ALL`, the `prctl(PR_CAP_AMBIENT, …)` operation that empties the ambient set. */
export const PR_CAP_AMBIENT_CLEAR_ALL = 4;

/**
 * Give up every capability for good (Linux): drop each one from the bounding set (needs CAP_SETPCAP, so only a
 * process that has it, e.g. root, can; one that lacks it has nothing to lose there and is left as is), clear the
 * ambient set, then set the effective, permitted and inheritable sets to empty with `capset(2)`. After this, an
 * exec — of a root-owned or setuid program, as root or not — gains no capability. Throws `SYSCALL` when capset
 * fails.
 */
export function dropAllCapabilities(): void {
  let last = 40;
  try {
    last = Number(readFileSync("/proc/sys/kernel/cap_last_cap", "utf8").trim());
  } catch {
    // older kernels: 40 covers every capability they know
  }
  for (let cap = 0; cap <= last; cap++) {
    try {
      prctl(PR.CAPBSET_DROP, cap);
    } catch {
      break; // EPERM: no CAP_SETPCAP (not root), nothing in reach to drop
    }
  }
  try {
    prctl(PR.CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL);
  } catch {
    // kernel without ambient capabilities (< 4.3): nothing ambient to clear
  }
  const header = new Uint32Array([0x20080522, 0]); // _LINUX_CAPABILITY_VERSION_3, this process
  const data = new Uint32Array(6); // two { effective, permitted, inheritable }: all empty
  syscall("capset", syscallNumber("capset"), header, data);
}

/** `CLONE_NEWPID` (<linux/sched.h>): a new pid namespace for the children the calling thread creates next. */
export const CLONE_NEWPID = 0x20000000;

/**
 * `unshare(flags)` on the calling thread (Linux). With {@link CLONE_NEWPID} the caller stays where it is and its
 * next child becomes pid 1 of a new pid namespace; that needs CAP_SYS_ADMIN (root, or a user namespace of its
 * own). Throws `SYSCALL` with errno (EPERM without the capability, EINVAL for flags a multi-threaded process may
 * not unshare, e.g. CLONE_NEWUSER).
 */
export function unshare(flags: number): void {
  syscall("unshare", syscallNumber("unshare"), flags);
}

/**
 * `setns(fd, nstype)` (Linux): join the namespace `fd` refers to. For a pid namespace (`CLONE_NEWPID`) this sets
 * the namespace of the thread's next children only; joining the caller's own (`/proc/thread-self/ns/pid`) undoes an
 * {@link unshare}. Needs CAP_SYS_ADMIN. Throws `SYSCALL` with errno.
 */
export function setns(fd: number, nstype: number): void {
  syscall("setns", syscallNumber("setns"), fd, nstype);
}

/** `prctl(option, a2, a3, a4, a5)` → result. Linux only. */
export function prctl(option: number, a2 = 0, a3 = 0, a4 = 0, a5 = 0): number {
  if (process.platform !== "linux") throw new ShellmcpError("SYSCALL", "prctl is Linux-only", { call: "prctl" });
  return check(`prctl(${option})`, sym("kernel").prctl(option, a2, a3, a4, a5));
}

/** Argument of a raw syscall: a number, bigint, or a buffer whose address is passed. */
export type SyscallArg = number | bigint | NodeJS.TypedArray | DataView | null;

/**
 * The number of syscall `name` on this host, from the one table in ffi/layout.ts. Throws `SYSCALL` when this
 * OS has no such syscall (e.g. pidfds on macOS).
 */
export function syscallNumber(name: SyscallName): number {
  const nr = L.sys[name];
  if (nr === undefined) throw new ShellmcpError("SYSCALL", `${name} is not available on ${process.platform}`, { call: name });
  return nr;
}

/**
 * Raw `syscall(nr, a1..a6)` → result (≥ 0). Missing arguments are passed as 0 (libc's `syscall` is variadic,
 * and a short declaration leaves garbage in later registers: EINVAL). Throws `SYSCALL` with errno on -1.
 */
export function syscall(name: string, nr: number, ...args: SyscallArg[]): number {
  const a: (number | bigint)[] = [];
  const keep: (NodeJS.TypedArray | DataView)[] = [];
  for (let i = 0; i < 6; i++) {
    const x = args[i];
    if (x === undefined || x === null) a.push(0);
    else if (typeof x === "number" || typeof x === "bigint") a.push(x);
    else {
      keep.push(x);
      a.push(ptr(x));
    }
  }
  const rc = sym("kernel").syscall(nr, a[0]!, a[1]!, a[2]!, a[3]!, a[4]!, a[5]!);
  const n = Number(rc);
  if (n < 0) throw sysError(name);
  keepAlive(keep);
  return n;
}

// ---------------------------------------------------------------------------------------------------------
// helpers

function writeSizeT(v: DataView, off: number, n: number, arch: string): void {
  if (arch.startsWith("linux")) v.setBigUint64(off, BigInt(n), true);
  else v.setUint32(off, n, true);
}

function readSizeT(v: DataView, off: number, arch: string): number {
  return arch.startsWith("linux") ? Number(v.getBigUint64(off, true)) : v.getUint32(off, true);
}

/** Keep buffers reachable until after a foreign call has used their addresses. */
function keepAlive(..._xs: unknown[]): void {}

/** Address of a buffer, for code that lays out its own structs (e.g. Landlock attrs). */
export function addressOf(b: NodeJS.TypedArray | DataView): Pointer {
  return ptr(b);
}

// ---------------------------------------------------------------------------------------------------------
// process creation and reaping

/** What {@link spawn} runs and how. */
export interface SpawnSpec {
  /** Program path (no PATH search). */
  path: CStr;
  /** Full argv including argv[0]. */
  argv: readonly CStr[];
  /** Environment entries `KEY=VALUE`. */
  env: readonly CStr[];
  /** Working directory of the child (chdir before exec). */
  cwd?: string;
  /** `[source fd in this process, destination fd in the child]`; sources must not be destinations of others. */
  fdMap?: readonly (readonly [number, number])[];
  /** Destination fds among 0, 1, 2 that get /dev/null when `fdMap` does not provide them. */
  devNullStdio?: boolean;
  /** Close every fd at or above this number in the child (after the dups). Default 3; `false`: close none (the
   * child inherits every fd not marked close-on-exec, as with a plain exec). */
  closeFrom?: number | false;
  /** Process group: 0 = a new group led by the child; a pid = join that group; undefined = inherit. */
  pgroup?: number;
  /** `setsid()` in the child (new session and group). */
  setsid?: boolean;
}

const POSIX_SPAWN_SETPGROUP = 0x02;
const POSIX_SPAWN_SETSIGDEF = 0x04;
const POSIX_SPAWN_SETSIGMASK = 0x08;
const POSIX_SPAWN_SETSID = 0x80;
const O_RDWR = 2;
/** Generous upper bounds of glibc's opaque types (336 and 80 bytes on x86_64/aarch64). */
const SPAWNATTR_BYTES = 1024;
const FILE_ACTIONS_BYTES = 512;

function spawnCheck(call: string, rc: number): void {
  // posix_spawn* return the error number instead of setting errno.
  if (rc !== 0) throw sysError(call, rc);
}

/** A {@link SpawnSpec} turned into posix_spawn's arguments: {@link PreparedSpawn.start} then only calls posix_spawn. */
export interface PreparedSpawn {
  /** posix_spawn with the prepared arguments → the child's pid. No JS allocation before the call. Throws `SYSCALL`. */
  start(): number;
  /** Free the attribute and file-action objects (once, after the last start). */
  dispose(): void;
}

/** Whether libc has `posix_spawn_file_actions_addclosefrom_np` (glibc ≥ 2.34); undefined until first asked. */
let hasCloseFrom: boolean | undefined;

/**
 * For tests: make {@link spawn} close fds as on a libc without `posix_spawn_file_actions_addclosefrom_np` (`false`),
 * or probe libc again (`undefined`).
 */
export function setSpawnCloseFromForTest(available: boolean | undefined): void {
  hasCloseFrom = available;
}

/**
 * Add "close every fd ≥ `from`" to `fa`: `posix_spawn_file_actions_addclosefrom_np` where libc has it (glibc ≥
 * 2.34), else one `addclose` per fd this process has open at or above `from` (read from `/proc/self/fd`), except
 * the dup2 destinations in `keep`. glibc ignores EBADF for a close action, so an fd closed meanwhile is harmless;
 * one opened meanwhile by another thread is not in the list, but Bun opens its fds close-on-exec.
 */
function addCloseFrom(fa: Uint8Array, from: number, keep: ReadonlySet<number>): void {
  if (hasCloseFrom === undefined) {
    try {
      sym("spawnClosefrom");
      hasCloseFrom = true;
    } catch {
      hasCloseFrom = false;
    }
  }
  if (hasCloseFrom) {
    spawnCheck("posix_spawn_file_actions_addclosefrom_np", sym("spawnClosefrom").posix_spawn_file_actions_addclosefrom_np(fa, from));
    return;
  }
  const s = sym("spawn");
  for (const name of readdirSync(process.platform === "darwin" ? "/dev/fd" : "/proc/self/fd")) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd < from || keep.has(fd)) continue;
    spawnCheck("posix_spawn_file_actions_addclose", s.posix_spawn_file_actions_addclose(fa, fd));
  }
}

/**
 * Everything {@link spawn} does before its posix_spawn call, so that the call itself can happen in a window where
 * nothing else may run on this thread (e.g. between `unshare(CLONE_NEWPID)` and the `setns` that undoes it, when
 * the thread must not create threads). Throws `SYSCALL` when an attribute cannot be set.
 */
export function prepareSpawn(spec: SpawnSpec): PreparedSpawn {
  const s = sym("spawn");
  const fa = new Uint8Array(FILE_ACTIONS_BYTES);
  const attr = new Uint8Array(SPAWNATTR_BYTES);
  spawnCheck("posix_spawn_file_actions_init", s.posix_spawn_file_actions_init(fa));
  spawnCheck("posix_spawnattr_init", s.posix_spawnattr_init(attr));
  const keep: unknown[] = [];
  const dispose = () => {
    s.posix_spawn_file_actions_destroy(fa);
    s.posix_spawnattr_destroy(attr);
  };
  try {
    const mapped = new Set<number>();
    for (const [src, dst] of spec.fdMap ?? []) {
      spawnCheck("posix_spawn_file_actions_adddup2", s.posix_spawn_file_actions_adddup2(fa, src, dst));
      mapped.add(dst);
    }
    if (spec.devNullStdio) {
      const devNull = cstr("/dev/null", "path");
      keep.push(devNull);
      for (const fd of [0, 1, 2]) {
        if (!mapped.has(fd)) spawnCheck("posix_spawn_file_actions_addopen", s.posix_spawn_file_actions_addopen(fa, fd, devNull, O_RDWR, 0));
      }
    }
    if (spec.closeFrom !== false) addCloseFrom(fa, spec.closeFrom ?? 3, mapped);
    if (spec.cwd !== undefined) {
      const cwd = cstr(spec.cwd, "cwd");
      keep.push(cwd);
      spawnCheck("posix_spawn_file_actions_addchdir_np", s.posix_spawn_file_actions_addchdir_np(fa, cwd));
    }
    let flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
    const all = new Uint8Array(L.sigsetBytes);
    const none = new Uint8Array(L.sigsetBytes);
    s.sigfillset(all);
    s.sigemptyset(none);
    keep.push(all, none);
    spawnCheck("posix_spawnattr_setsigdefault", s.posix_spawnattr_setsigdefault(attr, all));
    spawnCheck("posix_spawnattr_setsigmask", s.posix_spawnattr_setsigmask(attr, none));
    if (spec.setsid) flags |= POSIX_SPAWN_SETSID;
    else if (spec.pgroup !== undefined) {
      flags |= POSIX_SPAWN_SETPGROUP;
      spawnCheck("posix_spawnattr_setpgroup", s.posix_spawnattr_setpgroup(attr, spec.pgroup));
    }
    spawnCheck("posix_spawnattr_setflags", s.posix_spawnattr_setflags(attr, flags));

    const path = cstr(spec.path, "path");
    const argv = cstrArray(spec.argv, "argv");
    const env = cstrArray(spec.env, "env");
    const pid = new Int32Array(1);
    const what = `posix_spawn(${typeof spec.path === "string" ? spec.path : Buffer.from(spec.path).toString()})`;
    return {
      start(): number {
        const rc = s.posix_spawn(pid, path, fa, attr, argv.array, env.array);
        keepAlive(path, argv.keep, env.keep, keep);
        spawnCheck(what, rc);
        return pid[0]!;
      },
      dispose,
    };
  } catch (e) {
    dispose();
    throw e;
  }
}

/**
 * Start a program with exact control over its fds, signals, process group and cwd, via glibc's
 * `posix_spawn` (clone+exec; no fork of this multi-threaded process). In the child: every signal disposition is
 * reset to default and the mask cleared (Bun ignores SIGPIPE), `fdMap` dups are applied, 0/1/2 not mapped get
 * /dev/null when `devNullStdio`, every other fd ≥ `closeFrom` is closed (nothing of ours leaks), then chdir and
 * exec. Returns the child's pid; throws `SYSCALL` (e.g. ENOENT for a missing program or cwd).
 */
export function spawn(spec: SpawnSpec): number {
  const p = prepareSpawn(spec);
  try {
    return p.start();
  } finally {
    p.dispose();
  }
}

/** How a child ended: `code` for a normal exit, `signal` for death by a signal. */
export type WaitStatus = { code: number; signal?: undefined } | { code?: undefined; signal: number };

/** `waitpid(pid, WNOHANG)`: the status if the child has ended, undefined if it still runs. Throws ECHILD etc. */
export function waitpidNoHang(pid: number): WaitStatus | undefined {
  const status = new Int32Array(1);
  for (;;) {
    const rc = sym("spawn").waitpid(pid, status, 1 /* WNOHANG */);
    if (rc === 0) return undefined;
    if (rc > 0) {
      const st = status[0]!;
      const sig = st & 0x7f;
      return sig === 0 ? { code: (st >> 8) & 0xff } : { signal: sig };
    }
    const e = errno();
    if (e !== ERRNO.EINTR) throw sysError(`waitpid(${pid})`, e);
  }
}

/** `kill(pid, sig)`; a negative pid signals a process group. ESRCH (already gone) is not an error. */
export function kill(pid: number, sig: number): void {
  if (sym("spawn").kill(pid, sig) < 0) {
    const e = errno();
    if (e !== ERRNO.ESRCH) throw sysError(`kill(${pid}, ${sig})`, e);
  }
}

/** `pidfd_open(pid)`: an fd that polls readable when the process ends (Linux 5.3+). CLOEXEC. */
export function pidfdOpen(pid: number): number {
  return syscall("pidfd_open", syscallNumber("pidfd_open"), pid, 0);
}

/**
 * `pidfd_send_signal(pidfd, sig, NULL, 0)` (Linux 5.1+): signal exactly the process behind `pidfd`, never a
 * process that reused its pid. ESRCH (it has exited) is not an error.
 */
export function pidfdSendSignal(pidfd: number, sig: number): void {
  try {
    syscall("pidfd_send_signal", syscallNumber("pidfd_send_signal"), pidfd, sig, 0, 0);
  } catch (e) {
    if (!(e instanceof ShellmcpError && e.data.errno === ERRNO.ESRCH)) throw e;
  }
}

// ---------------------------------------------------------------------------------------------------------
// the process's own environment block

/**
 * Overwrite, in this process's initial environment block (what `/proc/<pid>/environ` shows), the value of every
 * variable for which `scrub(name)` is true, with NUL bytes. Linux only (the block's bounds are fields 50–51 of
 * `/proc/self/stat`). Returns the names scrubbed. The runtime's own copy (`process.env`) is not touched; C
 * `getenv` sees an empty value afterwards. Throws `SYSCALL`-free errors only for an unreadable `/proc`.
 */
export function scrubInitialEnviron(scrub: (name: string) => boolean): string[] {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields from 3 on
  const start = Number(fields[50 - 3]);
  const end = Number(fields[51 - 3]);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || end <= start) return [];
  const block = new Uint8Array(toArrayBuffer(start as unknown as Pointer, 0, end - start));
  const done: string[] = [];
  let i = 0;
  while (i < block.length) {
    let j = block.indexOf(0, i);
    if (j < 0) j = block.length;
    const eq = block.indexOf(0x3d, i);
    if (eq > i && eq < j) {
      const name = new TextDecoder().decode(block.subarray(i, eq));
      if (scrub(name)) {
        block.fill(0, eq + 1, j);
        done.push(name);
      }
    }
    i = j + 1;
  }
  return done;
}

// ---------------------------------------------------------------------------------------------------------
// advisory locks

/** `flock(2)` operations. */
export const LOCK = { SH: 1, EX: 2, NB: 4, UN: 8 } as const;

/** `flock(fd, op)`; retries EINTR. Throws `SYSCALL` (EWOULDBLOCK with `LOCK.NB` when held). */
export function flock(fd: number, op: number): void {
  for (;;) {
    if (sym("file").flock(fd, op) === 0) return;
    const e = errno();
    if (e !== ERRNO.EINTR) throw sysError(`flock(${fd}, ${op})`, e);
  }
}

/** Whether `fd` refers to a terminal (`isatty(3)`: 1 for a tty, 0 otherwise, including a closed fd). */
export function isatty(fd: number): boolean {
  return sym("file").isatty(fd) === 1;
}

/** `pipe2(flags)` → `[readEnd, writeEnd]` (e.g. `O_CLOEXEC` = `SOCK.SOCK_CLOEXEC` on Linux). */
export function pipe2(flags: number): [number, number] {
  const out = new Int32Array(2);
  if (sym("file").pipe2(out, flags) < 0) throw sysError("pipe2");
  return [out[0]!, out[1]!];
}

/** A pseudo-terminal pair: `master` (this process reads output and writes input) and `slave` (the program's fds 0–2). */
export interface PtyPair {
  master: number;
  slave: number;
}

/** `O_RDWR | O_NOCTTY | O_CLOEXEC` on Linux (x86_64 and aarch64). */
const PTY_OPEN_FLAGS = 0o2 | 0o400 | 0o2000000;
/** `TIOCSWINSZ` on Linux. */
const TIOCSWINSZ = 0x5414;

/**
 * Open a pseudo-terminal (`posix_openpt`, `grantpt`, `unlockpt`, `ptsname_r`, then the slave), both ends
 * close-on-exec and not the caller's controlling terminal, sized `rows` × `cols` (Codex's unified exec: 24 × 80).
 * Linux only. Throws `SYSCALL` (both ends closed on failure).
 */
export function openPty(rows = 24, cols = 80): PtyPair {
  const s = sym("pty");
  const master = s.posix_openpt(PTY_OPEN_FLAGS);
  if (master < 0) throw sysError("posix_openpt");
  try {
    if (s.grantpt(master) !== 0) throw sysError("grantpt");
    if (s.unlockpt(master) !== 0) throw sysError("unlockpt");
    const name = new Uint8Array(128);
    const e = s.ptsname_r(master, name, name.length);
    if (e !== 0) throw sysError("ptsname_r", e);
    const slave = s.open(name, PTY_OPEN_FLAGS);
    if (slave < 0) throw sysError("open(pty slave)");
    const ws = new Uint16Array([rows, cols, 0, 0]);
    s.ioctl(slave, TIOCSWINSZ, ws);
    return { master, slave };
  } catch (err) {
    closeQuiet(master);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Calls relative to a folder descriptor (Linux): the git guard's repairs (src/sandbox/git/repair.ts)

/** `unlinkat` flag: remove a folder (as `rmdir`). */
export const AT_REMOVEDIR = 0x200;
/** `openat2` resolve flags (linux/openat2.h). */
export const RESOLVE = { NO_XDEV: 0x01, NO_MAGICLINKS: 0x02, NO_SYMLINKS: 0x04, BENEATH: 0x08 } as const;

/** A NUL-terminated copy of `s` for a raw syscall. */
function cPath(s: string): Uint8Array {
  return Buffer.from(`${s}\0`);
}

/**
 * `openat2(dirfd, path, {flags, mode, resolve})` → fd (Linux 5.6+). Throws `SYSCALL` with errno (ENOSYS on an
 * older kernel, ELOOP/EXDEV when a link or `..` would be crossed against `resolve`).
 */
export function openat2(dirfd: number, path: string, flags: number, mode: number, resolve: number): number {
  const how = new Uint8Array(24); // struct open_how { u64 flags; u64 mode; u64 resolve }
  const v = new DataView(how.buffer);
  v.setBigUint64(0, BigInt(flags), true);
  v.setBigUint64(8, BigInt(mode), true);
  v.setBigUint64(16, BigInt(resolve), true);
  return syscall("openat2", syscallNumber("openat2"), dirfd, cPath(path), how, 24);
}

/** `openat(dirfd, path, flags, mode)` → fd. Throws `SYSCALL` with errno. */
export function openat(dirfd: number, path: string, flags: number, mode = 0): number {
  return syscall("openat", syscallNumber("openat"), dirfd, cPath(path), flags, mode);
}

/** `unlinkat(dirfd, name, flags)` ({@link AT_REMOVEDIR} for a folder). Throws `SYSCALL` with errno. */
export function unlinkat(dirfd: number, name: string, flags = 0): void {
  syscall("unlinkat", syscallNumber("unlinkat"), dirfd, cPath(name), flags);
}

/** `mkdirat(dirfd, name, mode)`. Throws `SYSCALL` with errno. */
export function mkdirat(dirfd: number, name: string, mode: number): void {
  syscall("mkdirat", syscallNumber("mkdirat"), dirfd, cPath(name), mode);
}

/** `symlinkat(target, dirfd, name)`. Throws `SYSCALL` with errno. */
export function symlinkat(target: string, dirfd: number, name: string): void {
  syscall("symlinkat", syscallNumber("symlinkat"), cPath(target), dirfd, cPath(name));
}

/** `renameat2(olddirfd, oldname, newdirfd, newname, flags)`. Throws `SYSCALL` with errno. */
export function renameat2(olddirfd: number, oldname: string, newdirfd: number, newname: string, flags = 0): void {
  syscall("renameat2", syscallNumber("renameat2"), olddirfd, cPath(oldname), newdirfd, cPath(newname), flags);
}
