/**
 * Landlock (docs/sandbox.md, "Landlock + seccomp backend"): a ruleset for the highest ABI the kernel offers (best effort down to ABI 1),
 * applied with `landlock_restrict_self` on the calling thread right before execve.
 *
 * Rules (Codex's, plus what Codex lacked):
 * - full read: `/` → EXECUTE|READ_FILE|READ_DIR; restricted read: only the readable roots get them (Codex 0.99
 *   ignored restricted reads: fail-open);
 * - `/dev/null` → file rights; `/dev/shm` → all rights (so Python multiprocessing works; a documented deviation);
 * - every writable root → all rights;
 * - ABI ≥ 4 with network off: TCP bind/connect handled with no port rules (a second layer under seccomp);
 * - ABI ≥ 6: scoped abstract UNIX sockets (network off) and signals.
 * Landlock cannot subtract, so `.git`/`.codex` inside a writable root stay writable in this backend.
 */
import { closeSync, openSync, statSync } from "node:fs";
import { close as closeFd, L, PR, prctl, syscall } from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";

/** Landlock FS access rights. */
export const FS = {
  EXECUTE: 1,
  WRITE_FILE: 2,
  READ_FILE: 4,
  READ_DIR: 8,
  REMOVE_DIR: 0x10,
  REMOVE_FILE: 0x20,
  MAKE_CHAR: 0x40,
  MAKE_DIR: 0x80,
  MAKE_REG: 0x100,
  MAKE_SOCK: 0x200,
  MAKE_FIFO: 0x400,
  MAKE_BLOCK: 0x800,
  MAKE_SYM: 0x1000,
  REFER: 0x2000,
  TRUNCATE: 0x4000,
  IOCTL_DEV: 0x8000,
} as const;

/** Rights valid on a non-directory (the kernel rejects directory-only rights on files with EINVAL). */
export const FILE_RIGHTS = FS.EXECUTE | FS.WRITE_FILE | FS.READ_FILE | FS.TRUNCATE | FS.IOCTL_DEV;
/** Read rights. */
export const READ_RIGHTS = FS.EXECUTE | FS.READ_FILE | FS.READ_DIR;
/**
 * What a writable root grants: every right a workspace needs, but no device creation (`MAKE_CHAR`, `MAKE_BLOCK`:
 * a root command could make a `/dev/kmsg` node in the project) and no ioctls on devices (`IOCTL_DEV`).
 */
export const WRITE_RIGHTS = 0xffff & ~(FS.MAKE_CHAR | FS.MAKE_BLOCK | FS.IOCTL_DEV);

/** All FS rights known to `abi`. */
export function fsRightsForAbi(abi: number): number {
  if (abi >= 5) return 0xffff;
  if (abi >= 3) return 0x7fff;
  if (abi === 2) return 0x3fff;
  return 0x1fff;
}

const CREATE_RULESET_VERSION = 1;
const RULE_PATH_BENEATH = 1;
const RULE_NET_PORT = 2;
const NET_BIND_TCP = 1;
const NET_CONNECT_TCP = 2;
const SCOPE_ABSTRACT_UNIX_SOCKET = 1;
const SCOPE_SIGNAL = 2;
const O_PATH = 0o10000000;
const O_CLOEXEC = 0o2000000;

/** Environment variable that makes the ABI probe report a lower ABI (or 0 = absent); it can only lower it. */
export const SIMULATE_ABI_ENV = "SHELLMCP_SIMULATE_LANDLOCK_ABI";

/** Landlock ABI of this kernel: 0 when not available (ENOSYS: not built; EOPNOTSUPP: disabled at boot). */
export function landlockAbi(env: Record<string, string | undefined> = process.env): number {
  let abi: number;
  try {
    abi = syscall("landlock_create_ruleset", L.sys.landlock_create_ruleset!, null, 0, CREATE_RULESET_VERSION);
  } catch {
    abi = 0;
  }
  const sim = env[SIMULATE_ABI_ENV];
  if (sim !== undefined && /^\d+$/.test(sim)) abi = Math.min(abi, Number(sim));
  return abi;
}

