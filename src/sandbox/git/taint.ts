/**
 * Git control state written during this server's life (review of h7: "a `.git` written in one call is trusted in
 * later calls"). The escalation boundary (../escalate/decision/boundary.ts) asks whether *this* call's sandbox can
 * write git's control files; under bubblewrap a nested `.git` is bound read-only at call start, so a repository an
 * earlier call made (`git init` + a `core.fsmonitor` command) or whose config an earlier call wrote (a repository
 * deeper than the git guard's search) looked safe, and the next allowed `git status` ran the planted command outside
 * the sandbox.
 *
 * The test: a control file in a place some sandbox or room of this server could write (read-only carve-outs
 * ignored: another call's sandbox may not have had them), whose inode change time (ctime: no unprivileged process can
 * set it back; every write, rename, link or chmod moves it) is at or after the moment that place was first handed
 * out (less {@link START_MARGIN_MS}), was possibly written by one of them: an escalation of git run there stays
 * inside the call's sandbox. The git guard's own restores move ctime too: what the guard wrote is
 * recorded (path, device, inode, ctime after its write) and trusted exactly as long as nothing writes it again —
 * and only when what it put back was itself trusted (a guard never launders a planted config).
 *
 * A folder renamed into place keeps its files' old ctimes; only its own moves. A hooks folder is judged by it; a
 * git dir's folder changes with every git write, so it is trusted when it is a git dir seen at that path before
 * ({@link taintedGitDir}, {@link noteGitDirSeen}, {@link noteOriginal}).
 *
 * Two halves: the registry (main thread: {@link noteWritable}, {@link noteGuardWrite}, {@link noteGitDirSeen},
 * {@link noteOriginal}, {@link taintContext}) and the checks ({@link taintedControlFile}, {@link taintedGitDir},
 * {@link originalKey}), which run in the decision inspector (../escalate/decision/inspector.ts) with a copy of the
 * registry and do nothing but `lstat`.
 */
import { lstatSync } from "node:fs";
import type { WritableView } from "../writable.ts";

/**
 * Clock margin, ms: a ctime this long before a place was first handed out to a sandbox still counts as written by
 * one. The kernel stamps ctime from its coarse clock, which lags the real time by at most one tick (10 ms at
 * HZ=100): a write after that moment has a ctime after it less one tick. Kept small: a repository the user made
 * just before the call would otherwise count as written by it.
 */
export const START_MARGIN_MS = 20;

/** At most this many guard writes are remembered (the oldest are forgotten: their files then count as written). */
const MAX_TRUSTED = 4_096;
/** At most this many places are remembered; past it, every place counts as writable ("/") since the earliest. */
const MAX_PLACES = 256;

/** A file the git guard wrote, as it was right after the write. */
export interface TrustedWrite {
  path: string;
  dev: string;
  ino: string;
  ctimeNs: string;
}

/** A place a sandbox or room of this server could write, and since when (ns since the epoch, decimal). */
export interface WritablePlace {
  root: string;
  sinceNs: string;
}

/** What the check needs from the registry (plain data: it crosses to the inspector worker). */
export interface TaintContext {
  /**
   * Canonical folders some sandbox or room of this server could write ("/" after an unsandboxed call), each with
   * when it was first handed out less {@link START_MARGIN_MS}: a ctime at or after it is "written by us, maybe".
   */
  places: WritablePlace[];
  /** Files the git guard wrote (and put back as trusted state). */
  trusted: TrustedWrite[];
  /**
   * `path NUL dev:ino` of the git dirs found where they were before their place was handed out
   * ({@link noteGitDirSeen}): the same folder at the same path (a git dir moved elsewhere is not original there).
   */
  original: string[];
}

/** Each place handed out, with when it first was less {@link START_MARGIN_MS} (ms since the epoch). */
const places = new Map<string, number>();
const trusted = new Map<string, TrustedWrite>();
/** Git dirs (`path NUL dev:ino`) that were where they are before a sandbox of ours could write there. */
const original = new Set<string>();
/** At most this many original git dirs are remembered (past it, a git dir seen later is not: it fails closed). */
const MAX_ORIGINAL = 10_000;

/** How many sandboxes were handed out ({@link noteWritable}): what a cached search of their places is valid for. */
let handOuts = 0;

/**
 * The number of sandboxes and rooms handed out so far (each {@link noteWritable}): a search of writable places made
 * at one count describes them only while no sandbox has run since (./git/discover.ts reuses one within a call).
 */
export function handOutGeneration(): number {
  return handOuts;
}

/**
 * Record the writable places of a sandbox (a call's, or a room's) this server hands out, before anything runs in
 * it. Main thread.
 */
export function noteWritable(view: WritableView | { full: false; roots: readonly string[] }): void {
  handOuts++;
  const since = Date.now() - START_MARGIN_MS;
  for (const r of view.full ? ["/"] : view.roots) if (!places.has(r)) places.set(r, since);
  if (places.size > MAX_PLACES) {
    const earliest = Math.min(...places.values());
    places.clear();
    places.set("/", earliest);
  }
}

/**
 * Record that the git guard put `path` back (a file, a link or a folder) as it was. `clean`: whether the state it
 * put back was itself trusted ({@link untaintedNow} when the guard recorded it); a write of untrusted state (or a
 * failed one) is not recorded, and the file keeps counting as written. `holds`: whether what is at `path` now is
 * what the guard wrote (a sandbox of a call running beside this one may write it meanwhile); it runs between two
 * `lstat`s that must agree. Main thread; never throws.
 */
