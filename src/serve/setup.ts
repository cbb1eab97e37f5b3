/**
 * Everything `serve` reads and checks before it serves, in one place: `CODEX_HOME`, `config.toml` (with `-c`),
 * the shell environment policy, the `.rules` files, the escalation settings, the shell, the initial sandbox
 * policy, the output cap and the sandbox backend. Any error is a `ShellmcpError` whose message names the file,
 * key or flag.
 */
import { existsSync, realpathSync } from "node:fs";
import { userHome } from "../self.ts";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { Approver, DEFAULT_APPROVER_TIMEOUT_MS } from "../approvals/server.ts";
import { approvalsDir, approvalsDirs } from "../approvals/place.ts";
import {
  applyEnvironmentPolicy,
  approverConfig,
  modernEraConfig,
  listenConfig,
  defaultTimeoutConfig,
  escalationConfig,
  loadConfig,
  parseDefaultTimeoutMs,
  parsePositive,
  sessionLimitsConfig,
  shellEnvironmentPolicy,
  type EscalationConfig,
} from "../config/config.ts";
import { DEFAULT_TIMEOUT_MS } from "../mcp/shell-tool.ts";
import { DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_BUFFERED_BYTES, DEFAULT_MAX_SESSIONS, type SessionLimits } from "../shell/session-manager.ts";
import { ShellmcpError } from "../errors.ts";
import { checkRoomNetworkGrants } from "../escalate/rooms/grants.ts";
import { loadPolicy, resolveCodexHome } from "../execpolicy/discovery.ts";
import { log } from "../log.ts";
import type { EscalationSettings, OnPrompt } from "../escalate/decision/decide.ts";
import type { SandboxState } from "../mcp/sandbox-state.ts";
import { setHiding } from "../sandbox/secrets.ts";
import { isUnder, symlinksOnTheWay } from "../sandbox/paths.ts";
import { parseSandboxPolicy, type SandboxPolicy } from "../sandbox/policy.ts";
import { setProtectedConfigDirs } from "../sandbox/protected-config.ts";
import { LANDLOCK_EXTRA_WRITABLE } from "../sandbox/writable.ts";
import { DEFAULT_MAX_OUTPUT_BYTES } from "../shell/output.ts";
import { carriedBases, embeddedShell, installPortableShell } from "../carried/portable-shells.ts";
import { BackendChoice } from "./backend.ts";
import { readNetworkPolicy, type NetworkPolicy } from "../network/policy.ts";

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
  /** `--escalation room|host` (overrides `shellmcp.escalation` in config.toml). */
  escalation?: string;
  /** `--cd DIR` (Codex's flag): the workspace until the client sends a sandbox state (default: the start folder). */
  cd?: string;
  /** `--add-dir DIR` (Codex's flag, repeatable): more writable roots of that workspace under workspace-write. */
  addDir?: string[];
  /** `--log-file PATH` ("" for none): where everything the server logs is kept too. */
  logFile?: string;
  /** `--default-timeout-ms N`: the timeout of a `shell` call without `timeout_ms` (overrides `shellmcp.default_timeout_ms`). */
  defaultTimeoutMs?: string;
  /** `--max-sessions N`: unified exec sessions open at once (overrides `shellmcp.max_sessions`). */
  maxSessions?: string;
  /** `--session-idle-timeout-ms N`: a session without a call for this long is ended (overrides `shellmcp.session_idle_timeout_ms`). */
  sessionIdleTimeoutMs?: string;
  /**
   * `--approver [WHEN]`: prompts for a client without elicitation wait for `shellmcp approvals` (`true`, or
   * `"fallback"`), or every prompt does (`"always"`); overrides `shellmcp.approver`.
   */
  approver?: boolean | string;
  /** `--approver-timeout-ms N`: how long they wait (overrides `shellmcp.approver_timeout_ms`). */
  approverTimeoutMs?: string;
  /** `--input-required-timeout-ms N`: how long a modern-era exec parked for a human waits (overrides `shellmcp.input_required_timeout_ms`). */
  inputRequiredTimeoutMs?: string;
  /** `--task-after-ms N`: after how long a call becomes a task, for clients with the tasks extension (overrides `shellmcp.task_after_ms`). */
  taskAfterMs?: string;
  /** `--listen URL`: serve MCP over streamable HTTP there instead of stdio (overrides `shellmcp.listen`; ../http/). */
  listen?: string;
}

