/**
 * Bubblewrap: finding and preflighting it ({@link probeBwrap}, with a verified per-boot cache of full-strength
 * successes in ./bwrap-probe-cache.ts), and the argv that builds a run's mount view ({@link planBwrap}: the mounts
 * of ./bwrap-mounts.ts — writable roots, read-only re-binds, denied paths — then namespaces, the seccomp program or
 * our inner stage), with the host-side mount points it needs ({@link releaseBwrapPlan}). Launching it is in ./run.ts.
 */
import { existsSync, readFileSync, readlinkSync } from "node:fs";
import { ShellmcpError } from "../../errors.ts";
import { IS_COMPILED, selfCommand, selfExecCommand } from "../../self.ts";
import { forgetProbe, probedFullStrength, probeKey, rememberFullStrength } from "./bwrap-probe-cache.ts";
import { serializePermissionProfile } from "../permission-profile.ts";
import { linuxReadableRoots, type FilesystemPlan } from "../filesystem-plan.ts";
import { serializeSandboxPolicy } from "../policy.ts";
import { planOf, resolveCommand, seccompModeForPlan, type SandboxRun } from "./in-process.ts";
import { buildFilter, type SeccompMode } from "./seccomp.ts";
import { failIfInjected } from "../../fault-injection.ts";
import { bwrapMounts } from "./bwrap-mounts.ts";
import { countMounts, refuseOversizeBwrap } from "./exec-limits.ts";
import { releaseBwrapPlan } from "./mount-points.ts";
import type { BwrapProbe } from "../platform.ts";

// The mount part of the argv lives in ./bwrap-mounts.ts; named here too for its other users (the escalation room).
export { bwrapMounts };

/** Result of probing bubblewrap (defined with the platform types, ../platform.ts). */
export type { BwrapProbe };

/** Folders searched for `bwrap`, in order: the system's, never the caller's `PATH` (see {@link findBwrap}). */
export const BWRAP_DIRS = ["/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin"];

/** Environment variable naming the bubblewrap to use (an absolute path), for an install outside {@link BWRAP_DIRS}. */
export const BWRAP_ENV = "SHELLMCP_BWRAP";

/**
 * The bubblewrap to run: `$SHELLMCP_BWRAP` when set (an absolute path, the operator's choice), else the first
 * executable `bwrap` in {@link BWRAP_DIRS}; undefined when there is none, or a reason when `$SHELLMCP_BWRAP` is
 * unusable. bwrap runs outside every sandbox, so it is never looked up on `PATH`: PATH often has folders under
 * HOME first (`~/.local/bin`), and a command whose sandbox can write HOME would choose the program that builds the
 * next sandboxes (issue 22).
 */
export function findBwrap(env: Record<string, string | undefined> = process.env): { path?: string; reason?: string } {
  const chosen = env[BWRAP_ENV];
  if (chosen !== undefined && chosen !== "") {
    if (!chosen.startsWith("/")) return { reason: `${BWRAP_ENV} must be an absolute path (got ${chosen})` };
    return existsSync(chosen) ? { path: chosen } : { reason: `bubblewrap is not installed: ${BWRAP_ENV}=${chosen} does not exist` };
  }
  const path = resolveCommand("bwrap", BWRAP_DIRS.join(":"));
  return path === undefined ? {} : { path };
}

/**
 * Locate and preflight bubblewrap. A full-strength success is remembered for this boot and this bwrap binary in a
 * verified runtime folder (./bwrap-probe-cache.ts; `SHELLMCP_NO_PROBE_CACHE=1`: always probe); a degraded one
 * (`--no-proc`) or a failure is probed every time.
 */
export function probeBwrap(networkRestricted = true): BwrapProbe {
  const found = findBwrap();
  if (found.reason !== undefined) return { ok: false, reason: found.reason };
  const path = found.path;
  if (path === undefined) return { ok: false, reason: "bubblewrap is not installed (apt-get install bubblewrap)" };
  const key = probeKey(path, networkRestricted);
  if (key !== undefined && probedFullStrength(key)) return { ok: true, path };
  const r = probeBwrapUncached(path, networkRestricted);
  if (r.ok && r.noProc !== true && key !== undefined) rememberFullStrength(key);
  return r;
}

