/**
 * Crash safety of what bubblewrap plans leave on the host (docs/sandbox.md, "Mount points: crash safety"): the empty
 * mount points made for missing protected paths (a project's `.codex`, a `.git` placeholder: ./mount-points.ts
 * `holdMountPoint`) and the private folders holding the empty file bound over denied files (`$TMPDIR/shellmcp-deny-*`).
 * Each process that makes one records it on disk before making it, in a marker of its own named by its pid and start
 * time, and forgets it once given back; {@link sweepMountMarkers} (run at `serve` and `exec-server` start) removes what
 * the markers of processes that no longer run still name, so a SIGKILLed server (or sandbox helper) leaves nothing
 * behind past the next start. The model is Codex's marker scheme (codex-rs/linux-sandbox/src/bwrap_mount_cleanup.rs,
 * read, not copied); the differences: one marker per holder process (and thread) listing every path it holds, the holder known by
 * pid + start time + boot id (a reused pid is not taken for the holder), and a holder in another pid namespace counted
 * as alive (it cannot be seen from here).
 *
 * Where: `$CODEX_HOME/sandbox-mounts/` (mode 0700), which no sandbox can write (bubblewrap re-binds CODEX_HOME
 * read-only, the Landlock backend refuses a writable root containing it), never `/tmp`: a sandbox must not be able to
 * plant a marker that makes a later start remove a folder of its choosing. Markers are written by rename (a crash never
 * leaves half of one). Where the folder cannot be made or is not private, nothing is recorded (the in-memory count of
 * ./bwrap.ts still gives everything back on every ordinary end).
 *
 * Sharing: processes with one CODEX_HOME (two servers in one workspace, a server and its own sandbox helper) may
 * need the same missing path. A folder one of them made is not "a real folder" to the other: the other records it
 * too ({@link adoptedMountPoint}) and whoever gives it back last removes it (none other {@link heldByAnother}), so no
 * process pulls a mount point from under another's running sandbox (the kernel would detach the bind there, and
 * the sandbox could then create the path). Making, adopting and removing are serialised by `flock` on
 * `sandbox-mounts/lock` ({@link withMountLock}). No sandboxed command can hold that lock: the file is write-only
 * (mode 0200: not opened for reading by its owner without a capability, and every sandbox runs without any), and no
 * sandbox may open CODEX_HOME for writing (bubblewrap's read-only bind, Landlock's missing write right); a wait for
 * it is still bounded ({@link LOCK_WAIT_MS}) and fails closed. Processes with different CODEX_HOMEs do not see each
 * other's markers; they see each other's sandboxes through a lock on the folder itself (./mount-locks.ts): a mount
 * point is removed only under an exclusive `flock` on it, and one another process still stands on is left recorded
 * as a {@link pending} removal, tried again at this process's later give-backs and exit and by the next start's sweep.
 *
 * The sweep acts only on what the markers name and never follows a link: a mount point is removed only when it is
 * still a real, empty folder whose parent resolves to the same canonical path as when it was made (`rmdir`: a folder
 * a sandbox or the user filled stays) and no process holds a lock on it; a deny folder only when it is a real folder
 * of this user holding nothing but the one empty file (or nothing). A path that a live holder's marker names is left
 * alone.
 */
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmdirSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { constants as fsConstants, fchmodSync, openSync } from "node:fs";
import { threadId } from "node:worker_threads";
import { flock, LOCK } from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { resolveCodexHome } from "../../execpolicy/discovery.ts";
import { readUntrustedText } from "../../untrusted-fs.ts";
import { ownedAndPrivate } from "../paths.ts";
import { removeUnheld, unlock, type FolderLock } from "./mount-locks.ts";

/** What a marker names: an empty mount point made in place of a missing path, or a deny file's private folder. */
export type MarkedKind = "mount-point" | "deny-dir";

/** Name of the folder under CODEX_HOME. */
const FOLDER = "sandbox-mounts";

/** The name of a deny file's folder (under `$TMPDIR`), and of the empty file in it. */
export const DENY_DIR_PREFIX = "shellmcp-deny-";
export const DENY_FILE = "denied";

interface Holder {
  pid: number;
  /** Start time, clock ticks since boot (/proc/<pid>/stat field 22). */
  start: string;
  boot: string;
  /** `pid:[inode]` of the holder's pid namespace. */
  pidns: string;
}