/** What `serve` runs with, as read at start. */
export interface ServeSetup {
  codexHome: string;
  /** The rules and how prompts are handled (shared by every call). */
  settings: EscalationSettings;
  /** The shells' environment: this process's, after `shell_environment_policy`. */
  env: Record<string, string>;
  shellPath: string;
  /** The sandbox state until the client sends one (`--sandbox`). */
  initialState: SandboxState;
  maxOutputBytes: number;
  /** Timeout of a `shell` call that gives no `timeout_ms`, ms: `--default-timeout-ms`, `[shellmcp] default_timeout_ms`, else Codex's 10 s. */
  defaultTimeoutMs: number;
  /** Bounds of `exec_command` sessions (flags, `[shellmcp]` keys, else the defaults of ../shell/session-manager.ts). */
  sessionLimits: SessionLimits;
  escalation: EscalationConfig;
  backend: BackendChoice;
  /** The network policy of proxy mode (`[features] network_proxy`, `[permissions.<p>.network]`, `network_rule`s). */
  network: NetworkPolicy;
  /** Hosts a person allowed for this session (network proxy mode's "session" and "always" answers). */
  networkApproved: Set<string>;
  /** The local approver (docs/approvals.md), when `--approver` or `[shellmcp] approver = true` turned it on. */
  approver?: Approver;
  /** Modern era (docs/mcp-eras.md): how long a parked exec waits for the retry, ms; undefined: ../mcp/modern.ts's default. */
  inputRequiredTimeoutMs?: number;
  /** Modern era: after how long a call becomes a task, ms; undefined: ../mcp/modern.ts's default. */
  taskAfterMs?: number;
  /** Where MCP is served over HTTP (`--listen`, else `[shellmcp] listen`); undefined: stdio. */
  listen?: string;
}

/** Read and check everything `serve` needs (see the top of this file). Throws `ShellmcpError`. */
export function loadServeSetup(o: ServeOptions): ServeSetup {
  const codexHome = resolveCodexHome();
  // CODEX_HOME decides what this and every later session may do: from here on no sandbox of this process (calls,
  // rooms, the helper through --protected-config-dir) can write it, and it is not read at all when some sandbox
  // could have written it already (issue 34, item 4).
  // So is the folder of the programs this executable carries and runs outside every sandbox (the lifeline guard,
  // sandbox-exec): for a user without /run/user/<uid> it is ~/.cache/shellmcp, inside a workspace that holds HOME.
  setProtectedConfigDirs([codexHome, ...carriedBases()]);
  const backendKind = o.sandboxBackend ?? "auto";
  const pinned = pinnedWorkspace(o);
  const exposed = codexHomeExposure(codexHome, {
    tmpdirs: [process.env.TMPDIR],
    pinned: pinned.policy.type === "workspace-write" && backendKind === "landlock" ? pinnedRoots(pinned) : [],
  });
  if (exposed !== undefined) throw exposed;
  const cfg = loadConfig(codexHome, o.config);
  const env = applyEnvironmentPolicy(shellEnvironmentPolicy(cfg), process.env);
  // The shells' TMPDIR (shell_environment_policy may set one) is a writable root of their sandboxes too.
  const exposedByShellTmp = codexHomeExposure(codexHome, { tmpdirs: [env.TMPDIR], pinned: [] });
  if (exposedByShellTmp !== undefined) throw exposedByShellTmp;
  const escalation = escalationFor(o, cfg);
  const { policy, files } = loadPolicy({ codexHome, cwd: process.cwd(), extraRules: o.rules, config: cfg });
  log.info("rules loaded", { files, rules: policy.ruleCount });
  const { network, initialState } = networkFor(cfg, policy, pinned);
  const onPrompt = (o.onPrompt ?? "deny") as OnPrompt;
  if (onPrompt !== "deny" && onPrompt !== "run-in-sandbox")
    throw new ShellmcpError("USAGE", `--on-prompt must be deny or run-in-sandbox (got ${o.onPrompt})`);
  const settings: EscalationSettings = {
    policy,
    codexHome,
    preserveProgramPaths: o.preserveProgramPaths ?? false,
    onPrompt,
    memory: new Map(),
  };
  const shell = o.bash ?? o.shell ?? process.env.CODEX_BASH_PATH ?? "bash";
  const shellPath = shell === "bash" || shell === "zsh" ? defaultShell(shell) : resolve(shell);
  if (!existsSync(shellPath)) throw new ShellmcpError("CONFIG", `shell not found: ${shellPath}`, { shell: shellPath });
  const { maxOutputBytes, defaultTimeoutMs, sessionLimits } = limitsFor(o, cfg);
  const approver = approverFor(o, cfg);
  const modernCfg = modernEraConfig(cfg);
  const inputRequiredTimeoutMs =
    o.inputRequiredTimeoutMs !== undefined
      ? parsePositive(o.inputRequiredTimeoutMs, "--input-required-timeout-ms", 24 * 3600 * 1000)
      : modernCfg.inputRequiredTimeoutMs;
  const taskAfterMs = o.taskAfterMs !== undefined ? parsePositive(o.taskAfterMs, "--task-after-ms", 3600 * 1000) : modernCfg.taskAfterMs;
  return {
    listen: o.listen ?? listenConfig(cfg),
    approver,
    inputRequiredTimeoutMs,
    taskAfterMs,
    sessionLimits,
    codexHome,
    settings,
    env,
    shellPath,
    initialState,
    maxOutputBytes,
    defaultTimeoutMs,
    escalation,
    backend: new BackendChoice(backendKind, [codexHome]),
    network,
    networkApproved: new Set(),
  };
}

