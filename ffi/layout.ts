/**
 * Struct layouts and kernel/libc constants, per architecture.
 *
 * This is the one place that knows C struct offsets and syscall numbers. Everything is computed from
 * field sizes and alignments by {@link layoutStruct} (the C rules: each field at the next multiple of its
 * alignment, the struct padded to its largest alignment), so the table for an architecture we cannot run
 * here (aarch64, darwin) is derived, not typed in, and the unit tests compare it with values a C compiler
 * printed.
 */

/** Architectures whose layouts are described here. `linux-x64` and `linux-arm64` are LP64 glibc. */
export type Arch = "linux-x64" | "linux-arm64" | "darwin-x64" | "darwin-arm64";

/** One C field: byte size and alignment. */
export interface FieldSpec {
  readonly name: string;
  readonly size: number;
  readonly align: number;
}

/** Computed layout of one C struct: byte offset of every field, total `size`, struct `align`. */
export interface StructLayout {
  readonly offsets: Readonly<Record<string, number>>;
  readonly size: number;
  readonly align: number;
}

/** Round `n` up to a multiple of `align` (a power of two). */
export function alignUp(n: number, align: number): number {
  return (n + align - 1) & ~(align - 1);
}

/** Lay out `fields` by the C rules (no packing). */
export function layoutStruct(fields: readonly FieldSpec[]): StructLayout {
  const offsets: Record<string, number> = {};
  let at = 0;
  let maxAlign = 1;
  for (const f of fields) {
    at = alignUp(at, f.align);
    offsets[f.name] = at;
    at += f.size;
    maxAlign = Math.max(maxAlign, f.align);
  }
  return { offsets, size: alignUp(at, maxAlign), align: maxAlign };
}

const PTR = { size: 8, align: 8 };
const SIZE_T = { size: 8, align: 8 };
const INT = { size: 4, align: 4 };
const SHORT = { size: 2, align: 2 };

/** Every layout and constant the FFI layer needs for one architecture. */
export interface ArchLayout {
  readonly arch: Arch;
  /** `struct msghdr` (sendmsg/recvmsg). */
  readonly msghdr: StructLayout;
  /** `struct iovec`. */
  readonly iovec: StructLayout;
  /** `struct cmsghdr` header; data starts at `CMSG_DATA` = `cmsgDataOffset`. */
  readonly cmsghdr: StructLayout;
  /** Offset of the data after a `cmsghdr` (`CMSG_DATA`), i.e. the header size aligned to `cmsgAlign`. */
  readonly cmsgDataOffset: number;
  /** Alignment used by `CMSG_ALIGN` (sizeof(size_t) on Linux, 4 on darwin). */
  readonly cmsgAlign: number;
  /** `struct pollfd`. */
  readonly pollfd: StructLayout;
  /** glibc `struct sigaction` (the libc one, not the kernel's). Darwin: the libc `struct __sigaction`-free form. */
  readonly sigaction: StructLayout;
  /** `sizeof(sigset_t)` in libc. */
  readonly sigsetBytes: number;
  /** Syscall numbers used through raw `syscall(2)`; `undefined` where the OS lacks it. */
  readonly sys: Readonly<Record<SyscallName, number | undefined>>;
  /** Socket-level constants. */
  readonly sock: Readonly<SocketConstants>;
  /** `AUDIT_ARCH_*` value that a seccomp filter checks `seccomp_data.arch` against. */
  readonly auditArch: number | undefined;
}

/**
 * Linux syscall numbers, per architecture: the raw syscalls we issue through `syscall(2)` (Landlock, seccomp,
 * pidfds, gettid) and the ones the seccomp filter names (src/sandbox/linux/seccomp.ts). From the kernel's
 * syscall tables (arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h for arm64);
 * test/ffi/layout.test.ts checks every one against the host's <sys/syscall.h>.
 */
