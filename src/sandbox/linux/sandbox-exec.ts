/**
 * sandbox-exec (issue 40, "No Bun start on the per-call path"): under the Landlock backend, `serve` starts a call's
 * shell through a small static program (patches/sandbox-exec.c) instead of a second copy of this executable as the
 * helper. The server plans here, per call, exactly what the helper's in-process path would apply
 * (./in-process.ts {@link inProcessSteps}, ./landlock.ts {@link planLandlock}, ./seccomp.ts `buildFilter`), with the
 * call's environment; the program reads that plan from a pipe, applies it in the helper's order and execs the shell.
 * A call whose plan needs something only the helper does (a pid namespace of its own below Landlock ABI 6, an
 * unsandboxed plan) or that the helper would refuse (it then says why) still starts the helper.
 *
 * The plan is planned per call, not cached whole: what it names depends on the filesystem at the call (canonical
 * roots, roots that exist, and the entries beside a hidden credential store, ../secrets.ts `pathsBeside`), which the
 * helper read afresh at each call. The seccomp programs (a few per server) are cached.
 *
 * The wire format (version 1) is described in patches/sandbox-exec.c; {@link encodeExecPlan} and
 * {@link decodeExecPlan} are its two ends on this side. The program is found like the room launcher: beside a
 * from-source run in `dist/shells-static/<platform>/`, or the copy the compiled executable carries, installed to a
 * checked folder like the portable shells. `SHELLMCP_SANDBOX_EXEC=off` asks for the helper (the benches compare both).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { L } from "../../../ffi/libc.ts";
import { embeddedShell, installPortableShell } from "../../carried/portable-shells.ts";
import { IS_COMPILED, userHome } from "../../self.ts";
import type { PermissionProfile } from "../permission-profile.ts";
import type { SandboxPolicy } from "../policy.ts";
import { inProcessSteps, selfDirs } from "./in-process.ts";
import { FS, landlockAbi, NET_CONNECT_TCP_RIGHT, planLandlock } from "./landlock.ts";
import { buildFilter, type SeccompMode } from "./seccomp.ts";

/** Plan flags (patches/sandbox-exec.c). */
export const PLAN_FLAGS = {
  NO_NEW_PRIVS: 1,
  LANDLOCK: 2,
  DROP_CAPS: 4,
  SECCOMP: 8,
  RESET_SIGNALS: 16,
  SETSID: 32,
} as const;

const MAGIC = 0x31505853; // "SXP1"
const VERSION = 1;
/** Size of the plan's fixed header (bytes). */
export const PLAN_HEADER_BYTES = 4 * 4 + 8 * 3 + 4 * 3;

/** A plan for sandbox-exec: what to apply, in its order (see patches/sandbox-exec.c). */
export interface ExecPlan {
  /** {@link PLAN_FLAGS} bits. */
  flags: number;
  /** Landlock ABI the ruleset was planned for (0: no Landlock). */
  abi: number;
  handledFs: number;
  handledNet: number;
  scoped: number;
  /** Path rules: the rights a folder gets (a file keeps only the file rights; a missing path is skipped at the call). */
  pathRules: { path: string; access: number }[];
  /** TCP ports `connect` may reach (proxy mode). */
  connectTcpPorts: number[];
  /** The seccomp program (`struct sock_filter[]` bytes), when the flags ask for one. */
  seccomp?: Uint8Array;
}

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

/** The plan's bytes (little endian, version 1). Throws `RangeError` for a path with a NUL byte. */
export function encodeExecPlan(p: ExecPlan): Uint8Array {
  const paths = p.pathRules.map((r) => {
    if (r.path.includes("\0")) throw new RangeError(`a sandbox-exec path rule holds a NUL byte: ${r.path}`);
    return enc.encode(r.path);
  });
  const bpf = p.seccomp ?? new Uint8Array(0);
  const size = PLAN_HEADER_BYTES + paths.reduce((n, b) => n + 12 + b.byteLength, 0) + 16 * p.connectTcpPorts.length + bpf.byteLength;
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  let o = 0;
  const u32 = (x: number) => {
    v.setUint32(o, x >>> 0, true);
    o += 4;
  };
  const u64 = (x: number) => {
    v.setBigUint64(o, BigInt(x), true);
    o += 8;
  };
  u32(MAGIC);
  u32(VERSION);
  u32(p.flags);
  u32(p.abi);
  u64(p.handledFs);
  u64(p.handledNet);
  u64(p.scoped);
  u32(paths.length);
  u32(p.connectTcpPorts.length);
  u32(bpf.byteLength);
  p.pathRules.forEach((r, i) => {
    u64(r.access);
    u32(paths[i]!.byteLength);
    out.set(paths[i]!, o);
    o += paths[i]!.byteLength;
  });
  for (const port of p.connectTcpPorts) {
    u64(NET_CONNECT_TCP_RIGHT);
    u64(port);
  }
  out.set(bpf, o);
  return out;
}