/**
 * The escalation settings of config.toml (`[shellmcp]`: mode, extra writable paths, room grants, secrets) with
 * `--escalation` applied, after hiding what no sandbox of this server reads (../sandbox/secrets.ts): besides HOME's
 * credential stores and CODEX_HOME's secrets, the approver's folders and the paths config.toml names;
 * `sandbox_readable` opens stores knowingly. Throws `ShellmcpError` (`USAGE`) for a bad `--escalation`, and what
 * the room grants' check throws.
 */
function escalationFor(o: ServeOptions, cfg: Record<string, unknown>): EscalationConfig {
  const escalation = escalationConfig(cfg, userHome());
  let approverDirs: string[] = [];
  try {
    approverDirs = approvalsDirs();
  } catch {
    // CODEX_HOME missing: loadServeSetup refused it already
  }
  setHiding({ secrets: [...approverDirs, ...escalation.secretPaths], open: escalation.sandboxReadable });
  checkRoomNetworkGrants(escalation.roomNetwork);
  if (o.escalation !== undefined) {
    if (o.escalation !== "room" && o.escalation !== "host")
      throw new ShellmcpError("USAGE", `--escalation must be room or host (got ${o.escalation})`);
    escalation.mode = o.escalation;
  }
  if (escalation.mode === "host") log.warn("escalation = host: allowed programs run unconfined on the host (Codex's meaning)");
  return escalation;
}

/**
 * Proxy mode's network policy (`[features] network_proxy`, `[permissions.<p>.network]`, the rules' `network_rule`s)
 * and the sandbox state of a client that sends none: `pinned`, with the network when its configured permission
 * profile says so (issue 31: with `[features] network_proxy` that is proxy mode with the allow-list, as a Codex
 * client would get). Logs both.
 */
function networkFor(
  cfg: Record<string, unknown>,
  policy: EscalationSettings["policy"],
  pinned: SandboxState,
): { network: NetworkPolicy; initialState: SandboxState } {
  const network = readNetworkPolicy(cfg, policy, (m) => log.warn(m));
  const profileNetwork = profileNetworkEnabled(cfg);
  const initialState = profileNetwork === true ? withNetwork(pinned) : pinned;
  if (initialState !== pinned)
    log.info("network for clients without sandbox state, from default_permissions", {
      profile: cfg.default_permissions,
      proxy: network.enabled,
    });
  if (network.enabled)
    log.info("network proxy mode for calls with network", {
      allow: network.allow,
      deny: network.deny,
      mode: network.mode,
      allowLocalBinding: network.allowLocalBinding,
    });
  return { network, initialState };
}

