/**
 * One `shell` call of `serve`: the sandbox state that applies to it (Codex 0.169's per-call `_meta`, else the
 * session's), the launcher for that state (Seatbelt on macOS; our helper, direct bubblewrap, or Codex's own
 * helper on Linux), then the command itself (../shell/run-command.ts) with every exec decided by the rules.
 */
import { trackSession } from "../shell/sessions.ts";
import { existsSync } from "node:fs";
import { isAbsolute } from "node:path";
import type { EscalationServer } from "../escalate/server.ts";
import { decideExec } from "../mcp/escalation-policy.ts";
import { interceptSetFor } from "../mcp/intercept-set.ts";
import { planWritableView, sandboxStateFromMeta, type SandboxState } from "../mcp/sandbox-state.ts";
import type { ToolContext, ToolResult } from "../mcp/server.ts";
import { formatResult, parseShellArgs } from "../mcp/shell-tool.ts";
import { landlockCanEnforce, planPermissionProfile, planSandboxPolicy, type FilesystemPlan } from "../sandbox/filesystem-plan.ts";
import { seatbeltWritableView } from "../sandbox/macos/seatbelt.ts";
import { serializePermissionProfile } from "../sandbox/permission-profile.ts";
import { ShellmcpError } from "../errors.ts";
import { log } from "../log.ts";
import type { CgroupManager } from "../shell/cgroup.ts";
import { runCommand, type RunCommandOptions, type SandboxLauncher } from "../shell/run-command.ts";
import type { ServeOptions, ServeSetup } from "./setup.ts";
import { hasFullDiskWrite, hasFullNetwork } from "../sandbox/policy.ts";
import { CallProxy, refusalReport } from "../network/proxy.ts";
import { networkAsker } from "../mcp/network-approval.ts";

/** What every call of one server shares. */
export interface ServeRuntime {
  setup: ServeSetup;
  options: ServeOptions;
  platform: NodeJS.Platform;
  /** The exec wrapper and the Linux sandbox helper (this executable under those names). */
  wrapperPath: string;
  helperExe: string;
  /** Resolves once the escalation server is up (calls wait for it). */
  server: () => Promise<EscalationServer>;
  /** Resolves with why the shell is refused (not patched), or undefined once it is known to intercept. */
  shellRefused: () => Promise<string | undefined>;
  /** Session ids of the shells of this server's running calls (killed when the client goes away). */
  sessions: Set<number>;
  cgroups?: CgroupManager;
}

/** A tool result that reports a refusal (the command was not run). */
export function errorResult(message: string): ToolResult {
  return { content: [{ type: "text", text: message }], isError: true };
}

/** The launcher for one call under `snap`, or a refusal (what cannot be enforced is never run with less). */
function launcherFor(
  rt: ServeRuntime,
  snap: SandboxState,
  workdir: string,
): { launcher: SandboxLauncher; writable?: RunCommandOptions["writable"]; callPlan?: FilesystemPlan } | ToolResult {
  const { helperExe, setup } = rt;
  const cwd = snap.sandboxCwd ?? workdir;
  if (rt.platform === "darwin") {
    // macOS: Seatbelt, from the profile or the legacy policy; the boundary judges what that policy lets write.
    let plan: FilesystemPlan;
    try {
      plan = snap.profile !== undefined ? planPermissionProfile(snap.profile, cwd) : planSandboxPolicy(snap.policy, cwd, setup.env);
    } catch (e) {
      return errorResult(`shellmcp refused to run the command: ${(e as Error).message}`);
    }
    return { launcher: { exe: helperExe, flags: [], seatbelt: { plan } }, writable: () => seatbeltWritableView(plan), callPlan: plan };
  }
  if (snap.profile !== undefined) {
    // Codex's own helper takes profiles with a different argv (no --sandbox-policy): ours always runs them.
    const flags = snap.useLegacyLandlock ? ["--backend", "landlock"] : setup.backend.flags();
    let plan: FilesystemPlan;
    try {
      plan = planPermissionProfile(snap.profile, cwd);
    } catch (e) {
      return errorResult(`shellmcp refused to run the command: ${(e as Error).message}`);
    }
    const why = flags[1] === "landlock" ? landlockCanEnforce(plan) : undefined;
    if (why !== undefined) return errorResult(`shellmcp refused to run the command: ${why}`);
    return {
      launcher: {
        exe: helperExe,
        flags: [...flags, "--permission-profile", serializePermissionProfile(snap.profile)],
        direct: setup.backend.direct(flags, snap.profile),
      },
      // The escalation boundary judges against what the profile really lets the shell write.
      writable: (enforcement) => planWritableView(plan, enforcement),
      callPlan: plan,
    };
  }
  if (rt.options.useCodexLinuxSandboxExe && snap.codexLinuxSandboxExe !== undefined)
    return { launcher: { exe: snap.codexLinuxSandboxExe, flags: snap.useBwrap ? ["--use-bwrap-sandbox"] : [] } };
  const flags = snap.useBwrap ? ["--backend", "bwrap"] : setup.backend.flags();
  return { launcher: { exe: helperExe, flags, direct: setup.backend.direct(flags) } };
}