/**
 * The plan in `bytes` (for tests and the golden launches; the C program is the reader that counts). Throws
 * `RangeError` for bytes that are not exactly one version-1 plan.
 */
export function decodeExecPlan(bytes: Uint8Array): ExecPlan {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let o = 0;
  const need = (n: number) => {
    if (o + n > bytes.byteLength) throw new RangeError("sandbox-exec plan: truncated");
  };
  const u32 = () => (need(4), (o += 4), v.getUint32(o - 4, true));
  const u64 = () => (need(8), (o += 8), Number(v.getBigUint64(o - 8, true)));
  if (u32() !== MAGIC || u32() !== VERSION) throw new RangeError("sandbox-exec plan: bad magic or version");
  const p: ExecPlan = { flags: u32(), abi: u32(), handledFs: u64(), handledNet: u64(), scoped: u64(), pathRules: [], connectTcpPorts: [] };
  const [np, nn, nb] = [u32(), u32(), u32()];
  for (let i = 0; i < np; i++) {
    const access = u64();
    const n = u32();
    need(n);
    p.pathRules.push({ access, path: dec.decode(bytes.subarray(o, o + n)) });
    o += n;
  }
  for (let i = 0; i < nn; i++) {
    u64();
    p.connectTcpPorts.push(u64());
  }
  need(nb);
  if (nb > 0) p.seccomp = bytes.slice(o, o + nb);
  o += nb;
  if (o !== bytes.byteLength) throw new RangeError("sandbox-exec plan: bytes after its end");
  return p;
}

const filters = new Map<string, Uint8Array>();

/** The seccomp program for `mode` (with truncate refused or not) on this machine, built once per process. */
function filterFor(mode: SeccompMode, refuseTruncate: boolean): Uint8Array {
  const key = `${mode}/${refuseTruncate}`;
  let f = filters.get(key);
  if (f === undefined) filters.set(key, (f = buildFilter(mode, L.arch as "linux-x64" | "linux-arm64", { refuseTruncate })));
  return f;
}

/** What a Landlock call of `serve` runs under (the helper's command line, as arguments). */
export interface LandlockCall {
  policy: SandboxPolicy;
  profile?: PermissionProfile;
  policyCwd: string;
  /** The shell's environment (the helper's own, whose `$TMPDIR`, `$HOME` and `SHELLMCP_SIMULATE_LANDLOCK_ABI` count). */
  env: Record<string, string | undefined>;
  /** Network proxy mode's loopback ports (`--network-proxy-ports`). */
  proxyPorts?: number[];
}

/** Most path rules sandbox-exec takes in one plan (`MAX_PATH_RULES` in patches/sandbox-exec.c; keep them equal). */
const SANDBOX_EXEC_MAX_PATH_RULES = 65536;
/**
 * Most bytes the path rules may take in a plan: what one pipe can hold for it (the plan is written before sandbox-exec
 * reads it: `/proc/sys/fs/pipe-max-size`, 1 MiB by default), at most sandbox-exec's `MAX_PLAN` (16 MiB), less 64 KiB
 * for the rest of the plan. Read once per process.
 */
function maxRuleBytes(): number {
  if (pipeMax === undefined) {
    let n = 1 << 20;
    try {
      const v = Number(readFileSync("/proc/sys/fs/pipe-max-size", "utf8").trim());
      if (Number.isSafeInteger(v) && v > 0) n = v;
    } catch {
      // no procfs: the kernel's default
    }
    pipeMax = Math.min(n, 1 << 24) - (1 << 16);
  }
  return pipeMax;
}
let pipeMax: number | undefined;

/**
 * The plan the helper (`--backend landlock`) would apply for `call` in its own process (./run.ts `runSandboxed`,
 * Landlock path, then ./in-process.ts `applyInProcess` and `execCommand`), or `{ helper }` with why only the helper
 * can run it: an unsandboxed plan (the helper execs, or refuses proxy mode), a pid namespace of its own (Landlock
 * ABI 1–5), or anything the helper would refuse (it then says why, exactly as before). Reads the filesystem as the
 * helper did (not cached: see the top of this file).
 */