export const LINUX_SYSCALLS = {
  "linux-x64": {
    landlock_create_ruleset: 444,
    landlock_add_rule: 445,
    landlock_restrict_self: 446,
    seccomp: 317,
    gettid: 186,
    capset: 126,
    unshare: 272,
    setns: 308,
    prlimit64: 302,
    setpriority: 141,
    sched_setparam: 142,
    sched_setscheduler: 144,
    sched_setaffinity: 203,
    sched_setattr: 314,
    ioprio_set: 251,
    migrate_pages: 256,
    move_pages: 279,
    pidfd_open: 434,
    pidfd_send_signal: 424,
    socket: 41,
    connect: 42,
    accept: 43,
    sendto: 44,
    sendmsg: 46,
    shutdown: 48,
    bind: 49,
    listen: 50,
    getsockname: 51,
    getpeername: 52,
    socketpair: 53,
    setsockopt: 54,
    getsockopt: 55,
    ptrace: 101,
    accept4: 288,
    recvmmsg: 299,
    sendmmsg: 307,
    process_vm_readv: 310,
    process_vm_writev: 311,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    ioctl: 16,
    truncate: 76,
    openat: 257,
    openat2: 437,
    unlinkat: 263,
    mkdirat: 258,
    symlinkat: 266,
    renameat2: 316,
    lgetxattr: 192,
  },
  "linux-arm64": {
    landlock_create_ruleset: 444,
    landlock_add_rule: 445,
    landlock_restrict_self: 446,
    seccomp: 277,
    gettid: 178,
    capset: 91,
    unshare: 97,
    setns: 268,
    prlimit64: 261,
    setpriority: 140,
    sched_setparam: 118,
    sched_setscheduler: 119,
    sched_setaffinity: 122,
    sched_setattr: 274,
    ioprio_set: 30,
    migrate_pages: 238,
    move_pages: 239,
    pidfd_open: 434,
    pidfd_send_signal: 424,
    socket: 198,
    connect: 203,
    accept: 202,
    sendto: 206,
    sendmsg: 211,
    shutdown: 210,
    bind: 200,
    listen: 201,
    getsockname: 204,
    getpeername: 205,
    socketpair: 199,
    setsockopt: 208,
    getsockopt: 209,
    ptrace: 117,
    accept4: 242,
    recvmmsg: 243,
    sendmmsg: 269,
    process_vm_readv: 270,
    process_vm_writev: 271,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    ioctl: 29,
    truncate: 45,
    openat: 56,
    openat2: 437,
    unlinkat: 35,
    mkdirat: 34,
    symlinkat: 36,
    renameat2: 276,
    lgetxattr: 9,
  },
} as const satisfies Record<"linux-x64" | "linux-arm64", Record<string, number>>;

/** Syscalls known by number (the keys of {@link LINUX_SYSCALLS}). */
export type SyscallName = keyof (typeof LINUX_SYSCALLS)["linux-x64"];

const NO_SYSCALLS = Object.fromEntries(Object.keys(LINUX_SYSCALLS["linux-x64"]).map((k) => [k, undefined])) as Record<
  SyscallName,
  undefined
>;

/** Socket and fd constants. */
export interface SocketConstants {
  AF_UNIX: number;
  SOCK_STREAM: number;
  SOCK_DGRAM: number;
  SOCK_SEQPACKET: number;
  SOCK_CLOEXEC: number;
  SOCK_NONBLOCK: number;
  SOL_SOCKET: number;
  SCM_RIGHTS: number;
  MSG_DONTWAIT: number;
  MSG_NOSIGNAL: number;
  MSG_CMSG_CLOEXEC: number;
  MSG_CTRUNC: number;
  SO_SNDBUF: number;
  SO_RCVBUF: number;
  O_NONBLOCK: number;
  F_GETFD: number;
  F_SETFD: number;
  F_GETFL: number;
  F_SETFL: number;
  /** `fcntl` command: duplicate to the lowest free fd ≥ arg, with FD_CLOEXEC set. */
  F_DUPFD_CLOEXEC: number;
  FD_CLOEXEC: number;
}

const LINUX_SOCK: SocketConstants = {
  AF_UNIX: 1,
  SOCK_STREAM: 1,
  SOCK_DGRAM: 2,
  SOCK_SEQPACKET: 5,
  SOCK_CLOEXEC: 0o2000000,
  SOCK_NONBLOCK: 0o4000,
  SOL_SOCKET: 1,
  SCM_RIGHTS: 1,
  MSG_DONTWAIT: 0x40,
  MSG_NOSIGNAL: 0x4000,
  MSG_CMSG_CLOEXEC: 0x40000000,
  MSG_CTRUNC: 0x8,
  SO_SNDBUF: 7,
  SO_RCVBUF: 8,
  O_NONBLOCK: 0o4000,
  F_GETFD: 1,
  F_SETFD: 2,
  F_GETFL: 3,
  F_SETFL: 4,
  F_DUPFD_CLOEXEC: 1030,
  FD_CLOEXEC: 1,
};

const DARWIN_SOCK: SocketConstants = {
  AF_UNIX: 1,
  SOCK_STREAM: 1,
  SOCK_DGRAM: 2,
  SOCK_SEQPACKET: 5,
  SOCK_CLOEXEC: 0, // no such flag: set FD_CLOEXEC with fcntl
  SOCK_NONBLOCK: 0,
  SOL_SOCKET: 0xffff,
  SCM_RIGHTS: 1,
  MSG_DONTWAIT: 0x80,
  MSG_NOSIGNAL: 0, // darwin uses SO_NOSIGPIPE
  MSG_CMSG_CLOEXEC: 0,
  MSG_CTRUNC: 0x20,
  SO_SNDBUF: 0x1001,
  SO_RCVBUF: 0x1002,
  O_NONBLOCK: 0x4,
  F_GETFD: 1,
  F_SETFD: 2,
  F_GETFL: 3,
  F_SETFL: 4,
  F_DUPFD_CLOEXEC: 67,
  FD_CLOEXEC: 1,
};