interface MarkerEntry {
  kind: MarkedKind;
  path: string;
  /** The canonical path of `path`'s parent when it was made. */
  parent: string;
}

interface Marker extends Holder {
  v: 1;
  entries: MarkerEntry[];
}

let self: { dir: string; holder: Holder; file: string } | null | undefined;
/** What this process holds: `${kind}\0${path}` → entry. */
const held = new Map<string, MarkerEntry>();

function statStart(pid: number | "self"): string | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // comm (field 2) may hold spaces and parentheses: the fields after it start after the last ')'.
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  // A process that has ended but is not reaped yet (state Z or X: a killed helper whose parent died with it) holds
  // nothing any more.
  if (rest[0] === "Z" || rest[0] === "X") return undefined;
  return rest[19]; // field 22
}

function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}

function pidNamespace(pid: number | "self"): string {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return "";
  }
}

/**
 * The marker folder for `env` (`$CODEX_HOME/sandbox-mounts`), made 0700 when missing; undefined when CODEX_HOME cannot
 * be resolved or does not exist, or the folder is not a real folder of this user that nobody else can reach.
 */
export function markerDir(env: Record<string, string | undefined> = process.env): string | undefined {
  let dir: string;
  try {
    dir = join(resolveCodexHome(env), FOLDER);
    mkdirSync(dir, { mode: 0o700 }); // CODEX_HOME itself is not made here: without it, no markers
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") return undefined;
    dir = join(resolveCodexHome(env), FOLDER);
  }
  return ownedAndPrivate(dir, process.getuid?.() ?? 0, true) && (lstatSync(dir).mode & 0o077) === 0 ? dir : undefined;
}

/** This process's marker folder, holder identity and marker file (found once), or null when markers are off. */
function me(): { dir: string; holder: Holder; file: string } | null {
  if (self !== undefined) return self;
  const dir = process.platform === "linux" ? markerDir() : undefined;
  const start = statStart("self");
  if (dir === undefined || start === undefined) return (self = null);
  const holder = { pid: process.pid, start, boot: bootId(), pidns: pidNamespace("self") };
  // One file per thread too: each thread that plans has its own module state (and would overwrite a shared file).
  return (self = { dir, holder, file: join(dir, `${holder.pid}-${holder.start}-${threadId}.json`) });
}

/** Write this process's marker (by rename), or remove it when nothing is held. Failures are ignored (best effort). */
function save(): void {
  const m = me();
  if (m === null) return;
  try {
    if (held.size === 0) {
      unlinkSync(m.file);
      return;
    }
    const marker: Marker = { v: 1, ...m.holder, entries: [...held.values()] };
    const tmp = join(m.dir, `.${basename(m.file)}.tmp`);
    writeFileSync(tmp, JSON.stringify(marker), { mode: 0o600 });
    renameSync(tmp, m.file);
  } catch {
    // the in-memory count still gives it back on an ordinary end
  }
}

/**
 * Record, before making it, that this process is about to make `path` (a mount point, or a deny file's folder whose
 * parent exists): a crash from here on leaves it to the next start's {@link sweepMountMarkers}. Never throws.
 */
export function recordMade(kind: MarkedKind, path: string): void {
  let parent: string;
  try {
    parent = realpathSync(dirname(path));
  } catch {
    return; // no parent: nothing will be made
  }
  held.set(`${kind}\0${path}`, { kind, path, parent });
  save();
}

/** Forget `path` once given back (removed, or left because something was put in it). Never throws. */
export function recordGone(kind: MarkedKind, path: string): void {
  if (held.delete(`${kind}\0${path}`)) save();
}

/** How long a process waits for the mount-point lock before it fails closed (ms). */
export const LOCK_WAIT_MS = 2000;

/** This process's open lock file (`sandbox-mounts/lock`), or null when markers are off. */
let lockFd: number | null | undefined;
/** Nesting depth of {@link withMountLock} in this thread (flock is per open file: a nested take is a no-op). */
let lockDepth = 0;

