/**
 * One `shell` call of `serve`: the sandbox state that applies to it (Codex 0.169's per-call `_meta`, else the
 * session's), the launcher for that state (Seatbelt on macOS; our helper, direct bubblewrap, or Codex's own
 * helper on Linux), then the command itself (../shell/run-command.ts) with every exec decided by the rules.
 */
import { trackSession } from "../shell/sessions.ts";
import { lifelineProblem } from "../sandbox/linux/lifeline.ts";
import { existsSync } from "node:fs";
import { isAbsolute } from "node:path";
import type { EscalationServer } from "../escalate/server.ts";
import { decideExec, type ExecDenial } from "../escalate/decision/decide.ts";
import { interceptSetFor } from "../escalate/decision/intercept-set.ts";
import { sandboxStateFromMeta, type SandboxState } from "../mcp/sandbox-state.ts";
import type { ToolContext, ToolResult } from "../mcp/server.ts";
import { formatResult, parseShellArgs } from "../mcp/shell-tool.ts";
import type { CallSandbox } from "../sandbox/backend.ts";
import { ShellmcpError } from "../errors.ts";
import { log } from "../log.ts";
import type { CgroupManager } from "../shell/cgroup.ts";
import { runCommand, type RunCommandOptions, type RunCommandResult } from "../shell/run-command.ts";
import { MAX_SEARCH_DEPTH, type GitGuard } from "../sandbox/git/guard.ts";
import { hostGitGuard } from "../shell/git-guard.ts";
import { GitCheck } from "../sandbox/git/call-check.ts";
import { LANDLOCK_EXTRA_WRITABLE, type WritableView } from "../sandbox/writable.ts";
import type { ServeOptions, ServeSetup } from "./setup.ts";
import { hasFullDiskWrite, hasFullNetwork } from "../sandbox/policy.ts";
import { CallProxy, refusalReport } from "../network/proxy.ts";
import { networkAsker } from "../mcp/network-approval.ts";
import { execAsker } from "../mcp/elicitation.ts";
import { shlexJoin } from "../execpolicy/shlex.ts";
import { visibleLines } from "../safe-text.ts";
import { TRACE_STEPS, traceStep } from "../trace-steps.ts";
import { BlockedLog, type BlockedAction } from "../blocked/report.ts";
import { detectKernelBlocks, type KernelContext } from "../blocked/kernel.ts";
import { approvalRemedy, escalationRemedy, gitGuardRemedy, proxyRefusalRemedy, ruleRemedy } from "../blocked/remedies.ts";

/** Bytes of the latest output a progress notification of a `shell` call carries. */
export const PROGRESS_TAIL_BYTES = 400;

/** The last `max` bytes of a stream, as visible text (controls escaped, line breaks kept: ../safe-text.ts). */
export class OutputTail {
  private buf = new Uint8Array(0);
  constructor(private readonly max: number) {}
  /** Add a chunk, keeping the last `max` bytes. */
  push(chunk: Uint8Array): void {
    const joined = new Uint8Array(Math.min(this.max, this.buf.byteLength + chunk.byteLength));
    const fromChunk = Math.min(chunk.byteLength, joined.byteLength);
    const fromBuf = joined.byteLength - fromChunk;
    joined.set(this.buf.subarray(this.buf.byteLength - fromBuf), 0);
    joined.set(chunk.subarray(chunk.byteLength - fromChunk), fromBuf);
    this.buf = joined;
  }
  /** The kept bytes decoded (a cut first character dropped), controls made visible. */
  text(): string {
    return visibleLines(new TextDecoder().decode(this.buf).replace(/^\uFFFD/, ""));
  }
}

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

/** Per server: its git guard, and whether the weaker-protection notice was given (once per session). */
const guards = new WeakMap<ServeRuntime, { guard: GitGuard; noticeGiven: boolean }>();

function guardOf(rt: ServeRuntime): { guard: GitGuard; noticeGiven: boolean } {
  let g = guards.get(rt);
  // Changed versions the guard undoes are kept aside outside every writable root (docs/git-guard.md).
  if (g === undefined)
    guards.set(
      rt,
      (g = {
        guard: hostGitGuard(rt.setup.settings.codexHome, rt.platform),
        noticeGiven: false,
      }),
    );
  return g;
}

