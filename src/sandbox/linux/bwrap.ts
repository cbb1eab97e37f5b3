/**
 * Bubblewrap: finding and preflighting it ({@link probeBwrap}, with a verified per-boot cache of full-strength
 * successes in ./bwrap-probe-cache.ts), and the argv
 * that builds a run's mount view ({@link planBwrap}: writable roots, read-only re-binds, denied paths, namespaces,
 * the seccomp program or our inner stage), with the host-side mount points it needs
 * ({@link releaseBwrapPlan}). Launching it is in ./run.ts.
 */
import { chmodSync, existsSync, lstatSync, openSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join, sep } from "node:path";
import { ShellmcpError } from "../../errors.ts";
import { IS_COMPILED, selfCommand, selfExecCommand } from "../../self.ts";
import { forgetProbe, probedFullStrength, probeKey, rememberFullStrength } from "./bwrap-probe-cache.ts";
import { serializePermissionProfile } from "../permission-profile.ts";
import { linuxReadableRoots, type FilesystemPlan } from "../filesystem-plan.ts";
import { FIRST_SEARCH_MAX_DIRS, frontierTooLarge } from "../git/discover.ts";
import { configCarveOuts, rootInConfigDir } from "../protected-config.ts";
import { foundByDiscovery } from "../git/nested.ts";
import { pinFolders } from "../writable-model.ts";
import { serializeSandboxPolicy } from "../policy.ts";
import { planOf, resolveCommand, seccompModeForPlan, type SandboxRun } from "./in-process.ts";
import { outermost } from "../secrets.ts";
import { buildFilter, type SeccompMode } from "./seccomp.ts";
import { failIfInjected } from "../../fault-injection.ts";
import { DENY_FILE } from "./mount-markers.ts";
import { denyDir, holdMountPoint, releaseBwrapPlan } from "./mount-points.ts";

/** Result of probing bubblewrap. */
export interface BwrapProbe {
  ok: boolean;
  path?: string;
  /** `/proc` cannot be mounted (e.g. nested in a container): run with --no-proc. */
  noProc?: boolean;
  /** Why bwrap cannot be used, with the fix. */
  reason?: string;
  /**
   * bwrap is there but new user namespaces are refused: `container` when this process runs under a seccomp filter
   * (a container runtime's default profile, a Kubernetes pod's `RuntimeDefault`: expected, nothing to install),
   * `host` otherwise (sysctl, AppArmor). Absent when bwrap is missing or failed for another reason.
   */
  usernsRefused?: "container" | "host";
}

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

let selfExeFd: number | undefined;

/**
 * A read-only fd of the file this process runs (`/proc/self/exe`: the genuine executable even when its path has
 * since been replaced), opened once and kept (close-on-exec): given to bubblewrap as `--ro-bind-fd` so the inner
 * stage inside the sandbox is that file ({@link planBwrap}). Undefined where it cannot be opened (no /proc).
 */
export function openSelfExe(): number | undefined {
  if (selfExeFd === undefined) {
    try {
      selfExeFd = openSync("/proc/self/exe", "r");
    } catch {
      return undefined;
    }
  }
  return selfExeFd;
}

/**
 * The command that starts this binary as the Linux sandbox helper, whatever it is called: by its path for a command
 * run inside a sandbox (`from: "inside"`, the default: bwrap's inner stage), or as the file this process runs for a
 * process this one starts itself (`"here"`: {@link selfExecCommand}, which a replaced file cannot redirect).
 */
export function selfHelperCommand(from: "inside" | "here" = "inside"): string[] {
  return [...(from === "here" ? selfExecCommand() : selfCommand()), "--codex-run-as-linux-sandbox"];
}

/** Sort key: fewer path components first, then by name (a stable, total order). */
function byDepth<T>(path: (t: T) => string): (a: T, b: T) => number {
  const depth = (p: string) => p.split("/").filter(Boolean).length;
  return (a, b) => depth(path(a)) - depth(path(b)) || (path(a) < path(b) ? -1 : path(a) > path(b) ? 1 : 0);
}

