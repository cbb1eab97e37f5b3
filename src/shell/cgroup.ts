/**
 * One cgroup (v2) per `shell` call, so that every process the call starts ends with it — the sandboxed shell,
 * its background jobs, the escalated programs, and whatever they `setsid` or double-fork away from their process
 * group. (A process group or session is left with one `setsid()`; a cgroup cannot be left without write access
 * to the cgroup filesystem, which no sandbox grants.)
 *
 * Layout: `<this server's cgroup>/shellmcp-<pid>/call-<n>`. Every process of a call is in the call's cgroup from
 * its first instruction: the lifeline guard that starts the shell or an escalated program makes its child inside it
 * (`clone3(CLONE_INTO_CGROUP)`: no move, which costs an RCU grace period, ~9 ms a call here; joining first where the
 * kernel cannot)
 * (src/sandbox/linux/lifeline.ts), or `/bin/sh` (`joinCgroupFirst` in ./spawn-plan.ts) where there is no guard binary, and
 * the sandbox helper joins it itself with `--join-cgroup`. Ending a call writes `cgroup.kill` (Linux 5.14+; older
 * kernels: freeze, SIGKILL every member, thaw), then removes the folder once it is empty.
 *
 * Needs a writable cgroup v2 hierarchy (root, or a delegated subtree as systemd gives user services). Where there
 * is none, {@link CgroupManager.detect} says why, and the lifeline guard still holds a call's processes: it is the
 * subreaper of everything the shell or program starts and kills it all when the shell ends, when the server ends
 * the call, or when the server dies (docs/security.md, "Running as root / in containers").
 */
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as libc from "../../ffi/libc.ts";
import { log } from "../log.ts";
import { ownedAndPrivate } from "../sandbox/paths.ts";
import { readUntrustedText } from "../untrusted-fs.ts";

/** Where this process's cgroup v2 lives, or why it cannot have children. */
function ownCgroup(): { dir: string } | { error: string } {
  let mounts: string;
  let self: string;
  try {
    mounts = readFileSync("/proc/self/mountinfo", "utf8");
    self = readFileSync("/proc/self/cgroup", "utf8");
  } catch (e) {
    return { error: `cannot read /proc: ${(e as Error).message}` };
  }
  // mountinfo: "id parent maj:min root mountpoint opts ... - fstype source superopts"
  const mount = mounts
    .split("\n")
    .map((l) => l.split(" - "))
    .find(([, tail]) => tail?.startsWith("cgroup2 "))?.[0]
    ?.split(" ");
  if (mount === undefined) return { error: "no cgroup v2 hierarchy is mounted" };
  const [root, point] = [mount[3]!, mount[4]!];
  const line = self.split("\n").find((l) => l.startsWith("0::"));
  if (line === undefined) return { error: "this process is in no cgroup v2" };
  const path = line.slice(3);
  const rel = root === "/" ? path : path.startsWith(root) ? path.slice(root.length) : path;
  return { dir: join(point, rel) };
}

/** Creates, fills and kills the per-call cgroups of one server. */
export class CgroupManager {
  private next = 1;
  /** The next call's cgroup, made ahead off the calls' path ({@link create}); at most one. */
  private spare: CallCgroup | undefined;
  private preparing = false;
  /** Set by {@link shutdown}: no cgroup is made ahead any more. */
  private stopped = false;
  private constructor(readonly base: string) {}

  /**
   * A manager whose calls get cgroups under `<own cgroup>/shellmcp-<pid>`, or `{ error }` saying why there can be
   * none here (no cgroup v2, not writable, …). `SHELLMCP_NO_CGROUP=1` turns them off (tests of the fallback).
   */
  static detect(env: Record<string, string | undefined> = process.env): CgroupManager | { error: string } {
    if (env.SHELLMCP_NO_CGROUP === "1") return { error: "turned off by SHELLMCP_NO_CGROUP=1" };
    const own = ownCgroup();
    if ("error" in own) return own;
    sweepStale(own.dir);
    const base = join(own.dir, `shellmcp-${process.pid}`);
    try {
      mkdirSync(base);
      // Probe: can we move a process in and kill it? (Delegation can allow mkdir and still refuse moves.)
      const probe = join(base, "probe");
      mkdirSync(probe);
      rmdirSync(probe);
    } catch (e) {
      try {
        rmdirSync(base);
      } catch {
        // never created
      }
      return { error: `cannot create cgroups under ${own.dir}: ${(e as Error).message}` };
    }
    return new CgroupManager(base);
  }

