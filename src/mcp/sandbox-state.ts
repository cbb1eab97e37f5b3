/**
 * Codex's sandbox state, both ways it reaches an MCP server that declares the `codex/sandbox-state` capability:
 *
 * - Codex 0.97: the `codex/sandbox-state/update` request, params `{sandboxPolicy, sandboxCwd,
 *   codexLinuxSandboxExe?, useLinuxSandboxBwrap?}` (docs/escalation.md, "Sandbox state"). It sets the session's state: it
 *   applies to the calls that start after it.
 * - Codex 0.169: never sends the update; every `tools/call` carries the state in
 *   `params._meta["codex/sandbox-state"]` (a copy in `"codex/sandbox-state-meta"`, and
 *   `"codex/sandbox-launcher": {"codexExecutable"}` beside it) as `{permissionProfile, sandboxCwd: "file://…",
 *   codexLinuxSandboxExe, useLegacyLandlock, useMxc}`. It applies to that call only and wins over the session's.
 *
 * Both shapes are accepted in both places (a `permissionProfile` wins over a `sandboxPolicy` given with it).
 * Unknown envelope fields (`useMxc`, Windows fields, …) are ignored as Codex ignores them; the policy and the
 * profile themselves are validated strictly (see policy.ts and permission-profile.ts).
 */
import { ShellmcpError } from "../errors.ts";
import { parsePermissionProfile, pathFromUri } from "../sandbox/permission-profile.ts";
import { planPermissionProfile, summarySandboxPolicy } from "../sandbox/filesystem-plan.ts";
import { parseSandboxPolicy } from "../sandbox/policy.ts";
import type { SandboxRequest } from "../shell/backend-choice.ts";

/**
 * A sandbox state, from either Codex line: the request a call's backend is chosen from (../shell/backend-choice.ts
 * `SandboxRequest`, one type for `serve` and the exec-server). `sandboxCwd` is an absolute path (0.169's `file://`
 * URI converted); `useLegacyLandlock` means Landlock instead of bubblewrap (profiles Landlock cannot enforce fail).
 */
export type SandboxState = SandboxRequest;

/** `_meta` keys Codex 0.169 uses. */
export const META_SANDBOX_STATE = "codex/sandbox-state";
export const META_SANDBOX_STATE_COPY = "codex/sandbox-state-meta";
export const META_SANDBOX_LAUNCHER = "codex/sandbox-launcher";

function optString(v: unknown, name: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw new ShellmcpError("USAGE", `\`${name}\` must be a string`);
  return v;
}

function optBool(v: unknown, name: string, nullOk: boolean): boolean {
  if (v === undefined || (nullOk && v === null)) return false;
  if (typeof v !== "boolean") throw new ShellmcpError("USAGE", `\`${name}\` must be a boolean`);
  return v;
}

/**
 * Parse a sandbox state (the params of `codex/sandbox-state/update`, or the value of
 * `_meta["codex/sandbox-state"]`). Throws `USAGE` for anything malformed (→ -32602 for the update request, an
 * error result for a call). 0.97 rules kept: `sandboxCwd` must be a string, `useLinuxSandboxBwrap` null is
 * rejected.
 */
export function parseSandboxState(params: unknown): SandboxState {
  if (typeof params !== "object" || params === null || Array.isArray(params)) throw new ShellmcpError("USAGE", "params must be an object");
  const p = params as Record<string, unknown>;
  if (p.sandboxPolicy === undefined && p.permissionProfile === undefined)
    throw new ShellmcpError("USAGE", "missing field `sandboxPolicy` (or `permissionProfile`)");
  if (typeof p.sandboxCwd !== "string") throw new ShellmcpError("USAGE", "missing field `sandboxCwd`");
  const state: SandboxState = {
    policy: { type: "read-only", access: { type: "full-access" }, network_access: false },
    sandboxCwd: p.sandboxCwd,
    codexLinuxSandboxExe: optString(p.codexLinuxSandboxExe, "codexLinuxSandboxExe"),
    useBwrap: optBool(p.useLinuxSandboxBwrap, "useLinuxSandboxBwrap", false),
    useLegacyLandlock: optBool(p.useLegacyLandlock, "useLegacyLandlock", true),
  };
  if (p.permissionProfile !== undefined) {
    state.profile = parsePermissionProfile(p.permissionProfile);
    state.sandboxCwd = pathFromUri(p.sandboxCwd, "sandboxCwd");
    // Only for decisions that still take a legacy policy; `profile` is what is enforced.
    state.policy = summarySandboxPolicy(planPermissionProfile(state.profile, state.sandboxCwd));
  } else {
    state.policy = parseSandboxPolicy(p.sandboxPolicy);
    // 0.97 passes `sandboxCwd` through verbatim (even "" or relative); a file:// URI is converted.
    if (p.sandboxCwd.startsWith("file:")) state.sandboxCwd = pathFromUri(p.sandboxCwd, "sandboxCwd");
  }
  return state;
}

/**
 * The per-call state in a `tools/call`'s `_meta` (Codex 0.169), or `undefined` when the call carries none (the
 * session's state then applies). `codex/sandbox-state` is read, else its copy `codex/sandbox-state-meta`;
 * `codex/sandbox-launcher.codexExecutable` fills in a missing `codexLinuxSandboxExe`. Throws `USAGE` when the
 * state is present but malformed: the call must then fail, never fall back to the (possibly wider) session state.
 */
export function sandboxStateFromMeta(meta: Record<string, unknown> | undefined): SandboxState | undefined {
  if (meta === undefined) return undefined;
  const raw = meta[META_SANDBOX_STATE] ?? meta[META_SANDBOX_STATE_COPY];
  if (raw === undefined || raw === null) return undefined;
  let state: SandboxState;
  try {
    state = parseSandboxState(raw);
  } catch (e) {
    throw new ShellmcpError(
      e instanceof ShellmcpError ? e.code : "USAGE",
      `invalid _meta["${META_SANDBOX_STATE}"]: ${(e as Error).message}`,
    );
  }
  const launcher = meta[META_SANDBOX_LAUNCHER];
  if (state.codexLinuxSandboxExe === undefined && typeof launcher === "object" && launcher !== null) {
    const exe = (launcher as Record<string, unknown>).codexExecutable;
    if (typeof exe === "string") state.codexLinuxSandboxExe = exe;
  }
  return state;
}

/** Moved to ../sandbox/writable.ts (the call's sandbox asks it there); kept here for existing importers. */
export { planWritableView } from "../sandbox/writable.ts";