/**
 * The output cap (`--max-output-bytes`, bytes, at least 1024), a `shell` call's default timeout (ms:
 * `--default-timeout-ms`, `[shellmcp] default_timeout_ms`, else Codex's) and the bounds of `exec_command` sessions
 * (flags, `[shellmcp]` keys, else the defaults). Throws `ShellmcpError` (`USAGE`/`CONFIG`) for a value out of range.
 */
function limitsFor(
  o: ServeOptions,
  cfg: Record<string, unknown>,
): { maxOutputBytes: number; defaultTimeoutMs: number; sessionLimits: SessionLimits } {
  let maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES;
  if (o.maxOutputBytes !== undefined) {
    maxOutputBytes = Number(o.maxOutputBytes);
    if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < 1024)
      throw new ShellmcpError("USAGE", "--max-output-bytes must be an integer ≥ 1024");
  }
  const defaultTimeoutMs =
    o.defaultTimeoutMs !== undefined
      ? parseDefaultTimeoutMs(o.defaultTimeoutMs, "--default-timeout-ms")
      : (defaultTimeoutConfig(cfg) ?? DEFAULT_TIMEOUT_MS);
  const fromConfig = sessionLimitsConfig(cfg);
  const sessionLimits: SessionLimits = {
    maxSessions:
      o.maxSessions !== undefined ? parsePositive(o.maxSessions, "--max-sessions", 1024) : (fromConfig.maxSessions ?? DEFAULT_MAX_SESSIONS),
    idleTimeoutMs:
      o.sessionIdleTimeoutMs !== undefined
        ? parsePositive(o.sessionIdleTimeoutMs, "--session-idle-timeout-ms", 7 * 24 * 3600 * 1000)
        : (fromConfig.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS),
    maxBufferedBytes: DEFAULT_MAX_BUFFERED_BYTES,
  };
  return { maxOutputBytes, defaultTimeoutMs, sessionLimits };
}

/**
 * The local approver (docs/approvals.md), started when `--approver` (or `[shellmcp] approver`) turns it on, with its
 * timeout (ms); undefined when off. Throws `ShellmcpError` (`USAGE`) for a bad `--approver`, and what its start throws.
 */
function approverFor(o: ServeOptions, cfg: Record<string, unknown>): Approver | undefined {
  const approverCfg = approverConfig(cfg);
  if (o.approver !== undefined && o.approver !== true && o.approver !== "fallback" && o.approver !== "always")
    throw new ShellmcpError("USAGE", `--approver takes fallback (the default) or always (got ${String(o.approver)})`);
  const approverOn = o.approver ?? approverCfg.enabled;
  return approverOn !== undefined && approverOn !== false
    ? Approver.start(
        approvalsDir(),
        o.approverTimeoutMs !== undefined
          ? parsePositive(o.approverTimeoutMs, "--approver-timeout-ms", 24 * 3600 * 1000)
          : (approverCfg.timeoutMs ?? DEFAULT_APPROVER_TIMEOUT_MS),
        approverOn === "always" ? "always" : "fallback",
      )
    : undefined;
}

/**
 * The patched `kind` shell `serve` runs by default, first found of:
 * 1. `$SHELLMCP_SHELLS_DIR/<kind>` when that variable is set (e.g. the macOS shells built by
 *    scripts/build-shells-macos.sh);
 * 2. `<dir>/shells/<kind>` beside this executable (`dist/shells/` when scripts/build-shells-macos.sh, or the
 *    optional Debian-linked scripts/build-shells.sh, built it);
 * 3. the portable shell this executable carries, copied to a checked folder outside every writable root
 *    (`src/carried/portable-shells.ts`; the npm packages and release tarballs for Linux).
 * Throws `CONFIG` saying how to get one when none exists (on macOS: build them with scripts/build-shells-macos.sh).
 */