/** Mount points that must be created on the host for missing protected paths (removed afterwards). */
export interface BwrapPlan {
  argv: string[];
  /** Empty mount points made on the host for missing protected paths (give them back with {@link releaseBwrapPlan}). */
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
  /** fd number of a read-only fd of this executable (`--ro-bind-fd`, {@link openSelfExe}). */
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
 * through it would escape the read-only re-bind (Codex 0.169: "crosses writable symlink").
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
    argv.push(...bwrapMounts(plan, created, tempDirs));
    failIfInjected("bwrap_mounts");
    return finishPlan(run, opts, plan, argv, created, tempDirs);
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
  // file this process runs, {@link openSelfExe}) that path shows the genuine file, bound over whatever lies there
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

/**
 * The mount part of a bwrap argv for `plan` (docs/sandbox.md, "Bubblewrap backend"): `/` read-only (or writable),
 * a fresh `/dev`, every writable root (except one inside a protected config folder), then every read-only re-bind
 * (the plan's, and the protected config folders inside any writable root: policy.ts `configCarveOuts`), then the
 * denied paths, then Codex's daemon folder hidden. Host-side mount points it creates are appended to `created`, temporary folders to `tempDirs`
 * (give both back with {@link releaseBwrapPlan}). Throws `SANDBOX_UNAVAILABLE` when a protected or denied path is a
 * symlink. Shared by the call's sandbox ({@link planBwrap}) and the escalation room (./room.ts).
 */
export function bwrapMounts(plan: FilesystemPlan, created: string[], tempDirs: string[]): string[] {
  const argv: string[] = [];
  argv.push(...(plan.fullWrite ? ["--bind", "/", "/"] : ["--ro-bind", "/", "/"]));
  argv.push("--dev", "/dev");
  // Mount order decides what wins: a later bind covers an earlier one. Every writable root is bound first,
  // shallowest first (a nested writable root stays writable); then every read-only re-bind, shallowest first,
  // so that no writable bind — `/tmp` and `$TMPDIR` included, whatever their order in the policy — can cover
  // a protected path (a project under /tmp keeps its `.git` read-only).
  // CODEX_HOME and /etc/codex are never writable, whatever plan this is (a call's, or a room's with the roots it
  // adds): a root inside one is not bound writable, and one inside a root is re-bound read-only (or, missing, kept
  // from being created).
  const roots = plan.writableRoots.filter((w) => rootInConfigDir(w.root) === undefined);
  // A root whose git-dir search stopped with more folders unsearched than can be bound (../git/discover.ts): in the
  // server the git guard refuses such a call before it gets here; a helper process planning its own mounts refuses too.
  for (const w of roots) {
    const n = frontierTooLarge(w.root);
    if (n !== undefined)
      throw new ShellmcpError(
        "SANDBOX_UNAVAILABLE",
        `${w.root} holds more than ${FIRST_SEARCH_MAX_DIRS} folders, so its ${n} folders not searched for git repositories cannot be kept read-only: narrow the writable folders`,
        { path: w.root },
      );
  }
  const sortedRoots = [...roots].sort(byDepth((r) => r.root));
  const subpaths = [...new Set(roots.flatMap((w) => [...w.readOnlySubpaths, ...configCarveOuts(w.root)]))].sort(byDepth((p) => p));
  // Folders bound writable again inside a read-only subpath (a bare repository's `objects/`, `refs/`: policy.ts
  // `nestedGit`), each after its read-only parent (depth order), with what lies read-only inside them after them.
  const again = [...new Set(roots.flatMap((w) => w.writableAgain ?? []))].filter((a) => subpaths.some((s) => s !== a && isUnderPath(a, s)));
  // A writable root that lies inside another root's read-only subpath (a room's submodule git dir inside the
  // call's read-only `.git`) is bound again after that subpath, with its own read-only subpaths after it.
  const nestedInReadOnly = sortedRoots.filter((w) => subpaths.some((sub) => sub !== w.root && isUnderPath(w.root, sub)));
  // The folders above a read-only entry that the sandbox could rename (a nested repository's folder, with its
  // read-only .git inside) are bound onto themselves, with the roots, shallowest first: a mount point cannot be renamed.
  // One inside a read-only subpath (below a folder bound writable again) is bound after that folder.
  const pins = pinFolders(
    roots.map((w) => w.root),
    [...subpaths, ...plan.deniedPaths],
    again,
  );
  const insideReadOnly = (p: string) => subpaths.some((s) => s !== p && isUnderPath(p, s));
  // A writable folder such as /tmp changes under the plan: another process may remove a repository the discovery
  // found between the plan and bwrap's mounts, and a bind of a missing source fails the whole sandbox. The git
  // control entries the discovery found (policy.ts `foundByDiscovery`) and the folders pinned only for them are
  // therefore bound with `-try` (skipped when gone: what is gone protects nothing, and what a command creates there
  // later is new, as for any folder it makes; the escalation boundary distrusts a control file made after its place
  // was handed out, ../git/taint.ts). Everything else stays strict: a missing one fails the call.
  const strict = new Set<string>(subpaths.filter((p) => !foundByDiscovery(p)));
  for (const a of again) if (!foundByDiscovery(a)) strict.add(a);
  for (const pin of pins) if ([...strict].some((p) => isUnderPath(p, pin))) strict.add(pin);
  const pinSet = new Set(pins);
  const binds = [...sortedRoots.map((w) => w.root), ...pins.filter((p) => !insideReadOnly(p))].sort(byDepth((p) => p));
  for (const b of binds) argv.push(pinSet.has(b) && !strict.has(b) ? "--bind-try" : "--bind", b, b);
  for (const sub of subpaths) {
    let isLink = false;
    try {
      isLink = readlinkSync(sub) !== undefined;
    } catch {
      isLink = false;
    }
    if (isLink) {
      throw new ShellmcpError(
        "SANDBOX_UNAVAILABLE",
        `cannot enforce sandbox read-only path ${sub} because it crosses writable symlink ${sub}`,
        { path: sub },
      );
    }
  }
  // Read-only subpaths, and inside them the folders bound writable again and what is pinned or read-only below
  // those, in one depth order: each covers what is above it.
  const layered = (p: string): string[] => {
    if (pinSet.has(p) || again.includes(p)) return [strict.has(p) ? "--bind" : "--bind-try", p, p];
    return [strict.has(p) ? "--ro-bind" : "--ro-bind-try", p, p];
  };
  const layers = [...subpaths, ...again, ...pins.filter((p) => insideReadOnly(p))].sort(byDepth((p) => p));
  for (const p of layers) {
    // Block creation (e.g. a missing .codex in the cwd): an empty read-only directory in its place.
    // A missing folder bound writable again (a bare repository's `logs/`, policy.ts `GIT_HELD_WRITABLE`): an empty
    // folder made on the host, bound writable.
    if (!pinSet.has(p) && !holdMountPoint(p, created)) continue;
    argv.push(...layered(p));
  }
  for (const w of nestedInReadOnly) {
    argv.push("--bind", w.root, w.root);
    const under = (p: string) => isUnderPath(p, w.root) && p !== w.root;
    for (const pin of pins.filter((p) => under(p) && !insideReadOnly(p)).sort(byDepth((p) => p)))
      argv.push(strict.has(pin) ? "--bind" : "--bind-try", pin, pin);
    for (const p of layers.filter(under)) argv.push(...layered(p));
  }
  // Denied paths (permission profiles' `deny`), after every bind so that none re-exposes them: a folder becomes
  // an empty, unreadable, read-only tmpfs (as Codex 0.169); a file is covered by an empty file of mode 000 bound
  // read-only (EACCES: no capability inside can override it). A missing one inside a writable root is blocked
  // from being created the same way.
  let unreadable: string | undefined;
  // Hidden credential files and secrets (../secrets.ts): /dev/null bound read-only over each (it cannot be opened
  // there: the mounts of bwrap's user namespace are nodev), no file of ours on the host to clean up.
  const hiddenFiles = new Set([...(plan.hidden?.stores ?? []), ...(plan.hidden?.secrets ?? [])]);
  // A denied path inside another one is hidden with it (a mount inside a hidden folder would fail the call).
  for (const d of outermost(plan.deniedPaths).sort(byDepth((p) => p))) {
    let st: ReturnType<typeof statSync> | undefined;
    try {
      st = lstatSync(d);
    } catch {
      st = undefined;
    }
    if (st?.isSymbolicLink()) {
      throw new ShellmcpError("SANDBOX_UNAVAILABLE", `cannot enforce sandbox denied path ${d} because it is a symlink`, { path: d });
    }
    if (st !== undefined && !st.isDirectory()) {
      if (hiddenFiles.has(d)) {
        argv.push("--ro-bind", "/dev/null", d);
        continue;
      }
      if (unreadable === undefined) {
        const dir = denyDir();
        tempDirs.push(dir);
        unreadable = join(dir, DENY_FILE);
        writeFileSync(unreadable, "", { mode: 0 });
        chmodSync(unreadable, 0);
      }
      argv.push("--ro-bind", unreadable, d);
      continue;
    }
    if (st === undefined) {
      if (!roots.some((w) => isUnderPath(d, w.root))) continue;
      if (!holdMountPoint(d, created)) continue;
    }
    argv.push("--perms", "000", "--tmpfs", d, "--remount-ro", d);
  }
  // Hide Codex's app-server socket folder, as Codex 0.169 does: a sandboxed command must not reach a daemon
  // that runs outside the sandbox. (After the writable binds, which may re-expose /tmp.)
  const daemonDir = `/tmp/codex-daemon-${process.getuid?.() ?? 0}`;
  if (existsSync(daemonDir)) argv.push("--perms", "000", "--tmpfs", daemonDir, "--remount-ro", daemonDir);
  return argv;
}

function isUnderPath(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
