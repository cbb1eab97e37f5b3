/**
 * `shellmcp sandbox linux` / `shellmcp debug landlock`: run a command under the sandbox, for a person.
 *
 *   shellmcp sandbox linux [--sandbox read-only|workspace-write|danger-full-access | --full-auto]
 *                          [--add-dir DIR]… [--network] [--backend auto|bwrap|landlock] [--policy JSON]
 *                          [--no-proc] [-C DIR] [--allow-domain H]… [--deny-domain H]… [--allow-local-binding]
 *                          -- CMD…
 *
 * Network proxy mode (docs/network.md) when `--allow-domain`/`--deny-domain` is given (they turn the network on),
 * or with `--network` when `$CODEX_HOME/config.toml` turns `[features] network_proxy` on: the config's domain
 * policy plus the flags' entries, the proxy in this process, the command as its child under the helper (bubblewrap
 * with the bridge, else Landlock ABI ≥ 4). Refused hosts are listed on stderr when the command ends. `.rules`
 * `network_rule`s are not applied here, as in `codex sandbox`.
 *
 * Acts as the spawner too: sets `CODEX_SANDBOX_NETWORK_DISABLED=1` when the network is off (as Codex does).
 * The exit status is the command's (141 for `yes | head -1`: SIGPIPE is reset, unlike Codex).
 */
import { resolve } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { writeStderr } from "../stderr.ts";
import { hasFullDiskWrite, hasFullNetwork, parseSandboxPolicy, serializeSandboxPolicy, type SandboxPolicy } from "../sandbox/policy.ts";
import { loadConfig } from "../config/config.ts";
import { resolveCodexHome } from "../execpolicy/discovery.ts";
import { normalizePattern, readNetworkPolicy, type NetworkPolicy } from "../network/policy.ts";

/** Options as commander parses them. */
export interface SandboxCliOptions {
  sandbox?: string;
  fullAuto?: boolean;
  addDir: string[];
  network?: boolean;
  backend?: string;
  policy?: string;
  noProc?: boolean;
  cd?: string;
  /** `--allow-domain` entries (proxy mode). */
  allowDomain?: string[];
  /** `--deny-domain` entries (proxy mode). */
  denyDomain?: string[];
  /** `--allow-local-binding` (proxy mode). */
  allowLocalBinding?: boolean;
}

/** Build the policy the flags describe. Throws `USAGE` for contradictions. */
export function policyFromFlags(o: SandboxCliOptions): SandboxPolicy {
  if ((o.allowDomain?.length ?? 0) > 0 || (o.denyDomain?.length ?? 0) > 0) o = { ...o, network: o.policy === undefined ? true : o.network };
  if (o.policy !== undefined) {
    if (o.sandbox !== undefined || o.fullAuto || o.addDir.length > 0 || o.network)
      throw new ShellmcpError("USAGE", "--policy cannot be combined with --sandbox, --full-auto, --add-dir or --network");
    return parseSandboxPolicy(o.policy);
  }
  const mode = o.fullAuto ? "workspace-write" : (o.sandbox ?? "read-only");
  if (o.fullAuto && o.sandbox !== undefined && o.sandbox !== "workspace-write")
    throw new ShellmcpError("USAGE", "--full-auto means --sandbox workspace-write");
  switch (mode) {
    case "read-only":
      if (o.addDir.length > 0) throw new ShellmcpError("USAGE", "--add-dir needs --sandbox workspace-write (or --full-auto)");
      return { type: "read-only", access: { type: "full-access" }, network_access: o.network ?? false };
    case "workspace-write":
      return parseSandboxPolicy({
        type: "workspace-write",
        writable_roots: o.addDir.map((d) => resolve(d)),
        network_access: o.network ?? false,
      });
    case "danger-full-access":
      return { type: "danger-full-access" };
    default:
      throw new ShellmcpError("USAGE", `--sandbox must be read-only, workspace-write or danger-full-access (got ${mode})`);
  }
}

