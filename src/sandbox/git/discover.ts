/**
 * The one search for git directories below a writable root (issue 38, "One git-control module"; docs/git-guard.md,
 * "Discovery"). The bubblewrap plan's read-only binds (./nested.ts `nestedGitPaths`), the writable model that
 * mirrors them (../writable.ts) and the git guard's snapshot (./control-entries.ts `findGitDirs`) all take their
 * git dirs from here, so they cannot disagree about which repositories exist.
 *
 * What is found, never following a symlink and with no depth limit (only `node_modules` is not entered):
 * - work trees' `.git` folders, `.git` files (with the git dir their `gitdir:` line names) and `.git` links;
 * - folders that are git dirs whatever their name: bare repositories and `--separate-git-dir` folders (`HEAD`,
 *   `objects/`, `refs/`), linked worktrees' admin folders (`HEAD` and `commondir`), submodule git dirs (inside a
 *   git dir only `modules/` and `worktrees/` are entered, so `modules/**` and `worktrees/*` are found too);
 * - the common dir a git dir's `commondir` names, when that is a folder.
 *
 * Why a search the sandbox can make long does not decide protection: a per-server registry of the git dirs that
 * existed before any sandbox of this server could write a root. The first time a root is asked for (always while a
 * call is being planned, before its command runs) it is searched completely ({@link FIRST_SEARCH_MAX_DIRS} folders,
 * {@link FIRST_SEARCH_MAX_MS}); every git dir found is recorded by identity (device, inode, birth time) → path, and as original
 * for the escalation boundary (../taint.ts `noteOriginal`). Every later call re-checks each recorded identity
 * with one `lstat` (cost O(recorded), nothing the sandbox can grow) and searches again completely only when one no
 * longer matches (the host user moved or removed a repository; under Landlock the sandbox can move one too). On
 * top of that, each call searches {@link LATER_SEARCH_MAX_DIRS} folders breadth-first for repositories made since
 * (best effort: this search only adds protection, never removes any).
 *
 * The later search is proportional to what changed (issue 40): a folder whose identity and ctime (device, inode,
 * change time in ns, one `lstat`) are those it had when the previous later search of the root listed it is not
 * listed again; its remembered listing (sub-folders, its `.git` entry's kind, whether it is a git dir) is used.
 * A folder's ctime changes with every entry made, removed or renamed in it, and no unprivileged process can set it
 * (setting mtime back with `utimensat` sets ctime to now); a listing is remembered only when the folder's ctime was
 * at least {@link LISTING_MIN_AGE_MS} older than the read (ctime has the kernel's coarse clock: a change in the same
 * tick as the read would keep it). What a remembered listing cannot vouch for is read again each call: the `gitdir:`
 * line of a `.git` file and a git dir's `commondir`. The cache only ever skips a read whose result is known; it
 * cannot hide anything the uncached search would find, and the complete search (which decides the originals) never
 * uses it. It holds what the last later search of each root read ({@link LATER_SEARCH_MAX_DIRS} folders at most).
 * Only local filesystems whose ctime the kernel keeps ({@link CTIME_FILESYSTEMS}: a FUSE or network filesystem may
 * report any ctime, or a stale one) and only folders on the root's own device are cached; the rest is listed
 * every call, as before.
 *
 * When the complete search stops at its bound, the folders it did not read (the frontier) are returned with every
 * result: bubblewrap binds them read-only ({@link MAX_FRONTIER_BINDS} at most), and the git guard refuses a call
 * that could write one (Landlock, or too many to bind): fail closed, never "writable and unsearched".
 */
import { lstatSync, readdirSync, realpathSync, statfsSync, type Dirent } from "node:fs";
import { dirname, join, normalize, resolve } from "node:path";
import { readUntrustedText } from "../../untrusted-fs.ts";
import { handOutGeneration, noteOriginal, originalKey, taintContext } from "./taint.ts";
import { log } from "../../log.ts";
import { TRACE_STEPS, traceStep } from "../../trace-steps.ts";

