/**
 * Run a command under a {@link SandboxPolicy} on Linux: the one place that chooses a backend and applies it.
 *
 * - `landlock`: in this process, on the main thread, right before execve: PR_SET_NO_NEW_PRIVS, the seccomp
 *   filter, the Landlock ruleset, signal dispositions and mask reset, then execve in place.
 * - `bwrap`: bubblewrap builds the mount view (read-only `/`, writable roots bound read-write, `.git`/`.codex`/
 *   `.agents` re-bound read-only, private `/dev`, `--unshare-net` when the network is off, new user/pid/ipc
 *   namespaces, `/proc` with Codex's retry-without-/proc); inside it this binary runs again as the inner stage
 *   (`--apply-seccomp-then-exec`) to install the seccomp filter (and Landlock read rules for restricted reads)
 *   and exec the command.
 * - `auto`: bwrap when its preflight passes (it protects `.git`/`.codex` inside writable roots, which Landlock
 *   cannot), else Landlock with a one-line warning, else fail closed.
 * Nothing ever runs with less protection than asked for: every failure to apply a layer is an error.
 */
import {
  chmodSync,
  readFileSync,
  renameSync,
  writeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { homedir, constants as osConstants, tmpdir } from "node:os";
import { delimiter, dirname, join, sep } from "node:path";
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { writeStderr } from "../../stderr.ts";
import {
  landlockCanEnforce,
  linuxReadableRoots,
  planPermissionProfile,
  planSandboxPolicy,
  serializePermissionProfile,
  type FilesystemPlan,
  type PermissionProfile,
} from "../permission-profile.ts";
import { hasFullDiskWrite, hasFullNetwork, serializeSandboxPolicy, type SandboxPolicy } from "../policy.ts";
import { applyLandlock } from "./landlock.ts";
import { buildFilter, installFilter, type SeccompMode } from "./seccomp.ts";

/** Backend names. */
export type Backend = "auto" | "bwrap" | "landlock";

/** Exit status when the sandbox cannot be applied (Codex's helper panics with 101). */
export const SANDBOX_FAILURE_EXIT = 101;

/** What to run. */
export interface SandboxRun {
  policy: SandboxPolicy;
  /** Codex 0.169's permission profile (`--permission-profile`): when present it is enforced instead of `policy`. */
  profile?: PermissionProfile;
  /** Folder the policy's roots are computed from (`--sandbox-policy-cwd`). */
  policyCwd: string;
  command: string[];
  backend: Backend;
  /** Skip `--proc /proc` in bwrap. */
  noProc?: boolean;
}

/** The seccomp mode a policy needs (docs/sandbox.md, "seccomp filter"), or undefined for none. */
export function seccompModeFor(p: SandboxPolicy): SeccompMode | undefined {
  if (!hasFullNetwork(p)) return "restricted";
  if (!hasFullDiskWrite(p)) return "vsock";
  return undefined;
}

/** Resolve `name` like execvp: names with `/` as given, else the first executable regular file on PATH. */
export function resolveCommand(name: string, path = process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"): string | undefined {
  if (name.includes("/")) return name;
  for (const dir of path.split(delimiter)) {
    const p = join(dir === "" ? "." : dir, name);
    try {
      const st = statSync(p);
      if (st.isFile() && (st.mode & 0o111) !== 0) return p;
    } catch {
      // not here
    }
  }
  return undefined;
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

/** The folder holding this binary, readable even under restricted reads (the inner stage must start). */
function selfDirs(): string[] {
  return [dirname(process.execPath)];
}

/** What `run` enforces: its permission profile's plan when it has one, else its policy's. */
export function planOf(run: Pick<SandboxRun, "policy" | "profile" | "policyCwd">): FilesystemPlan {
  return run.profile !== undefined ? planPermissionProfile(run.profile, run.policyCwd) : planSandboxPolicy(run.policy, run.policyCwd);
}

/** The seccomp mode a plan needs: like {@link seccompModeFor}. */
function seccompModeForPlan(plan: FilesystemPlan): SeccompMode | undefined {
  if (plan.network !== "enabled") return "restricted";
  if (!plan.fullWrite) return "vsock";
  return undefined;
}

/**
 * Apply Landlock + seccomp to this thread per `policy` (or `profile` when given; no exec). Throws
 * `SANDBOX_UNAVAILABLE`, also when `landlockWrites` and Landlock cannot enforce a profile's read-only subpaths
 * or denied paths (never less protection than asked for).
 */
export function applyInProcess(
  policy: SandboxPolicy,
  policyCwd: string,
  opts: { landlockWrites: boolean },
  profile?: PermissionProfile,
): void {
  const plan = planOf({ policy, profile, policyCwd });
  if (opts.landlockWrites) {
    const why = landlockCanEnforce(plan);
    if (why !== undefined) throw new ShellmcpError("SANDBOX_UNAVAILABLE", `cannot enforce the sandbox: ${why}`);
  }
  const roots = plan.writableRoots;
  const readable = linuxReadableRoots(plan, selfDirs());
  const mode = seccompModeForPlan(plan);
  // Landlock first (its rule paths are opened with open(2), which the filter does not touch), then seccomp.
  // Inside bwrap (landlockWrites false) the mounts already confine writes; Landlock is added only to enforce
  // restricted reads, with the same writable roots so that it never widens anything.
  if ((opts.landlockWrites && !plan.fullWrite) || readable !== undefined) {
    applyLandlock({
      writableRoots: plan.fullWrite ? ["/"] : roots.map((r) => r.root),
      readableRoots: readable,
      networkRestricted: plan.network !== "enabled",
    });
  }
  // Without CAP_SYS_PTRACE nothing inside can read a non-dumpable process's /proc files (serve makes itself
  // non-dumpable, so its environment, with the secrets the shell does not get, stays unreadable). Landlock only
  // scopes ptrace attaches, not /proc/<pid>/environ reads; bwrap drops every capability anyway. Dropping from the
  // bounding set needs CAP_SETPCAP: a non-root user has neither, and nothing to drop.
  try {
    libc.prctl(libc.PR.CAPBSET_DROP, libc.CAP_SYS_PTRACE);
  } catch {
    // not permitted (non-root): no such capability to lose
  }
  if (mode !== undefined) installFilter(mode);
  else libc.prctl(libc.PR.SET_NO_NEW_PRIVS, 1);
}

// ---------------------------------------------------------------------------------------------------------
// bubblewrap

/** Result of probing bubblewrap. */
export interface BwrapProbe {
  ok: boolean;
  path?: string;
  /** `/proc` cannot be mounted (e.g. nested in a container): run with --no-proc. */
  noProc?: boolean;
  /** Why bwrap cannot be used, with the fix. */
  reason?: string;
}

/**
 * Where successful preflights are remembered (per user, outside /tmp): a preflight costs a whole bwrap run, and
 * its answer only changes with the kernel (boot) or the bwrap binary. Only successes are cached, so a forged
 * entry cannot downgrade a sandbox to Landlock: at worst bwrap then fails and the command does not run.
 */
export const BWRAP_PROBE_CACHE = join(homedir(), ".cache", "shellmcp", "bwrap-probe.json");

function probeCacheKey(path: string, networkRestricted: boolean): string | undefined {
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    const st = statSync(path);
    return `${boot}:${path}:${st.ino}:${st.mtimeMs}:${networkRestricted ? "net-off" : "net-on"}`;
  } catch {
    return undefined;
  }
}

function readProbeCache(key: string): { noProc: boolean } | undefined {
  try {
    const v = JSON.parse(readFileSync(BWRAP_PROBE_CACHE, "utf8")) as Record<string, { noProc?: unknown }>;
    const e = v[key];
    return e === undefined ? undefined : { noProc: e.noProc === true };
  } catch {
    return undefined;
  }
}

function writeProbeCache(key: string, noProc: boolean): void {
  try {
    mkdirSync(dirname(BWRAP_PROBE_CACHE), { recursive: true });
    const tmp = `${BWRAP_PROBE_CACHE}.${process.pid}`;
    writeFileSync(tmp, JSON.stringify({ [key]: { noProc } }));
    renameSync(tmp, BWRAP_PROBE_CACHE);
  } catch {
    // best effort
  }
}

/**
 * Locate and preflight bubblewrap: `--ro-bind / /`, new namespaces and `/proc`, running `true`. A success is
 * remembered in {@link BWRAP_PROBE_CACHE} for this boot and this bwrap binary (`SHELLMCP_NO_PROBE_CACHE=1`: always probe).
 */
export function probeBwrap(networkRestricted = true): BwrapProbe {
  const path = resolveCommand("bwrap");
  if (path === undefined) return { ok: false, reason: "bubblewrap is not installed (apt-get install bubblewrap)" };
  const key = process.env.SHELLMCP_NO_PROBE_CACHE === "1" ? undefined : probeCacheKey(path, networkRestricted);
  const cached = key === undefined ? undefined : readProbeCache(key);
  if (cached !== undefined) return { ok: true, path, ...(cached.noProc ? { noProc: true } : {}) };
  const r = probeBwrapUncached(path, networkRestricted);
  if (r.ok && key !== undefined) writeProbeCache(key, r.noProc === true);
  return r;
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
  if (/namespace|uid map|setting up uid|Operation not permitted|Permission denied/i.test(err)) {
    why +=
      " — user namespaces are disabled or restricted here: enable them (`sysctl -w kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04+ also `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for bwrap), or use the Landlock backend";
  }
  return { ok: false, path, reason: `bubblewrap cannot create its sandbox: ${why}` };
}

/** The command that starts this binary as the Linux sandbox helper, whatever it is called. */
function selfHelperCommand(): string[] {
  const compiled = (process.argv[1] ?? "").startsWith("/$bunfs/");
  return compiled
    ? [process.execPath, "--codex-run-as-linux-sandbox"]
    : [process.execPath, process.argv[1]!, "--codex-run-as-linux-sandbox"];
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
}

/**
 * Mount points this process made for missing protected paths, and how many running sandboxes use each:
 * concurrent calls of one server share them, and the last one out removes it (one call's cleanup must not pull
 * the mount point from under another's plan).
 */
const syntheticMountPoints = new Map<string, number>();

function holdMountPoint(p: string, created: string[]): void {
  const n = syntheticMountPoints.get(p);
  if (n === undefined && existsSync(p)) return; // a real folder: not ours
  if (n === undefined) mkdirSync(p);
  syntheticMountPoints.set(p, (n ?? 0) + 1);
  created.push(p);
}

/** Give back what {@link planBwrap} made on the host, once the sandbox has ended. */
export function releaseBwrapPlan(plan: BwrapPlan): void {
  for (const d of plan.tempDirs ?? []) rmSync(d, { recursive: true, force: true });
  for (const p of [...plan.created].reverse()) {
    const n = (syntheticMountPoints.get(p) ?? 1) - 1;
    if (n > 0) {
      syntheticMountPoints.set(p, n);
      continue;
    }
    syntheticMountPoints.delete(p);
    try {
      rmdirSync(p); // only if still empty
    } catch {
      // something was put there from outside the sandbox: leave it
    }
  }
}

/**
 * Build the bwrap argv (docs/sandbox.md, "Bubblewrap backend"). Refuses (throws) when a protected path is a symlink: writing
 * through it would escape the read-only re-bind (Codex 0.169: "crosses writable symlink").
 */
export function planBwrap(bwrap: string, run: SandboxRun, opts: { seccompFd?: number } = {}): BwrapPlan {
  const { policy } = run;
  const plan = planOf(run);
  // Direct: bwrap loads our seccomp program itself (`--seccomp FD`) and execs the command, with no stage of ours
  // inside. Only when nothing else must be applied inside (restricted reads need Landlock read rules) and the
  // program is named by an existing absolute path (bwrap 0.8 cannot set argv[0], and `command not found` keeps
  // its shell-style message and status 127 only from the inner stage).
  const direct =
    opts.seccompFd !== undefined &&
    linuxReadableRoots(plan) === undefined &&
    run.command[0]!.startsWith("/") &&
    existsSync(run.command[0]!);
  const argv = [bwrap, "--new-session", "--die-with-parent"];
  argv.push(...(plan.fullWrite ? ["--bind", "/", "/"] : ["--ro-bind", "/", "/"]));
  argv.push("--dev", "/dev");
  const created: string[] = [];
  // Mount order decides what wins: a later bind covers an earlier one. Every writable root is bound first,
  // shallowest first (a nested writable root stays writable); then every read-only re-bind, shallowest first,
  // so that no writable bind — `/tmp` and `$TMPDIR` included, whatever their order in the policy — can cover
  // a protected path (a project under /tmp keeps its `.git` read-only).
  const roots = plan.writableRoots;
  for (const w of [...roots].sort(byDepth((r) => r.root))) argv.push("--bind", w.root, w.root);
  const subpaths = [...new Set(roots.flatMap((w) => w.readOnlySubpaths))].sort(byDepth((p) => p));
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
    // Block creation (e.g. a missing .codex in the cwd): an empty read-only directory in its place.
    holdMountPoint(sub, created);
    argv.push("--ro-bind", sub, sub);
  }
  // Denied paths (permission profiles' `deny`), after every bind so that none re-exposes them: a folder becomes
  // an empty, unreadable, read-only tmpfs (as Codex 0.169); a file is covered by an empty file of mode 000 bound
  // read-only (EACCES: no capability inside can override it). A missing one inside a writable root is blocked
  // from being created the same way.
  let unreadable: string | undefined;
  const tempDirs: string[] = [];
  for (const d of [...plan.deniedPaths].sort(byDepth((p) => p))) {
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
      if (unreadable === undefined) {
        const dir = mkdtempSync(join(tmpdir(), "shellmcp-deny-"));
        tempDirs.push(dir);
        unreadable = join(dir, "denied");
        writeFileSync(unreadable, "", { mode: 0 });
        chmodSync(unreadable, 0);
      }
      argv.push("--ro-bind", unreadable, d);
      continue;
    }
    if (st === undefined) {
      if (!roots.some((w) => isUnderPath(d, w.root))) continue;
      holdMountPoint(d, created);
    }
    argv.push("--perms", "000", "--tmpfs", d, "--remount-ro", d);
  }
  // Hide Codex's app-server socket folder, as Codex 0.169 does: a sandboxed command must not reach a daemon
  // that runs outside the sandbox. (After the writable binds, which may re-expose /tmp.)
  const daemonDir = `/tmp/codex-daemon-${process.getuid?.() ?? 0}`;
  if (existsSync(daemonDir)) argv.push("--perms", "000", "--tmpfs", daemonDir, "--remount-ro", daemonDir);
  argv.push("--unshare-user", "--unshare-pid", "--unshare-ipc");
  if (plan.network !== "enabled") argv.push("--unshare-net");
  if (!run.noProc) argv.push("--proc", "/proc");
  argv.push("--cap-drop", "ALL");
  const mode = seccompModeForPlan(plan);
  if (direct) {
    if (mode !== undefined) argv.push("--seccomp", String(opts.seccompFd));
    argv.push("--", ...run.command);
    return { argv, created, tempDirs, direct: true, seccomp: mode === undefined ? undefined : buildFilter(mode) };
  }
  argv.push(
    "--",
    ...selfHelperCommand(),
    "--apply-seccomp-then-exec",
    "--sandbox-policy-cwd",
    run.policyCwd,
    "--sandbox-policy",
    serializeSandboxPolicy(policy),
    ...(run.profile !== undefined ? ["--permission-profile", serializePermissionProfile(run.profile)] : []),
    "--",
    ...run.command,
  );
  return { argv, created, tempDirs, direct: false };
}

