/**
 * A Linux sandbox run ({@link SandboxRun}: policy or permission profile, command, backend), the plan it enforces,
 * and what is applied in this process: Landlock + seccomp on the current thread (the `landlock` backend, and the
 * inner stage inside bubblewrap), then the command exec'd in place with a shell-style error when it cannot be.
 * The backend choice and bubblewrap are in ./run.ts and ./bwrap.ts.
 */
import { constants as osConstants } from "node:os";
import { dirname } from "node:path";
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { findExecutable } from "../../find-executable.ts";
import { portableShellBases } from "../../carried/portable-shells.ts";
import { writeStderr } from "../../stderr.ts";
import type { PermissionProfile } from "../permission-profile.ts";
import {
  landlockCanEnforce,
  linuxReadableRoots,
  planPermissionProfile,
  planSandboxPolicy,
  type FilesystemPlan,
} from "../filesystem-plan.ts";
import { isUnder } from "../paths.ts";
import type { SandboxPolicy } from "../policy.ts";
import { applyLandlock, FS, type LandlockSpec } from "./landlock.ts";
import { pathsBeside } from "../secrets.ts";
import { installFilter, type SeccompMode } from "./seccomp.ts";
import { sendNamespaceListeners } from "../../network/bridge.ts";

/** Backend names. */
export type Backend = "auto" | "bwrap" | "landlock";

/** What to run. */
export interface SandboxRun {
  policy: SandboxPolicy;
  /** Codex 0.169's permission profile (`--permission-profile`): when present it is enforced instead of `policy`. */
  profile?: PermissionProfile;
  /** Folder the policy's roots are computed from (`--sandbox-policy-cwd`). */
  policyCwd: string;
  /**
   * Folder the command starts in (the helper: its own working folder): under a legacy policy the `.git` of the
   * repository it lies in stays read-only at any depth below a writable root (policy.ts `nestedGitPaths`).
   */
  workdir?: string;
  command: string[];
  /**
   * The shell's environment (after `shell_environment_policy`), whose `$TMPDIR` is a writable root. Undefined: this
   * process's own (the helper and the inner stage run with the shell's environment). `serve` starting bubblewrap
   * directly must pass it: its own `$TMPDIR` is not the shell's when the policy drops or changes it, and the sandbox
   * must equal the model the escalation boundary judges by (`CallSandbox.writable`, found by the differential tier).
   */
  env?: Record<string, string | undefined>;
  backend: Backend;
  /** Skip `--proc /proc` in bwrap. */
  noProc?: boolean;
  /** `--inherit-pid-namespace` (Codex 0.169): keep the caller's pid namespace and /proc (bwrap: no --unshare-pid). */
  inheritPidNamespace?: boolean;
  /**
   * Network proxy mode (docs/network.md): the command reaches the network only through the call's proxy. With
   * `fd` (bubblewrap): a private network namespace whose only listeners, on `ports` of 127.0.0.1, are made by the
   * inner stage and sent to the server over `fd` (src/network/bridge.ts). Without (Landlock): TCP connect limited
   * to `ports`, the proxy's ports on the host's loopback. Seccomp in `proxy` mode either way.
   */
  networkProxy?: { fd?: number; ports: number[] };
  /**
   * Run the command in a new session, with no controlling terminal (`sandbox linux` for a person, whose terminal
   * the command would otherwise share: TIOCSTI could type into it). bubblewrap always does (`--new-session`); the
   * Landlock backend then starts the command as a child instead of exec'ing it in place, and waits for it.
   */
  newSession?: boolean;
}

/** Resolve `name` like execvp: names with `/` as given, else the first executable regular file on PATH. */
export function resolveCommand(name: string, path = process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"): string | undefined {
  return findExecutable(name, path);
}

/**
 * Start `command` (this process's environment) as a child in a new session, with no controlling terminal, and wait
 * for it; INT, TERM, HUP and QUIT sent to this process go to it. Resolves with its exit status (128+N for death by
 * signal N), or 127/126 with a shell-style error when it cannot be started. Used after the sandbox has been applied
 * to this thread: the child inherits it.
 */
export async function runInNewSession(command: string[]): Promise<number> {
  const file = resolveCommand(command[0]!);
  if (file === undefined) {
    writeStderr(`${command[0]}: command not found\n`);
    return 127;
  }
  const env = Object.entries(process.env).map(([k, v]) => `${k}=${v ?? ""}`);
  let pid: number;
  try {
    pid = libc.spawn({ path: file, argv: command, env, setsid: true, closeFrom: false });
  } catch (e) {
    const errno = e instanceof ShellmcpError ? (e.data.errno as number) : 0;
    writeStderr(`${command[0]}: ${errno ? libc.strerror(errno) : (e as Error).message}\n`);
    return errno === libc.ERRNO.ENOENT ? 127 : 126;
  }
  return waitForNamespaceInit(pid, undefined);
}

