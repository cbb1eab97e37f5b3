/**
 * arg0 role `codex-linux-sandbox` (also `shellmcp --codex-run-as-linux-sandbox …`): Codex's Linux sandbox
 * helper CLI (docs/sandbox.md, "The helper's command line"):
 *
 *   codex-linux-sandbox --sandbox-policy-cwd DIR (--sandbox-policy JSON | --permission-profile JSON)
 *                       [--command-cwd DIR] [--use-bwrap-sandbox] [--backend auto|bwrap|landlock] [--no-proc]
 *                       [--inherit-pid-namespace] [--join-cgroup PATH] [--network-proxy-ports P[,Q] [--network-proxy-fd N]]
 *                       [--protected-config-dir DIR]… [--hidden-paths JSON] -- CMD [ARG…]
 *
 * `--protected-config-dir DIR` (ours, repeatable; `serve` passes its CODEX_HOME): a folder no writable root may
 * expose — re-bound read-only under bubblewrap, the run refused under Landlock (policy.ts
 * `setProtectedConfigDirs`; `/etc/codex` always).
 *
 * `--hidden-paths JSON` (ours; `serve` and the escalation rooms pass it): exactly the credential stores and
 * secrets to hide, `{"stores":[…],"secrets":[…]}` (../secrets.ts); without it the helper hides this user's
 * defaults (HOME's credential stores, CODEX_HOME's secrets).
 *
 * `--permission-profile` (Codex 0.169's helper flag: a `PermissionProfile`, see permission-profile.ts) wins over
 * `--sandbox-policy`; `--command-cwd` is accepted for Codex 0.169 compatibility (the command runs in the
 * helper's own cwd).
 *
 * `--use-bwrap-sandbox` (Codex's flag) forces bwrap; without a backend flag the helper uses Landlock, as Codex's
 * legacy helper does, so an unchanged Codex client gets what it asked for. `--apply-seccomp-then-exec` is the
 * inner stage inside bwrap. Exit status: the command's; 2 for usage errors; 101 when the sandbox cannot be
 * applied (the command is then never run).
 */
import { writeFileSync } from "node:fs";
import { PR, prctl, setCloexec } from "../../../ffi/libc.ts";
import { keepEscalationSocketAcrossExec } from "../../escalation-socket.ts";
import { ShellmcpError } from "../../errors.ts";
import { writeStderr } from "../../stderr.ts";
import { parsePermissionProfile, pathFromUri, type PermissionProfile } from "../permission-profile.ts";
import { planPermissionProfile, summarySandboxPolicy } from "../filesystem-plan.ts";
import { parseSandboxPolicy, type SandboxPolicy } from "../policy.ts";
import { setProtectedConfigDirs } from "../protected-config.ts";
import { parseHiddenPaths, setHiding, type HiddenPaths } from "../secrets.ts";
import { SANDBOX_FAILURE_EXIT } from "../backend.ts";
import { innerStage, type Backend } from "./in-process.ts";
import { runSandboxed } from "./run.ts";

/** Usage-error exit status. */
export const HELPER_USAGE_EXIT = 2;

const USAGE =
  "usage: codex-linux-sandbox --sandbox-policy-cwd DIR (--sandbox-policy JSON | --permission-profile JSON) [--command-cwd DIR] [--use-bwrap-sandbox] [--backend auto|bwrap|landlock] [--no-proc] [--inherit-pid-namespace] [--network-proxy-ports P[,Q] [--network-proxy-fd N]] [--protected-config-dir DIR]... [--hidden-paths JSON] -- CMD [ARG...]";

interface HelperArgs {
  policyCwd?: string;
  policyJson?: string;
  profileJson?: string;
  backend: Backend;
  noProc: boolean;
  inheritPidNamespace: boolean;
  /** `--join-cgroup PATH` (ours): a `cgroup.procs` file this process writes its pid into before anything else. */
  joinCgroup?: string;
  inner: boolean;
  command: string[];
  /** `--network-proxy-fd N`: the bridge socket (bubblewrap proxy mode, src/network/bridge.ts). */
  proxyFd?: number;
  /** `--network-proxy-ports P[,Q]`: proxy mode; the ports TCP may reach (see SandboxRun.networkProxy). */
  proxyPorts?: number[];
  /** `--protected-config-dir DIR` (repeatable): config folders no sandbox may write. */
  configDirs: string[];
  /** `--hidden-paths JSON`: exactly what to hide (../secrets.ts). */
  hidden?: HiddenPaths;
}