export function defaultShell(kind: "bash" | "zsh", platform: NodeJS.Platform = process.platform): string {
  const fromEnv = process.env.SHELLMCP_SHELLS_DIR;
  if (fromEnv !== undefined && fromEnv !== "") {
    const p = join(resolve(fromEnv), kind);
    if (!existsSync(p)) throw new ShellmcpError("CONFIG", `SHELLMCP_SHELLS_DIR=${fromEnv} holds no ${kind} (${p})`);
    return p;
  }
  const beside = join(dirname(process.execPath), "shells", kind);
  if (existsSync(beside)) return beside;
  const bytes = embeddedShell(kind);
  if (bytes !== undefined) return installPortableShell(kind, bytes);
  if (platform === "darwin")
    throw new ShellmcpError(
      "CONFIG",
      `no patched ${kind}: on macOS shellmcp cannot carry its shells (they are built on a Mac). In a clone of shellmcp's ` +
        `repository run "bash scripts/build-shells-macos.sh" (needs the Xcode command line ` +
        `tools and autoconf), then start serve with SHELLMCP_SHELLS_DIR=<clone>/dist/shells, or --shell <clone>/dist/shells/${kind}`,
      { kind },
    );
  throw new ShellmcpError(
    "CONFIG",
    `no patched ${kind} at ${beside} and none embedded in this executable: build it with scripts/build-shells.sh ` +
      `(or scripts/build-shells-static.sh, then rebuild), or pass --shell PATH`,
    { kind },
  );
}

/**
 * The sandbox state until the client sends one — all a client other than Codex ever has (issue 22, item 5): the
 * policy `--sandbox` names, pinned to the server's workspace: `--cd DIR` or the folder `serve` started in, plus
 * `--add-dir` folders as writable roots. The model's `workdir` never widens it: a command run elsewhere runs
 * there read-only. Throws `USAGE` for a missing folder.
 */
function pinnedWorkspace(o: ServeOptions): SandboxState {
  const cwd = resolve(o.cd ?? process.cwd());
  const extra = (o.addDir ?? []).map((d) => resolve(cwd, d));
  for (const d of [cwd, ...extra]) if (!existsSync(d)) throw new ShellmcpError("USAGE", `--cd/--add-dir: no such folder ${d}`);
  let policy = initialPolicy(o.sandbox);
  if (policy.type === "workspace-write") policy = { ...policy, writable_roots: [...policy.writable_roots, ...extra] };
  log.info("workspace until the client sends a sandbox state", { cwd, policy: policy.type, addDir: extra });
  return { policy, sandboxCwd: cwd, useBwrap: false, useLegacyLandlock: false };
}

/**
 * `network.enabled` of the `default_permissions` profile in config.toml, following `extends` through the
 * `[permissions.*]` tables (a built-in `:name` profile has the network off): true or false when some table of the
 * chain sets it, undefined when none does or there is no `default_permissions`. Wrong types were already refused by
 * `readNetworkPolicy`; a cycle ends the walk.
 */
export function profileNetworkEnabled(cfg: Record<string, unknown>): boolean | undefined {
  const perms = (cfg.permissions ?? {}) as Record<string, unknown>;
  let name = cfg.default_permissions;
  const seen = new Set<string>();
  while (typeof name === "string" && !name.startsWith(":") && !seen.has(name)) {
    seen.add(name);
    const prof = perms[name] as Record<string, unknown> | undefined;
    if (prof === undefined || typeof prof !== "object") return undefined;
    const net = prof.network as Record<string, unknown> | undefined;
    if (net !== undefined && typeof net === "object" && typeof net.enabled === "boolean") return net.enabled;
    name = prof.extends;
  }
  return undefined;
}

/**
 * `state` with the network on (`network_access: true`): read-only and workspace-write only (full access already
 * has it). With `[features] network_proxy` the calls then run in proxy mode (../serve/call.ts `proxyModeFor`).
 */