  /**
   * A new, empty cgroup for one call: the one made ahead ({@link prepare}) when it is still there, else made now.
   * Throws when it cannot be created (the caller fails the call). The base is created again when it is gone (another server's {@link sweepStale} removes empty bases of pids it cannot
   * see, e.g. across pid namespaces).
   */
  create(): CallCgroup {
    const spare = this.spare;
    this.spare = undefined;
    this.prepare();
    // A cgroup made ahead is used while it is still there (another server's sweep removes only bases it finds empty).
    if (spare !== undefined && existsSync(spare.procs)) return spare;
    return this.make();
  }

  private make(): CallCgroup {
    const dir = join(this.base, `call-${this.next++}`);
    mkdirSync(this.base, { recursive: true });
    mkdirSync(dir);
    return new CallCgroup(dir);
  }

  /**
   * Make the next call's cgroup once the current task has run (issue 40: the `mkdir` of a cgroup, ~0.06 ms, is off
   * the call's path; it runs while the call's shell starts). Nothing is made after {@link shutdown}; a failure is
   * left for the next {@link create} to meet and report.
   */
  private prepare(): void {
    if (this.preparing || this.stopped) return;
    this.preparing = true;
    setImmediate(() => {
      this.preparing = false;
      if (this.spare !== undefined || this.stopped) return;
      try {
        this.spare = this.make();
      } catch {
        // create() makes one itself, and says why it cannot
      }
    });
  }

  /**
   * Server shutdown: kill every call's processes, wait until the kernel has emptied each cgroup (SIGKILL is
   * delivered asynchronously; up to ~2 s each, in parallel), then remove the folders and the base. Resolves when
   * done; never rejects (what cannot be removed is logged and left).
   */
  async shutdown(): Promise<void> {
    this.stopped = true;
    this.spare = undefined; // removed below with the rest
    const calls: CallCgroup[] = [];
    for (let n = 1; n < this.next; n++) {
      const dir = join(this.base, `call-${n}`);
      if (existsSync(dir)) calls.push(new CallCgroup(dir));
    }
    for (const c of calls) c.kill(); // all at once first: nothing of any call runs on while we wait for another
    await Promise.all(calls.map((c) => c.dispose()));
    tryRmdir(this.base);
  }
}

/**
 * Remove the empty `shellmcp-<pid>` folders (and their empty `call-<n>` folders) that servers which no longer run
 * left in `dir` (a server killed with SIGKILL cannot clean up). Only empty cgroups are removed (rmdir refuses the
 * others); folders of live pids are left alone, unless that pid's process started after the folder last changed
 * (a reused pid: {@link startedAfter}). Best effort, never throws.
 */
function sweepStale(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^shellmcp-(\d+)$/.exec(name);
    const base = join(dir, name);
    if (m === null || Number(m[1]) === process.pid || (existsSync(`/proc/${m[1]}`) && !startedAfter(Number(m[1]), base))) continue;
    try {
      for (const call of readdirSync(base)) if (call.startsWith("call-")) tryRmdir(join(base, call));
    } catch {
      continue;
    }
    tryRmdir(base);
  }
}

/**
 * Whether process `pid` started after `dir` last changed: then it is not the server that made `dir` (that one ran
 * before it), only a later process that got the same pid. False when unknown. (Start time: ticks
 * since boot, /proc/<pid>/stat field 22, at 100 per second, plus the boot time of /proc/stat.)
 */
function startedAfter(pid: number, dir: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const ticks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
    const btime = Number(/^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"))?.[1]);
    if (!Number.isFinite(ticks) || !Number.isFinite(btime)) return false;
    // btime is whole seconds, rounded down: the start computed here is at most a second early, never late.
    return (btime + ticks / 100) * 1000 > statSync(dir).ctimeMs;
  } catch {
    return false;
  }
}