/** Run `command` under the sandbox the flags describe; returns the exit status (or execs). */
export async function sandboxLinuxCli(
  command: string[],
  o: SandboxCliOptions,
  defaultBackend: "auto" | "landlock" = "auto",
): Promise<number> {
  if (process.platform !== "linux") {
    writeStderr("shellmcp: `sandbox linux` needs Linux; on macOS use `shellmcp sandbox macos`\n");
    return 2;
  }
  const { runSandboxed } = await import("../sandbox/linux/run.ts");
  const { SANDBOX_FAILURE_EXIT } = await import("../sandbox/backend.ts");
  let policy: SandboxPolicy;
  try {
    if (command.length === 0) throw new ShellmcpError("USAGE", "no command given (usage: shellmcp sandbox linux [options] -- CMD...)");
    policy = policyFromFlags(o);
    if (o.cd !== undefined) process.chdir(o.cd);
  } catch (e) {
    writeStderr(`shellmcp: ${(e as Error).message}\n`);
    return 2;
  }
  // The config is read only when the network is on for a sandboxed command: nothing else depends on it here.
  const sandboxed = policy.type !== "danger-full-access" && !(hasFullDiskWrite(policy) && hasFullNetwork(policy));
  if (hasFullNetwork(policy) && sandboxed) {
    let network: NetworkPolicy;
    try {
      network = cliNetworkPolicy(o);
    } catch (e) {
      writeStderr(`shellmcp: ${(e as Error).message}\n`);
      return 2;
    }
    if (network.enabled) return runProxied(command, policy, network, o);
  }
  if (!hasFullNetwork(policy)) process.env.CODEX_SANDBOX_NETWORK_DISABLED = "1";
  (await import("../escalation-socket.ts")).keepEscalationSocketAcrossExec();
  const backend = (o.backend ?? defaultBackend) as "auto" | "bwrap" | "landlock";
  if (!["auto", "bwrap", "landlock"].includes(backend)) {
    writeStderr(`shellmcp: --backend must be auto, bwrap or landlock (got ${backend})\n`);
    return 2;
  }
  try {
    // A sandbox that writes: on the launch path of every call (the git guard watches what it writes).
    if (sandboxed && !hasFullDiskWrite(policy) && policy.type === "workspace-write")
      return await runOnLaunchPath(command, policy, backend, o.noProc === true);
    // A new session: the command does not share the person's terminal as its controlling terminal (TIOCSTI).
    return await runSandboxed({ policy, policyCwd: process.cwd(), command, backend, noProc: o.noProc, newSession: true });
  } catch (e) {
    writeStderr(`shellmcp: ${(e as Error).message}\n`);
    return SANDBOX_FAILURE_EXIT;
  }
}

/**
 * A writing sandbox for a person, launched as `serve` and the exec-server launch theirs (issue 39, "one launch
 * path"): the backend from one {@link BackendChoice} (no config folder protected beyond the helper's own `/etc/codex`,
 * as `codex sandbox` protects none: a person may run it in HOME), the command as a child under this
 * binary's helper in a new session, and the git guard around it — under Landlock, which cannot keep `.git`
 * read-only, a hook or config the command planted in a repository it could write is undone when it ends and said on
 * stderr. Returns the command's status (128+N for a signal), or 101 when the sandbox cannot be applied.
 */