function linuxLayout(arch: "linux-x64" | "linux-arm64"): ArchLayout {
  const cmsghdr = layoutStruct([
    { name: "cmsg_len", ...SIZE_T },
    { name: "cmsg_level", ...INT },
    { name: "cmsg_type", ...INT },
  ]);
  return {
    arch,
    msghdr: layoutStruct([
      { name: "msg_name", ...PTR },
      { name: "msg_namelen", ...INT },
      { name: "msg_iov", ...PTR },
      { name: "msg_iovlen", ...SIZE_T },
      { name: "msg_control", ...PTR },
      { name: "msg_controllen", ...SIZE_T },
      { name: "msg_flags", ...INT },
    ]),
    iovec: layoutStruct([
      { name: "iov_base", ...PTR },
      { name: "iov_len", ...SIZE_T },
    ]),
    cmsghdr,
    cmsgAlign: 8,
    cmsgDataOffset: alignUp(cmsghdr.size, 8),
    pollfd: layoutStruct([
      { name: "fd", ...INT },
      { name: "events", ...SHORT },
      { name: "revents", ...SHORT },
    ]),
    // glibc: { sa_handler; sigset_t sa_mask (1024 bits); int sa_flags; void (*sa_restorer)(void) }
    sigaction: layoutStruct([
      { name: "sa_handler", ...PTR },
      { name: "sa_mask", size: 128, align: 8 },
      { name: "sa_flags", ...INT },
      { name: "sa_restorer", ...PTR },
    ]),
    sigsetBytes: 128,
    sys: LINUX_SYSCALLS[arch],
    sock: LINUX_SOCK,
    // AUDIT_ARCH_X86_64 = EM_X86_64(62)|__AUDIT_ARCH_64BIT|__AUDIT_ARCH_LE; AUDIT_ARCH_AARCH64 = EM_AARCH64(183)|…
    auditArch: arch === "linux-x64" ? 0xc000003e : 0xc00000b7,
  };
}

function darwinLayout(arch: "darwin-x64" | "darwin-arm64"): ArchLayout {
  const cmsghdr = layoutStruct([
    { name: "cmsg_len", ...INT }, // socklen_t
    { name: "cmsg_level", ...INT },
    { name: "cmsg_type", ...INT },
  ]);
  return {
    arch,
    msghdr: layoutStruct([
      { name: "msg_name", ...PTR },
      { name: "msg_namelen", ...INT },
      { name: "msg_iov", ...PTR },
      { name: "msg_iovlen", ...INT },
      { name: "msg_control", ...PTR },
      { name: "msg_controllen", ...INT },
      { name: "msg_flags", ...INT },
    ]),
    iovec: layoutStruct([
      { name: "iov_base", ...PTR },
      { name: "iov_len", ...SIZE_T },
    ]),
    cmsghdr,
    cmsgAlign: 4,
    cmsgDataOffset: alignUp(cmsghdr.size, 4),
    pollfd: layoutStruct([
      { name: "fd", ...INT },
      { name: "events", ...SHORT },
      { name: "revents", ...SHORT },
    ]),
    // darwin: { union __sigaction_u; sigset_t sa_mask (u32); int sa_flags }
    sigaction: layoutStruct([
      { name: "sa_handler", ...PTR },
      { name: "sa_mask", ...INT },
      { name: "sa_flags", ...INT },
    ]),
    sigsetBytes: 4,
    sys: NO_SYSCALLS,
    sock: DARWIN_SOCK,
    auditArch: undefined,
  };
}

/** Layout table for `arch`. */
export function archLayout(arch: Arch): ArchLayout {
  return arch.startsWith("linux") ? linuxLayout(arch as "linux-x64" | "linux-arm64") : darwinLayout(arch as "darwin-x64" | "darwin-arm64");
}

/** The architecture this process runs on; throws for one we have no layout for. */
export function hostArch(): Arch {
  const key = `${process.platform}-${process.arch}`;
  if (key === "linux-x64" || key === "linux-arm64" || key === "darwin-x64" || key === "darwin-arm64") return key;
  throw new Error(`shellmcp: no struct layouts for ${key} (supported: linux-x64, linux-arm64, darwin-x64, darwin-arm64)`);
}

/** `CMSG_SPACE(n)`: bytes of control buffer for `n` data bytes. */
export function cmsgSpace(l: ArchLayout, dataBytes: number): number {
  return l.cmsgDataOffset + alignUp(dataBytes, l.cmsgAlign);
}

/** `CMSG_LEN(n)`: the `cmsg_len` value for `n` data bytes. */
export function cmsgLen(l: ArchLayout, dataBytes: number): number {
  return l.cmsgDataOffset + dataBytes;
}

/** Signal numbers 1..max that exist on this OS (`NSIG - 1`: 64 on Linux, 31 on darwin). */
export function maxSignal(arch: Arch): number {
  return arch.startsWith("linux") ? 64 : 31;
}
