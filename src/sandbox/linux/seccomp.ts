/**
 * The seccomp filter (docs/sandbox.md, "seccomp filter"): Codex's "Restricted" network filter, plus hardening Codex lacks.
 *
 * Program shape:
 *   arch ≠ this arch            → KILL_PROCESS (also stops i386 `int 0x80` socketcall tricks)
 *   x86_64: nr ≥ 0x40000000     → ERRNO(EPERM) (x32 ABI aliases)
 *   sendto (restricted mode)    → ALLOW only if args[4] (dest_addr) == NULL in both halves, else ERRNO(EPERM)
 *   nr ∈ deny list              → ERRNO(EPERM)
 *   socket/socketpair           → ALLOW only if args[0] == AF_UNIX in both 32-bit halves and, in restricted mode,
 *                                 the type (args[1] & SOCK_TYPE_MASK) is SOCK_STREAM or SOCK_SEQPACKET, else
 *                                 ERRNO(EPERM). No datagram socket can exist in the sandbox, so no send can carry
 *                                 a destination: the kernel refuses an address on a connected stream socket and
 *                                 ignores it on a seqpacket one (the escalation socket is a seqpacket pair).
 *                                 seccomp cannot read sendmsg's msghdr, so this is how addressed sendmsg/sendmmsg
 *                                 to a host socket (journald, syslog) is stopped.
 *   prlimit64, setpriority, sched_setparam/setscheduler/setaffinity/setattr, ioprio_set, migrate_pages,
 *   move_pages                  → ALLOW only on the caller (the pid/who argument 0; prlimit64 on another pid only
 *                                 to read, new limit NULL), else ERRNO(EPERM): a sandboxed command cannot lower the
 *                                 server's RLIMIT_NOFILE or renice the user's other processes (issue 22, item 2;
 *                                 under bwrap the pid namespace hides them anyway). Every mode.
 *   ioctl TIOCSTI, TIOCLINUX    → ERRNO(EPERM), every mode (the low 32 bits of the request: the kernel ignores the
 *                                 rest): no typed input pushed into a terminal the command shares with a person,
 *                                 no console selection pasted (issue 34, item 7b)
 *   truncate (with refuseTruncate) → ERRNO(EPERM): Landlock below ABI 3 has no TRUNCATE right, so truncate(2) by
 *                                 path would empty any file the user can write (issue 34, item 7a); ftruncate needs
 *                                 an fd opened for writing, which Landlock's WRITE_FILE already decides
 *   otherwise                   → ALLOW
 * Modes: `restricted` (network off): the full list above; `vsock` (network on, filesystem restricted): deny
 * AF_VSOCK sockets and io_uring only, as Codex 0.169; none when both are unrestricted.
 *
 * Installed after PR_SET_NO_NEW_PRIVS with `seccomp(SECCOMP_SET_MODE_FILTER, 0, &prog)` on the thread that then
 * calls execve (flags 0: no TSYNC, no LOG — as Codex).
 */
import { addressOf, L, PR, prctl, syscall } from "../../../ffi/libc.ts";
import { archLayout, LINUX_SYSCALLS } from "../../../ffi/layout.ts";
import { ShellmcpError } from "../../errors.ts";

/** Process-inspection and io_uring syscalls, denied in every network-restricting mode. */
const PROXY_DENY_LIST = [
  "ptrace",
  "process_vm_readv",
  "process_vm_writev",
  "io_uring_setup",
  "io_uring_enter",
  "io_uring_register",
] as const;

/** Syscalls Codex 0.169 denies outright in `restricted` mode (we allow `sendto` with a NULL address: see buildFilter). */
export const RESTRICTED_DENY = [
  "connect",
  "accept",
  "accept4",
  "bind",
  "listen",
  "getpeername",
  "getsockname",
  "shutdown",
  "sendto",
  "sendmmsg",
  "recvmmsg",
  "getsockopt",
  "setsockopt",
  ...PROXY_DENY_LIST,
] as const;