/** Folders the complete search of a root reads at most (measured: about 8 µs a folder, so ≈ 1 s at the bound). */
export const FIRST_SEARCH_MAX_DIRS = 100_000;
/** Time the complete search of a root takes at most, ms (a slow or huge filesystem): past it, the rest is frontier. */
export const FIRST_SEARCH_MAX_MS = 5_000;
/** Folders each later call's search for repositories made since reads per root (best effort, breadth-first). */
export const LATER_SEARCH_MAX_DIRS = 3_000;
/** Git dirs a later call's search adds per root (repositories not recorded by the complete search). */
export const LATER_SEARCH_MAX_GIT_DIRS = 200;
/** Frontier folders bubblewrap binds read-only at most; past it a call that could write them is refused. */
export const MAX_FRONTIER_BINDS = 1_000;
/**
 * How long one discovery of a root is reused, ms, and only while no sandbox was handed out since (../taint.ts
 * `handOutGeneration`): the writable model, the guard's snapshot and the plan of one call (all made before its
 * sandbox starts) see the same git dirs, and the next call searches again.
 */
export const DISCOVERY_REUSE_MS = 1_000;

/**
 * How much older than the read a folder's ctime must be for the later search to remember its listing, ms: more
 * than a tick of the kernel's coarse clock (≤ 10 ms), so a change made in the tick of the read changes it.
 */
export const LISTING_MIN_AGE_MS = 1_000;

/** The bounds in force (the constants above; tests lower them with {@link setDiscoveryBounds}). */
const bounds = {
  firstMaxDirs: FIRST_SEARCH_MAX_DIRS,
  laterMaxDirs: LATER_SEARCH_MAX_DIRS,
  frontierBinds: MAX_FRONTIER_BINDS,
  listingMinAgeMs: LISTING_MIN_AGE_MS,
};

/**
 * Replace the complete and later searches' folder bounds and the frontier bind limit (tests: a root that reaches them without
 * 100,000 folders); returns the previous ones. Forgets every record, as {@link resetDiscovery}.
 */
export function setDiscoveryBounds(b: Partial<typeof bounds>): typeof bounds {
  const before = { ...bounds };
  Object.assign(bounds, b);
  resetDiscovery();
  return before;
}

/** Frontier folders bubblewrap binds read-only at most ({@link MAX_FRONTIER_BINDS} unless a test changed it). */
export function frontierBindLimit(): number {
  return bounds.frontierBinds;
}

/** Folders never entered (dependency trees: thousands of folders, no repository the user works in). */
const SKIPPED = new Set(["node_modules"]);

/**
 * One repository entry found: a git dir (`gitDir`), a work tree's `.git` pointer file or link (`pointer`, with the
 * git dir it names when that is a folder), and the work tree (`workTree`: the folder holding `.git`). `dotGit`: the
 * git dir is a work tree's `.git` folder, or the one a `.git` file names. `original`: recorded by the root's
 * complete search (it existed before any sandbox of this server could write the root).
 */
export interface FoundGitDir {
  gitDir?: string;
  pointer?: string;
  workTree?: string;
  dotGit: boolean;
  original: boolean;
}

/** The git dirs of some writable roots ({@link discoverGitDirs}), originals first, and the folders not searched. */
export interface GitDiscovery {
  repos: FoundGitDir[];
  /** Folders the complete search did not read (its bound was reached): unknown, so to be kept read-only. */
  frontier: string[];
}

interface ScanResult {
  repos: FoundGitDir[];
  frontier: string[];
  read: number;
}

interface RootRecord {
  /** The complete search's entries (git dir paths updated by a re-search). */
  repos: FoundGitDir[];
  /** Identity (`dev:ino`) → path of every git dir of {@link repos}. */
  idents: Map<string, string>;
  frontier: string[];
}

/**
 * What one folder listing says to the search: its sub-folders in listing order (`node_modules` left out; `.git`
 * included, with its kind), and whether it is a git dir's listing.
 */
interface Listing {
  gitDirListing: boolean;
  /** Entries that matter, in listing order: sub-folders (`d`), and `.git` whatever it is (`d`, `f` file, `o` other). */
  entries: [name: string, kind: "d" | "f" | "o"][];
}

const registry = new Map<string, RootRecord>();
const memo = new Map<string, { at: number; gen: number; result: GitDiscovery }>();
/** Per root: folder → its identity and ctime (`dev:ino:ctimeNs`) and listing, as the last later search read it. */
const listings = new Map<string, Map<string, { key: string; listing: Listing }>>();
/**
 * `statfs` types whose folders' ctime the kernel sets itself on every change of their entries (ext2/3/4, XFS, Btrfs,
 * tmpfs, F2FS, overlayfs): the only filesystems the listing cache is used on.
 */
const CTIME_FILESYSTEMS = new Set([0xef53, 0x58465342, 0x9123683e, 0x01021994, 0xf2f52010, 0x794c7630]);