function lockFile(): number | null {
  if (lockFd !== undefined) return lockFd;
  const m = me();
  if (m === null) return (lockFd = null);
  try {
    // Write-only (see the module comment); Node and Bun open with O_CLOEXEC: no sandbox inherits it.
    const flags = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK;
    const fd = openSync(join(m.dir, "lock"), flags, 0o200);
    fchmodSync(fd, 0o200); // one made by anything else is made write-only too
    lockFd = fd;
  } catch {
    lockFd = null;
  }
  return lockFd;
}

/**
 * Run `f` holding the lock that serialises making, adopting and removing mount points among every process recording
 * markers in this CODEX_HOME (see the module comment). Without markers (no private marker folder) `f` runs unlocked:
 * the in-memory count of ./bwrap.ts is then all there is. Waits at most {@link LOCK_WAIT_MS}, then throws
 * `SANDBOX_UNAVAILABLE` (only another server of this user could hold it that long: no sandbox can open it).
 */
export function withMountLock<T>(f: () => T): T {
  const fd = lockFile();
  if (fd === null || lockDepth > 0) return f();
  const end = performance.now() + LOCK_WAIT_MS;
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      flock(fd, LOCK.EX | LOCK.NB);
      break;
    } catch (e) {
      if (performance.now() > end)
        throw new ShellmcpError(
          "SANDBOX_UNAVAILABLE",
          `another process sharing CODEX_HOME has held the sandbox mount-point lock for over ${LOCK_WAIT_MS} ms; try again`,
          {},
          { cause: e },
        );
      Atomics.wait(nap, 0, 0, 2);
    }
  }
  lockDepth++;
  try {
    return f();
  } finally {
    lockDepth--;
    try {
      flock(fd, LOCK.UN);
    } catch {
      // closing the file would release it too; the fd stays for the next call
    }
  }
}

/**
 * Whether a live process other than this thread records `path` as a mount point it holds, made where `path` is
 * now (the same canonical parent). Call under {@link withMountLock}. False when markers are off.
 */
export function heldByAnother(path: string): boolean {
  const m = me();
  if (m === null) return false;
  let parent: string;
  let names: string[];
  try {
    parent = realpathSync(dirname(path));
    names = readdirSync(m.dir);
  } catch {
    return false;
  }
  const boot = bootId();
  const ns = pidNamespace("self");
  for (const name of names) {
    if (!/^\d+-\d+-\d+\.json$/.test(name) || join(m.dir, name) === m.file) continue;
    const r = readUntrustedText(join(m.dir, name));
    const marker = r.ok ? parseMarker(r.text) : undefined;
    if (marker === undefined || !alive(marker, boot, ns)) continue;
    if (marker.entries.some((e) => e.kind === "mount-point" && e.path === path && e.parent === parent)) return true;
  }
  return false;
}

/**
 * Under {@link withMountLock}: an existing folder at `path` that another live process made (or holds) as a mount
 * point is recorded as held by this process too, and true is returned (this process then counts it and removes it
 * if it gives it back last); false for any other existing path (a real folder: not ours).
 */
export function adoptedMountPoint(path: string): boolean {
  if (!heldByAnother(path)) return false;
  recordMade("mount-point", path);
  return true;
}

/**
 * Mount points this thread made or adopted and no longer uses, whose removal was refused because another process's
 * sandbox still stood on them (./mount-locks.ts `removeUnheld` said "busy"): still named by this process's marker,
 * tried again at every later give-back ({@link retryPendingRemovals}), every {@link PENDING_RETRY_MS} while any is
 * left, at this process's orderly exit, and by the next start's sweep once this process is gone.
 */
const pending = new Set<string>();
let exitHook = false;
/** The timer retrying {@link pending} removals (unref'd: it keeps no process alive), while there are any. */
let retryTimer: ReturnType<typeof setInterval> | undefined;

/** How often pending removals are tried again while any is left, ms (nothing tells this process when another's sandbox ends). */
export const PENDING_RETRY_MS = 5000;

/** Put `path` (recorded in this thread's marker) among the {@link pending} removals. */
function markPending(path: string): void {
  pending.add(path);
  retryTimer ??= setInterval(retryPendingRemovals, PENDING_RETRY_MS);
  retryTimer.unref?.();
  if (exitHook) return;
  exitHook = true;
  process.once("exit", () => retryPendingRemovals());
}