/**
 * Filter modes: `restricted` (network off), `vsock` (network on, filesystem restricted), `proxy` (network only
 * through the call's proxy, docs/network.md): `socket` only AF_INET/AF_INET6 streams (no new AF_UNIX socket can
 * reach a host daemon or bypass the bridge; no UDP, raw or netlink), `socketpair` only AF_UNIX streams/seqpackets,
 * `sendto` only without an address and `sendmsg` never with `MSG_FASTOPEN` (no connect by the back door), and
 * `ptrace`, `process_vm_*`, `io_uring_*` denied.
 */
export type SeccompMode = "restricted" | "vsock" | "proxy";

/** Syscalls denied outright in `proxy` mode (and, with the socket calls, in `restricted` mode). */
export const PROXY_DENY = PROXY_DENY_LIST;
const AF_INET = 2;
const AF_INET6 = 10;
const MSG_FASTOPEN = 0x20000000;

const AF_UNIX = 1;
const AF_VSOCK = 40;
const EPERM = 1;
const RET_KILL_PROCESS = 0x80000000;
const RET_ERRNO = 0x00050000;
const RET_ALLOW = 0x7fff0000;
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;
const ALU_AND_K = 0x54;
/** Mask of the socket type in socket(2)'s second argument (the rest are SOCK_NONBLOCK / SOCK_CLOEXEC). */
const SOCK_TYPE_MASK = 0xf;
const SOCK_STREAM = 1;
const SOCK_SEQPACKET = 5;
const X32_SYSCALL_BIT = 0x40000000;
const SECCOMP_SET_MODE_FILTER = 1;

type Insn = { code: number; jt: number | string; jf: number | string; k: number; label?: string };

/** Assemble instructions whose jump targets may be labels into `struct sock_filter[]` bytes. */
function assemble(prog: Insn[]): Uint8Array {
  const at = new Map<string, number>();
  prog.forEach((ins, i) => ins.label !== undefined && at.set(ins.label, i));
  const out = new Uint8Array(prog.length * 8);
  const v = new DataView(out.buffer);
  prog.forEach((ins, i) => {
    const rel = (t: number | string) => {
      if (typeof t === "number") return t;
      const target = at.get(t);
      if (target === undefined || target <= i || target - i - 1 > 255) throw new Error(`seccomp: bad jump to ${t}`);
      return target - i - 1;
    };
    v.setUint16(i * 8, ins.code, true);
    v.setUint8(i * 8 + 2, rel(ins.jt));
    v.setUint8(i * 8 + 3, rel(ins.jf));
    v.setUint32(i * 8 + 4, ins.k >>> 0, true);
  });
  return out;
}

/** Syscalls that may only act on the calling process (their pid argument must be 0). */
type SelfOnly =
  | "prlimit64"
  | "setpriority"
  | "sched_setparam"
  | "sched_setscheduler"
  | "sched_setaffinity"
  | "sched_setattr"
  | "ioprio_set"
  | "migrate_pages"
  | "move_pages";

/** ioctl requests that push input into a terminal (`TIOCSTI`) or paste the console selection (`TIOCLINUX`). */
const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;

/** What a filter adds to its mode. */
export interface FilterOptions {
  /** Refuse `truncate(2)` (EPERM): Landlock confines writes here without its TRUNCATE right (ABI < 3). */
  refuseTruncate?: boolean;
}

