/**
 * The `sandbox` field of `process/start` and of the fs methods, turned into what our Linux sandbox helper runs.
 *
 * Shapes accepted (exec-server spec §6.3, §13.1; 0.169 traces §5):
 * - Codex 0.169: `{permissions: PermissionProfile, cwd?, workspaceRoots?, windowsSandboxLevel, …}`; the profile is
 *   validated and planned by `src/sandbox/permission-profile.ts` (the same mapping `serve` uses; what cannot be
 *   enforced is refused here) and handed to our helper as `--permission-profile`, which enforces that plan.
 * - April: `{sandboxPolicy: SandboxPolicy, sandboxPolicyCwd?, windowsSandboxLevel, …}`.
 * `windowsSandboxLevel` is required when `sandbox` is an object (−32602 otherwise), as upstream.
 * No sandbox: `sandbox` null/absent, profile `disabled`/`external` (fs: run directly), policy `danger-full-access`.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, rmdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { IS_COMPILED, isSelfExe, openSelfExe, selfExecCommand, selfExePath } from "../self.ts";
import type { CallSandbox } from "../sandbox/backend.ts";
import { bytesPipe } from "../sandbox/bytes-pipe.ts";
import * as libc from "../../ffi/libc.ts";
import type { GitGuard } from "../sandbox/git/guard.ts";
import { hostGitGuard } from "../shell/git-guard.ts";
import { resolveCodexHome } from "../execpolicy/discovery.ts";
import { BackendChoice } from "../shell/backend-choice.ts";
import { ShellmcpError } from "../errors.ts";
import { parsePermissionProfile, type PermissionProfile } from "../sandbox/permission-profile.ts";
import { planPermissionProfile, summarySandboxPolicy } from "../sandbox/filesystem-plan.ts";
import { hasFullDiskWrite, hasFullNetwork, parseSandboxPolicy, type SandboxPolicy } from "../sandbox/policy.ts";
import { markerDir } from "../sandbox/linux/mount-markers.ts";
import { PROTECTED_NAMES, setProtectedConfigDirs } from "../sandbox/protected-config.ts";
import { carriedBases } from "../carried/portable-shells.ts";
import { writeStderr } from "../stderr.ts";
import { decodePath, invalidParams, paramsObject, rpcError, RPC } from "./rpc.ts";

/** A decided sandbox: the legacy policy our helper enforces, and its cwd (absolute). */
export interface ExecSandbox {
  policy: SandboxPolicy;
  /** The Codex 0.169 profile it came from: the helper enforces it exactly (`--permission-profile`), e.g. `.aws`. */
  profile?: PermissionProfile;
  cwd: string;
  /** Kind reported as `sandboxType` in the `process/start` result (Codex 0.169: `linuxSeccomp`). */
  sandboxType: "linuxSeccomp";
}

/** Mount-point names our helper (bwrap) may create in a writable root, plus Codex's `.aws` (cleaned up after). */
const MOUNT_POINT_NAMES = [...PROTECTED_NAMES, ".aws"];

/**
 * Decode a `sandbox` value. `fallbackCwd` is used when it names no cwd. Returns undefined when the operation runs
 * without a sandbox. Throws −32602 for malformed input and `failPrefix`-prefixed −32600 when the profile cannot be
 * enforced (fail closed).
 */
export function decodeSandbox(v: unknown, fallbackCwd: string, opts: { fsOperation: boolean }): ExecSandbox | undefined {
  if (v === undefined || v === null) return undefined;
  const o = paramsObject(v, "FileSystemSandboxContext");
  if (o.windowsSandboxLevel === undefined) throw invalidParams("missing field `windowsSandboxLevel`");
  const cwdRaw = o.cwd ?? o.sandboxPolicyCwd;
  const cwd = cwdRaw === undefined || cwdRaw === null ? fallbackCwd : decodePath(cwdRaw, "cwd");
  let policy: SandboxPolicy;
  let profile: PermissionProfile | undefined;
  try {
    if (o.permissions !== undefined && o.permissions !== null) {
      profile = parsePermissionProfile(o.permissions);
      if (profile.type === "disabled") return undefined;
      if (profile.type === "external" && opts.fsOperation) return undefined;
      policy = summarySandboxPolicy(planPermissionProfile(profile, cwd));
    } else if (o.sandboxPolicy !== undefined && o.sandboxPolicy !== null) {
      policy = parseSandboxPolicy(o.sandboxPolicy);
    } else throw invalidParams("missing field `permissions`");
  } catch (e) {
    if (e instanceof ShellmcpError && e.code === "USAGE") throw invalidParams(e.message);
    if (e instanceof ShellmcpError && e.code === "SANDBOX_UNAVAILABLE")
      throw rpcError(
        RPC.INVALID_REQUEST,
        `${opts.fsOperation ? "failed to prepare fs sandbox" : "failed to prepare sandbox"}: ${e.message}`,
      );
    throw e;
  }
  if (policy.type === "danger-full-access") return undefined;
  if (opts.fsOperation && policy.type === "external-sandbox") return undefined;
  if (hasFullDiskWrite(policy) && hasFullNetwork(policy)) return undefined;
  return { policy, profile, cwd, sandboxType: "linuxSeccomp" };
}