export function noteGuardWrite(path: string, clean: boolean, holds: () => boolean = () => false): void {
  trusted.delete(path);
  if (!clean) return;
  try {
    const a = lstatSync(path, { bigint: true });
    if (!holds()) return;
    const b = lstatSync(path, { bigint: true });
    if (a.dev !== b.dev || a.ino !== b.ino || a.ctimeNs !== b.ctimeNs) return;
    trusted.set(path, { path, dev: String(b.dev), ino: String(b.ino), ctimeNs: String(b.ctimeNs) });
    if (trusted.size > MAX_TRUSTED) trusted.delete(trusted.keys().next().value!);
  } catch {
    // gone: nothing to trust
  }
}

/**
 * Record git dir `path`, found by the git guard's search before a call's command runs, as original when no sandbox
 * of ours could have put it there: its place was not handed out yet, or its folder's ctime is older than that (a
 * folder renamed into place has a new one). A git dir whose folder changes later (git's own writes: the index, refs,
 * logs) stays original while it is the same folder at the same path. Main thread; never throws.
 */
export function noteGitDirSeen(path: string): void {
  // The places only: whether it is original already does not matter (adding it again changes nothing).
  const key = originalKey({ places: placesList(), trusted: [], original: [] }, path);
  if (key !== undefined) noteOriginal([key]);
}

/**
 * Record git dirs as original by their keys ({@link originalKey}, computed where the escalation boundary trusted
 * them: the repository of a room about to be built, whose folder the room's git will change). Main thread.
 */
export function noteOriginal(keys: readonly string[]): void {
  for (const k of keys) if (original.size < MAX_ORIGINAL) original.add(k);
}

/**
 * The key of git dir `path` as an original one (`path NUL dev:ino`) when, by `ctx`, no sandbox of ours could have put
 * it there (see {@link noteGitDirSeen}); undefined otherwise. Only `lstat`.
 */
export function originalKey(ctx: TaintContext, path: string): string | undefined {
  try {
    const st = lstatSync(path, { bigint: true });
    if (!st.isDirectory()) return undefined;
    const key = `${path}\0${st.dev}:${st.ino}`;
    const since = coveringSince(ctx.places, path);
    return since === undefined || st.ctimeNs < since || ctx.original.includes(key) ? key : undefined;
  } catch {
    return undefined;
  }
}

function placesList(): WritablePlace[] {
  return [...places].map(([root, ms]) => ({ root, sinceNs: String(BigInt(ms) * 1_000_000n) }));
}

/** A copy of the registry for one decision. */
export function taintContext(): TaintContext {
  return {
    places: placesList(),
    trusted: [...trusted.values()],
    original: [...original],
  };
}

/** Whether `path` as it is now (an `lstat`) is not written during this server's life, by the registry as it is now. */
export function untaintedNow(path: string): boolean {
  return taintedControlFile(taintContext(), path) === undefined;
}

/** The earliest moment a place holding `path` was handed out (ns), or undefined when none holds it. */
function coveringSince(list: readonly WritablePlace[], path: string): bigint | undefined {
  let since: bigint | undefined;
  for (const p of list) {
    if (!under(path, p.root)) continue;
    const t = BigInt(p.sinceNs);
    if (since === undefined || t < since) since = t;
  }
  return since;
}

/**
 * When git dir `dir` (a folder) may have been put where it is by a sandbox or room of this server — its folder's ctime
 * is later than the moment its place was handed out and it is not a git dir the guard saw there before
 * ({@link noteGitDirSeen}): a folder of old files renamed into place (a project's fixture made a `.git`) keeps its
 * files' old ctimes — a sentence saying so; else undefined.
 */
export function taintedGitDir(ctx: TaintContext, dir: string): string | undefined {
  const since = coveringSince(ctx.places, dir);
  if (since === undefined) return undefined;
  let st;
  try {
    st = lstatSync(dir, { bigint: true });
  } catch {
    return undefined;
  }
  if (st.ctimeNs < since || ctx.original.includes(`${dir}\0${st.dev}:${st.ino}`)) return undefined;
  const at = new Date(Number(st.ctimeNs / 1_000_000n)).toISOString();
  return `${dir} (a git dir that appeared or was moved there, changed ${at})`;
}

function under(path: string, root: string): boolean {
  return root === "/" || path === root || path.startsWith(root.endsWith("/") ? root : root + "/");
}

/**
 * When control file `path` (never followed) changed during the server's life in a place one of its sandboxes or
 * rooms could write, and not by the git guard: a sentence saying so (with when); else undefined. A missing file is
 * undefined (its absence is what the caller judges).
 */
export function taintedControlFile(ctx: TaintContext, path: string): string | undefined {
  const since = coveringSince(ctx.places, path);
  if (since === undefined) return undefined;
  let st;
  try {
    st = lstatSync(path, { bigint: true });
  } catch {
    return undefined;
  }
  if (st.ctimeNs < since) return undefined;
  const t = ctx.trusted.find((w) => w.path === path);
  if (t !== undefined && t.dev === String(st.dev) && t.ino === String(st.ino) && t.ctimeNs === String(st.ctimeNs)) return undefined;
  const at = new Date(Number(st.ctimeNs / 1_000_000n)).toISOString();
  return `${path} (changed ${at})`;
}

/**
 * Whether git dir `dir` is one recorded as original ({@link noteGitDirSeen}, {@link noteOriginal}): the same folder
 * (device, inode) at the same path, seen as a git dir before a sandbox of ours could write its place. Only `lstat`.
 */
export function originalGitDir(ctx: TaintContext, dir: string): boolean {
  try {
    const st = lstatSync(dir, { bigint: true });
    return st.isDirectory() && ctx.original.includes(`${dir}\0${st.dev}:${st.ino}`);
  } catch {
    return false;
  }
}