/** The device of `root` when its filesystem keeps ctime ({@link CTIME_FILESYSTEMS}), else undefined (no cache). */
function cacheableDevice(root: string): bigint | undefined {
  try {
    if (!CTIME_FILESYSTEMS.has(Number(statfsSync(root).type))) return undefined;
    const st = lstatSync(root, { bigint: true });
    return st.isDirectory() ? st.dev : undefined;
  } catch {
    return undefined;
  }
}

/** Roots whose listings are kept at most (past it, all are forgotten: the next searches list everything again). */
const MAX_CACHED_ROOTS = 32;
/** Counts of the later searches' folder reads (tests and bench/call.ts): listed, and taken from the cache. */
const listingCounts = { listed: 0, reused: 0 };

/** How many folders the later searches listed and how many they took from the cache, since the process started. */
export function laterSearchCounts(): { listed: number; reused: number } {
  return { ...listingCounts };
}

function canonical(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return normalize(p);
  }
}

/**
 * A folder's identity: device, inode and birth time (statx). The inode alone is not enough: ext4 hands a removed
 * folder's inode number to the next folder made (seen at once here), so a sandbox that removes an original
 * repository and makes another would inherit its record. Where the filesystem keeps no birth time (0), device and
 * inode only.
 */
function identOf(p: string): string | undefined {
  try {
    const st = lstatSync(p, { bigint: true });
    return st.isDirectory() ? `${st.dev}:${st.ino}:${st.birthtimeNs}` : undefined;
  } catch {
    return undefined;
  }
}

/** The git dir a `.git` file names (`gitdir: <path>`, relative to its folder), canonical, when it is a folder. */
export function gitdirOf(dotGit: string): string | undefined {
  const r = readUntrustedText(dotGit, { maxBytes: 4096 });
  if (!r.ok) return undefined;
  const m = /^gitdir:\s*(.+?)\s*$/m.exec(r.text);
  if (m === null) return undefined;
  const target = canonical(resolve(dirname(dotGit), m[1]!));
  return identOf(target) !== undefined ? target : undefined;
}

/** The folder git dir `gitDir`'s `commondir` names (canonical), when there is one and it is a folder. */
export function commonDirOf(gitDir: string): string | undefined {
  const r = readUntrustedText(join(gitDir, "commondir"), { maxBytes: 4096 });
  if (!r.ok || r.text.trim() === "") return undefined;
  const c = canonical(resolve(gitDir, r.text.trim()));
  return c !== gitDir && identOf(c) !== undefined ? c : undefined;
}

/** Whether a folder listing is a git dir's: `HEAD` and either `objects/` + `refs/` or a `commondir` file. */
function isGitDirListing(names: readonly Dirent[]): boolean {
  let head = false;
  let objects = false;
  let refs = false;
  let common = false;
  for (const d of names) {
    if (d.name === "HEAD") head = d.isFile() || d.isSymbolicLink();
    else if (d.name === "objects") objects = d.isDirectory();
    else if (d.name === "refs") refs = d.isDirectory();
    else if (d.name === "commondir") common = d.isFile();
  }
  return head && ((objects && refs) || common);
}

/**
 * Search `root` breadth-first for git dirs (see the module's docs), reading at most `maxDirs` folders, for at most
 * `maxMs`; what was queued but not read is the frontier. Never throws: an unreadable folder is skipped.
 */