/**
 * The notice of the first call of a session that runs under Landlock + seccomp (issue 34): the kernel cannot keep
 * git's control files read-only there, so the model is told, in words to pass on, what protects them instead.
 * `why`: why not bubblewrap; `cgroups`: whether every process of a call ends with it (else a detached process
 * can change them after the check); `fix`: what to tell the user instead of installing bubblewrap (it is installed,
 * but user namespaces are refused: in a container or pod, by design).
 */
export function weakerProtectionNotice(why: string | undefined, cgroups: boolean, fix?: string): string {
  return (
    `\nshellmcp: this server runs commands under Landlock + seccomp${why === undefined ? "" : ` (${why})`}, which is weaker than bubblewrap: ` +
    "git hooks and config inside writable folders cannot be protected by the kernel; changes to them are undone after each call and reported." +
    (cgroups
      ? ""
      : " This host gives shellmcp no per-call cgroups, so a background process that detaches from a command can outlive it and change them after that check.") +
    ` (Checked: repositories up to ${MAX_SEARCH_DEPTH} folder levels below each writable folder.)` +
    ` Tell the user; ${fix ?? "installing bubblewrap (and allowing unprivileged user namespaces) restores kernel protection"}.\n`
  );
}

/**
 * A tool result that reports a refusal (the command was not run). The message may embed a folder or path the model
 * chose: rendered by ../safe-text.ts (controls and bidi characters as visible escapes; line breaks kept).
 */
export function errorResult(message: string): ToolResult {
  return { content: [{ type: "text", text: visibleLines(message) }], isError: true };
}

/**
 * The sandbox of one call under `snap` (`workdir`: the call's folder, the policy cwd when `snap` has none), chosen
 * by the server's {@link ServeSetup.backend}, or a refusal as a tool result (what cannot be enforced is never run
 * with less).
 */
export function sandboxFor(
  rt: Pick<ServeRuntime, "helperExe" | "platform"> & {
    options: Pick<ServeOptions, "useCodexLinuxSandboxExe">;
    setup: Pick<ServeSetup, "backend" | "env">;
  },
  snap: SandboxState,
  workdir: string,
): CallSandbox | ToolResult {
  const { setup } = rt;
  const call = setup.backend.forCall(snap, workdir, {
    platform: rt.platform,
    helperExe: rt.helperExe,
    useCodexLinuxSandboxExe: rt.options.useCodexLinuxSandboxExe,
    env: setup.env,
  });
  return "refused" in call ? errorResult(`shellmcp refused to run the command: ${call.refused}`) : call;
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
  if (TRACE_STEPS) traceStep("call");
  const a = parseShellArgs(args, rt.setup.defaultTimeoutMs);
  const started = await launchCommand(rt, state, a, ctx);
  if ("content" in started) return started;
  const { r, notice, stale, blocked } = await started.done;
  if (r.spawnError !== undefined) throw new ShellmcpError("PROTOCOL", r.spawnError);
  if (stale !== undefined) return formatResult({ ...r, output: `${r.output}${stale}\n` }, notice, blocked);
  const result = formatResult(r, notice, blocked);
  if (TRACE_STEPS) traceStep("result");
  return result;
}

/**
 * Variables every session's command gets on top of the shell environment policy's, as Codex's unified exec sets
 * them (`UNIFIED_EXEC_ENV`, spec §4): no colours, a dumb terminal, UTF-8, pagers that do not wait for a key.
 */
export const SESSION_ENV: Readonly<Record<string, string>> = {
  NO_COLOR: "1",
  TERM: "dumb",
  LANG: "C.UTF-8",
  LC_CTYPE: "C.UTF-8",
  LC_ALL: "C.UTF-8",
  COLORTERM: "",
  PAGER: "cat",
  GIT_PAGER: "cat",
  GH_PAGER: "cat",
};

/** How a session's command runs, besides what a `shell` call has (../shell/session-manager.ts). */
export interface DetachedRun {
  /** Ends the session's processes (its kill; a call's cancellation does not end a session). */
  signal: AbortSignal;
  terminal?: RunCommandOptions["terminal"];
  onOutput: NonNullable<RunCommandOptions["onOutput"]>;
  onStarted: NonNullable<RunCommandOptions["onStarted"]>;
}

/**
 * A started command: its end, with shellmcp's own notices, the network proxy's refusals (`refused`, also appended to
 * `r.output`; a session's output went elsewhere as it arrived) and, when bubblewrap's stale mount failed it, that report.
 */
