/**
 * The bubblewrap preflight's memory across processes: a preflight costs a whole bwrap run, and its answer only
 * changes with the kernel (boot), the bwrap binary and the user-namespace settings.
 *
 * It is start-up state, so nothing a sandboxed command could write may decide it (issue 22, item 4; it used to live
 * in `~/.cache/shellmcp/`, which a sandbox with a writable HOME could forge, and which a user versioning HOME saw
 * as an untracked file):
 * - **Where:** a per-boot runtime folder that no default sandbox can write: `/run/shellmcp` for root,
 *   `$XDG_RUNTIME_DIR/shellmcp` for other users; without one, nothing is kept on disk (each process probes once).
 * - **Verified before use:** the folder and the file must be ours (owner = this uid), not symlinks, and writable by
 *   nobody else; anything else is ignored (and never written through).
 * - **Only full strength is remembered:** an entry says "bwrap ran with its own user, pid, ipc (and net)
 *   namespaces and its own /proc". A forged entry can therefore only claim more than the truth; bwrap then fails
 *   at launch and the command does not run ({@link forgetProbe} drops the entry so that the next start probes
 *   again). Degraded outcomes (`--no-proc`) are never cached: they are probed every time.
 * Keyed by boot id, bwrap's path, inode and mtime, and the network setting.
 */
import { lstatSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { ownedAndPrivate } from "../paths.ts";

/** File name inside the runtime folder. */
const CACHE_FILE = "bwrap-probe.json";

/** `SHELLMCP_NO_PROBE_CACHE=1` turns the on-disk cache off (every process probes). */
function disabled(env: Record<string, string | undefined>): boolean {
  return env.SHELLMCP_NO_PROBE_CACHE === "1";
}

/**
 * This user's per-boot runtime folder for shellmcp's small state (not created here), or undefined when there is
 * none that qualifies: `/run/shellmcp` for root; else `$XDG_RUNTIME_DIR/shellmcp`, when `XDG_RUNTIME_DIR` is an
 * absolute path to a real folder (not a symlink) of this user that nobody else can write. Whether it lies where
 * sandboxed commands can write is for the caller to weigh (see ../../shell/cgroup.ts `shouldSayNoCgroups`).
 * @param uid  the effective uid (`process.getuid()`)
 * @param env  the environment (`XDG_RUNTIME_DIR`)
 */
export function runtimeDir(uid: number, env: Record<string, string | undefined> = process.env): string | undefined {
  if (uid === 0) return "/run/shellmcp";
  return xdgRuntimeDir(uid, env);
}

/**
 * `$XDG_RUNTIME_DIR/shellmcp` when `XDG_RUNTIME_DIR` is an absolute path to a real folder (not a symlink) of user
 * `uid` that nobody else can write; else undefined.
 * @param uid  the effective uid (`process.getuid()`)
 * @param env  the environment (`XDG_RUNTIME_DIR`)
 */
export function xdgRuntimeDir(uid: number, env: Record<string, string | undefined> = process.env): string | undefined {
  const xdg = env.XDG_RUNTIME_DIR;
  if (xdg === undefined || !isAbsolute(xdg) || !ownedAndPrivate(xdg, uid, true)) return undefined;
  return join(xdg, "shellmcp");
}

/**
 * The folder of the bubblewrap preflight's cache: {@link runtimeDir}, or undefined when there is none or
 * `SHELLMCP_NO_PROBE_CACHE=1`.
 * @param uid  the effective uid (`process.getuid()`)
 * @param env  the environment (`XDG_RUNTIME_DIR`, `SHELLMCP_NO_PROBE_CACHE`)
 */
export function probeCacheDir(uid: number, env: Record<string, string | undefined> = process.env): string | undefined {
  if (disabled(env)) return undefined;
  return runtimeDir(uid, env);
}

/** Cache key for bwrap at `path` (stat'ed) and the network setting; undefined when it cannot be computed. */
export function probeKey(path: string, networkRestricted: boolean): string | undefined {
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    const st = lstatSync(path);
    return `${boot}:${path}:${st.ino}:${st.mtimeMs}:${networkRestricted ? "net-off" : "net-on"}`;
  } catch {
    return undefined;
  }
}

function cacheFile(uid: number): string | undefined {
  const dir = probeCacheDir(uid);
  return dir === undefined ? undefined : join(dir, CACHE_FILE);
}

/** The verified set of keys that probed at full strength (empty when the file is missing or untrusted). */
function readKeys(uid: number): Set<string> {
  const file = cacheFile(uid);
  if (file === undefined || !ownedAndPrivate(join(file, ".."), uid, true) || !ownedAndPrivate(file, uid, false)) return new Set();
  try {
    const v = JSON.parse(readFileSync(file, "utf8")) as unknown;
    return new Set(Array.isArray(v) ? v.filter((k): k is string => typeof k === "string") : []);
  } catch {
    return new Set();
  }
}

function writeKeys(uid: number, keys: Set<string>): void {
  const file = cacheFile(uid);
  if (file === undefined) return;
  const dir = join(file, "..");
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!ownedAndPrivate(dir, uid, true)) return;
    const tmp = `${file}.${process.pid}`;
    writeFileSync(tmp, JSON.stringify([...keys]), { mode: 0o600 });
    renameSync(tmp, file);
  } catch {
    // best effort: without the cache the next process probes again
  }
}

function uid(): number {
  return process.getuid?.() ?? -1;
}

/** Whether `key` probed at full strength earlier this boot (verified cache). */
export function probedFullStrength(key: string): boolean {
  return readKeys(uid()).has(key);
}

/** Remember that `key` probed at full strength. */
export function rememberFullStrength(key: string): void {
  const keys = readKeys(uid());
  if (keys.has(key)) return;
  keys.add(key);
  writeKeys(uid(), keys);
}

/** Forget `key` (bwrap failed after a cached success: the next start probes again). */
export function forgetProbe(key: string): void {
  const keys = readKeys(uid());
  if (!keys.delete(key)) return;
  if (keys.size === 0) {
    const file = cacheFile(uid());
    if (file !== undefined) rmSync(file, { force: true });
  } else writeKeys(uid(), keys);
}