async function runOnLaunchPath(
  command: string[],
  policy: SandboxPolicy,
  backend: "auto" | "bwrap" | "landlock",
  noProc: boolean,
): Promise<number> {
  const { BackendChoice } = await import("../shell/backend-choice.ts");
  const { hostGitGuard } = await import("../shell/git-guard.ts");
  const { GitCheck } = await import("../sandbox/git/call-check.ts");
  const { SANDBOX_FAILURE_EXIT } = await import("../sandbox/backend.ts");
  const { IS_COMPILED, selfExecCommand, selfExePath, envForSelf } = await import("../self.ts");
  const codexHome = resolveCodexHome();
  const cwd = process.cwd();
  const call = new BackendChoice(backend).forCall({ policy, sandboxCwd: cwd, useBwrap: false, useLegacyLandlock: false }, cwd, {
    platform: "linux",
    helperExe: IS_COMPILED ? selfExePath() : selfExecCommand()[0]!,
    env: process.env,
    direct: false,
  });
  if ("refused" in call) {
    writeStderr(`shellmcp: ${call.refused}\n`);
    return SANDBOX_FAILURE_EXIT;
  }
  const argv = [...call.launch({ shellPath: "", login: false, command: "", wrapperPath: "", program: command }).argv];
  if (noProc) argv.splice(argv.indexOf("--codex-run-as-linux-sandbox") + 1, 0, "--no-proc");
  let git: import("../sandbox/git/call-check.ts").GitCheck;
  try {
    git = GitCheck.take(hostGitGuard(codexHome), call.writable(), call.enforcement === "landlock", "sandbox linux");
  } catch (e) {
    writeStderr(`shellmcp: cannot record the git control state to protect it: ${(e as Error).message}\n`);
    return SANDBOX_FAILURE_EXIT;
  }
  let child: ReturnType<typeof Bun.spawn>;
  try {
    // A new session (setsid): no controlling terminal to push input into (TIOCSTI).
    child = Bun.spawn(argv, { stdio: ["inherit", "inherit", "inherit"], env: envForSelf({ ...process.env }), detached: true });
  } catch (e) {
    git.checkNow();
    writeStderr(`shellmcp: cannot start the sandbox helper: ${(e as Error).message}\n`);
    return SANDBOX_FAILURE_EXIT;
  }
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"] as const) process.on(sig, forward(sig));
  const code = await child.exited;
  const report = git.checkNow();
  if (report !== "") writeStderr(report.replace(/^\n/, ""));
  const sig = child.signalCode;
  if (sig !== null && sig !== undefined) return 128 + ((await import("node:os")).constants.signals[sig as NodeJS.Signals] ?? 0);
  return code;
}

/**
 * The network policy of `sandbox linux`: `$CODEX_HOME/config.toml`'s (no `.rules`, as `codex sandbox`), plus
 * `--allow-domain`/`--deny-domain` entries (which turn proxy mode on) and `--allow-local-binding`. Throws `CONFIG`
 * for an entry Codex refuses (a deny `*`).
 */
export function cliNetworkPolicy(o: SandboxCliOptions): NetworkPolicy {
  const p = readNetworkPolicy(loadConfig(resolveCodexHome()), undefined, (m) => writeStderr(`shellmcp: ${m}\n`));
  const allow = o.allowDomain ?? [];
  const deny = o.denyDomain ?? [];
  if (allow.length > 0 || deny.length > 0) p.enabled = true;
  for (const d of deny) {
    const pat = normalizePattern(d, "deny");
    p.allow = p.allow.filter((a) => a !== pat);
    if (!p.deny.includes(pat)) p.deny.push(pat);
  }
  for (const a of allow) {
    const pat = normalizePattern(a, "allow");
    if (!p.deny.includes(pat) && !p.allow.includes(pat)) p.allow.push(pat);
  }
  if (o.allowLocalBinding) p.allowLocalBinding = true;
  return p;
}

/**
 * Proxy mode for a person: the proxy in this process, the command as a child under this binary's helper (bubblewrap
 * with the bridge when it works, else Landlock ABI ≥ 4), refusals on stderr at the end. Returns the command's
 * exit status (128+N for a signal), or 101 when the sandbox or the bridge cannot be built.
 */