/**
 * Take `path` back from this thread's pending removals (a new plan needs it again): true when it was one (it is this
 * thread's mount point again, still recorded), false otherwise.
 */
export function takePending(path: string): boolean {
  const had = pending.delete(path);
  if (had) stopRetryTimerWhenIdle();
  return had;
}

/** Stop the retry timer once nothing is {@link pending}. */
function stopRetryTimerWhenIdle(): void {
  if (pending.size > 0 || retryTimer === undefined) return;
  clearInterval(retryTimer);
  retryTimer = undefined;
}

/** The canonical parent `path` was recorded with, else its parent's canonical path now (no marker), else undefined. */
function recordedParent(path: string): string | undefined {
  const e = held.get(`mount-point\0${path}`);
  if (e !== undefined) return e.parent;
  try {
    return realpathSync(dirname(path));
  } catch {
    return undefined;
  }
}

/**
 * Give back mount point `path`, which this thread made or adopted and whose last plan has ended, with this thread's
 * shared lock on it (`lock`, closed here whatever happens). Under {@link withMountLock}: when another live process
 * of this CODEX_HOME still holds it, it is forgotten (that one removes it); otherwise it is removed if no process
 * (of any CODEX_HOME) holds a lock on it, and forgotten unless another process's sandbox still stands on it (then it
 * stays recorded and {@link pending}). Never throws: a lock not had leaves it to the next start's sweep (logged by the
 * caller through the returned error).
 *
 * @returns undefined, or the error that kept the mount-point lock from being taken.
 */
export function giveBackMountPoint(path: string, lock: FolderLock | undefined): Error | undefined {
  let ran = false;
  try {
    withMountLock(() => {
      ran = true; // the lock's fd is closed from here on (never twice: its number may be reused)
      const parent = recordedParent(path);
      if (heldByAnother(path) || parent === undefined) {
        unlock(lock);
        recordGone("mount-point", path);
        return;
      }
      if (removeUnheld(path, parent, lock) === "busy") markPending(path);
      else recordGone("mount-point", path);
    });
    return undefined;
  } catch (e) {
    if (!ran) unlock(lock);
    return e as Error;
  }
}

/**
 * Try again to remove this thread's {@link pending} mount points (see {@link giveBackMountPoint}); those still
 * stood on stay pending. Never throws.
 */
export function retryPendingRemovals(): void {
  for (const path of [...pending]) {
    pending.delete(path);
    if (giveBackMountPoint(path, undefined) !== undefined) pending.add(path);
  }
  stopRetryTimerWhenIdle();
}

/** Whether the holder of a marker still runs (unknown, e.g. another pid namespace: counted as running). */
function alive(h: Holder, boot: string, ns: string): boolean {
  if (h.boot !== boot) return false; // a marker of an earlier boot
  if (h.pidns !== ns) return true; // cannot be seen from here
  return statStart(h.pid) === h.start;
}

/** Parse a marker file's text; undefined when it is not one. */
function parseMarker(text: string): Marker | undefined {
  try {
    const m = JSON.parse(text) as Marker;
    if (m.v !== 1 || !Number.isInteger(m.pid) || typeof m.start !== "string" || !Array.isArray(m.entries)) return undefined;
    const ok = m.entries.every(
      (e) =>
        (e.kind === "mount-point" || e.kind === "deny-dir") &&
        typeof e.path === "string" &&
        e.path.startsWith("/") &&
        typeof e.parent === "string",
    );
    return ok ? m : undefined;
  } catch {
    return undefined;
  }
}

/** `path` is where it was made: its parent still resolves (no link on the way) to the recorded canonical path. */
function sameParent(e: MarkerEntry): boolean {
  try {
    return realpathSync(dirname(e.path)) === e.parent;
  } catch {
    return false;
  }
}

/**
 * Remove the deny folder `e` names if it is still a real folder of this user where it was made, holding nothing but
 * its one empty file (see the module comment); true when it is gone.
 */