/** Exec `command` in place after resetting signals; on failure print a shell-style error and exit 127/126. */
export function execCommand(command: string[]): never {
  const file = resolveCommand(command[0]!);
  if (file === undefined) {
    writeStderr(`${command[0]}: command not found\n`);
    process.exit(127);
  }
  libc.resetSignals();
  const env = Object.entries(process.env).map(([k, v]) => `${k}=${v ?? ""}`);
  try {
    libc.execve(file, command, env);
  } catch (e) {
    const errno = e instanceof ShellmcpError ? (e.data.errno as number) : 0;
    writeStderr(`${command[0]}: ${errno ? libc.strerror(errno) : (e as Error).message}\n`);
    process.exit(errno === libc.ERRNO.ENOENT ? 127 : 126);
  }
}

/**
 * Wait for `pid`, the init (pid 1) of a pid namespace this process started, and pass its status on. SIGINT,
 * SIGTERM, SIGHUP and SIGQUIT sent to this process go to it; since a namespace's init only receives the signals it
 * handles, SIGKILL follows after `graceMs` (ms) if it is still there (undefined: never, for a child that is no
 * namespace's init). Resolves with the exit status (128+N for
 * death by signal N). The wait polls (no pidfd the event loop could await): 1 ms at first, backing off to 20 ms.
 */
export async function waitForNamespaceInit(pid: number, graceMs: number | undefined = 1000): Promise<number> {
  const forward = (sig: NodeJS.Signals): void => {
    libc.kill(pid, osConstants.signals[sig]);
    if (graceMs !== undefined) setTimeout(() => libc.kill(pid, osConstants.signals.SIGKILL), graceMs).unref();
  };
  const relayed = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"] as const;
  for (const sig of relayed) process.on(sig, forward);
  try {
    for (let delay = 1; ; delay = Math.min(delay * 2, 20)) {
      const st = libc.waitpidNoHang(pid);
      if (st !== undefined) return st.signal !== undefined ? 128 + st.signal : st.code;
      await Bun.sleep(delay);
    }
  } finally {
    for (const sig of relayed) process.off(sig, forward);
  }
}

/**
 * The folder holding this binary and the base folders of the portable shells it extracts (`serve` starts the
 * shell from there) for the user whose home is `home` (default: this process's), readable even under restricted
 * reads: the inner stage and the shell must start.
 */
export function selfDirs(home?: string): string[] {
  return [dirname(process.execPath), ...portableShellBases(undefined, home)];
}

/** What `run` enforces: its permission profile's plan when it has one, else its policy's. */
export function planOf(
  run: Pick<SandboxRun, "policy" | "profile" | "policyCwd" | "workdir"> & Partial<Pick<SandboxRun, "backend" | "env">>,
): FilesystemPlan {
  const env = run.env ?? process.env;
  return run.profile !== undefined
    ? planPermissionProfile(run.profile, run.policyCwd, env)
    : planSandboxPolicy(run.policy, run.policyCwd, env, run.backend === "landlock" ? undefined : { workdir: run.workdir });
}

/**
 * The seccomp mode a plan needs (docs/sandbox.md, "seccomp filter"), or undefined for none: `restricted` without
 * the full network, else `vsock` without full disk write; `proxy` in network proxy mode.
 */
export function seccompModeForPlan(plan: FilesystemPlan, proxied = false): SeccompMode | undefined {
  if (plan.network !== "enabled") return "restricted";
  if (proxied) return "proxy";
  if (!plan.fullWrite) return "vsock";
  return undefined;
}

/**
 * What {@link applyInProcess} applies, decided before anything is: the Landlock rules (undefined: no Landlock), the
 * seccomp mode (undefined: only PR_SET_NO_NEW_PRIVS), and whether Landlock confines writes (then, without its
 * TRUNCATE right, ABI < 3, the filter refuses truncate(2)). Every capability is dropped in any case.
 */
export interface InProcessSteps {
  landlock?: LandlockSpec;
  seccomp?: SeccompMode;
  /** Landlock confines writes: the filter refuses truncate(2) when the ruleset cannot handle TRUNCATE. */
  confinesWrites: boolean;
  /** The filesystem plan the steps enforce. */
  plan: FilesystemPlan;
}

/**
 * The steps that enforce `policy` (or `profile` when given) with `opts` (see {@link applyInProcess}), planned with
 * `env` (its `$TMPDIR` is a writable root) and `dirs` readable under restricted reads (this binary's folder and the
 * portable shells'). Reads the filesystem (canonical roots, the folders beside hidden paths) but changes nothing.
 * Throws `SANDBOX_UNAVAILABLE` as {@link applyInProcess}. Used by the helper in this process, and by `serve` for the
 * plan sandbox-exec applies (./sandbox-exec.ts) with the call's environment.
 */
