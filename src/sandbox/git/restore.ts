/**
 * How the git guard puts an entry back (./guard.ts; docs/git-guard.md, "Through what the guard writes"): the
 * writes of one comparison are planned as {@link RepairOp}s and carried out in one batch by {@link Repairs} — on
 * Linux through folder descriptors reached without links and checked against the identities recorded at the
 * snapshot (./repair.ts, or the Landlock-confined child ../linux/git-repair-child.ts), elsewhere (macOS) by path
 * after an `lstat` walk of every folder from `/`. A file is written to a new name with `O_EXCL | O_NOFOLLOW` and
 * renamed over the old entry (a link is replaced, never written through).
 */
import {
  closeSync,
  constants,
  fchmodSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { basename, dirname, isAbsolute, join, relative } from "node:path";
import { identOf, lstatQuiet, type Entry, type EntryState } from "./entry-state.ts";
import { DirFds, type RepairOp, type RepairResult } from "./repair.ts";

/**
 * Why the folders from the filesystem's root down to `p`'s parent are not all real folders (undefined when they
 * are). Every folder, not only those below `base`: a folder between the writable root and the git dir (`a` of
 * `ws/a/proj/.git`) swapped for a symlink would otherwise send the restore into a repository outside every
 * writable root (review of issue 34, hole 1). The paths recorded are canonical, so no real link is on the way.
 */
function unsafeParents(base: string, p: string): string | undefined {
  const rel = relative(base, dirname(p));
  if (rel.startsWith("..") || isAbsolute(rel) || !isAbsolute(base)) return `${p} is not below ${base}`;
  let d = "/";
  for (const part of dirname(p).split("/").filter(Boolean)) {
    d = join(d, part);
    const st = lstatQuiet(d);
    if (st === undefined) return `${d} does not exist`;
    if (!st.isDirectory()) return `${d} is not a folder`;
  }
  return undefined;
}

/** Remove whatever is at `p` (a folder with everything in it; a link itself, never its target). */
function removeEntry(base: string, p: string): string | undefined {
  const why = unsafeParents(base, p);
  if (why !== undefined) return why;
  try {
    const st = lstatQuiet(p);
    if (st === undefined) return undefined;
    if (st.isDirectory()) rmSync(p, { recursive: true, force: true });
    else unlinkSync(p);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Write `data` at `p` with `mode`: a new file beside it (`O_EXCL | O_NOFOLLOW`), renamed over whatever is there. */
function writeFileAt(base: string, p: string, data: Buffer, mode: number): string | undefined {
  const why = unsafeParents(base, p);
  if (why !== undefined) return why;
  const tmp = join(dirname(p), `.${basename(p)}.shellmcp-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
  let fd: number | undefined;
  try {
    fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    for (let off = 0; off < data.length;) off += writeSync(fd, data, off, data.length - off);
    fchmodSync(fd, mode);
    closeSync(fd);
    fd = undefined;
    if (lstatQuiet(p)?.isDirectory() === true) rmSync(p, { recursive: true, force: true });
    renameSync(tmp, p);
    return undefined;
  } catch (e) {
    if (fd !== undefined) closeSync(fd);
    rmSync(tmp, { force: true });
    return (e as Error).message;
  }
}

/**
 * The writes of one comparison: on Linux each through a folder descriptor reached without links and checked
 * against the identity recorded at the snapshot (./repair.ts); elsewhere (macOS) by path after an `lstat` walk
 * (docs/git-guard.md, "Through what the guard writes").
 */
export class Repairs {
  private readonly ops: RepairOp[] = [];
  private results: RepairResult[] | undefined;
  /** Descriptors for reading folders (extra entries); the writes get their own, in the process that makes them. */
  private readonly readFds = process.platform === "linux" ? new DirFds() : undefined;
  constructor(
    private readonly folders: ReadonlyMap<string, string>,
    private readonly exe: (ops: readonly RepairOp[]) => RepairResult[],
  ) {}

  /**
   * Plan `op` (its `dir`'s identity taken from the snapshot's folders); what it came to, once {@link flush}ed:
   * undefined when done, else why not.
   */
  run(op: Omit<RepairOp, "ident">): () => RepairResult {
    const ident = this.folders.get(op.dir);
    const i = this.ops.push(ident === undefined ? op : { ...op, ident }) - 1;
    return () => (this.results === undefined ? "not carried out" : this.results[i]);
  }

  /** Carry out every planned op, in order (nothing when none: the usual case). */
  flush(): void {
    if (this.ops.length === 0) {
      this.results = [];
      return;
    }
    if (process.platform === "linux") {
      this.results = this.exe(this.ops);
      return;
    }
    this.results = this.ops.map((op) => pathRepair(op));
  }

  /** Names in folder `dir` (read through its checked descriptor on Linux), or [] when it cannot be read. */
  list(dir: string): string[] {
    try {
      if (this.readFds === undefined) return unsafeParents(dir, join(dir, "x")) === undefined ? readdirSync(dir) : [];
      return readdirSync(`/proc/self/fd/${this.readFds.get(dir, this.folders.get(dir))}`);
    } catch {
      return [];
    }
  }

  /** Close the descriptors. */
  close(): void {
    this.readFds?.close();
  }
}

/** `op` by path after an `lstat` walk (non-Linux; see docs/git-guard.md). */
function pathRepair(op: RepairOp): RepairResult {
  const p = join(op.dir, op.name);
  switch (op.kind) {
    case "remove":
      return removeEntry(op.dir, p);
    case "write":
      return writeFileAt(op.dir, p, Buffer.from(op.data ?? new Uint8Array(0)), op.mode ?? 0o644);
    case "mkdir":
      return mkdirAt(op.dir, p, op.mode ?? 0o755);
    case "symlink": {
      const why = removeEntry(op.dir, p);
      if (why !== undefined) return why;
      try {
        symlinkSync(op.target ?? "", p);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    }
    case "rename": {
      const why = unsafeParents(op.dir, p) ?? removeEntry(op.dir, join(op.dir, op.to ?? ""));
      if (why !== undefined) return why;
      try {
        renameSync(p, join(op.dir, op.to ?? ""));
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    }
  }
}

/** Make `p` a folder with `mode` by path (non-Linux): whatever else is there removed first. */
function mkdirAt(base: string, p: string, mode: number): string | undefined {
  const why = unsafeParents(base, p);
  if (why !== undefined) return why;
  try {
    const st = lstatQuiet(p);
    if (st !== undefined && !st.isDirectory()) unlinkSync(p);
    if (st === undefined || !st.isDirectory()) mkdirSync(p, { mode });
    const fd = openSync(p, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      fchmodSync(fd, mode);
    } finally {
      closeSync(fd);
    }
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * Record in each of `entries` its identity (`dev:ino`, not followed: {@link Entry.ident}) and return the identity of
 * every folder the guard may write in — the entries that are folders, the folders holding an entry, and those
 * holding the indexes at `indexPaths` — by canonical path: a repair refuses a folder that is not this one. A path
 * that cannot be `lstat`-ed is left out.
 */
export function recordIdents(entries: readonly Entry[], indexPaths: readonly string[]): Map<string, string> {
  const folders = new Map<string, string>();
  for (const e of entries) {
    const ident = identOf(e.path);
    if (ident !== undefined) e.ident = ident;
    if (e.state.kind === "dir" && ident !== undefined) folders.set(e.path, ident);
  }
  for (const d of new Set([...entries.map((e) => dirname(e.path)), ...indexPaths.map((i) => dirname(i))]))
    if (!folders.has(d)) {
      const ident = identOf(d);
      if (ident !== undefined) folders.set(d, ident);
    }
  return folders;
}

/** Plan putting entry `e` back to `want`; the result (after {@link Repairs.flush}): undefined on success, else why not. */
export function restoreEntry(e: Entry, want: EntryState, repair: Repairs): () => string | undefined {
  const dir = dirname(e.path);
  const name = basename(e.path);
  switch (want.kind) {
    case "absent":
      return repair.run({ dir, kind: "remove", name });
    case "file":
      return repair.run({ dir, kind: "write", name, data: want.data, mode: want.mode });
    case "dir":
      return repair.run({ dir, kind: "mkdir", name, mode: want.mode });
    case "link":
      return repair.run({ dir, kind: "symlink", name, target: want.target });
    case "other":
      return () => `it was ${want.what}, which is not kept`;
  }
}

/** Entries of folder `e` that were not recorded (created by the command). */
export function extraChildren(e: Entry, recorded: ReadonlySet<string>, repair: Repairs): string[] {
  return repair
    .list(e.path)
    .map((n) => join(e.path, n))
    .filter((p) => !recorded.has(p));
}
