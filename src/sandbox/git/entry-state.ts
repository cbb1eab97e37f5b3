/**
 * What one path the git guard records is (./guard.ts): its {@link EntryState} (bytes and mode, a folder, a link's
 * target, or what it is when it cannot be kept), the recorded {@link Entry}, how a state is read without following a
 * link or blocking (../../untrusted-fs.ts), how two states compare, and how a change is said in the report.
 */
import { lstatSync, readlinkSync, type BigIntStats } from "node:fs";
import { dirname } from "node:path";
import { readUntrusted } from "../../untrusted-fs.ts";

/**
 * What one path was (or is): how it compares and how it is put back. `data`: the file's bytes; `mode`: the
 * permission bits (`mode & 0o7777`); `target`: a link's target as stored (never followed); `other`: what it is in
 * words and its stat key (`byStat`: a file past the memory bound, kept by its stat key only).
 */
export type EntryState =
  | { kind: "absent" }
  | { kind: "file"; data: Buffer; mode: number }
  | { kind: "dir"; mode: number }
  | { kind: "link"; target: string }
  /** Not restorable (a FIFO, a device, a file over the size cap, unreadable): compared by its stat. */
  | { kind: "other"; what: string; fingerprint: string; byStat?: true };

/** One recorded path. `children`: a folder whose entries are all recorded (anything new in it is removed). */
export interface Entry {
  path: string;
  state: EntryState;
  /** The folder the restore starts from: every folder between it and `path` must be a real folder. */
  base: string;
  children?: boolean;
  /**
   * A gitlink's `.git`: a change is undone only when the repository it now leads to is one the sandbox could
   * write (`git submodule update --init` through a room makes a `.git` file pointing into the protected git dir).
   */
  gitlink?: { workTree: string; path: string };
  /** Short name for the report (`.git/hooks/pre-commit`, relative to the repository). */
  label: string;
  /**
   * Whether the recorded state was trusted by the escalation boundary (not written during the server's life by a
   * sandbox, ./taint.ts): what the guard puts back is trusted only then.
   */
  clean?: boolean;
  /** Device and inode when recorded (a folder the guard wrote in is trusted again only while it is the same one). */
  ident?: string;
}

/** `lstat` of `p` with bigint times (the last link not followed), or undefined when it fails (any error). */
export function lstatQuiet(p: string): BigIntStats | undefined {
  try {
    return lstatSync(p, { bigint: true });
  } catch {
    return undefined;
  }
}

/** `dev:ino` of `p` (not followed), or undefined when it cannot be had. */
export function identOf(p: string): string | undefined {
  const st = lstatQuiet(p);
  return st === undefined ? undefined : `${st.dev}:${st.ino}`;
}

/** dev, inode, size, mtime and ctime (ns): any write changes ctime, which no unprivileged program can set back. */
export function statKey(st: BigIntStats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}:${st.mode}`;
}

/** States of regular files by path, with the stat key they were read under. */
export type FileCache = Map<string, { key: string; state: EntryState }>;

/**
 * {@link stateOf}, reusing the state in `previous` when the file's stat key is unchanged (a write changes ctime,
 * which no unprivileged program can set back); what it reads is remembered in `next`.
 */
export function cachedStateOf(p: string, previous: FileCache, next: FileCache, keep = true): EntryState {
  const st = lstatQuiet(p);
  if (st === undefined || !st.isFile()) return stateOf(p);
  const key = statKey(st);
  const hit = previous.get(p);
  const state =
    hit !== undefined && hit.key === key && (keep || hit.state.kind !== "file")
      ? hit.state
      : keep
        ? stateOf(p)
        : { kind: "other" as const, what: "a file past the guard's memory bound", fingerprint: key, byStat: true as const };
  // A file that changed between the lstat and the read is read again next time (its key no longer matches).
  next.set(p, { key, state });
  return state;
}

/**
 * What entry `e` is now, for the check: a regular file whose stat key is the one it was recorded under (in `files`,
 * the last snapshot's cache, holding this very state) is unchanged without reading it again; one recorded by its
 * stat only is compared by its stat only.
 */
export function currentState(e: Entry, files: FileCache): EntryState {
  const st = lstatQuiet(e.path);
  if (st !== undefined && st.isFile()) {
    const key = statKey(st);
    const c = files.get(e.path);
    if (c !== undefined && c.state === e.state && c.key === key) return e.state;
    if (e.state.kind === "other" && e.state.byStat === true)
      return { kind: "other", what: "a file past the guard's memory bound", fingerprint: key, byStat: true as const };
  }
  return stateOf(e.path);
}

/** The state of `p` now, read without following links or blocking. */
export function stateOf(p: string): EntryState {
  const st = lstatQuiet(p);
  if (st === undefined) return { kind: "absent" };
  const mode = Number(st.mode & 0o7777n);
  if (st.isDirectory()) return { kind: "dir", mode };
  if (st.isSymbolicLink()) {
    try {
      return { kind: "link", target: readlinkSync(p) };
    } catch {
      return { kind: "other", what: "an unreadable symbolic link", fingerprint: statKey(st) };
    }
  }
  if (st.isFile()) {
    const r = readUntrusted(p);
    if (r.ok) return { kind: "file", data: Buffer.from(r.data), mode };
    return { kind: "other", what: r.reason, fingerprint: statKey(st) };
  }
  return { kind: "other", what: st.isFIFO() ? "a FIFO" : "a socket or device", fingerprint: statKey(st) };
}

/**
 * Whether `a` and `b` are the same state: same kind, and the same bytes and mode (file), mode (folder), target
 * (link) or stat key (other).
 */
export function sameState(a: EntryState, b: EntryState): boolean {
  if (a.kind !== b.kind) return false;
  switch (a.kind) {
    case "absent":
      return true;
    case "file":
      return b.kind === "file" && a.mode === b.mode && a.data.equals(b.data);
    case "dir":
      return b.kind === "dir" && a.mode === b.mode;
    case "link":
      return b.kind === "link" && a.target === b.target;
    case "other":
      return b.kind === "other" && a.fingerprint === b.fingerprint;
  }
}

/** `s` in words for the report (`a file (executable)`, `a symbolic link to …`). */
function describeState(s: EntryState): string {
  switch (s.kind) {
    case "absent":
      return "absent";
    case "file":
      return `a file${s.mode & 0o111 ? " (executable)" : ""}`;
    case "dir":
      return "a folder";
    case "link":
      return `a symbolic link to ${s.target}`;
    case "other":
      return s.what;
  }
}

/** What the command did to an entry, in words. */
export function describeChange(before: EntryState, now: EntryState): string {
  if (before.kind === "absent") return `created by the command (${describeState(now)})`;
  if (now.kind === "absent") return "removed by the command";
  if (before.kind === "file" && now.kind === "file") {
    if (before.data.equals(now.data)) return `its mode changed (${before.mode.toString(8)} → ${now.mode.toString(8)})`;
    return "its content was changed by the command";
  }
  if (before.kind === "dir" && now.kind === "dir") return `its mode changed (${before.mode.toString(8)} → ${now.mode.toString(8)})`;
  return `${describeState(before)} was replaced by ${describeState(now)}`;
}

/** A short name for `p`: from the folder that holds its `.git` (or the bare repository's folder) on. */
export function labelOf(p: string): string {
  const i = p.lastIndexOf("/.git/");
  if (i >= 0) return p.slice(dirname(p.slice(0, i)).length + 1);
  return p;
}