export function inProcessSteps(
  policy: SandboxPolicy,
  policyCwd: string,
  opts: { landlockWrites: boolean; proxied?: boolean; proxyPorts?: number[] },
  profile?: PermissionProfile,
  env?: Record<string, string | undefined>,
  dirs: string[] = selfDirs(),
): InProcessSteps {
  // Landlock enforces the writable roots only: no search for the git dirs below them (policy.ts `nestedGitPaths`,
  // a complete search in this fresh process) is needed here, whichever stage this is.
  const plan = planOf({ policy, profile, policyCwd, backend: "landlock", ...(env !== undefined ? { env } : {}) });
  if (opts.landlockWrites) {
    const why = landlockCanEnforce(plan);
    if (why !== undefined) throw new ShellmcpError("SANDBOX_UNAVAILABLE", `cannot enforce the sandbox: ${why}`);
  }
  const roots = plan.writableRoots;
  let readable = linuxReadableRoots(plan, dirs);
  let writable = plan.fullWrite ? ["/"] : roots.map((r) => r.root);
  // Credential stores and secrets (../secrets.ts) under Landlock, which can only allow: the read and write rules
  // name everything beside them. (Inside bubblewrap, its mounts hide them already.)
  // The readable roots split that way may still be listed (READ_DIR only: `ls ~`, a shell's own getcwd walk), so
  // the names in a hidden folder can be listed, never a file's content; nothing outside the plan's reads.
  const hidden = opts.landlockWrites ? [...(plan.hidden?.stores ?? []), ...(plan.hidden?.secrets ?? [])] : [];
  let listable: string[] = [];
  if (hidden.length > 0) {
    const roots = readable ?? ["/"];
    listable = roots.filter((r) => hidden.some((h) => h !== r && isUnder(h, r)));
    readable = roots.flatMap((r) => pathsBeside(r, hidden));
    writable = writable.flatMap((w) => pathsBeside(w, hidden));
  }
  const mode = seccompModeForPlan(plan, opts.proxied === true);
  const proxyPorts = opts.landlockWrites && plan.network === "enabled" ? opts.proxyPorts : undefined;
  // Inside bwrap (landlockWrites false) the mounts already confine writes; Landlock is added only to enforce
  // restricted reads, with the same writable roots so that it never widens anything.
  const landlock =
    (opts.landlockWrites && !plan.fullWrite) || readable !== undefined || proxyPorts !== undefined
      ? {
          writableRoots: writable,
          readableRoots: readable,
          ...(listable.length > 0 ? { listableRoots: listable } : {}),
          networkRestricted: plan.network !== "enabled",
          ...(proxyPorts !== undefined ? { connectTcpPorts: proxyPorts } : {}),
        }
      : undefined;
  return {
    ...(landlock !== undefined ? { landlock } : {}),
    ...(mode !== undefined ? { seccomp: mode } : {}),
    confinesWrites: opts.landlockWrites && !plan.fullWrite,
    plan,
  };
}

/**
 * Apply Landlock + seccomp to this thread per `policy` (or `profile` when given; no exec): the steps of
 * {@link inProcessSteps}. Throws `SANDBOX_UNAVAILABLE`, also when `landlockWrites` and Landlock cannot enforce a
 * profile's read-only subpaths or denied paths (never less protection than asked for).
 */
export function applyInProcess(
  policy: SandboxPolicy,
  policyCwd: string,
  opts: { landlockWrites: boolean; proxied?: boolean; proxyPorts?: number[] },
  profile?: PermissionProfile,
): void {
  const steps = inProcessSteps(policy, policyCwd, opts, profile);
  // Landlock first (its rule paths are opened with open(2), which the filter does not touch), then seccomp.
  // Landlock confining writes without its TRUNCATE right (ABI < 3): seccomp refuses truncate(2) instead.
  let refuseTruncate = false;
  if (steps.landlock !== undefined) {
    const report = applyLandlock(steps.landlock);
    refuseTruncate = steps.confinesWrites && (report.handledFs & FS.TRUNCATE) === 0;
  }
  // No capability survives into the sandbox (issue 22, item 1): a root command kept every one of them (mknod of
  // /dev/kmsg, sethostname, reading any process's environ with CAP_SYS_PTRACE). bwrap drops them all too
  // (--cap-drop ALL); here the bounding, ambient, effective, permitted and inheritable sets are emptied before
  // the exec. A non-root user has none to drop.
  libc.dropAllCapabilities();
  if (steps.seccomp !== undefined)
    installFilter(steps.seccomp, { refuseTruncate }); // writes confined: a mode is always set then
  else libc.prctl(libc.PR.SET_NO_NEW_PRIVS, 1);
}

/**
 * Inner stage inside bwrap: in proxy mode first the bridge's listeners (made in this namespace and sent to the
 * server over `proxy.fd`), then seccomp (+ Landlock read rules for restricted reads), then exec.
 */
export function innerStage(
  policy: SandboxPolicy,
  policyCwd: string,
  command: string[],
  profile?: PermissionProfile,
  proxy?: SandboxRun["networkProxy"],
): never {
  if (proxy !== undefined) {
    if (proxy.fd === undefined) throw new ShellmcpError("SANDBOX_UNAVAILABLE", "network proxy mode inside bubblewrap needs the bridge fd");
    sendNamespaceListeners(proxy.fd, proxy.ports);
  }
  applyInProcess(policy, policyCwd, { landlockWrites: false, proxied: proxy !== undefined }, profile);
  return execCommand(command);
}