function scan(
  root: string,
  maxDirs: number,
  maxMs: number,
  maxGitDirs = Infinity,
  cache?: {
    dev: bigint;
    before: ReadonlyMap<string, { key: string; listing: Listing }>;
    after: Map<string, { key: string; listing: Listing }>;
  },
): ScanResult {
  const repos: FoundGitDir[] = [];
  const t0 = performance.now();
  const queue: { dir: string; gitDir: boolean }[] = [{ dir: root, gitDir: false }];
  let read = 0;
  let found = 0;
  let i = 0;
  const addGitDir = (g: string, extra: Omit<FoundGitDir, "original" | "gitDir">) => {
    found++;
    repos.push({ gitDir: g, ...extra, original: false });
    const c = commonDirOf(g);
    if (c !== undefined) repos.push({ gitDir: c, dotGit: false, original: false });
  };
  for (; i < queue.length; i++) {
    if (read >= maxDirs || found >= maxGitDirs || (read % 256 === 0 && read > 0 && performance.now() - t0 > maxMs)) break;
    const { dir, gitDir } = queue[i]!;
    read++;
    const listing = cache === undefined ? listFolder(dir) : cachedListing(dir, cache.dev, cache.before, cache.after);
    if (listing === undefined) continue;
    if (gitDir || listing.gitDirListing) {
      if (!gitDir) addGitDir(dir, { dotGit: false });
      // Inside a git dir only its submodules' and linked worktrees' git dirs are searched.
      for (const [name, kind] of listing.entries)
        if (kind === "d" && (name === "modules" || name === "worktrees")) queue.push({ dir: join(dir, name), gitDir: false });
      continue;
    }
    for (const [name, kind] of listing.entries) {
      const p = join(dir, name);
      if (name === ".git") {
        if (kind === "d") {
          addGitDir(p, { workTree: dir, dotGit: true });
          queue.push({ dir: p, gitDir: true });
        } else if (kind === "f") {
          const target = gitdirOf(p);
          found++;
          repos.push(
            target === undefined
              ? { pointer: p, workTree: dir, dotGit: true, original: false }
              : { pointer: p, gitDir: target, workTree: dir, dotGit: true, original: false },
          );
          if (target !== undefined) {
            const c = commonDirOf(target);
            if (c !== undefined) repos.push({ gitDir: c, dotGit: false, original: false });
          }
        } else repos.push({ pointer: p, workTree: dir, dotGit: true, original: false });
        continue;
      }
      queue.push({ dir: p, gitDir: false });
    }
  }
  return { repos, frontier: queue.slice(i).map((q) => q.dir), read };
}

/** `dir`'s listing as the search uses it (see {@link Listing}); undefined when it cannot be read. */
function listFolder(dir: string): Listing | undefined {
  let names: Dirent[];
  try {
    names = readdirSync(dir, { withFileTypes: true });
  } catch {
    return undefined;
  }
  const entries: Listing["entries"] = [];
  for (const d of names) {
    if (d.name === ".git") entries.push([d.name, d.isDirectory() ? "d" : d.isFile() ? "f" : "o"]);
    else if (d.isDirectory() && !SKIPPED.has(d.name)) entries.push([d.name, "d"]);
  }
  return { gitDirListing: isGitDirListing(names), entries };
}

/**
 * `dir`'s listing for a later search: the one `before` holds when the folder's identity and ctime are unchanged,
 * else read now (and remembered when its ctime is old enough: see the module's docs). Recorded in `after` either
 * way it is remembered. Fails closed: a folder that cannot be stat'ed, or on another device than the root (`dev`),
 * is listed as the uncached search lists it.
 */
function cachedListing(
  dir: string,
  dev: bigint,
  before: ReadonlyMap<string, { key: string; listing: Listing }>,
  after: Map<string, { key: string; listing: Listing }>,
): Listing | undefined {
  let key: string | undefined;
  let ctimeNs = 0n;
  try {
    const st = lstatSync(dir, { bigint: true });
    if (st.isDirectory() && st.dev === dev) {
      key = `${st.dev}:${st.ino}:${st.ctimeNs}`;
      ctimeNs = st.ctimeNs;
    }
  } catch {
    key = undefined;
  }
  const was = key === undefined ? undefined : before.get(dir);
  if (was !== undefined && was.key === key) {
    listingCounts.reused++;
    after.set(dir, was);
    return was.listing;
  }
  const readAtNs = BigInt(Date.now()) * 1_000_000n;
  const listing = listFolder(dir);
  listingCounts.listed++;
  if (listing !== undefined && key !== undefined && ctimeNs < readAtNs - BigInt(bounds.listingMinAgeMs) * 1_000_000n)
    after.set(dir, { key, listing });
  return listing;
}

/**
 * Search `root` completely and record what it holds (see the module's docs): the record, and every entry the search
 * found for the call that asked (originals marked). `before`: the record being replaced (a recorded identity no
 * longer matched): then only what it recorded stays original, and what is new is found but not recorded.
 */