/** What to enforce. */
export interface LandlockSpec {
  /** Roots readable (and executable); undefined = everything. */
  readableRoots?: string[];
  /** Roots writable (all rights). */
  writableRoots: string[];
  /**
   * Roots whose folders may be listed (READ_DIR only, no file read): the readable roots (`/` under full read) that
   * hidden credential stores were left out of (../secrets.ts), so that `ls ~` and a shell's own getcwd walk still
   * work; the names in a hidden folder can then be listed, never a file's content.
   */
  listableRoots?: string[];
  /** Block TCP bind/connect (ABI ≥ 4) and scope abstract UNIX sockets (ABI ≥ 6). */
  networkRestricted: boolean;
  /**
   * Proxy mode (docs/network.md, "Landlock"): TCP bind denied and TCP connect allowed only to these ports (any
   * address: Landlock's port rules cannot name one), abstract UNIX sockets scoped (ABI ≥ 6). Needs ABI ≥ 4: below,
   * {@link applyLandlock} refuses (never a wider network).
   */
  connectTcpPorts?: readonly number[];
}

/** Landlock ABI that brought TCP port rules (Linux 6.7). */
export const LANDLOCK_NET_ABI = 4;

/** What was enforced, for reports and tests. */
export interface LandlockReport {
  abi: number;
  handledFs: number;
  rules: { path: string; access: number }[];
}

/**
 * A ruleset as planned for one Landlock ABI, before the kernel or the filesystem is asked: the handled masks and
 * scopes, each path rule with the rights it would grant a folder (a path that turns out to be a file keeps only
 * {@link FILE_RIGHTS}, a missing one is skipped, and every rule is masked by `handledFs`: all at apply time), and the
 * TCP ports `connect` may reach. Applied here by {@link applyLandlock}, or by sandbox-exec (patches/sandbox-exec.c)
 * from the plan ./sandbox-exec.ts encodes.
 */
export interface LandlockRuleset {
  abi: number;
  /** `handled_access_fs`: {@link fsRightsForAbi}. */
  handledFs: number;
  /** `handled_access_net`: TCP bind and connect when the network is restricted (ABI ≥ 4), else 0. */
  handledNet: number;
  /** `scoped`: signals (ABI ≥ 6), and abstract UNIX sockets when the network is restricted. */
  scoped: number;
  /** Rules in the order they are added: readable roots (`/` under full read), listable roots, /dev/null, /dev/shm, writable roots. */
  pathRules: { path: string; access: number }[];
  /** Ports of {@link LandlockSpec.connectTcpPorts}, each a NET_CONNECT_TCP rule. */
  connectTcpPorts: number[];
}

/** Landlock's TCP connect right (`LANDLOCK_ACCESS_NET_CONNECT_TCP`), the right of each port rule. */
export const NET_CONNECT_TCP_RIGHT = NET_CONNECT_TCP;

/**
 * The ruleset `spec` asks for under Landlock ABI `abi`. Pure. Throws `SANDBOX_UNAVAILABLE` (fail closed) when
 * `abi` is 0 (no Landlock) or `spec` is proxy mode below {@link LANDLOCK_NET_ABI}.
 */