export interface LaunchedCommand {
  /** `blocked`: what the rules, approvals, escalation boundary, proxy and kernel sandbox refused (../blocked/report.ts). */
  done: Promise<{ r: RunCommandResult; notice: string; stale?: string; refused: string; blocked: BlockedLog }>;
}

/**
 * Start one command as a `shell` call does — the call's sandbox state (per-call `_meta`, else `state`; MCP roots),
 * its launcher, proxy mode, the git guard, every exec decided by the rules — and return once it runs (or a refusal
 * as a tool result). `detached`: a session's command (`exec_command`), which gets its own kill signal, optionally a
 * terminal, its output as it arrives, no progress notifications and no practical timeout; what it acquires (the
 * escalation listener, the proxy, the cgroup) lives until it ends.
 */
export async function launchCommand(
  rt: ServeRuntime,
  state: SandboxState,
  a: LaunchArgs,
  ctx: ToolContext,
  detached?: DetachedRun,
): Promise<ToolResult | LaunchedCommand> {
  const call = await prepareCall(rt, state, a, ctx);
  if ("content" in call) return call;
  return startCall(rt, a, ctx, call, detached);
}

/** The arguments of one command: what to run, where (an absolute folder), `-lc` or `-c`, the timeout in ms. */
type LaunchArgs = { command: string; workdir: string; login: boolean; timeoutMs: number };

/** What one call settled before anything of it runs ({@link prepareCall}). */
interface PreparedCall {
  /** The call's sandbox, for its state (per-call `_meta`, else the session's; MCP roots joined). */
  sandbox: CallSandbox;
  /** Network proxy mode ({@link proxyModeFor}); `proxy` is then the call's proxy. */
  proxied: boolean;
  proxy: CallProxy | undefined;
  server: EscalationServer;
  /** What the call may write (the git guard's and the kernel-block report's view). */
  view: WritableView;
  /** The git guard's snapshot, taken before anything runs; the run owns and settles it. */
  gitCheck: GitCheck;
  /** The weaker-protection notice ({@link weakerProtectionNotice}) when this call is the first to need it, else "". */
  notice: string;
}

/**
 * The sandbox state one call runs under: Codex 0.169's per-call `_meta` (applies to this call alone), else the
 * session's `state` (0.97); for a client without sandbox state that offers MCP roots, the roots join the server's
 * workspace (never the workdir). A malformed `_meta` is a refusal as a tool result.
 */
async function callState(rt: ServeRuntime, state: SandboxState, ctx: ToolContext): Promise<SandboxState | ToolResult> {
  const { setup } = rt;
  let snap = state;
  try {
    snap = sandboxStateFromMeta(ctx.meta) ?? state;
  } catch (e) {
    return errorResult((e as Error).message);
  }
  if (snap === setup.initialState && ctx.roots !== undefined && snap.policy.type === "workspace-write") {
    const extra = (await ctx.roots()).filter((p) => isAbsolute(p) && existsSync(p));
    if (extra.length > 0) snap = { ...snap, policy: { ...snap.policy, writable_roots: [...snap.policy.writable_roots, ...extra] } };
  }
  return snap;
}

/**
 * The state of one call, before anything of it runs: its sandbox state ({@link callState}), its sandbox, proxy mode,
 * the escalation server (waited for), the git guard's snapshot of what it may write, its proxy and the session's
 * weaker-protection notice. A refusal (a sandbox that cannot be enforced, proxy mode under Codex's helper, a shell
 * that is not patched, a git state that cannot be recorded) is a tool result.
 */