let inheritPidNamespace = false;

/**
 * `--linux-sandbox-pid-namespace` of this server (Codex 0.169): `isolate` (default) gives each sandboxed process a
 * pid namespace of its own (bwrap `--unshare-pid`: it cannot see or signal other processes of this user);
 * `inherit` passes the helper Codex's `--inherit-pid-namespace` (no pid namespace, the host's /proc).
 */
export function setPidNamespaceMode(mode: "isolate" | "inherit"): void {
  inheritPidNamespace = mode === "inherit";
}

/**
 * This server's CODEX_HOME (absolute), also when `CODEX_HOME` names a folder that does not exist (yet) or no home
 * folder is known (a uid without a passwd entry): then `$HOME/.codex`, or `/.codex` without HOME (a folder to protect
 * and keep copies in that simply does not exist).
 */
export function codexHome(): string {
  try {
    return resolveCodexHome();
  } catch {
    const v = process.env.CODEX_HOME;
    return v !== undefined && v !== "" ? resolve(v) : join(process.env.HOME ?? "/", ".codex");
  }
}

let choice: BackendChoice | undefined;
let guard: GitGuard | undefined;
/** This server's CODEX_HOME when it protects it (made at start: {@link setSandboxBackend}). */
let protectedHome: string | undefined;

/**
 * Make `home` (with missing parents, mode 0700) when it does not exist. Returns the error text when it cannot be
 * made (or is no folder), undefined when it is there.
 */
