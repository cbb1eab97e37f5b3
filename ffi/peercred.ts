/**
 * Who is at the other end of a connected `AF_UNIX` stream socket (Linux): `SO_PEERCRED` (the pid, uid and gid the
 * kernel recorded at `connect(2)`) and `SO_PEERPIDFD` (Linux ≥ 6.5: a pidfd for that very process, so a pid reused
 * after the peer ended cannot be mistaken for it). Used by the local approver (src/approvals/) to refuse a peer
 * that runs inside a sandbox. Kept apart from ./libc.ts: only the approver binds `getsockopt` this way.
 */
import { dlopen, FFIType } from "bun:ffi";
import { ShellmcpError } from "../src/errors.ts";
import { errno, errname, ERRNO, L, sysError } from "./libc.ts";

/** `SO_PEERCRED` (Linux, every architecture shellmcp runs on). */
export const SO_PEERCRED = 17;
/** `SO_PEERPIDFD` (Linux ≥ 6.5). */
export const SO_PEERPIDFD = 77;
/** `ENOPROTOOPT`: the kernel does not know the option. */
const ENOPROTOOPT = 92;

let lib: { getsockopt: (fd: number, level: number, opt: number, val: Uint8Array, len: Uint32Array) => number } | undefined;

function getsockopt(fd: number, opt: number, size: number): { ok: true; bytes: Uint8Array } | { ok: false; errno: number } {
  if (process.platform !== "linux") throw new ShellmcpError("SYSCALL", "peer credentials are read on Linux only");
  lib ??= dlopen("libc.so.6", {
    getsockopt: { args: [FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  }).symbols as unknown as typeof lib;
  const bytes = new Uint8Array(size);
  const len = new Uint32Array([size]);
  if (lib!.getsockopt(fd, L.sock.SOL_SOCKET, opt, bytes, len) < 0) return { ok: false, errno: errno() };
  return { ok: true, bytes: bytes.subarray(0, len[0]!) };
}

/** The credentials the kernel recorded for the peer of `fd` at `connect(2)`, in this process's namespaces. */
export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

/** `getsockopt(fd, SOL_SOCKET, SO_PEERCRED)` (`struct ucred { pid_t pid; uid_t uid; gid_t gid; }`). Throws `SYSCALL`. */
export function peerCredentials(fd: number): PeerCredentials {
  const r = getsockopt(fd, SO_PEERCRED, 12);
  if (!r.ok) throw sysError("getsockopt(SO_PEERCRED)", r.errno);
  if (r.bytes.byteLength < 12) throw new ShellmcpError("SYSCALL", `getsockopt(SO_PEERCRED) returned ${r.bytes.byteLength} bytes`);
  const v = new DataView(r.bytes.buffer, r.bytes.byteOffset, 12);
  return { pid: v.getInt32(0, true), uid: v.getUint32(4, true), gid: v.getUint32(8, true) };
}

/**
 * A pidfd (close-on-exec) for the peer of `fd`, the process that called `connect(2)`, through `SO_PEERPIDFD`; or
 * undefined when this kernel has no such option (before 6.5). Throws `SYSCALL` for any other failure (e.g. `ESRCH`:
 * the peer has already been reaped). The caller closes it.
 */
export function peerPidfd(fd: number): number | undefined {
  const r = getsockopt(fd, SO_PEERPIDFD, 4);
  if (!r.ok) {
    if (r.errno === ENOPROTOOPT || r.errno === ERRNO.EINVAL) return undefined;
    throw sysError(`getsockopt(SO_PEERPIDFD) (${errname(r.errno)})`, r.errno);
  }
  return new DataView(r.bytes.buffer, r.bytes.byteOffset, 4).getInt32(0, true);
}