async function prepareCall(rt: ServeRuntime, state: SandboxState, a: LaunchArgs, ctx: ToolContext): Promise<PreparedCall | ToolResult> {
  const { setup } = rt;
  const snap = await callState(rt, state, ctx);
  if ("content" in snap) return snap;
  const sandbox = sandboxFor(rt, snap, a.workdir);
  if (TRACE_STEPS) traceStep("plan");
  if ("content" in sandbox) return sandbox;
  // Network proxy mode: the feature is on and this call's sandbox has the network (Codex: without the feature,
  // enabled network stays full network).
  const proxied = proxyModeFor(setup, snap);
  if (proxied && sandbox.backend.proxyWiring === "unsupported")
    return errorResult(
      "shellmcp refused to run the command: network proxy mode cannot be enforced by Codex's own sandbox helper (--use-codex-linux-sandbox-exe); run without that flag",
    );
  const server = await rt.server();
  const refused = await rt.shellRefused();
  if (refused !== undefined) return errorResult(`shellmcp cannot run commands: ${refused}.`);
  if (TRACE_STEPS) traceStep("escalation-server");
  // The git guard (../sandbox/git/guard.ts): the control state under the writable roots, before anything runs; the
  // call owns it (and the proxy) from runCommand on, which settles it on every way out.
  const enforcement = sandbox.enforcement;
  const view: WritableView = sandbox.writable();
  if (TRACE_STEPS) traceStep("writable-view");
  const guard = guardOf(rt);
  let gitCheck: GitCheck;
  try {
    gitCheck = GitCheck.take(guard.guard, view, enforcement === "landlock");
  } catch (e) {
    return errorResult(`shellmcp refused to run the command: cannot record the git control state to protect it: ${(e as Error).message}`);
  }
  if (TRACE_STEPS) traceStep("git-snapshot");
  const proxy = proxied
    ? new CallProxy({
        policy: setup.network,
        // Asked where a prompt is (the local approver where it applies, else the client's elicitation).
        ask: networkAsker(setup.approver?.askerFor(ctx.elicit) ?? ctx.elicit, setup.settings.codexHome),
        sessionAllowed: setup.networkApproved,
      })
    : undefined;
  let notice = "";
  // The notice is about files inside writable folders: a read-only call (only Landlock's /dev/shm) has none.
  const writesFolders = view.roots.some((r) => !LANDLOCK_EXTRA_WRITABLE.includes(r));
  if (!guard.noticeGiven && rt.platform === "linux" && !view.full && enforcement === "landlock" && writesFolders) {
    guard.noticeGiven = true;
    const why = sandbox.backend.landlockWhy;
    // Every process of a call ends with it: with per-call cgroups, or under the lifeline guard (src/sandbox/linux/lifeline.ts).
    notice = weakerProtectionNotice(why, rt.cgroups !== undefined || lifelineProblem() === undefined, sandbox.backend.landlockFix);
  }
  return { sandbox, proxied, proxy, server, view, gitCheck, notice };
}

/**
 * Run a prepared call (runCommand with the server's settings, every exec decided by the rules, progress
 * notifications with the output's tail for a `shell` call) and return at once; `done` resolves with its end
 * ({@link finishCall}).
 */
function startCall(rt: ServeRuntime, a: LaunchArgs, ctx: ToolContext, call: PreparedCall, detached?: DetachedRun): LaunchedCommand {
  const { setup } = rt;
  const notices: string[] = [];
  // What this call's layers refused, reported to the model (docs/blocked-actions.md).
  const blocked = new BlockedLog();
  // The end of the output so far, for progress notifications (issue 31: a client sees what a long command does).
  const tail = new OutputTail(PROGRESS_TAIL_BYTES);
  const run = runCommand({
    notice: (text, detail) => {
      // A program that ran inside the sandbox instead of escalating: the notice as before, and reported as blocked
      // (layer `escalation`).
      notices.push(text);
      if (detail !== undefined)
        blocked.add({ layer: "escalation", target: detail.argv.join(" "), remedy: escalationRemedy(detail.reason) });
    },
    networkProxy: call.proxy,
    gitCheck: call.gitCheck,
    command: a.command,
    workdir: a.workdir,
    login: a.login,
    timeoutMs: a.timeoutMs,
    shellPath: setup.shellPath,
    wrapperPath: rt.wrapperPath,
    env: detached === undefined ? setup.env : { ...setup.env, ...SESSION_ENV },
    sandbox: call.sandbox,
    server: call.server,
    // A session keeps its output in its own bounded buffer (../shell/session-manager.ts); the run's copy is unused.
    maxOutputBytes: detached === undefined ? setup.maxOutputBytes : 1024,
    signal: detached?.signal ?? ctx.signal,
    terminal: detached?.terminal,
    onOutput: detached?.onOutput ?? (ctx.progress !== undefined ? (chunk) => tail.push(chunk) : undefined),
    onStarted: detached?.onStarted,
    decide: (req, stopwatch) =>
      decideExec(
        setup.settings,
        {
          ask: execAsker(setup.approver?.askerFor(ctx.elicit) ?? ctx.elicit),
          paused: (f) => stopwatch.paused(f),
          denied: (d) => blocked.add(blockedOfDenial(d, `${setup.settings.codexHome}/rules`)),
        },
        req,
      ),
    onProgress:
      ctx.progress === undefined || detached !== undefined
        ? undefined
        : (ms, bytes) =>
            ctx.progress!(
              Math.floor(ms / 1000),
              `running for ${Math.floor(ms / 1000)} s, ${bytes} bytes of output${bytes > 0 ? `; last output: ${tail.text()}` : ""}`,
            ),
    track: (sid, running) => trackSession(rt.sessions, sid, running),
    cgroups: rt.cgroups,
    interceptSet: rt.options.interceptAll ? undefined : interceptSetFor(setup.settings.policy),
    escalation: setup.escalation,
  });
  return { done: finishCall(rt, a, call, run, notices, blocked) };
}

