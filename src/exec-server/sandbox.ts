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
import { IS_COMPILED, selfExecCommand, selfExePath } from "../self.ts";
import type { CallSandbox } from "../sandbox/backend.ts";
import type { GitGuard } from "../sandbox/git/guard.ts";
import { hostGitGuard } from "../shell/git-guard.ts";
import { resolveCodexHome } from "../execpolicy/discovery.ts";
import { BackendChoice } from "../shell/backend-choice.ts";
import { ShellmcpError } from "../errors.ts";
import { parsePermissionProfile, type PermissionProfile } from "../sandbox/permission-profile.ts";
import { planPermissionProfile, summarySandboxPolicy } from "../sandbox/filesystem-plan.ts";
import { hasFullDiskWrite, hasFullNetwork, parseSandboxPolicy, type SandboxPolicy } from "../sandbox/policy.ts";
import { PROTECTED_NAMES, setProtectedConfigDirs } from "../sandbox/protected-config.ts";
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
  setProtectedConfigDirs(protectedHome === undefined ? [] : [protectedHome]);
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
 * (issue 39, "one launch path"), with `env` the child's environment. Throws −32600 "failed to prepare sandbox: …"
 * when it cannot be enforced.
 */
export function callSandboxFor(sb: ExecSandbox, env: Record<string, string | undefined>): CallSandbox {
  choice ??= new BackendChoice("auto");
  ensureProtectedHome();
  const call = choice.forCall(
    { policy: sb.policy, profile: sb.profile, sandboxCwd: sb.cwd, useBwrap: false, useLegacyLandlock: false },
    sb.cwd,
    {
      platform: process.platform,
      helperExe: IS_COMPILED && process.platform === "linux" ? selfExePath() : selfExecCommand()[0]!,
      env,
      direct: false,
    },
  );
  if ("refused" in call) throw rpcError(RPC.INVALID_REQUEST, `failed to prepare sandbox: ${call.refused}`);
  return call;
}

/** argv that runs `command` under `call` through our `codex-linux-sandbox` role (the backend the server chose). */
export function sandboxedArgv(call: CallSandbox, command: string[]): string[] {
  const launch = call.launch({ shellPath: "", login: false, command: "", wrapperPath: "", program: command });
  const argv = [...launch.argv];
  // Our helper's role flag comes first (../sandbox/linux/backend.ts `helperCommand`); Codex's pid-namespace flag after it.
  if (inheritPidNamespace) argv.splice(argv.indexOf("--codex-run-as-linux-sandbox") + 1, 0, "--inherit-pid-namespace");
  return argv;
}

/** Paths where the sandbox may create an empty mount point, that do not exist now (to remove afterwards). */
export function mountPointCandidates(sb: ExecSandbox): string[] {
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