/**
 * Run one `shell` call: `args` as the client sent them, `state` the session's sandbox state, `ctx` the MCP
 * context (per-call `_meta`, elicitation, progress, cancellation). A refusal is a tool result; a command that
 * could not be started at all throws `PROTOCOL`.
 */
export async function handleShellCall(
  rt: ServeRuntime,
  state: SandboxState,
  args: Record<string, unknown> | undefined,
  ctx: ToolContext,
): Promise<ToolResult> {
  const a = parseShellArgs(args);
  const { setup } = rt;
  // Codex 0.169: the state travels with the call and applies to it alone; else the session's (0.97).
  let snap = state;
  try {
    snap = sandboxStateFromMeta(ctx.meta) ?? state;
  } catch (e) {
    return errorResult((e as Error).message);
  }
  // A client without sandbox state that offers MCP roots: they join the server's workspace (never the workdir).
  if (snap === setup.initialState && ctx.roots !== undefined && snap.policy.type === "workspace-write") {
    const extra = (await ctx.roots()).filter((p) => isAbsolute(p) && existsSync(p));
    if (extra.length > 0) snap = { ...snap, policy: { ...snap.policy, writable_roots: [...snap.policy.writable_roots, ...extra] } };
  }
  const l = launcherFor(rt, snap, a.workdir);
  if ("content" in l) return l;
  // Network proxy mode: the feature is on and this call's sandbox has the network (Codex: without the feature,
  // enabled network stays full network).
  const proxied = proxyModeFor(setup, snap);
  if (proxied && l.launcher.direct === undefined && l.launcher.exe !== rt.helperExe)
    return errorResult(
      "shellmcp refused to run the command: network proxy mode cannot be enforced by Codex's own sandbox helper (--use-codex-linux-sandbox-exe); run without that flag",
    );
  const server = await rt.server();
  const refused = await rt.shellRefused();
  if (refused !== undefined) return errorResult(`shellmcp cannot run commands: ${refused}.`);
  const proxy = proxied
    ? new CallProxy({
        policy: setup.network,
        ask: networkAsker(ctx.elicit, setup.settings.codexHome),
        sessionAllowed: setup.networkApproved,
      })
    : undefined;
  const r = await runCommand({
    networkProxy: proxy,
    command: a.command,
    workdir: a.workdir,
    login: a.login,
    timeoutMs: a.timeoutMs,
    shellPath: setup.shellPath,
    wrapperPath: rt.wrapperPath,
    env: setup.env,
    policy: snap.policy,
    sandboxCwd: snap.sandboxCwd ?? a.workdir,
    writable: l.writable,
    launcher: l.launcher,
    server,
    maxOutputBytes: setup.maxOutputBytes,
    signal: ctx.signal,
    decide: (req, stopwatch) => decideExec(setup.settings, { elicit: ctx.elicit, paused: (f) => stopwatch.paused(f) }, req),
    onProgress:
      ctx.progress === undefined
        ? undefined
        : (ms, bytes) => ctx.progress!(Math.floor(ms / 1000), `running for ${Math.floor(ms / 1000)} s, ${bytes} bytes of output`),
    track: (sid, running) => trackSession(rt.sessions, sid, running),
    cgroups: rt.cgroups,
    interceptSet: rt.options.interceptAll ? undefined : interceptSetFor(setup.settings.policy),
    escalation: setup.escalation,
    callPlan: l.callPlan,
  }).finally(() => proxy?.close());
  if (proxy !== undefined && proxy.refusals.length > 0) r.output += refusalReport(proxy.refusals);
  if (r.spawnError !== undefined) throw new ShellmcpError("PROTOCOL", r.spawnError);
  const stale = setup.backend.bwrapFailed(r, l.launcher);
  if (stale !== undefined) {
    log.warn(stale);
    return formatResult({ ...r, output: `${r.output}${stale}\n` });
  }
  return formatResult(r);
}

/**
 * Whether a call runs in network proxy mode: `[features] network_proxy` is on, the call's sandbox has the network
 * (0.97's `network_access: true`, 0.169's `network: "enabled"`, `--sandbox` flags) and the call is sandboxed at
 * all (`danger-full-access` and full-access external sandboxes run as before).
 */
export function proxyModeFor(setup: Pick<ServeSetup, "network">, snap: SandboxState): boolean {
  if (!setup.network.enabled || !hasFullNetwork(snap.policy)) return false;
  return snap.policy.type !== "danger-full-access" && !hasFullDiskWrite(snap.policy);
}