/** fds this process inherited from its parent (not CLOEXEC): the command must get them too (e.g. the escalation socket). */
function inheritedFds(): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc/self/fd")) {
    const fd = Number(name);
    if (fd < 3) continue;
    try {
      if (!libc.getCloexec(fd)) out.push(fd);
    } catch {
      // the fd of the directory listing itself, gone by now
    }
  }
  return out.sort((a, b) => a - b);
}

/** A pipe whose read end holds `bytes` and then EOF (e.g. a seccomp program for bwrap). CLOEXEC; close it after use. */
export function bytesPipe(bytes: Uint8Array): number {
  const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
  try {
    let off = 0;
    while (off < bytes.byteLength) off += writeSync(w, bytes, off);
  } finally {
    libc.closeQuiet(w);
  }
  return r;
}

async function runBwrap(bwrap: string, run: SandboxRun): Promise<number> {
  const fds = inheritedFds();
  const seccompFd = Math.max(2, ...fds) + 1;
  const plan = planBwrap(bwrap, run, { seccompFd });
  const stdio: (number | "inherit" | "ignore")[] = ["inherit", "inherit", "inherit"];
  for (let fd = 3; fd <= (fds[fds.length - 1] ?? 2); fd++) stdio.push(fds.includes(fd) ? fd : "ignore");
  const bpf = plan.seccomp === undefined ? undefined : bytesPipe(plan.seccomp);
  if (bpf !== undefined) stdio.push(bpf);
  const child = Bun.spawn(plan.argv, { stdio: stdio as ["inherit", "inherit", "inherit"], env: process.env });
  if (bpf !== undefined) libc.closeQuiet(bpf);
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  for (const s of ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"] as const) process.on(s, forward(s));
  const code = await child.exited;
  releaseBwrapPlan(plan);
  const sig = child.signalCode;
  if (sig !== null && sig !== undefined) {
    return 128 + (osConstants.signals[sig as NodeJS.Signals] ?? 0);
  }
  return code;
}

/**
 * Run `run.command` under the policy. Landlock path: never returns (execs). bwrap path: resolves with the
 * command's exit status (128+N for a signal). Throws `SANDBOX_UNAVAILABLE` when protection cannot be applied.
 */
export async function runSandboxed(run: SandboxRun): Promise<number> {
  if (run.command.length === 0) throw new ShellmcpError("USAGE", "No command specified to execute.");
  const plan = planOf(run);
  if (!plan.sandboxed) return execCommand(run.command);
  const needsFs = !plan.fullWrite || !plan.fullRead || plan.deniedPaths.length > 0;
  let backend = run.backend;
  let probe: BwrapProbe | undefined;
  if (backend !== "landlock" && needsFs) {
    probe = probeBwrap(plan.network !== "enabled");
    if (!probe.ok) {
      if (backend === "bwrap") throw new ShellmcpError("SANDBOX_UNAVAILABLE", probe.reason!);
      writeStderr(`shellmcp: ${probe.reason}; using Landlock instead, which does not protect .git/.codex inside writable roots\n`);
      backend = "landlock";
    } else backend = "bwrap";
  } else if (backend === "auto") backend = "landlock";

  if (backend === "bwrap" && needsFs) return runBwrap(probe!.path!, { ...run, noProc: run.noProc || probe!.noProc });
  // Landlock (or seccomp only, for external-sandbox).
  applyInProcess(run.policy, run.policyCwd, { landlockWrites: true }, run.profile);
  return execCommand(run.command);
}

/** Inner stage inside bwrap: seccomp (+ Landlock read rules for restricted reads), then exec. */
export function innerStage(policy: SandboxPolicy, policyCwd: string, command: string[], profile?: PermissionProfile): never {
  applyInProcess(policy, policyCwd, { landlockWrites: false }, profile);
  return execCommand(command);
}

function isUnderPath(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