function removeDenyDir(e: MarkerEntry): boolean {
  let st;
  try {
    st = lstatSync(e.path);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT";
  }
  if (!st.isDirectory() || st.isSymbolicLink() || !sameParent(e)) return false;
  if (!basename(e.path).startsWith(DENY_DIR_PREFIX) || st.uid !== (process.getuid?.() ?? 0)) return false;
  try {
    const names = readdirSync(e.path);
    if (names.some((n) => n !== DENY_FILE)) return false;
    if (names.length === 1) {
      const f = lstatSync(join(e.path, DENY_FILE));
      if (!f.isFile() || f.size !== 0) return false;
      unlinkSync(join(e.path, DENY_FILE));
    }
    rmdirSync(e.path); // refuses a folder that is not empty: what a sandbox or the user put there stays
    return true;
  } catch {
    return false;
  }
}

/** What {@link sweepMountMarkers} did: paths removed, and paths it left (filled, moved, or held by a live process). */
export interface SweepResult {
  removed: string[];
  left: string[];
}

/**
 * Remove what the markers of processes that no longer run name (see the module comment), then those markers; for
 * `serve` and `exec-server` at start. Best effort: never throws; a marker folder that is missing or not private is
 * not read.
 */
export function sweepMountMarkers(env: Record<string, string | undefined> = process.env): SweepResult {
  const out: SweepResult = { removed: [], left: [] };
  if (process.platform !== "linux") return out;
  const dir = markerDir(env);
  if (dir === undefined) return out;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  const boot = bootId();
  const ns = pidNamespace("self");
  const live = new Set<string>();
  const dead: { file: string; marker: Marker }[] = [];
  for (const name of names) {
    const file = join(dir, name);
    if (!/^\d+-\d+-\d+\.json$/.test(name)) {
      // a temporary file of a writer killed before its rename
      if (/^\.\d+-\d+-\d+\.json\.tmp$/.test(name)) {
        const [pid, start] = name.slice(1, -".json.tmp".length).split("-");
        if (statStart(Number(pid)) !== start) unlinkQuiet(file);
      }
      continue;
    }
    const r = readUntrustedText(file);
    const marker = r.ok ? parseMarker(r.text) : undefined;
    if (marker === undefined) continue;
    if (marker.pid === process.pid || alive(marker, boot, ns)) for (const e of marker.entries) live.add(e.path);
    else dead.push({ file, marker });
  }
  const sweep = () => {
    for (const d of dead) sweepMarker(dir, d, live, out);
  };
  try {
    if (dead.length > 0) withMountLock(sweep);
  } catch {
    // the lock was not had: the next start sweeps
  }
  return out;
}

/**
 * Under {@link withMountLock}: remove what the dead holder's marker `file` names (see the module comment), into `out`,
 * then the marker. A mount point another process's sandbox still stands on (a lock on the folder, ./mount-locks.ts) is
 * left: when `dir` is this process's own marker folder it becomes this thread's {@link pending} removal (recorded in
 * this process's marker); otherwise the dead marker is rewritten to name only those, for a later sweep.
 */
function sweepMarker(dir: string, d: { file: string; marker: Marker }, live: Set<string>, out: SweepResult): void {
  const busy: MarkerEntry[] = [];
  for (const e of [...d.marker.entries].reverse()) {
    // Another live process may have adopted it since the listing (./mount-points.ts `holdMountPoint`).
    if (live.has(e.path) || (e.kind === "mount-point" && heldByAnother(e.path))) out.left.push(e.path);
    else if (e.kind === "deny-dir") (removeDenyDir(e) ? out.removed : out.left).push(e.path);
    else {
      const r = removeUnheld(e.path, e.parent);
      (r === "removed" || r === "gone" ? out.removed : out.left).push(e.path);
      if (r === "busy") busy.push(e);
    }
  }
  const own = me()?.dir === dir;
  if (busy.length > 0 && !own) {
    try {
      const tmp = join(dir, `.${basename(d.file)}.tmp`);
      writeFileSync(tmp, JSON.stringify({ ...d.marker, entries: busy.reverse() }), { mode: 0o600 });
      renameSync(tmp, d.file);
      return;
    } catch {
      // left to be found again by its lock; the marker goes
    }
  }
  for (const e of busy) {
    held.set(`mount-point\0${e.path}`, e);
    markPending(e.path);
  }
  if (busy.length > 0) save();
  unlinkQuiet(d.file);
}

function unlinkQuiet(p: string): void {
  try {
    unlinkSync(p);
  } catch {
    // gone
  }
}