/**
 * A call's end, once `run` resolved: the git guard's report before the call's notices, what each layer refused
 * added to `blocked` (the guard's undone changes, the proxy's refusals, the kernel's read from the output), the
 * proxy's refusals appended to the output, and bubblewrap's stale-mount report when that failed it.
 */
async function finishCall(
  rt: ServeRuntime,
  a: LaunchArgs,
  call: PreparedCall,
  run: Promise<RunCommandResult>,
  notices: readonly string[],
  blocked: BlockedLog,
): Promise<Awaited<LaunchedCommand["done"]>> {
  const { setup } = rt;
  const { proxy, gitCheck, sandbox, view } = call;
  // Whatever way the run ends, its git check has run (../shell/call-resources.ts `CallResources.holdGitCheck`).
  const r = await run;
  if (TRACE_STEPS) traceStep("run");
  let notice = (await gitCheck.settle()) + call.notice;
  // Each change the guard undid (or could not) is a refused write to a protected path (../blocked/report.ts).
  const changes = gitCheck.changes();
  for (const line of [...changes.undone, ...changes.failed])
    blocked.add({ layer: "protected-path", target: line.split(": ")[0]!, remedy: gitGuardRemedy(changes.failed.includes(line)) });
  const refused = proxy !== undefined && proxy.refusals.length > 0 ? refusalReport(proxy.refusals) : "";
  for (const x of proxy?.refusals ?? []) {
    const host = x.host.includes(":") ? `[${x.host}]` : x.host;
    blocked.add({ layer: "network", target: `${host}:${x.port}`, remedy: proxyRefusalRemedy(x.host, x.reason) });
  }
  // What the kernel sandbox refused, read from the output (../blocked/kernel.ts: only what the sandbox caused).
  const kernel = kernelBackend(rt.platform, sandbox.enforcement);
  if (r.sandboxed && kernel !== undefined)
    blocked.addAll(
      detectKernelBlocks(r.output, {
        backend: kernel,
        view,
        workdir: a.workdir,
        networkOff: !call.proxied && !hasFullNetwork(sandbox.policy),
      }),
    );
  r.output += refused;
  // Allowed programs that ran inside the sandbox instead (../escalate/server.ts): after the output, like the guard's.
  if (notices.length > 0) notice = notices.map((n) => `\nshellmcp: ${n}`).join("") + "\n" + notice;
  const stale = setup.backend.bwrapFailed(r, sandbox);
  if (stale !== undefined) log.warn(stale);
  return { r, notice, stale, refused, blocked };
}

/**
 * A Deny of the decision (../escalate/decision/decide.ts) as a blocked action (../blocked/report.ts): layer `rule`
 * for a `forbidden` rule (its prefix named in the remedy when one matched), `approval` for a missing approval; the
 * target is the command as the rules name it, shell-quoted; the remedies name `rulesDir` (`$CODEX_HOME/rules`).
 */
function blockedOfDenial(d: ExecDenial, rulesDir: string): BlockedAction {
  const target = shlexJoin(d.command);
  if (d.kind === "forbidden") return { layer: "rule", target, remedy: ruleRemedy(d.prefix, rulesDir) };
  return { layer: "approval", target, remedy: approvalRemedy(d.command, rulesDir, d.reason) };
}

/** The kernel mechanism whose refusals a sandboxed call's output may show (../blocked/kernel.ts), if known. */
function kernelBackend(platform: NodeJS.Platform, enforcement: string): KernelContext["backend"] | undefined {
  if (platform === "darwin") return "seatbelt";
  return enforcement === "bwrap" || enforcement === "landlock" ? enforcement : undefined;
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