function parse(args: string[]): HelperArgs {
  const o: HelperArgs = { backend: "landlock", noProc: false, inheritPidNamespace: false, inner: false, command: [], configDirs: [] };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const value = () => {
      const v = args[++i];
      if (v === undefined) throw new ShellmcpError("USAGE", `${a} needs a value`);
      return v;
    };
    const eq = a.indexOf("=");
    const [name, inline] = a.startsWith("--") && eq > 0 ? [a.slice(0, eq), a.slice(eq + 1)] : [a, undefined];
    const v = () => inline ?? value();
    switch (name) {
      case "--":
        o.command = args.slice(i + 1);
        return o;
      case "--sandbox-policy-cwd":
        o.policyCwd = v();
        break;
      case "--sandbox-policy":
        o.policyJson = v();
        break;
      case "--permission-profile":
        o.profileJson = v();
        break;
      case "--command-cwd":
        v();
        break;
      case "--use-bwrap-sandbox":
        o.backend = "bwrap";
        break;
      case "--backend": {
        const b = v();
        if (b !== "auto" && b !== "bwrap" && b !== "landlock")
          throw new ShellmcpError("USAGE", `--backend must be auto, bwrap or landlock (got ${b})`);
        o.backend = b;
        break;
      }
      case "--no-proc":
        o.noProc = true;
        break;
      case "--inherit-pid-namespace":
        o.inheritPidNamespace = true;
        break;
      case "--join-cgroup":
        o.joinCgroup = v();
        break;
      case "--network-proxy-fd": {
        const n = v();
        if (!/^\d+$/.test(n)) throw new ShellmcpError("USAGE", `--network-proxy-fd must be an fd number (got ${n})`);
        o.proxyFd = Number(n);
        break;
      }
      case "--network-proxy-ports": {
        const ps = v().split(",");
        if (!ps.every((p) => /^\d{1,5}$/.test(p) && Number(p) >= 1 && Number(p) <= 65535))
          throw new ShellmcpError("USAGE", `--network-proxy-ports must be ports separated by commas`);
        o.proxyPorts = ps.map(Number);
        break;
      }
      case "--protected-config-dir": {
        const d = v();
        if (!d.startsWith("/")) throw new ShellmcpError("USAGE", `--protected-config-dir must be an absolute path (got ${d})`);
        o.configDirs.push(d);
        break;
      }
      case "--hidden-paths": {
        const j = v();
        try {
          o.hidden = parseHiddenPaths(j);
        } catch (e) {
          throw new ShellmcpError("USAGE", (e as Error).message);
        }
        break;
      }
      case "--apply-seccomp-then-exec":
        o.inner = true;
        break;
      default:
        throw new ShellmcpError("USAGE", `unexpected argument '${a}'`);
    }
  }
  return o;
}

/** This process's working folder (the command's), or undefined when it has been removed. */
function currentFolder(): string | undefined {
  try {
    return process.cwd();
  } catch {
    return undefined;
  }
}

/** Run the helper role; returns an exit status unless it execs. */
export async function linuxSandboxMain(args: string[]): Promise<number> {
  let o: HelperArgs;
  let policy: SandboxPolicy;
  let profile: PermissionProfile | undefined;
  try {
    o = parse(args);
    if (o.policyCwd === undefined || (o.policyJson === undefined && o.profileJson === undefined))
      throw new ShellmcpError("USAGE", "--sandbox-policy-cwd and --sandbox-policy (or --permission-profile) are required");
    if (o.command.length === 0) throw new ShellmcpError("USAGE", "No command specified to execute.");
    if (o.profileJson !== undefined) {
      profile = parsePermissionProfile(o.profileJson);
      o.policyCwd = pathFromUri(o.policyCwd, "--sandbox-policy-cwd");
    }
    policy =
      o.policyJson !== undefined
        ? parseSandboxPolicy(o.policyJson)
        : { type: "read-only", access: { type: "full-access" }, network_access: false };
  } catch (e) {
    writeStderr(`codex-linux-sandbox: ${(e as Error).message}\n${USAGE}\n`);
    return HELPER_USAGE_EXIT;
  }
  if (o.joinCgroup !== undefined) {
    // Started directly by `serve` (as /proc/self/exe, which no trampoline can exec), this process joins its call's
    // cgroup itself, before it starts anything: the kernel has moved it once the write returns, so everything of
    // the call is in the cgroup from its first instruction. Not accounted, it must not run (the trampoline's 126).
    try {
      writeFileSync(o.joinCgroup, String(process.pid));
    } catch (e) {
      writeStderr(`codex-linux-sandbox: cannot join the call's cgroup: ${(e as Error).message}\n`);
      return 126;
    }
  }
  if (o.inheritPidNamespace && process.pid === 1) {
    // The init of the pid namespace our own helper made (Landlock below ABI 6, src/sandbox/linux/run.ts): it dies
    // with that helper, even a SIGKILLed one (the kernel then kills the whole namespace), and survives exec.
    try {
      prctl(PR.SET_PDEATHSIG, 9);
    } catch {
      // not Linux: no such namespace either
    }
  }
  keepEscalationSocketAcrossExec();
  setProtectedConfigDirs(o.configDirs);
  if (o.hidden !== undefined) setHiding({ fixed: o.hidden });
  try {
    // Bun marks inherited fds close-on-exec: the bridge fd must reach bubblewrap's inner stage.
    if (o.proxyFd !== undefined && !o.inner) setCloexec(o.proxyFd, false);
    if (o.policyJson === undefined) policy = summarySandboxPolicy(planPermissionProfile(profile!, o.policyCwd));
    if (o.proxyFd !== undefined && o.proxyPorts === undefined)
      throw new ShellmcpError("USAGE", "--network-proxy-fd needs --network-proxy-ports");
    const networkProxy =
      o.proxyPorts === undefined ? undefined : { ports: o.proxyPorts, ...(o.proxyFd !== undefined ? { fd: o.proxyFd } : {}) };
    if (o.inner) return innerStage(policy, o.policyCwd, o.command, profile, networkProxy);
    return await runSandboxed({
      networkProxy,
      policy,
      profile,
      policyCwd: o.policyCwd,
      workdir: currentFolder(),
      command: o.command,
      backend: o.backend,
      noProc: o.noProc,
      inheritPidNamespace: o.inheritPidNamespace,
    });
  } catch (e) {
    writeStderr(`codex-linux-sandbox: ${(e as Error).message}\n`);
    return e instanceof ShellmcpError && e.code === "USAGE" ? HELPER_USAGE_EXIT : SANDBOX_FAILURE_EXIT;
  }
}