/** Build the BPF program for `mode` on `arch` (default: this machine), with `opts`' additions. */
export function buildFilter(
  mode: SeccompMode,
  arch: "linux-x64" | "linux-arm64" = L.arch as "linux-x64" | "linux-arm64",
  opts: FilterOptions = {},
): Uint8Array {
  const nr = LINUX_SYSCALLS[arch];
  const auditArch = archLayout(arch).auditArch!;
  const p: Insn[] = [
    { code: LD_W_ABS, jt: 0, jf: 0, k: 4 }, // seccomp_data.arch
    { code: JEQ_K, jt: 1, jf: 0, k: auditArch },
    { code: RET_K, jt: 0, jf: 0, k: RET_KILL_PROCESS },
    { code: LD_W_ABS, jt: 0, jf: 0, k: 0 }, // seccomp_data.nr
  ];
  if (arch === "linux-x64") p.push({ code: JGE_K, jt: "deny", jf: 0, k: X32_SYSCALL_BIT });
  // ioctl(fd, TIOCSTI | TIOCLINUX, …): request is args[1], an unsigned int for the kernel (low word only).
  p.push({ code: JEQ_K, jt: 0, jf: "not-ioctl", k: nr.ioctl });
  p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 16 + 8 * 1 });
  p.push({ code: JEQ_K, jt: "deny", jf: 0, k: TIOCSTI });
  p.push({ code: JEQ_K, jt: "deny", jf: 0, k: TIOCLINUX });
  p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 0, label: "not-ioctl" });
  if (opts.refuseTruncate === true) p.push({ code: JEQ_K, jt: "deny", jf: 0, k: nr.truncate });
  if (mode === "proxy") {
    // sendmsg(fd, msg, flags): MSG_FASTOPEN would connect a TCP socket without connect(2).
    p.push({ code: JEQ_K, jt: 0, jf: "not-sendmsg", k: nr.sendmsg! });
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 16 + 8 * 2 }); // args[2], low word
    p.push({ code: JSET_K, jt: "deny", jf: "allow", k: MSG_FASTOPEN });
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 0, label: "not-sendmsg" });
  }
  if (mode === "restricted" || mode === "proxy") {
    // libc's send(fd, buf, len, flags) is sendto(fd, buf, len, flags, NULL, 0): allow it, so that a connected
    // AF_UNIX socketpair works (Python's socket.send, IPC libraries). Any destination address stays denied.
    // Only AF_UNIX sockets can be created under this filter, so nothing reaches the network this way that
    // write(2) on the same socket could not. (Codex denies every sendto.)
    p.push({ code: JEQ_K, jt: 0, jf: "not-sendto", k: nr.sendto! });
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 16 + 8 * 4 + 4 }); // args[4], high word
    p.push({ code: JEQ_K, jt: 0, jf: "deny", k: 0 });
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 16 + 8 * 4 }); // args[4], low word
    p.push({ code: JEQ_K, jt: "allow", jf: "deny", k: 0 });
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 0, label: "not-sendto" }); // the accumulator still holds nr; harmless
  }
  const deny =
    mode === "restricted"
      ? RESTRICTED_DENY.filter((n) => n !== "sendto")
      : mode === "proxy"
        ? PROXY_DENY
        : (["io_uring_setup", "io_uring_enter", "io_uring_register"] as const);
  for (const name of deny) p.push({ code: JEQ_K, jt: "deny", jf: 0, k: nr[name]! });
  // Calls that act on another process by pid: only on the caller. Each block ends by reloading nr for the next.
  const argIsZero = (arg: number, ok: string, bad: string) => {
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 16 + 8 * arg + 4 });
    p.push({ code: JEQ_K, jt: 0, jf: bad, k: 0 });
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 16 + 8 * arg });
    p.push({ code: JEQ_K, jt: ok, jf: bad, k: 0 });
  };
  const byPid: [SelfOnly, number][] = [
    ["prlimit64", 0],
    ["setpriority", 1],
    ["sched_setparam", 0],
    ["sched_setscheduler", 0],
    ["sched_setaffinity", 0],
    ["sched_setattr", 0],
    ["ioprio_set", 1],
    ["migrate_pages", 0],
    ["move_pages", 0],
  ];
  byPid.forEach(([name, arg], i) => {
    const next = `pid-${i + 1}`;
    p.push({ code: JEQ_K, jt: 0, jf: next, k: nr[name]! });
    if (name === "prlimit64") {
      argIsZero(0, "allow", `prlimit-read-${i}`);
      p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 0, label: `prlimit-read-${i}` });
      argIsZero(2, "allow", "deny"); // new_limit == NULL: reading another process's limits
    } else argIsZero(arg, "allow", "deny");
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 0, label: next });
  });
  // socket / socketpair: look at args[0] (low word at offset 16, high word at 20).
  const family = (name: "socket" | "socketpair", next: string) => {
    p.push({ code: JEQ_K, jt: 0, jf: next, k: nr[name]! });
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 20 });
    p.push({ code: JEQ_K, jt: 0, jf: "deny", k: 0 }); // high word must be 0 (no truncation games)
    p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 16 });
    if (mode === "proxy" && name === "socket") {
      // AF_INET or AF_INET6, and a stream.
      p.push({ code: JEQ_K, jt: "inet", jf: 0, k: AF_INET });
      p.push({ code: JEQ_K, jt: 0, jf: "deny", k: AF_INET6 });
      p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 28, label: "inet" });
      p.push({ code: JEQ_K, jt: 0, jf: "deny", k: 0 });
      p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 24 });
      p.push({ code: ALU_AND_K, jt: 0, jf: 0, k: SOCK_TYPE_MASK });
      p.push({ code: JEQ_K, jt: "allow", jf: "deny", k: SOCK_STREAM });
    } else if (mode === "restricted" || mode === "proxy") {
      p.push({ code: JEQ_K, jt: 0, jf: "deny", k: AF_UNIX });
      // The type: args[1] (low word at 24, high word at 28), stream or seqpacket only (SOCK_RAW is a datagram
      // socket for AF_UNIX).
      p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 28 });
      p.push({ code: JEQ_K, jt: 0, jf: "deny", k: 0 });
      p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 24 });
      p.push({ code: ALU_AND_K, jt: 0, jf: 0, k: SOCK_TYPE_MASK });
      p.push({ code: JEQ_K, jt: "allow", jf: 0, k: SOCK_STREAM });
      p.push({ code: JEQ_K, jt: "allow", jf: "deny", k: SOCK_SEQPACKET });
    } else p.push({ code: JEQ_K, jt: "deny", jf: "allow", k: AF_VSOCK });
  };
  family("socket", "socketpair");
  p.push({ code: LD_W_ABS, jt: 0, jf: 0, k: 0, label: "socketpair" }); // reload nr (harmless when reached by fallthrough)
  family("socketpair", "allow");
  p.push({ code: RET_K, jt: 0, jf: 0, k: RET_ALLOW, label: "allow" });
  p.push({ code: RET_K, jt: 0, jf: 0, k: RET_ERRNO | EPERM, label: "deny" });
  return assemble(p);
}

