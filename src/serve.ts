/**
 * `shellmcp serve`: the MCP server (stdio) with the `shell` tool — a drop-in for Codex's
 * `codex-exec-mcp-server`. Wires the pieces: exec policy (rules), escalation server, sandbox, patched shell, MCP.
 */
import { CgroupManager } from "./shell/cgroup.ts";
import { existsSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { applyEnvironmentPolicy, loadConfig, shellEnvironmentPolicy } from "./config/config.ts";
import { EscalationServer } from "./escalate/server.ts";
import { ShellmcpError } from "./errors.ts";
import { loadPolicy, resolveCodexHome } from "./execpolicy/discovery.ts";
import { log } from "./log.ts";
import { decideExec, type EscalationSettings, type OnPrompt } from "./mcp/escalation-policy.ts";
import { serveStdio } from "./mcp/server.ts";
import { formatResult, parseShellArgs, SHELL_TOOL } from "./mcp/shell-tool.ts";
import { parseSandboxPolicy, type SandboxPolicy } from "./sandbox/policy.ts";
import { probeBwrap } from "./sandbox/linux/run.ts";
import { DEFAULT_MAX_OUTPUT_BYTES } from "./shell/output.ts";
import { runCommand, type SandboxLauncher } from "./shell/run-command.ts";
import { killSessions } from "./shell/sessions.ts";
import { writeStderr } from "./stderr.ts";
import { VERSION } from "./version.ts";

/** `serve` options (see the CLI for their flags). */
export interface ServeOptions {
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
}

/** Codex's `SandboxState` (params of `codex/sandbox-state/update`). */
export interface SandboxState {
  policy: SandboxPolicy;
  sandboxCwd?: string;
  codexLinuxSandboxExe?: string;
  useBwrap: boolean;
}

/** The purpose of the original's `instructions`, in our words. */
export const INSTRUCTIONS = "This server provides a tool to execute shell commands and return their output.";

/** Parse `codex/sandbox-state/update` params. Throws `USAGE` (→ -32602) for anything malformed. */
export function parseSandboxState(params: unknown): SandboxState {
  if (typeof params !== "object" || params === null || Array.isArray(params)) throw new ShellmcpError("USAGE", "params must be an object");
  const p = params as Record<string, unknown>;
  if (p.sandboxPolicy === undefined) throw new ShellmcpError("USAGE", "missing field `sandboxPolicy`");
  if (typeof p.sandboxCwd !== "string") throw new ShellmcpError("USAGE", "missing field `sandboxCwd`");
  if (p.codexLinuxSandboxExe !== undefined && p.codexLinuxSandboxExe !== null && typeof p.codexLinuxSandboxExe !== "string") throw new ShellmcpError("USAGE", "`codexLinuxSandboxExe` must be a string");
  if (p.useLinuxSandboxBwrap !== undefined && typeof p.useLinuxSandboxBwrap !== "boolean") throw new ShellmcpError("USAGE", "`useLinuxSandboxBwrap` must be a boolean");
  return {
    policy: parseSandboxPolicy(p.sandboxPolicy),
    sandboxCwd: p.sandboxCwd,
    codexLinuxSandboxExe: (p.codexLinuxSandboxExe as string | null | undefined) ?? undefined,
    useBwrap: (p.useLinuxSandboxBwrap as boolean | undefined) ?? false,
  };
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
  if (!existsSync(p)) throw new ShellmcpError("CONFIG", `no patched ${kind} at ${p}: build it with scripts/build-shells.sh, or pass --shell PATH`);
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
  // Everything that can be wrong is checked before the first message: fail at start-up, not mid-session.
  let codexHome: string;
  let settings: EscalationSettings;
  let env: Record<string, string>;
  let shellPath: string;
  let state: SandboxState;
  let backendFlag: string[];
  let maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES;
  try {
    codexHome = resolveCodexHome();
    const cfg = loadConfig(codexHome, o.config);
    env = applyEnvironmentPolicy(shellEnvironmentPolicy(cfg), process.env);
    const { policy, files } = loadPolicy({ codexHome, cwd: process.cwd(), extraRules: o.rules });
    log.info("rules loaded", { files, rules: policy.ruleCount });
    const onPrompt = (o.onPrompt ?? "deny") as OnPrompt;
    if (onPrompt !== "deny" && onPrompt !== "run-in-sandbox") throw new ShellmcpError("USAGE", `--on-prompt must be deny or run-in-sandbox (got ${o.onPrompt})`);
    settings = { policy, codexHome, preserveProgramPaths: o.preserveProgramPaths ?? false, onPrompt, memory: new Map() };
    const shell = o.bash ?? o.shell ?? process.env.CODEX_BASH_PATH ?? "bash";
    shellPath = shell === "bash" || shell === "zsh" ? defaultShell(shell) : resolve(shell);
    if (!existsSync(shellPath)) throw new ShellmcpError("CONFIG", `shell not found: ${shellPath}`);
    state = { policy: initialPolicy(o.sandbox), useBwrap: false };
    if (o.maxOutputBytes !== undefined) {
      maxOutputBytes = Number(o.maxOutputBytes);
      if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < 1024) throw new ShellmcpError("USAGE", "--max-output-bytes must be an integer ≥ 1024");
    }
    const backend = o.sandboxBackend ?? "auto";
    if (backend === "auto") {
      const probe = probeBwrap(true);
      backendFlag = ["--backend", probe.ok ? "bwrap" : "landlock", ...(probe.noProc ? ["--no-proc"] : [])];
      if (!probe.ok) writeStderr(`shellmcp: ${probe.reason}; commands run under Landlock + seccomp, which does not protect .git/.codex inside writable roots\n`);
    } else if (backend === "bwrap" || backend === "landlock") backendFlag = ["--backend", backend];
    else throw new ShellmcpError("USAGE", `--sandbox-backend must be auto, bwrap or landlock (got ${backend})`);
  } catch (e) {
    writeStderr(`shellmcp serve: ${(e as Error).message}\n`);
    return 1;
  }

  const wrapperPath = o.execve ?? selfAs("codex-execve-wrapper");
  const helperExe = selfAs("codex-linux-sandbox");
  let server: EscalationServer;
  try {
    server = await EscalationServer.start();
  } catch (e) {
    writeStderr(`shellmcp serve: ${(e as Error).message}\n`);
    return 1;
  }
  /** Session ids of every shell this server started: their leftovers are killed when the client goes away. */
  const sessions = new Set<number>();
  // One cgroup per call, so detached processes end with their call too (see src/shell/cgroup.ts).
  const cg = CgroupManager.detect();
  const cgroups = cg instanceof CgroupManager ? cg : undefined;
  if (!(cg instanceof CgroupManager)) {
    writeStderr(`shellmcp: no per-call cgroups (${cg.error}); a process that leaves its process group (setsid) can outlive its call\n`);
  }

  const shutdown = async () => {
    cgroups?.shutdown();
    killSessions(sessions);
    await server.stop();
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
      log.info("sandbox state", { policy: state.policy.type, cwd: state.sandboxCwd });
    },
    callTool: async (args, ctx) => {
      const a = parseShellArgs(args);
      const snap = state;
      const launcher: SandboxLauncher =
        o.useCodexLinuxSandboxExe && snap.codexLinuxSandboxExe !== undefined
          ? { exe: snap.codexLinuxSandboxExe, flags: snap.useBwrap ? ["--use-bwrap-sandbox"] : [] }
          : { exe: helperExe, flags: snap.useBwrap ? ["--backend", "bwrap"] : backendFlag };
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
        launcher,
        server,
        maxOutputBytes,
        signal: ctx.signal,
        decide: (stopwatch) => (req) => decideExec(settings, { elicit: ctx.elicit, paused: (f) => stopwatch.paused(f) }, req),
        onProgress: ctx.progress === undefined ? undefined : (ms, bytes) => ctx.progress!(Math.floor(ms / 1000), `running for ${Math.floor(ms / 1000)} s, ${bytes} bytes of output`),
        track: (sid) => sessions.add(sid),
        cgroups,
      });
      if (r.spawnError !== undefined) throw new ShellmcpError("PROTOCOL", r.spawnError);
      return formatResult(r);
    },
  });
  await shutdown();
  return 0;
}
