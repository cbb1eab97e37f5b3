/**
 * `shellmcp serve`: the MCP server (stdio) with the `shell` tool — a drop-in for Codex's
 * `codex-exec-mcp-server`. Wires the pieces: exec policy (rules), escalation server, sandbox, patched shell, MCP.
 */
import * as libc from "../ffi/libc.ts";
import { CgroupManager } from "./shell/cgroup.ts";
import { existsSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { applyEnvironmentPolicy, loadConfig, shellEnvironmentPolicy } from "./config/config.ts";
import { EscalationServer } from "./escalate/server.ts";
import { ShellmcpError } from "./errors.ts";
import { loadPolicy, resolveCodexHome } from "./execpolicy/discovery.ts";
import { log } from "./log.ts";
import { interceptSetFor } from "./mcp/intercept-set.ts";
import { decideExec, type EscalationSettings, type OnPrompt } from "./mcp/escalation-policy.ts";
import { serveStdio, type ToolResult } from "./mcp/server.ts";
import { formatResult, parseShellArgs, SHELL_TOOL } from "./mcp/shell-tool.ts";
import { INSTRUCTIONS } from "./mcp/early-initialize.ts";
import { parseSandboxState, planWritableView, sandboxStateFromMeta, type SandboxState } from "./mcp/sandbox-state.ts";
import {
  landlockCanEnforce,
  planPermissionProfile,
  planSandboxPolicy,
  serializePermissionProfile,
  type FilesystemPlan,
  type PermissionProfile,
} from "./sandbox/permission-profile.ts";
import { seatbeltWritableView } from "./sandbox/macos/seatbelt.ts";
import { parseSandboxPolicy, type SandboxPolicy } from "./sandbox/policy.ts";
import { probeBwrap } from "./sandbox/linux/run.ts";
import { DEFAULT_MAX_OUTPUT_BYTES } from "./shell/output.ts";
import { runCommand, type RunCommandOptions, type SandboxLauncher } from "./shell/run-command.ts";
import { killSessions } from "./shell/sessions.ts";
import { writeStderr } from "./stderr.ts";
import { VERSION } from "./version.ts";

/** `serve` options (see the CLI for their flags). */
export interface ServeOptions {
  /** The OS to serve for (default `process.platform`; injected by tests of the macOS path). */
  platform?: NodeJS.Platform;
  shell?: string;
  bash?: string;
  execve?: string;
  sandbox?: string;
  sandboxBackend?: string;
  preserveProgramPaths?: boolean;
  onPrompt?: string;
  rules: string[];
  config: string[];
  maxOutputBytes?: string;
  useCodexLinuxSandboxExe?: boolean;
  /** `--intercept-all`: give the shell no intercept set, so every exec goes through the escalation server. */
  interceptAll?: boolean;
}

export { parseSandboxState, type SandboxState } from "./mcp/sandbox-state.ts";
export { INSTRUCTIONS } from "./mcp/early-initialize.ts";

/** A tool result that reports a refusal (the command was not run). */
function errorResult(message: string): ToolResult {
  return { content: [{ type: "text", text: message }], isError: true };
}

/** Path of a file named `name` that runs this binary: `<dir of binary>/name` if present, else a private symlink. */
function selfAs(name: string): string {
  const beside = join(dirname(process.execPath), name);
  if (existsSync(beside)) return beside;
  const dir = mkdtempSync(join(tmpdir(), "shellmcp-arg0-"));
  const link = join(dir, name);
  symlinkSync(process.execPath, link);
  return link;
}

function defaultShell(kind: string): string {
  const p = join(dirname(process.execPath), "shells", kind);
  if (!existsSync(p))
    throw new ShellmcpError("CONFIG", `no patched ${kind} at ${p}: build it with scripts/build-shells.sh, or pass --shell PATH`);
  return p;
}

function initialPolicy(mode: string | undefined): SandboxPolicy {
  switch (mode ?? "read-only") {
    case "read-only":
      return { type: "read-only", access: { type: "full-access" }, network_access: false };
    case "workspace-write":
      return parseSandboxPolicy({ type: "workspace-write" });
    case "danger-full-access":
      return { type: "danger-full-access" };
    default:
      throw new ShellmcpError("USAGE", `--sandbox must be read-only, workspace-write or danger-full-access (got ${mode})`);
  }
}

/** Run the server until the client disconnects. Returns the exit status. */
export async function serveMain(o: ServeOptions): Promise<number> {
  // Everything that can be wrong is checked before the MCP session starts (only `initialize` may have been answered
  // already, see mcp/early-initialize.ts): fail at start-up, not mid-session.
  let codexHome: string;
  let settings: EscalationSettings;
  let env: Record<string, string>;
  let shellPath: string;
  let state: SandboxState;
  let backendFlag: () => string[];
  /** Set once the preflight has passed: where bwrap is, so calls can start it directly (no helper stage). */
  let bwrapDirect: { bwrap: string; noProc: boolean } | undefined;
  const direct = (flags: string[], profile?: PermissionProfile): SandboxLauncher["direct"] =>
    flags[0] === "--backend" && flags[1] === "bwrap" && bwrapDirect !== undefined ? { ...bwrapDirect, profile } : undefined;
  let maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES;
  try {
    codexHome = resolveCodexHome();
    const cfg = loadConfig(codexHome, o.config);
    env = applyEnvironmentPolicy(shellEnvironmentPolicy(cfg), process.env);
    const { policy, files } = loadPolicy({ codexHome, cwd: process.cwd(), extraRules: o.rules, config: cfg });
    log.info("rules loaded", { files, rules: policy.ruleCount });
    const onPrompt = (o.onPrompt ?? "deny") as OnPrompt;
    if (onPrompt !== "deny" && onPrompt !== "run-in-sandbox")
      throw new ShellmcpError("USAGE", `--on-prompt must be deny or run-in-sandbox (got ${o.onPrompt})`);
    settings = { policy, codexHome, preserveProgramPaths: o.preserveProgramPaths ?? false, onPrompt, memory: new Map() };
    const shell = o.bash ?? o.shell ?? process.env.CODEX_BASH_PATH ?? "bash";
    shellPath = shell === "bash" || shell === "zsh" ? defaultShell(shell) : resolve(shell);
    if (!existsSync(shellPath)) throw new ShellmcpError("CONFIG", `shell not found: ${shellPath}`);
    state = { policy: initialPolicy(o.sandbox), useBwrap: false, useLegacyLandlock: false };
    if (o.maxOutputBytes !== undefined) {
      maxOutputBytes = Number(o.maxOutputBytes);
      if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < 1024)
        throw new ShellmcpError("USAGE", "--max-output-bytes must be an integer ≥ 1024");
    }
    const backend = o.sandboxBackend ?? "auto";
    if (backend === "bwrap") {
      backendFlag = () => {
        const probe = probeBwrap(true);
        // Direct launches need bwrap's path and whether /proc can be mounted; when the preflight fails, the
        // helper runs it and fails closed with the reason.
        if (probe.ok) bwrapDirect = { bwrap: probe.path!, noProc: probe.noProc === true };
        return ["--backend", "bwrap", ...(probe.noProc ? ["--no-proc"] : [])];
      };
    } else if (backend === "landlock") backendFlag = () => ["--backend", backend];
    else if (backend !== "auto") throw new ShellmcpError("USAGE", `--sandbox-backend must be auto, bwrap or landlock (got ${backend})`);
    else {
      // The bubblewrap preflight (two short bwrap runs) waits for the first call that needs a backend.
      let probed: string[] | undefined;
      backendFlag = () => {
        if (probed !== undefined) return probed;
        const probe = probeBwrap(true);
        if (!probe.ok)
          writeStderr(
            `shellmcp: ${probe.reason}; commands run under Landlock + seccomp, which does not protect .git/.codex inside writable roots\n`,
          );
        probed = ["--backend", probe.ok ? "bwrap" : "landlock", ...(probe.noProc ? ["--no-proc"] : [])];
        if (probe.ok) bwrapDirect = { bwrap: probe.path!, noProc: probe.noProc === true };
        return probed;
      };
    }
  } catch (e) {
    writeStderr(`shellmcp serve: ${(e as Error).message}\n`);
    return 1;
  }

  const platform = o.platform ?? process.platform;
  // Non-dumpable: this process's /proc files (environ: the secrets the shells do not get) are readable only
  // with CAP_SYS_PTRACE, which no sandboxed command has (bwrap drops every capability, the Landlock helper drops
  // this one). Children are dumpable again after their exec.
  try {
    libc.prctl(libc.PR.SET_DUMPABLE, 0);
  } catch (e) {
    log.warn("cannot make the server non-dumpable", { error: (e as Error).message });
  }
  // Root can read any process's environ whatever its dumpability, and the Landlock backend shares the host's
  // /proc: so the secrets themselves leave the initial environment block. Every variable the shells do not get
  // (shell_environment_policy: *KEY*, *SECRET*, *TOKEN* by default) is blanked there; this process keeps its
  // copy in process.env, which never reaches a sandboxed command.
  if (platform === "linux") {
    try {
      const scrubbed = libc.scrubInitialEnviron((name) => !(name in env));
      if (scrubbed.length > 0) log.info("blanked in this process's /proc environ", { names: scrubbed });
    } catch (e) {
      log.warn("cannot blank secrets in this process's environment block", { error: (e as Error).message });
    }
  }
  const wrapperPath = o.execve ?? selfAs("codex-execve-wrapper");
  const helperExe = selfAs("codex-linux-sandbox");
  // The escalation server (a worker) starts beside the MCP session; a call waits for it, a failure ends the server.
  let server: EscalationServer | undefined;
  const serverReady = EscalationServer.start().then(
    (s) => (server = s),
    (e: unknown) => {
      writeStderr(`shellmcp serve: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
  /** Session ids of every shell this server started: their leftovers are killed when the client goes away. */
  const sessions = new Set<number>();
  // One cgroup per call, so detached processes end with their call too (see src/shell/cgroup.ts).
  const cg = CgroupManager.detect();
  const cgroups = cg instanceof CgroupManager ? cg : undefined;
  if (!(cg instanceof CgroupManager)) {
    writeStderr(`shellmcp: no per-call cgroups (${cg.error}); a process that leaves its process group (setsid) can outlive its call\n`);
  }

  const shutdown = async () => {
    await cgroups?.shutdown();
    killSessions(sessions);
    await server?.stop();
  };
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.on(sig, () => {
      void shutdown().then(() => process.exit(128 + (sig === "SIGINT" ? 2 : sig === "SIGTERM" ? 15 : 1)));
    });
  }

  await serveStdio({
    name: "shellmcp",
    version: VERSION,
    instructions: INSTRUCTIONS,
    tool: SHELL_TOOL,
    onSandboxState: (params) => {
      state = parseSandboxState(params); // applies to the next call; running calls keep their snapshot
      log.info("sandbox state", { policy: state.policy.type, profile: state.profile?.type, cwd: state.sandboxCwd });
    },
    callTool: async (args, ctx) => {
      const a = parseShellArgs(args);
      // Codex 0.169: the state travels with the call and applies to it alone; else the session's (0.97).
      let snap = state;
      try {
        snap = sandboxStateFromMeta(ctx.meta) ?? state;
      } catch (e) {
        return errorResult((e as Error).message);
      }
      let launcher: SandboxLauncher;
      let writable: RunCommandOptions["writable"];
      if (platform === "darwin") {
        // macOS: Seatbelt, from the profile or the legacy policy; the boundary judges what that policy lets write.
        let plan: FilesystemPlan;
        try {
          const cwd = snap.sandboxCwd ?? a.workdir;
          plan = snap.profile !== undefined ? planPermissionProfile(snap.profile, cwd) : planSandboxPolicy(snap.policy, cwd, env);
        } catch (e) {
          return errorResult(`shellmcp refused to run the command: ${(e as Error).message}`);
        }
        launcher = { exe: helperExe, flags: [], seatbelt: { plan } };
        writable = () => seatbeltWritableView(plan);
      } else if (snap.profile !== undefined) {
        // Codex's own helper takes profiles with a different argv (no --sandbox-policy): ours always runs them.
        const flags = snap.useLegacyLandlock ? ["--backend", "landlock"] : backendFlag();
        let plan: FilesystemPlan;
        try {
          plan = planPermissionProfile(snap.profile, snap.sandboxCwd ?? a.workdir);
        } catch (e) {
          return errorResult(`shellmcp refused to run the command: ${(e as Error).message}`);
        }
        const why = flags[1] === "landlock" ? landlockCanEnforce(plan) : undefined;
        if (why !== undefined) return errorResult(`shellmcp refused to run the command: ${why}`);
        launcher = {
          exe: helperExe,
          flags: [...flags, "--permission-profile", serializePermissionProfile(snap.profile)],
          direct: direct(flags, snap.profile),
        };
        // The escalation boundary judges against what the profile really lets the shell write.
        writable = (enforcement) => planWritableView(plan, enforcement);
      } else if (o.useCodexLinuxSandboxExe && snap.codexLinuxSandboxExe !== undefined) {
        launcher = { exe: snap.codexLinuxSandboxExe, flags: snap.useBwrap ? ["--use-bwrap-sandbox"] : [] };
      } else {
        const flags = backendFlag();
        launcher = snap.useBwrap
          ? { exe: helperExe, flags: ["--backend", "bwrap"], direct: direct(["--backend", "bwrap"]) }
          : { exe: helperExe, flags, direct: direct(flags) };
      }
      await serverReady;
      const r = await runCommand({
        command: a.command,
        workdir: a.workdir,
        login: a.login,
        timeoutMs: a.timeoutMs,
        shellPath,
        wrapperPath,
        env,
        policy: snap.policy,
        sandboxCwd: snap.sandboxCwd ?? a.workdir,
        writable,
        launcher,
        server: server!,
        maxOutputBytes,
        signal: ctx.signal,
        decide: (req, stopwatch) => decideExec(settings, { elicit: ctx.elicit, paused: (f) => stopwatch.paused(f) }, req),
        onProgress:
          ctx.progress === undefined
            ? undefined
            : (ms, bytes) => ctx.progress!(Math.floor(ms / 1000), `running for ${Math.floor(ms / 1000)} s, ${bytes} bytes of output`),
        track: (sid) => sessions.add(sid),
        cgroups,
        interceptSet: o.interceptAll ? undefined : interceptSetFor(settings.policy),
      });
      if (r.spawnError !== undefined) throw new ShellmcpError("PROTOCOL", r.spawnError);
      return formatResult(r);
    },
  });
  await shutdown();
  return 0;
}