async function runProxied(command: string[], policy: SandboxPolicy, network: NetworkPolicy, o: SandboxCliOptions): Promise<number> {
  const { CallProxy, refusalReport } = await import("../network/proxy.ts");
  const { bridgePair, NAMESPACE_PORTS, PROXY_BRIDGE_FD, receiveNamespaceListeners } = await import("../network/bridge.ts");
  const { proxyEnvironment } = await import("../network/env.ts");
  const { probeBwrap, selfHelperCommand } = await import("../sandbox/linux/bwrap.ts");
  const { SANDBOX_FAILURE_EXIT } = await import("../sandbox/backend.ts");

  const { closeQuiet } = await import("../../ffi/libc.ts");
  const requested = o.backend ?? "auto";
  if (!["auto", "bwrap", "landlock"].includes(requested)) {
    writeStderr(`shellmcp: --backend must be auto, bwrap or landlock (got ${requested})\n`);
    return 2;
  }
  let backend: "bwrap" | "landlock" = "landlock";
  let noProc = o.noProc === true;
  if (requested !== "landlock") {
    const probe = probeBwrap(true);
    if (probe.ok) {
      backend = "bwrap";
      noProc ||= probe.noProc === true;
    } else if (requested === "bwrap") {
      writeStderr(`shellmcp: ${probe.reason}\n`);
      return SANDBOX_FAILURE_EXIT;
    } else writeStderr(`shellmcp: ${probe.reason}; using Landlock, whose proxy mode is weaker (docs/network.md)\n`);
  }
  const proxy = new CallProxy({ policy: network });
  const bridge = backend === "bwrap" ? bridgePair() : undefined;
  const ports =
    bridge !== undefined
      ? network.enableSocks5
        ? { http: NAMESPACE_PORTS.http, socks: NAMESPACE_PORTS.socks }
        : { http: NAMESPACE_PORTS.http }
      : await proxy.listenLoopback();
  const argv = [
    ...selfHelperCommand("here"),
    "--backend",
    backend,
    ...(noProc ? ["--no-proc"] : []),
    "--network-proxy-ports",
    Object.values(ports).join(","),
    ...(bridge !== undefined ? ["--network-proxy-fd", String(PROXY_BRIDGE_FD)] : []),
    "--sandbox-policy-cwd",
    process.cwd(),
    "--sandbox-policy",
    serializeSandboxPolicy(policy),
    "--",
    ...command,
  ];
  const stdio: (number | "inherit" | "ignore")[] = ["inherit", "inherit", "inherit"];
  if (bridge !== undefined) stdio.push("ignore", "ignore", bridge.childFd);
  const env = { ...process.env, ...proxyEnvironment(ports, network.allowLocalBinding) };
  delete env.CODEX_SANDBOX_NETWORK_DISABLED;
  let child: ReturnType<typeof Bun.spawn>;
  try {
    // A new session (setsid), as every `sandbox linux` command: no controlling terminal to push input into.
    child = Bun.spawn(argv, { stdio: stdio as ["inherit", "inherit", "inherit"], env, detached: true });
  } catch (e) {
    writeStderr(`shellmcp: cannot start the sandbox helper: ${(e as Error).message}\n`);
    if (bridge !== undefined) [bridge.serverFd, bridge.childFd].forEach(closeQuiet);
    await proxy.close();
    return SANDBOX_FAILURE_EXIT;
  }
  if (bridge !== undefined) {
    closeQuiet(bridge.childFd);
    receiveNamespaceListeners(bridge.serverFd, Object.keys(ports).length, child.exited)
      .then((fds) => proxy.adopt(fds.length === 2 ? { http: fds[0]!, socks: fds[1]! } : { http: fds[0]! }))
      .catch((e: unknown) => {
        if (child.exitCode !== null) return;
        writeStderr(`shellmcp: the network proxy bridge failed, the command was stopped: ${(e as Error).message}\n`);
        child.kill(9);
      });
  }
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  for (const s of ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"] as const) process.on(s, forward(s));
  const code = await child.exited;
  await proxy.close();
  if (proxy.refusals.length > 0) writeStderr(refusalReport(proxy.refusals));
  const sig = child.signalCode;
  if (sig !== null && sig !== undefined) return 128 + ((await import("node:os")).constants.signals[sig as NodeJS.Signals] ?? 0);
  return code;
}