export function planLandlockExec(call: LandlockCall): ExecPlan | { helper: string } {
  if (L.arch !== "linux-x64" && L.arch !== "linux-arm64") return { helper: `seccomp is not implemented for ${L.arch}` };
  const env = call.env;
  const proxied = call.proxyPorts !== undefined;
  try {
    // The helper's order (./run.ts `runSandboxed`, then `applyInProcess`): an unsandboxed plan execs or is refused,
    // a pid namespace of its own below ABI 6, then the steps. A refusal of the steps (landlockCanEnforce) is the
    // helper's to say, whichever of these it meets first.
    const steps = inProcessSteps(
      call.policy,
      call.policyCwd,
      { landlockWrites: true, proxied, ...(proxied ? { proxyPorts: call.proxyPorts } : {}) },
      call.profile,
      env,
      selfDirs(env.HOME ?? userHome()),
    );
    const plan = steps.plan;
    if (!plan.sandboxed) return { helper: "the plan is not sandboxed" };
    const needsFs = !plan.fullWrite || !plan.fullRead || plan.deniedPaths.length > 0;
    const abi = landlockAbi(env);
    if (needsFs && abi >= 1 && abi < 6) return { helper: `Landlock ABI ${abi}: the command needs a pid namespace of its own` };
    let flags = PLAN_FLAGS.NO_NEW_PRIVS | PLAN_FLAGS.DROP_CAPS | PLAN_FLAGS.RESET_SIGNALS;
    let ruleset: ReturnType<typeof planLandlock> | undefined;
    let refuseTruncate = false;
    if (steps.landlock !== undefined) {
      ruleset = planLandlock(steps.landlock, abi);
      // Over sandbox-exec's bound or a pipe's (a folder of thousands of entries beside a hidden store): the helper,
      // which has neither, applies the same rules (slower: a Bun start), rather than a call refused.
      const ruleBytes = ruleset.pathRules.reduce((n, r) => n + 12 + Buffer.byteLength(r.path), 0);
      if (ruleset.pathRules.length > SANDBOX_EXEC_MAX_PATH_RULES || ruleBytes > maxRuleBytes())
        return {
          helper: `${ruleset.pathRules.length} Landlock path rules (${ruleBytes} bytes), more than sandbox-exec takes (${SANDBOX_EXEC_MAX_PATH_RULES} rules, ${maxRuleBytes()} bytes in a pipe)`,
        };
      flags |= PLAN_FLAGS.LANDLOCK;
      refuseTruncate = steps.confinesWrites && (ruleset.handledFs & FS.TRUNCATE) === 0;
    }
    const seccomp = steps.seccomp !== undefined ? filterFor(steps.seccomp, refuseTruncate) : undefined;
    if (seccomp !== undefined) flags |= PLAN_FLAGS.SECCOMP;
    return {
      flags,
      abi: ruleset?.abi ?? 0,
      handledFs: ruleset?.handledFs ?? 0,
      handledNet: ruleset?.handledNet ?? 0,
      scoped: ruleset?.scoped ?? 0,
      pathRules: ruleset?.pathRules ?? [],
      connectTcpPorts: ruleset?.connectTcpPorts ?? [],
      ...(seccomp !== undefined ? { seccomp } : {}),
    };
  } catch (e) {
    return { helper: (e as Error).message };
  }
}

let found: { path: string } | { error: string } | undefined;

/**
 * Path of sandbox-exec (patches/sandbox-exec.c), found once per thread: compiled → the carried copy, installed to a
 * checked folder outside every writable root; from source → `dist/shells-static/<platform>/sandbox-exec` when built
 * (scripts/build-sandbox-exec.sh). `{ error }` says why there is none (not Linux, a build that carries none, a
 * failure to install, `SHELLMCP_SANDBOX_EXEC=off`).
 */
export function sandboxExecBinary(): { path: string } | { error: string } {
  if (process.env.SHELLMCP_SANDBOX_EXEC === "off") return { error: "SHELLMCP_SANDBOX_EXEC=off" };
  if (found === undefined) {
    if (process.platform !== "linux") found = { error: "not Linux" };
    else if (IS_COMPILED) {
      const bytes = embeddedShell("sandbox-exec");
      if (bytes === undefined) found = { error: "this build carries no sandbox-exec" };
      else
        try {
          found = { path: installPortableShell("sandbox-exec", bytes) };
        } catch (e) {
          found = { error: `cannot install sandbox-exec: ${(e as Error).message}` };
        }
    } else {
      const p = join(import.meta.dir, "..", "..", "..", "dist", "shells-static", `linux-${process.arch}`, "sandbox-exec");
      found = existsSync(p) ? { path: p } : { error: `${p} is not built (scripts/build-sandbox-exec.sh)` };
    }
  }
  return found;
}

/** sandbox-exec's argv: `PATH --plan-fd FD -- COMMAND…`. */
export function sandboxExecArgv(path: string, planFd: number, command: readonly string[]): string[] {
  return [path, "--plan-fd", String(planFd), "--", ...command];
}