function makeCodexHome(home: string): string | undefined {
  try {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    return statSync(home).isDirectory() ? undefined : "not a folder";
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * `--sandbox-backend auto|bwrap|landlock` of this server (as `serve`'s): the one backend choice every sandboxed
 * process and fs operation of this server is launched under. Throws `USAGE` for another value.
 *
 * CODEX_HOME (rules, config.toml, auth.json: what decides later sessions) is protected as `serve` protects it: kept
 * read-only inside every writable root under bubblewrap (`--protected-config-dir`), a sandbox whose writable roots
 * contain it refused under Landlock. It is made here (mode 0700) when it does not exist: a missing protected
 * folder would get an empty placeholder as bubblewrap's mount point, which a killed helper could leave behind in
 * HOME. When it cannot be made (a read-only HOME), no sandbox can make it either: it is not protected, and the
 * server says so on stderr.
 */
export function setSandboxBackend(kind: string): void {
  const home = codexHome();
  const why = makeCodexHome(home);
  if (why !== undefined)
    writeStderr(`shellmcp exec-server: cannot make CODEX_HOME (${home}): ${why}; sandboxed processes run without it protected\n`);
  protectedHome = why === undefined ? home : undefined;
  // With it, the folder of the programs this executable carries and runs outside every sandbox (the lifeline guard).
  setProtectedConfigDirs([...(protectedHome === undefined ? [] : [protectedHome]), ...carriedBases()]);
  choice = new BackendChoice(kind, protectedHome === undefined ? [] : [protectedHome]);
}

/**
 * Throws −32600 "failed to prepare sandbox: …" when the protected CODEX_HOME was removed while the server runs and
 * cannot be made again (a sandbox would then get a placeholder mount point for it); makes it again otherwise.
 */
function ensureProtectedHome(): void {
  if (protectedHome === undefined || existsSync(protectedHome)) return;
  const why = makeCodexHome(protectedHome);
  if (why !== undefined)
    throw rpcError(
      RPC.INVALID_REQUEST,
      `failed to prepare sandbox: CODEX_HOME (${protectedHome}) is gone and cannot be made again: ${why}`,
    );
}

/**
 * The git guard of this server (../sandbox/git/guard.ts, one per process, as `serve`'s): the control state under a
 * sandboxed process's writable roots is recorded before it starts and checked once it and what it started ended.
 */
export function execGitGuard(): GitGuard {
  guard ??= hostGitGuard(codexHome());
  return guard;
}

/**
 * The sandbox of one process or fs operation under `sb`: the server's {@link BackendChoice} asked as `serve` asks it
 * (issue 39, "one launch path"), with `env` the child's environment. `workdir`: the folder the process starts in
 * (default the sandbox's cwd; bubblewrap keeps the `.git` of its repository read-only). `direct`: whether the launch
 * may start bubblewrap or sandbox-exec directly with fds besides 0–2 (a `process/start` under the lifeline guard,
 * {@link execLaunchFor}); else our helper is started (the fs helper, which passes only stdio). Throws −32600 "failed
 * to prepare sandbox: …" when it cannot be enforced.
 */
export function callSandboxFor(
  sb: ExecSandbox,
  env: Record<string, string | undefined>,
  opts: { workdir?: string; direct?: boolean } = {},
): CallSandbox {
  choice ??= new BackendChoice("auto");
  ensureProtectedHome();
  const call = choice.forCall(
    { policy: sb.policy, profile: sb.profile, sandboxCwd: sb.cwd, useBwrap: false, useLegacyLandlock: false },
    opts.workdir ?? sb.cwd,
    {
      platform: process.platform,
      helperExe: IS_COMPILED && process.platform === "linux" ? selfExePath() : selfExecCommand()[0]!,
      env,
      // `inherit` keeps our helper (its `--inherit-pid-namespace`): bubblewrap started directly unshares the pid
      // namespace, and without one, processes could outlive bwrap on mount points given back at the process's close.
      direct: opts.direct === true && !inheritPidNamespace,
    },
  );
  if ("refused" in call) throw rpcError(RPC.INVALID_REQUEST, `failed to prepare sandbox: ${call.refused}`);
  return call;
}

/** argv that runs `command` under `call` through our `codex-linux-sandbox` role (the backend the server chose). */
export function sandboxedArgv(call: CallSandbox, command: string[]): string[] {
  return withPidNamespaceFlag(call.launch({ ...PROGRAM_SHELL, program: command }).argv);
}

/** A {@link ShellCommand} that starts `program` (set by the caller) instead of a shell. */
const PROGRAM_SHELL = { shellPath: "", login: false, command: "", wrapperPath: "" };

/** `argv` with Codex's pid-namespace flag after our helper's role flag (../sandbox/linux/backend.ts `helperCommand`). */
function withPidNamespaceFlag(launchArgv: readonly string[]): string[] {
  const argv = [...launchArgv];
  const role = argv.indexOf("--codex-run-as-linux-sandbox");
  if (inheritPidNamespace && role >= 0) argv.splice(role + 1, 0, "--inherit-pid-namespace");
  return argv;
}

/**
 * How one sandboxed process starts (see {@link execLaunch}): its argv, whether that is our helper, the fds to place
 * in the spawned process (`[fd number in it, fd here]`, as ../shell/spawn-plan.ts `spawnPlan` places them), and what
 * to give back.
 */
export interface ExecLaunch {
  argv: string[];
  /** Our Bun helper (`codex-linux-sandbox`) starts the sandbox: it makes and gives back its mount points itself. */
  helper: boolean;
  fds: [number, number][];
  /** Close this process's copies of the fds only it holds (the seccomp program or plan pipe), once spawned. Idempotent. */
  closeFds: () => void;
  /** Give back what the launch made on the host (bubblewrap's mount points), once the sandbox has ended. Idempotent. */
  release: () => void;
}

/**
 * The sandbox and launch of `command` under `sb` (issue 40: serve's launch path, no Bun start): with `direct`,
 * bubblewrap started directly with its seccomp program at an fd (`--seccomp FD`), or sandbox-exec reading the plan
 * from an fd under Landlock; our helper where only it can run the plan, where `direct` is false, and where the
 * direct launch cannot be made here (a replaced executable, a plan larger than a pipe holds): the helper then
 * fails the process with its reason on stderr, as before. `env`, `workdir`: as {@link callSandboxFor}, whose
 * errors it throws; nothing is left held when it throws.
 */
export function execLaunchFor(
  sb: ExecSandbox,
  env: Record<string, string | undefined>,
  workdir: string,
  direct: boolean,
  command: string[],
): { call: CallSandbox; launch: ExecLaunch } {
  const call = callSandboxFor(sb, env, { workdir, direct });
  try {
    return { call, launch: execLaunch(call, command) };
  } catch (e) {
    if (!direct || !(e instanceof ShellmcpError && e.code === "SANDBOX_UNAVAILABLE")) throw e;
  }
  const viaHelper = callSandboxFor(sb, env, { workdir, direct: false });
  return { call: viaHelper, launch: execLaunch(viaHelper, command) };
}

/** {@link execLaunchFor}'s launch under `call`. Throws `SANDBOX_UNAVAILABLE` (with nothing held) when it cannot be made. */
function execLaunch(call: CallSandbox, command: string[]): ExecLaunch {
  const launch = call.launch({ ...PROGRAM_SHELL, program: command });
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    launch.release?.();
  };
  const fds: [number, number][] = (launch.fds ?? []).map(([at, fd]) => [at, fd]);
  let owned: number | undefined;
  try {
    if (launch.seccomp !== undefined) {
      owned = bytesPipe(launch.seccomp.program);
      fds.push([launch.seccomp.fd, owned]);
    }
    const self = launch.selfExeFd !== undefined ? openSelfExe() : undefined;
    if (self !== undefined) fds.push([launch.selfExeFd!, self]);
  } catch (e) {
    release();
    throw e;
  }
  const closeFds = () => {
    if (owned !== undefined) libc.closeQuiet(owned);
    owned = undefined;
  };
  return { argv: withPidNamespaceFlag(launch.argv), helper: isSelfExe(launch.argv[0]), fds, closeFds, release };
}

/** Paths where the sandbox may create an empty mount point, that do not exist now (to remove afterwards). */
function mountPointCandidates(sb: ExecSandbox): string[] {
  const roots = sb.policy.type === "workspace-write" ? [...sb.policy.writable_roots, sb.cwd] : [sb.cwd];
  const out: string[] = [];
  for (const r of new Set(roots)) for (const n of MOUNT_POINT_NAMES) if (!existsSync(join(r, n))) out.push(join(r, n));
  return out;
}

/**
 * Remove those candidates that now exist as empty directories (left behind by a killed sandbox helper). Only where
 * mount markers are off (no CODEX_HOME folder: ../sandbox/linux/mount-markers.ts); with markers the sweep removes
 * exactly what dead helpers made and nothing another process still stands on.
 */
export function removeLeftoverMountPoints(candidates: string[]): void {
  for (const p of candidates) {
    try {
      if (lstatSync(p).isDirectory() && readdirSync(p).length === 0) rmdirSync(p);
    } catch {
      // gone, or not ours
    }
  }
}

/**
 * What a process's end must clean up after our helper (./process.ts `maybeClose`), which records its mount points in
 * the CODEX_HOME of the process's environment (it may not be ours) and cannot give them back when killed with the
 * process: `markerEnv`, that environment when it names this server's own CODEX_HOME (only that one is swept by marker:
 * the environment comes from the client, and a marker folder it names elsewhere could be one a sandbox wrote), and
 * without markers the missing paths a killed helper may leave as empty mount points (`leftovers`). Nothing for a
 * direct launch: its mount points are this server's own (in its markers), given back by {@link ExecLaunch.release}.
 */
export function helperLeftovers(
  launch: ExecLaunch,
  env: Record<string, string | undefined>,
  sb: ExecSandbox,
): { markerEnv: Record<string, string | undefined> | undefined; leftovers: string[] } {
  if (!launch.helper) return { markerEnv: undefined, leftovers: [] };
  const own = sameCodexHome(env);
  return { markerEnv: own ? env : undefined, leftovers: own && markerDir(env) !== undefined ? [] : mountPointCandidates(sb) };
}

/** Place `fds` (`[fd number in the child, fd here]`) in a spawn's `stdio`, "ignore" before them (as ../shell/spawn-plan.ts). */
export function placeFds(stdio: (number | "ignore" | "pipe")[], fds: readonly (readonly [number, number])[]): void {
  for (const [at, fd] of fds) {
    for (let i = 0; i < at; i++) stdio[i] ??= "ignore";
    stdio[at] = fd;
  }
}

/** Whether `env` names this server's own CODEX_HOME (where its helpers record their mount points). */
function sameCodexHome(env: Record<string, string | undefined>): boolean {
  try {
    return resolveCodexHome(env) === codexHome();
  } catch {
    return false;
  }
}