function register(root: string, before?: RootRecord): { rec: RootRecord; found: FoundGitDir[] } {
  const t0 = performance.now();
  const r = scan(root, bounds.firstMaxDirs, FIRST_SEARCH_MAX_MS);
  const idents = new Map<string, string>();
  const repos: FoundGitDir[] = [];
  const found: FoundGitDir[] = [];
  const ctx = taintContext();
  const keys: string[] = [];
  for (const e of r.repos) {
    const id = e.gitDir !== undefined ? identOf(e.gitDir) : undefined;
    const original = before === undefined || (id !== undefined && before.idents.has(id));
    found.push({ ...e, original });
    if (!original) continue;
    repos.push({ ...e, original: true });
    if (id !== undefined) {
      idents.set(id, e.gitDir!);
      const k = originalKey(ctx, e.gitDir!);
      if (k !== undefined) keys.push(k);
    }
  }
  noteOriginal(keys);
  const ms = performance.now() - t0;
  if (r.frontier.length > 0)
    log.warn("the search for git repositories stopped at its bound: the folders not searched stay read-only or the call is refused", {
      root,
      read: r.read,
      left: r.frontier.length,
      ms: Math.round(ms),
    });
  const rec = { repos, idents, frontier: r.frontier };
  registry.set(root, rec);
  return { rec, found };
}

/** Whether every recorded git dir of `rec` is still the same folder at the same path (one `lstat` each). */
function intact(rec: RootRecord): boolean {
  for (const [id, path] of rec.idents) if (identOf(path) !== id) return false;
  return true;
}

/**
 * The git dirs below `root` (canonical) for one call: the recorded originals (a complete search the first time, or
 * again when one of them moved), then those a bounded search finds made since ({@link LATER_SEARCH_MAX_DIRS}), and
 * the frontier of the complete search. Reused for {@link DISCOVERY_REUSE_MS}. Never throws.
 */
export function discoverRoot(root: string): GitDiscovery {
  const now = performance.now();
  const gen = handOutGeneration();
  const m = memo.get(root);
  if (m !== undefined && m.gen === gen && now - m.at < DISCOVERY_REUSE_MS) return m.result;
  for (const [k, v] of memo) if (v.gen !== gen || now - v.at >= DISCOVERY_REUSE_MS) memo.delete(k);
  let rec = registry.get(root);
  let repos: FoundGitDir[];
  if (rec === undefined || !intact(rec)) {
    const r = register(root, rec);
    rec = r.rec;
    repos = r.found;
  } else {
    repos = [...rec.repos];
    const after = new Map<string, { key: string; listing: Listing }>();
    const dev = cacheableDevice(root);
    const cache = dev === undefined ? undefined : { dev, before: listings.get(root) ?? new Map(), after };
    const later = scan(root, bounds.laterMaxDirs, FIRST_SEARCH_MAX_MS, LATER_SEARCH_MAX_GIT_DIRS, cache);
    if (!listings.has(root) && listings.size >= MAX_CACHED_ROOTS) listings.clear();
    listings.set(root, after);
    const known = new Set(repos.map(keyOf));
    for (const e of later.repos) if (!known.has(keyOf(e))) repos.push(e);
  }
  const result = { repos, frontier: [...rec.frontier] };
  memo.set(root, { at: now, gen, result });
  if (TRACE_STEPS) traceStep("discover (nested)", { ms: performance.now() - now, repos: repos.length });
  return result;
}

function keyOf(e: FoundGitDir): string {
  return `${e.gitDir ?? ""}\0${e.pointer ?? ""}`;
}

/** {@link discoverRoot} for each of `roots` (canonical), merged: originals first, duplicates (nested roots) once. */
export function discoverGitDirs(roots: readonly string[]): GitDiscovery {
  const all = roots.map((r) => discoverRoot(r));
  const seen = new Set<string>();
  const repos: FoundGitDir[] = [];
  for (const pass of [true, false])
    for (const d of all)
      for (const e of d.repos) {
        if (e.original !== pass || seen.has(keyOf(e))) continue;
        seen.add(keyOf(e));
        repos.push(e);
      }
  return { repos, frontier: [...new Set(all.flatMap((d) => d.frontier))] };
}

/**
 * How many folders the complete search of `root` (canonical) did not read, when that is more than bubblewrap binds
 * ({@link frontierBindLimit}); undefined otherwise, or when `root` was never searched. Looks only at the record
 * (no search): for a plan made right after {@link discoverRoot} ran for its roots.
 */
export function frontierTooLarge(root: string): number | undefined {
  const n = registry.get(root)?.frontier.length ?? 0;
  return n > bounds.frontierBinds ? n : undefined;
}

/** Forget every record (tests: a fresh server). */
export function resetDiscovery(): void {
  registry.clear();
  memo.clear();
  listings.clear();
}
