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
 * Two halves: the registry (main thread: {@link noteWritable}, {@link noteGuardWrite}, {@link taintContext}) and the
 * check ({@link taintedControlFile}), which runs in the decision inspector (../escalate/decision/inspector.ts) with a
 * copy of the registry and does nothing but `lstat`.
 */
import { lstatSync } from "node:fs";
import type { WritableView } from "./writable.ts";

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
}

/** Each place handed out, with when it first was less {@link START_MARGIN_MS} (ms since the epoch). */
const places = new Map<string, number>();
const trusted = new Map<string, TrustedWrite>();

/**
 * Record the writable places of a sandbox (a call's, or a room's) this server hands out, before anything runs in
 * it. Main thread.
 */
export function noteWritable(view: WritableView | { full: false; roots: readonly string[] }): void {
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

/** A copy of the registry for one decision. */
export function taintContext(): TaintContext {
  return {
    places: [...places].map(([root, ms]) => ({ root, sinceNs: String(BigInt(ms) * 1_000_000n) })),
    trusted: [...trusted.values()],
  };
}

/** Whether `path` as it is now (an `lstat`) is not written during this server's life, by the registry as it is now. */
export function untaintedNow(path: string): boolean {
  return taintedControlFile(taintContext(), path) === undefined;
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
  const covering = ctx.places.filter((p) => under(path, p.root)).map((p) => BigInt(p.sinceNs));
  if (covering.length === 0) return undefined;
  const since = covering.reduce((a, b) => (b < a ? b : a));
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