/**
 * bubblewrap at `path` failed after its preflight passed (a cached success gone stale: user namespaces disabled
 * since, a changed AppArmor policy): forget the cached success, so that the next probe runs bwrap again and falls
 * back to Landlock or explains.
 */
export function forgetBwrapProbe(path: string): void {
  for (const net of [true, false]) {
    const key = probeKey(path, net);
    if (key !== undefined) forgetProbe(key);
  }
}

function probeBwrapUncached(path: string, networkRestricted: boolean): BwrapProbe {
  const base = [
    path,
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    ...(networkRestricted ? ["--unshare-net"] : []),
    "--die-with-parent",
  ];
  const tru = existsSync("/usr/bin/true") ? "/usr/bin/true" : "/bin/true";
  const run = (extra: string[]) => Bun.spawnSync([...base, ...extra, "--", tru], { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  const r = run(["--proc", "/proc"]);
  if (r.exitCode === 0) return { ok: true, path };
  const err = r.stderr.toString();
  if (/Can't mount proc/i.test(err)) {
    const r2 = run([]);
    if (r2.exitCode === 0) return { ok: true, path, noProc: true };
  }
  let why = err.trim().split("\n").pop() ?? `exit ${r.exitCode}`;
  let usernsRefused: BwrapProbe["usernsRefused"];
  if (/namespace|uid map|setting up uid|Operation not permitted|Permission denied/i.test(err) && underSeccompFilter()) {
    usernsRefused = "container";
    // A container (issue 44): the runtime's default seccomp profile refuses new user namespaces, by design.
    why +=
      " — this process runs under a seccomp filter (a container runtime's default profile refuses new user namespaces), so the Landlock backend is the one that works here";
  } else if (/namespace|uid map|setting up uid|Operation not permitted|Permission denied/i.test(err)) {
    usernsRefused = "host";
    why +=
      " — user namespaces are disabled or restricted here: enable them (`sysctl -w kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04+ also `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for bwrap), or use the Landlock backend";
  }
  return { ok: false, path, reason: `bubblewrap cannot create its sandbox: ${why}`, ...(usernsRefused ? { usernsRefused } : {}) };
}

/**
 * Whether this process already runs under a seccomp filter (`Seccomp: 2` in /proc/self/status): inside a container
 * (Docker's, containerd's or CRI-O's default profile, Kubernetes' `RuntimeDefault`), whose filter refuses new user
 * namespaces. False when it cannot be read.
 */
function underSeccompFilter(): boolean {
  try {
    return /^Seccomp:\s*2$/m.test(readFileSync("/proc/self/status", "utf8"));
  } catch {
    return false;
  }
}

/**
 * The command that starts this binary as the Linux sandbox helper, whatever it is called: by its path for a command
 * run inside a sandbox (`from: "inside"`, the default: bwrap's inner stage), or as the file this process runs for a
 * process this one starts itself (`"here"`: {@link selfExecCommand}, which a replaced file cannot redirect).
 */
export function selfHelperCommand(from: "inside" | "here" = "inside"): string[] {
  return [...(from === "here" ? selfExecCommand() : selfCommand()), "--codex-run-as-linux-sandbox"];
}

/** Mount points that must be created on the host for missing protected paths (removed afterwards). */
export interface BwrapPlan {
  argv: string[];
  /**
   * Folders held on the host for protected paths: empty mount points made for missing ones, and existing folders bound
   * over, each locked while the sandbox runs (./mount-points.ts; give them back with {@link releaseBwrapPlan}).
   */
  created: string[];
  /** Private folders made for the plan (removed afterwards with their content). */
  tempDirs?: string[];
  /** The command runs as bwrap's child with no inner stage of ours (see {@link planBwrap}). */
  direct: boolean;
  /** Direct plans: the seccomp program (BPF bytes) bwrap must read from the `seccompFd` given to {@link planBwrap}. */
  seccomp?: Uint8Array;
  /**
   * The plan has no `--unshare-net`: bwrap must be started inside the server's loopback network (./loopback-net.ts),
   * whose filter it carries. Only when `loopback` was asked, the network is off, there is no proxy, and the plan is direct.
   */
  loopback?: boolean;
}

/** {@link planBwrap}'s options: the fd numbers bwrap will find, and whether it may run in the server's loopback network. */
export interface PlanOptions {
  /** fd number from which bwrap reads a direct plan's seccomp program (`--seccomp FD`). */
  seccompFd?: number;
  /** fd number of a read-only fd of this executable (`--ro-bind-fd`, src/self.ts `openSelfExe`). */
  selfFd?: number;
  /**
   * The caller can start bwrap inside the server's loopback network (./loopback-net.ts): a network-off, proxy-less,
   * direct plan then leaves out `--unshare-net` and carries the proxy mode's seccomp filter (AF_INET/AF_INET6 streams,
   * no new AF_UNIX socket), and says so (`loopback: true`); any other plan is as without it.
   */
  loopback?: boolean;
  /** `run`'s filesystem plan when the caller has it, made from the same inputs (../backend.ts `CallSandbox.plan`). */
  plan?: FilesystemPlan;
}

/**
 * Build the bwrap argv (docs/sandbox.md, "Bubblewrap backend"). Refuses (throws) when a protected path is a symlink: writing
 * through it would escape the read-only re-bind (Codex 0.169: "crosses writable symlink"); and (`SANDBOX_UNAVAILABLE`
 * with the mounts, arguments and bytes, and which limit) when the argv with `run.env` (else this process's
 * environment) could not start: a string over 131,072 bytes, more bytes than the kernel takes in one execve (a quarter
 * of the stack limit, at most 6 MiB), or more than bubblewrap's 9,000 arguments (./exec-limits.ts). Codex does not
 * count: its helper passes on bwrap's own "Exceeded maximum number of arguments 9000" (seen in a user's report).
 */
export function planBwrap(bwrap: string, run: SandboxRun, opts: PlanOptions = {}): BwrapPlan {
  const plan = opts.plan ?? planOf(run);
  // Direct: bwrap loads our seccomp program itself (`--seccomp FD`) and execs the command, with no stage of ours
  // inside. Only when nothing else must be applied inside (restricted reads need Landlock read rules) and the
  // program is named by an existing absolute path (bwrap 0.8 cannot set argv[0], and `command not found` keeps
  // its shell-style message and status 127 only from the inner stage).
  // Proxy mode needs our inner stage (it builds the bridge's listeners inside the namespace).
  const proxy = run.networkProxy;
  if (proxy !== undefined && proxy.fd === undefined)
    throw new ShellmcpError("SANDBOX_UNAVAILABLE", "network proxy mode under bubblewrap needs the bridge fd");
  const argv = [bwrap, "--new-session", "--die-with-parent"];
  const created: string[] = [];
  const tempDirs: string[] = [];
  // Every way out of here but a returned plan gives back the mount points and folders made so far (a refusal
  // after some were made: a symlinked protected path, a replaced executable).
  try {
    const mounts = bwrapMounts(plan, created, tempDirs);
    argv.push(...mounts);
    failIfInjected("bwrap_mounts");
    const out = finishPlan(run, opts, plan, argv, created, tempDirs);
    // Too large to start (E2BIG, or bwrap's own limit): refused here, before anything runs (./exec-limits.ts).
    refuseOversizeBwrap(out.argv, run.env ?? process.env, {
      mounts: countMounts(mounts),
      writableRoots: plan.writableRoots.length,
      deniedPaths: plan.deniedPaths.length,
    });
    return out;
  } catch (e) {
    releaseBwrapPlan({ argv, created, tempDirs, direct: false });
    throw e;
  }
}

/** Direct plans' seccomp programs by mode (./seccomp.ts `buildFilter`: they depend on the mode only), built once. */
const filters = new Map<SeccompMode, Uint8Array>();

/** The rest of {@link planBwrap} once the mounts are planned (it throws the same refusals). */
function finishPlan(
  run: SandboxRun,
  opts: PlanOptions,
  plan: FilesystemPlan,
  argv: string[],
  created: string[],
  tempDirs: string[],
): BwrapPlan {
  const proxy = run.networkProxy;
  const direct =
    proxy === undefined &&
    opts.seccompFd !== undefined &&
    linuxReadableRoots(plan) === undefined &&
    run.command[0]!.startsWith("/") &&
    existsSync(run.command[0]!);
  // The server's loopback network (./loopback-net.ts) instead of a fresh one: only lo, shared by this server's calls.
  const loopback = opts.loopback === true && direct && plan.network !== "enabled" && proxy === undefined;
  argv.push("--unshare-user", ...(run.inheritPidNamespace === true ? [] : ["--unshare-pid"]), "--unshare-ipc");
  if ((plan.network !== "enabled" || proxy !== undefined) && !loopback) argv.push("--unshare-net");
  if (!run.noProc && run.inheritPidNamespace !== true) argv.push("--proc", "/proc");
  argv.push("--cap-drop", "ALL");
  const mode = loopback ? "proxy" : seccompModeForPlan(plan);
  if (direct) {
    if (mode !== undefined) argv.push("--seccomp", String(opts.seccompFd));
    argv.push("--", ...run.command);
    if (mode !== undefined && !filters.has(mode)) filters.set(mode, buildFilter(mode));
    const seccomp = mode === undefined ? undefined : filters.get(mode)!.slice(); // a copy: the caller may hand it on
    return { argv, created, tempDirs, direct: true, seccomp, ...(loopback ? { loopback: true } : {}) };
  }
  // The inner stage is this executable, found by its path inside the sandbox's view. With `selfFd` (an fd of the
  // file this process runs, src/self.ts `openSelfExe`) that path shows the genuine file, bound over whatever lies there
  // now: a file an earlier call put at the executable's path never runs as the stage that installs the filter.
  // bwrap binds by the fd's path, so a genuine file whose path was replaced or removed cannot be bound: refused
  // with what to do (closed), never run from the path.
  if (IS_COMPILED && opts.selfFd !== undefined) {
    let running = "";
    try {
      running = readlinkSync("/proc/self/exe");
    } catch {
      // no /proc: the path it is
    }
    if (running.endsWith(" (deleted)"))
      throw new ShellmcpError(
        "SANDBOX_UNAVAILABLE",
        `the shellmcp executable at ${process.execPath} was replaced or removed after this process started, so the ` +
          `sandbox's inner stage cannot be the program that is running: restart shellmcp`,
      );
    argv.push("--ro-bind-fd", String(opts.selfFd), process.execPath);
  }
  argv.push("--", ...selfHelperArgv(run, ["--apply-seccomp-then-exec"]));
  return { argv, created, tempDirs, direct: false };
}

/**
 * argv that runs `run` again through this binary's sandbox helper role (`codex-linux-sandbox`), with `flags`
 * first: the bwrap inner stage (`--apply-seccomp-then-exec`), or the Landlock run started as a pid namespace's init
 * (src/sandbox/linux/run.ts). The policy, the permission profile when there is one, network proxy mode's bridge fd
 * and ports, and the command are passed as given; `from` as in {@link selfHelperCommand}.
 */
export function selfHelperArgv(
  run: Pick<SandboxRun, "policy" | "profile" | "policyCwd" | "command" | "networkProxy">,
  flags: string[],
  from: "inside" | "here" = "inside",
): string[] {
  const proxy = run.networkProxy;
  return [
    ...selfHelperCommand(from),
    ...flags,
    "--sandbox-policy-cwd",
    run.policyCwd,
    "--sandbox-policy",
    serializeSandboxPolicy(run.policy),
    ...(run.profile !== undefined ? ["--permission-profile", serializePermissionProfile(run.profile)] : []),
    ...(proxy === undefined
      ? []
      : [...(proxy.fd !== undefined ? ["--network-proxy-fd", String(proxy.fd)] : []), "--network-proxy-ports", proxy.ports.join(",")]),
    "--",
    ...run.command,
  ];
}