export function planLandlock(spec: LandlockSpec, abi: number): LandlockRuleset {
  if (abi < 1) {
    throw new ShellmcpError(
      "SANDBOX_UNAVAILABLE",
      "Landlock is not available on this kernel (it needs Linux 5.13+ with landlock in the `lsm=` boot list); install bubblewrap (`apt-get install bubblewrap`) for the bwrap backend, or run with --sandbox danger-full-access",
      { abi },
    );
  }
  const proxied = spec.connectTcpPorts !== undefined;
  if (proxied && abi < LANDLOCK_NET_ABI) {
    throw new ShellmcpError(
      "SANDBOX_UNAVAILABLE",
      `network proxy mode under Landlock needs Landlock ABI ${LANDLOCK_NET_ABI} (Linux 6.7+) to limit TCP connections to the proxy; this kernel has ABI ${abi}. Install bubblewrap (apt-get install bubblewrap) for the bwrap backend, or turn the network off for this call`,
      { abi },
    );
  }
  const restrictNet = spec.networkRestricted || proxied;
  const pathRules: { path: string; access: number }[] = [];
  const add = (path: string, access: number) => pathRules.push({ path, access });
  if (spec.readableRoots === undefined) add("/", READ_RIGHTS);
  else for (const r of spec.readableRoots) add(r, READ_RIGHTS);
  for (const r of spec.listableRoots ?? []) add(r, FS.READ_DIR);
  add("/dev/null", FS.READ_FILE | FS.WRITE_FILE);
  add("/dev/shm", WRITE_RIGHTS);
  for (const r of spec.writableRoots) add(r, WRITE_RIGHTS);
  return {
    abi,
    handledFs: fsRightsForAbi(abi),
    handledNet: restrictNet && abi >= 4 ? NET_BIND_TCP | NET_CONNECT_TCP : 0,
    scoped: abi >= 6 ? SCOPE_SIGNAL | (restrictNet ? SCOPE_ABSTRACT_UNIX_SOCKET : 0) : 0,
    pathRules,
    connectTcpPorts: [...(spec.connectTcpPorts ?? [])],
  };
}

/**
 * Build and apply the ruleset to the calling thread (sets PR_SET_NO_NEW_PRIVS). Throws `SANDBOX_UNAVAILABLE`
 * (fail closed) when Landlock is missing or refuses; the caller must then not exec.
 */
export function applyLandlock(spec: LandlockSpec, env: Record<string, string | undefined> = process.env): LandlockReport {
  const abi = landlockAbi(env);
  const planned = planLandlock(spec, abi);
  const handledFs = planned.handledFs;
  const attr = new Uint8Array(24); // { u64 handled_access_fs; u64 handled_access_net; u64 scoped }
  const av = new DataView(attr.buffer);
  av.setBigUint64(0, BigInt(handledFs), true);
  av.setBigUint64(8, BigInt(planned.handledNet), true);
  av.setBigUint64(16, BigInt(planned.scoped), true);

  const rules: { path: string; access: number }[] = [];
  for (const { path, access } of planned.pathRules) {
    let isDir: boolean;
    try {
      isDir = statSync(path).isDirectory();
    } catch {
      continue; // missing paths are skipped, as Codex does
    }
    rules.push({ path, access: (isDir ? access : access & FILE_RIGHTS) & handledFs });
  }

  let rulesetFd = -1;
  try {
    rulesetFd = syscall("landlock_create_ruleset", L.sys.landlock_create_ruleset!, attr, 24, 0);
    for (const r of rules) {
      if (r.access === 0) continue;
      const fd = openSync(r.path, O_PATH | O_CLOEXEC);
      try {
        const pb = new Uint8Array(12); // packed { u64 allowed_access; s32 parent_fd }
        const pv = new DataView(pb.buffer);
        pv.setBigUint64(0, BigInt(r.access), true);
        pv.setInt32(8, fd, true);
        syscall("landlock_add_rule", L.sys.landlock_add_rule!, rulesetFd, RULE_PATH_BENEATH, pb, 0);
      } finally {
        closeSync(fd);
      }
    }
    for (const port of planned.connectTcpPorts) {
      const nb = new Uint8Array(16); // packed { u64 allowed_access; u64 port }
      const nv = new DataView(nb.buffer);
      nv.setBigUint64(0, BigInt(NET_CONNECT_TCP), true);
      nv.setBigUint64(8, BigInt(port), true);
      syscall("landlock_add_rule", L.sys.landlock_add_rule!, rulesetFd, RULE_NET_PORT, nb, 0);
    }
    prctl(PR.SET_NO_NEW_PRIVS, 1);
    syscall("landlock_restrict_self", L.sys.landlock_restrict_self!, rulesetFd, 0);
  } catch (e) {
    throw new ShellmcpError("SANDBOX_UNAVAILABLE", `cannot apply the Landlock ruleset: ${(e as Error).message}`, { abi }, { cause: e });
  } finally {
    if (rulesetFd >= 0) closeFd(rulesetFd);
  }
  return { abi, handledFs, rules };
}