function withNetwork(state: SandboxState): SandboxState {
  const p = state.policy;
  if (p.type === "read-only" || p.type === "workspace-write") return { ...state, policy: { ...p, network_access: true } };
  return state;
}

/** The policy `--sandbox MODE` names (default read-only). Throws `USAGE`. */
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

/** The writable roots of the pinned workspace's policy (`--cd`/start folder and `--add-dir`), as given. */
function pinnedRoots(state: SandboxState): string[] {
  const p = state.policy;
  return p.type === "workspace-write" ? [...p.writable_roots, ...(state.sandboxCwd !== undefined ? [state.sandboxCwd] : [])] : [];
}

/** Canonical form of `p`: its real path, or its nearest existing ancestor's with the rest appended. */
function realOrNearest(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    const parent = dirname(p);
    return parent === p ? p : join(realOrNearest(parent), basename(p));
  }
}

/**
 * Why `serve` must not read rules or `config.toml` from `codexHome`, or undefined when it may: a `CONFIG` error
 * (its message says where CODEX_HOME lies, why that is unsafe, and what to do) when CODEX_HOME — canonical — lies
 * in a folder that a sandbox in use could have written before this server started: `/tmp`, a temporary folder of
 * `tmpdirs` (this process's `$TMPDIR`, the shells' — writable roots of every workspace-write sandbox, of any
 * session, and `/tmp` of any user), `/dev/shm` (writable under Landlock), or one of `pinned` (the pinned
 * workspace's roots, given when its calls run under Landlock, which cannot keep CODEX_HOME read-only inside
 * them). Under bubblewrap a CODEX_HOME inside the workspace is re-bound read-only in every call instead, and a
 * Landlock call whose writable roots contain it is refused (filesystem-plan.ts `landlockCanEnforce`).
 */
export function codexHomeExposure(
  codexHome: string,
  where: { tmpdirs: readonly (string | undefined)[]; pinned: readonly string[] },
): ShellmcpError | undefined {
  const home = realOrNearest(resolve(codexHome));
  // Where it lies, and every symlink on the way to it (a link in /tmp could be re-pointed by any session).
  const places = [home, ...symlinksOnTheWay(resolve(codexHome))];
  const shared: { root: string; what: string }[] = [
    { root: "/tmp", what: "/tmp" },
    ...where.tmpdirs
      .filter((t): t is string => t !== undefined && t !== "" && isAbsolute(t))
      .map((t) => ({ root: t, what: `the temporary folder $TMPDIR (${t})` })),
    ...LANDLOCK_EXTRA_WRITABLE.map((r) => ({ root: r, what: r })),
  ];
  for (const s of shared) {
    const inside = places.find((p) => existsSync(s.root) && isUnder(p, realOrNearest(s.root)));
    if (inside === undefined) continue;
    return new ShellmcpError(
      "CONFIG",
      `CODEX_HOME (${codexHome}) lies in ${s.what}${inside === home ? "" : ` (through the symlink ${inside})`}, which sandboxed commands can write (it is a writable root of ` +
        `workspace-write sandboxes, of this session and of any other): shellmcp does not load rules or config.toml ` +
        `from there, since a sandboxed command could have written them to give this session any permission ` +
        `(e.g. escalation = "host"). Set CODEX_HOME to a folder outside /tmp, $TMPDIR and /dev/shm (the default is ` +
        `~/.codex), or run serve with a HOME outside them`,
      { codexHome, writableBy: s.root },
    );
  }
  for (const root of where.pinned) {
    if (!existsSync(root) || !places.some((p) => isUnder(p, realOrNearest(root)))) continue;
    return new ShellmcpError(
      "CONFIG",
      `CODEX_HOME (${codexHome}) lies in the workspace ${root}, which this server's commands can write under the ` +
        `Landlock backend (Landlock cannot keep a folder inside a writable one read-only): shellmcp does not load ` +
        `rules or config.toml from there. Use the bubblewrap backend (it keeps CODEX_HOME read-only), start serve in ` +
        `a folder that does not contain CODEX_HOME (--cd), or set CODEX_HOME outside the workspace`,
      { codexHome, writableBy: root },
    );
  }
  return undefined;
}
