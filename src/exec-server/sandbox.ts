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
import { existsSync, lstatSync, readdirSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { selfExecCommand } from "../self.ts";
import { ShellmcpError } from "../errors.ts";
import { parsePermissionProfile, serializePermissionProfile, type PermissionProfile } from "../sandbox/permission-profile.ts";
import { planPermissionProfile, summarySandboxPolicy } from "../sandbox/filesystem-plan.ts";
import {
  hasFullDiskWrite,
  hasFullNetwork,
  parseSandboxPolicy,
  PROTECTED_NAMES,
  serializeSandboxPolicy,
  type SandboxPolicy,
} from "../sandbox/policy.ts";
import { hiddenPaths, hiddenPathsFlag } from "../sandbox/secrets.ts";
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

/** argv that runs `command` under `sb` through our `codex-linux-sandbox` role (bwrap when available). */
export function sandboxedArgv(sb: ExecSandbox, command: string[]): string[] {
  const policy =
    sb.profile !== undefined
      ? ["--permission-profile", serializePermissionProfile(sb.profile)]
      : ["--sandbox-policy", serializeSandboxPolicy(sb.policy)];
  return [
    ...selfExecCommand(),
    "--codex-run-as-linux-sandbox",
    "--backend",
    "auto",
    "--sandbox-policy-cwd",
    sb.cwd,
    ...policy,
    ...(inheritPidNamespace ? ["--inherit-pid-namespace"] : []),
    ...hiddenPathsFlag(hiddenPaths()),
    "--",
    ...command,
  ];
}

/** Paths where the sandbox may create an empty mount point, that do not exist now (to remove afterwards). */
export function mountPointCandidates(sb: ExecSandbox): string[] {
  const roots = sb.policy.type === "workspace-write" ? [...sb.policy.writable_roots, sb.cwd] : [sb.cwd];
  const out: string[] = [];
  for (const r of new Set(roots)) for (const n of MOUNT_POINT_NAMES) if (!existsSync(join(r, n))) out.push(join(r, n));
  return out;
}

/** Remove those candidates that now exist as empty directories (left behind by a killed sandbox). */
export function removeLeftoverMountPoints(candidates: string[]): void {
  for (const p of candidates) {
    try {
      if (lstatSync(p).isDirectory() && readdirSync(p).length === 0) rmdirSync(p);
    } catch {
      // gone, or not ours
    }
  }
}