/**
 * Set PR_SET_NO_NEW_PRIVS and install the filter for `mode` (with `opts`) on the calling thread. Throws `SANDBOX_UNAVAILABLE` when the
 * kernel refuses (no seccomp, or an unsupported architecture).
 */
export function installFilter(mode: SeccompMode, opts: FilterOptions = {}): void {
  if (L.arch !== "linux-x64" && L.arch !== "linux-arm64") {
    throw new ShellmcpError("SANDBOX_UNAVAILABLE", `seccomp filters are not implemented for ${L.arch}`);
  }
  const bpf = buildFilter(mode, L.arch, opts);
  const fprog = new Uint8Array(16); // struct sock_fprog { u16 len; u8 pad[6]; struct sock_filter *filter; }
  const v = new DataView(fprog.buffer);
  v.setUint16(0, bpf.byteLength / 8, true);
  v.setBigUint64(8, BigInt(addressOf(bpf)), true);
  try {
    prctl(PR.SET_NO_NEW_PRIVS, 1);
    syscall("seccomp", L.sys.seccomp!, SECCOMP_SET_MODE_FILTER, 0, fprog);
  } catch (e) {
    throw new ShellmcpError(
      "SANDBOX_UNAVAILABLE",
      `cannot install the seccomp filter: ${(e as Error).message} (the kernel needs CONFIG_SECCOMP_FILTER)`,
      {},
      { cause: e },
    );
  }
  void bpf; // keep the program alive until the syscall has copied it
}