function tryRmdir(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/** One call's cgroup. */
export class CallCgroup {
  /** The `cgroup.procs` file: write a pid to move that process in. */
  readonly procs: string;
  constructor(readonly dir: string) {
    this.procs = join(dir, "cgroup.procs");
  }

  /** Move process `pid` (and its future children) into this cgroup. Throws when the kernel refuses. */
  add(pid: number): void {
    appendFileSync(this.procs, String(pid));
  }

  /** Pids in the cgroup now. */
  members(): number[] {
    try {
      return readFileSync(this.procs, "utf8").split("\n").filter(Boolean).map(Number);
    } catch {
      return [];
    }
  }

  /** SIGKILL every process in the cgroup, however it detached itself. */
  kill(): void {
    const killFile = join(this.dir, "cgroup.kill");
    if (existsSync(killFile)) {
      try {
        writeFileSync(killFile, "1");
        return;
      } catch (e) {
        log.debug("cgroup.kill failed; killing members one by one", { error: (e as Error).message });
      }
    }
    // Older kernels: freeze so nothing forks while we kill, then thaw so the signals are delivered.
    const freeze = join(this.dir, "cgroup.freeze");
    try {
      writeFileSync(freeze, "1");
    } catch {
      // no freezer: best effort
    }
    for (let round = 0; round < 3; round++) for (const pid of this.members()) libc.kill(pid, 9);
    try {
      writeFileSync(freeze, "0");
    } catch {
      // as above
    }
  }

  /**
   * Remove the folder, killing what is left first: an empty cgroup is removed at once (the usual case at the end
   * of a call, which has already written `cgroup.kill`: no second write); a populated one is killed, then
   * removed once the kernel has emptied it, retrying every 50 ms for up to ~2 s and killing again every 0.5 s.
   */
  async dispose(): Promise<void> {
    for (let i = 0; i < 40; i++) {
      if (tryRmdir(this.dir)) return;
      if (i % 10 === 0) this.kill();
      await Bun.sleep(50);
    }
    log.warn("a call's cgroup could not be removed", { dir: this.dir, members: this.members() });
  }
}

/** File in the runtime folder that remembers the "no per-call cgroups" reasons already said this boot. */
const SAID_FILE = "cgroup-warned";

/** Folders any sandboxed command may be allowed to write: a memory kept there could be forged, so none is kept. */
function sandboxWritable(env: Record<string, string | undefined>): string[] {
  return ["/tmp", "/dev/shm", ...(env.TMPDIR !== undefined && env.TMPDIR.startsWith("/") ? [env.TMPDIR] : [])];
}

/** `reason` without the paths in it (each login session has a cgroup of its own), after this boot's id. */
function saidKey(reason: string): string {
  return `${bootId()} ${reason.replace(/\/[^\s:'"]*/g, "<path>")}`;
}

/** The kernel's id of this boot (`/proc/sys/kernel/random/boot_id`), or "" where it cannot be read. */
function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}

/**
 * Where the "no per-call cgroups" memory lives for user `uid`: `runtime` (the runtime folder, emptied at boot:
 * `$XDG_RUNTIME_DIR/shellmcp`, `/run/shellmcp` for root), else — a user without `XDG_RUNTIME_DIR` (`su`, `sudo -u`,
 * a container, an ssh session without systemd: the warning was said on every start, issue 41) —
 * `$XDG_CACHE_HOME/shellmcp`, else `~/.cache/shellmcp`: not emptied at boot, which the boot id in every remembered
 * line makes up for. Undefined when none is known.
 * @param uid      the effective uid
 * @param runtime  the runtime folder, if any
 * @param env      XDG_CACHE_HOME, HOME
 */
export function cgroupWarnedDir(
  uid: number,
  runtime: string | undefined,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  if (runtime !== undefined) return runtime;
  if (uid === 0) return undefined;
  const cache = env.XDG_CACHE_HOME?.startsWith("/") ? env.XDG_CACHE_HOME : env.HOME?.startsWith("/") ? join(env.HOME, ".cache") : undefined;
  return cache === undefined ? undefined : join(cache, "shellmcp");
}

/**
 * Whether to print the "no per-call cgroups" warning for `reason` (issue 31, item 5): true the first time this
 * user meets this reason this boot, false afterwards (the server then logs it at debug level only). The memory is
 * the file `cgroup-warned` in `dir` ({@link cgroupWarnedDir}: the user's runtime folder, `$XDG_RUNTIME_DIR/shellmcp`,
 * else `/run/shellmcp` for root, both emptied at boot; else the user's cache folder), one line per reason said,
 * each after the boot id — used only when the folder is this user's, private,
 * not a symlink, and outside the temporary folders and /dev/shm that sandboxes may write; the file is read with
 * `readUntrusted` (a FIFO or link planted there is ignored). Without such a folder it always says it. A forged
 * file could only silence this warning, never change what a call may do.
 */
export function shouldSayNoCgroups(
  reason: string,
  dir: string | undefined,
  env: Record<string, string | undefined> = process.env,
): boolean {
  if (dir === undefined || !dir.startsWith("/")) return true;
  const inTemp = sandboxWritable(env).some((w) => dir === w || dir.startsWith(`${w.replace(/\/+$/, "")}/`));
  if (inTemp) return true;
  const uid = process.getuid?.() ?? -1;
  const key = saidKey(reason);
  const file = join(dir, SAID_FILE);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch {
    return true;
  }
  if (!ownedAndPrivate(dir, uid, true)) return true;
  const r = readUntrustedText(file, { maxBytes: 64 << 10 });
  const said = r.ok && ownedAndPrivate(file, uid, false) ? r.text.split("\n").filter((l) => l !== "") : [];
  if (said.includes(key)) return false;
  try {
    const tmp = `${file}.${process.pid}`;
    writeFileSync(tmp, [...said.slice(-15), key].join("\n") + "\n", { mode: 0o600 });
    renameSync(tmp, file);
  } catch {
    // not remembered: said again next time
  }
  return true;
}
