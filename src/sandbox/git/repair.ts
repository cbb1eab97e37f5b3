/**
 * The git guard's writes (issue 38 item 1; docs/git-guard.md, "Through what the guard writes"): every write,
 * rename and removal the guard makes goes through a folder descriptor opened without following any link and checked against the identity
 * (device, inode) the guard recorded for that folder; a folder that is no longer the one recorded is refused and
 * reported, never followed. A sandboxed process may exchange any folder on the way with a symlink to anywhere at
 * any moment (sessions and parallel calls run while the guard repairs); a path is resolved once, into a
 * descriptor, and every operation after that is relative to that descriptor.
 *
 * Opening: `openat2` from `/` with `RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` (Linux 5.6+); on an older kernel
 * (ENOSYS) one component at a time with `O_PATH | O_NOFOLLOW | O_DIRECTORY`, which fails on a symlink. Then
 * `fstat` of the descriptor must give the recorded `dev:ino`. Operations: `openat(O_CREAT|O_EXCL|O_NOFOLLOW)` +
 * `fchmod` + `renameat2` for a file, `unlinkat` (a folder emptied through its own descriptor first), `mkdirat`,
 * `symlinkat`, `renameat2` within the folder.
 *
 * {@link runRepairs} runs a batch in this process; src/sandbox/linux/git-repair-child.ts runs one in a short-lived child
 * that confines itself with Landlock to the verified folders first. Linux only: elsewhere (macOS) the caller keeps
 * its path-based writes (see docs/git-guard.md).
 */
import { closeSync, fchmodSync, fstatSync, readdirSync, writeSync } from "node:fs";
import { constants } from "node:fs";
import { AT_REMOVEDIR, closeQuiet, mkdirat, openat, openat2, renameat2, RESOLVE, symlinkat, unlinkat } from "../../../ffi/libc.ts";

/** `O_PATH` (the same value on x86_64 and aarch64). */
const O_PATH = 0o10000000;
const O_CLOEXEC = 0o2000000;
const E = { ENOENT: 2, EEXIST: 17, ENOTDIR: 20, EISDIR: 21, ENOSYS: 38, ENOTEMPTY: 39, ELOOP: 40, EPERM: 1 } as const;
/** Folder levels emptied below an entry being removed (a deeper tree is reported, not removed). */
const MAX_REMOVE_DEPTH = 16;

/**
 * One write of the guard: in folder `dir` (a canonical absolute path) whose identity is `ident` (`dev:ino` as
 * recorded; undefined: only the link-free walk is checked — a folder the guard did not record), on entry `name`
 * (one path component):
 * - `write`: a regular file with `data` and `mode` (a new file renamed over whatever is there);
 * - `remove`: whatever is there (a folder with everything in it; a link itself);
 * - `mkdir`: a folder with `mode` (whatever non-folder is there removed first; an existing folder's mode set);
 * - `symlink`: a symbolic link to `target` (whatever is there removed first);
 * - `rename`: rename `name` to `to` in the same folder (whatever is at `to` removed first).
 */
export interface RepairOp {
  dir: string;
  ident?: string;
  kind: "write" | "remove" | "mkdir" | "symlink" | "rename";
  name: string;
  data?: Uint8Array;
  mode?: number;
  target?: string;
  to?: string;
}

/** The outcome of one {@link RepairOp}: undefined when done, else why not (for the report). */
export type RepairResult = string | undefined;

/** A refusal: the folder is not the one recorded (or not reachable without a link). */
export class Replaced extends Error {}

/** errno of a `SYSCALL` error from ffi/libc.ts, or undefined. */
function errnoOf(e: unknown): number | undefined {
  const d = (e as { data?: { errno?: number } }).data;
  return typeof d?.errno === "number" ? d.errno : undefined;
}

let openat2Missing = false;

/** Tests: behave as on a kernel without `openat2` (true), or detect it again (false). */
export function setOpenat2MissingForTest(missing: boolean): void {
  openat2Missing = missing;
}

/**
 * A descriptor (`O_PATH`) of folder `dir`, reached from `/` without following any link. Throws {@link Replaced}
 * when a component is a link or not a folder, or when it is missing.
 */
export function openDirNoFollow(dir: string): number {
  if (!dir.startsWith("/")) throw new Replaced(`${dir} is not an absolute path`);
  const rel = dir.split("/").filter((c) => c !== "" && c !== ".");
  if (rel.includes("..")) throw new Replaced(`${dir} holds ..`);
  const flags = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW | O_CLOEXEC;
  if (!openat2Missing) {
    const root = openat(-100, "/", flags);
    try {
      if (rel.length === 0) return openat(root, ".", flags);
      return openat2(root, rel.join("/"), flags, 0, RESOLVE.NO_SYMLINKS | RESOLVE.NO_MAGICLINKS | RESOLVE.BENEATH);
    } catch (e) {
      const n = errnoOf(e);
      if (n === E.ENOSYS) openat2Missing = true;
      else if (n === E.ELOOP || n === E.ENOTDIR || n === E.ENOENT || n === 18 /* EXDEV */)
        throw new Replaced(`by a symbolic link, a non-folder or nothing (${dir} or a folder on the way to it)`);
      else throw e;
    } finally {
      closeQuiet(root);
    }
  }
  // Before Linux 5.6: one component at a time; O_NOFOLLOW | O_DIRECTORY fails on a link (ENOTDIR/ELOOP).
  let fd = openat(-100, "/", flags);
  try {
    for (const c of rel) {
      let next: number;
      try {
        next = openat(fd, c, flags);
      } catch (e) {
        const n = errnoOf(e);
        if (n === E.ELOOP || n === E.ENOTDIR || n === E.ENOENT)
          throw new Replaced(`by a symbolic link, a non-folder or nothing (${dir} or a folder on the way to it)`);
        throw e;
      }
      closeQuiet(fd);
      fd = next;
    }
    return fd;
  } catch (e) {
    closeQuiet(fd);
    throw e;
  }
}

/** `dev:ino` of a descriptor. */
export function identOfFd(fd: number): string {
  const st = fstatSync(fd, { bigint: true });
  return `${st.dev}:${st.ino}`;
}

/**
 * Folder descriptors of one batch: each folder opened once ({@link openDirNoFollow}) and checked against its
 * recorded identity; a folder a `mkdir` of the batch made is trusted by the identity it got then.
 */
export class DirFds {
  private readonly fds = new Map<string, number>();
  private readonly made = new Map<string, string>();
  private readonly refused = new Map<string, string>();

  /** The descriptor of `dir` (identity `ident`), or throws {@link Replaced} with what is there instead. */
  get(dir: string, ident: string | undefined): number {
    const known = this.fds.get(dir);
    if (known !== undefined) return known;
    const no = this.refused.get(dir);
    if (no !== undefined) throw new Replaced(no);
    let fd: number;
    try {
      fd = openDirNoFollow(dir);
    } catch (e) {
      const why = e instanceof Replaced ? `it was replaced ${e.message}` : (e as Error).message;
      this.refused.set(dir, why);
      throw new Replaced(why);
    }
    const want = this.made.get(dir) ?? ident;
    if (want !== undefined && identOfFd(fd) !== want) {
      closeQuiet(fd);
      const why = `it was replaced by another folder (${dir}) since it was recorded`;
      this.refused.set(dir, why);
      throw new Replaced(why);
    }
    this.fds.set(dir, fd);
    return fd;
  }

  /** Record that the batch made folder `dir` (identity `ident`): later operations in it accept that identity. */
  madeDir(dir: string, ident: string): void {
    this.made.set(dir, ident);
    const fd = this.fds.get(dir);
    if (fd !== undefined) closeQuiet(fd);
    this.fds.delete(dir);
    this.refused.delete(dir);
  }

  /** Every descriptor opened (for a Landlock ruleset). */
  all(): number[] {
    return [...this.fds.values()];
  }

  /** Close every descriptor. */
  close(): void {
    for (const fd of this.fds.values()) closeQuiet(fd);
    this.fds.clear();
  }
}

/** Remove entry `name` of folder `dirfd`: a folder emptied through its own descriptor first. */
export function removeAt(dirfd: number, name: string, depth = 0): void {
  try {
    unlinkat(dirfd, name, 0);
    return;
  } catch (e) {
    const n = errnoOf(e);
    if (n === E.ENOENT) return;
    if (n !== E.EISDIR && n !== E.EPERM) throw e;
  }
  if (depth >= MAX_REMOVE_DEPTH) throw new Error(`${name} holds folders deeper than ${MAX_REMOVE_DEPTH} levels`);
  const fd = openat(dirfd, name, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | O_CLOEXEC);
  try {
    // The folder's entries, read through the descriptor (the magic link names exactly this folder).
    for (const n of readdirSync(`/proc/self/fd/${fd}`)) removeAt(fd, n, depth + 1);
  } finally {
    closeQuiet(fd);
  }
  unlinkat(dirfd, name, AT_REMOVEDIR);
}

/** Rename `from` to `to` in folder `dirfd`, removing a folder at `to` first when the rename needs it. */
function renameOver(dirfd: number, from: string, to: string): void {
  try {
    renameat2(dirfd, from, dirfd, to, 0);
  } catch (e) {
    const n = errnoOf(e);
    if (n !== E.EISDIR && n !== E.ENOTEMPTY && n !== E.EEXIST && n !== E.ENOTDIR) throw e;
    removeAt(dirfd, to);
    renameat2(dirfd, from, dirfd, to, 0);
  }
}

/** Carry out `op` with the folder descriptors of `fds`. Undefined when done, else why not. */
export function applyOp(op: RepairOp, fds: DirFds): RepairResult {
  if (op.name === "" || op.name.includes("/") || op.name === "." || op.name === "..") return `bad name ${op.name}`;
  let dirfd: number;
  try {
    dirfd = fds.get(op.dir, op.ident);
  } catch (e) {
    return (e as Error).message;
  }
  try {
    switch (op.kind) {
      case "remove":
        removeAt(dirfd, op.name);
        return undefined;
      case "write": {
        const tmp = `.${op.name}.shellmcp-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
        const fd = openat(dirfd, tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | O_CLOEXEC, 0o600);
        try {
          const data = op.data ?? new Uint8Array(0);
          for (let off = 0; off < data.length;) off += writeSync(fd, data, off, data.length - off);
          fchmodSync(fd, op.mode ?? 0o644);
        } catch (e) {
          closeSync(fd);
          try {
            unlinkat(dirfd, tmp, 0);
          } catch {}
          throw e;
        }
        closeSync(fd);
        try {
          renameOver(dirfd, tmp, op.name);
        } catch (e) {
          try {
            unlinkat(dirfd, tmp, 0);
          } catch {}
          throw e;
        }
        return undefined;
      }
      case "mkdir": {
        const mode = op.mode ?? 0o755;
        let fd: number;
        try {
          mkdirat(dirfd, op.name, mode);
        } catch (e) {
          if (errnoOf(e) !== E.EEXIST) throw e;
        }
        try {
          fd = openat(dirfd, op.name, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | O_CLOEXEC);
        } catch (e) {
          const n = errnoOf(e);
          if (n !== E.ENOTDIR && n !== E.ELOOP) throw e;
          // A file or link where the folder belongs: removed (the link itself), then the folder made.
          unlinkat(dirfd, op.name, 0);
          mkdirat(dirfd, op.name, mode);
          fd = openat(dirfd, op.name, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | O_CLOEXEC);
        }
        try {
          fchmodSync(fd, mode);
          fds.madeDir(`${op.dir === "/" ? "" : op.dir}/${op.name}`, identOfFd(fd));
        } finally {
          closeQuiet(fd);
        }
        return undefined;
      }
      case "symlink":
        removeAt(dirfd, op.name);
        symlinkat(op.target ?? "", dirfd, op.name);
        return undefined;
      case "rename": {
        const to = op.to ?? "";
        if (to === "" || to.includes("/") || to === "." || to === "..") return `bad name ${to}`;
        removeAt(dirfd, to);
        renameat2(dirfd, op.name, dirfd, to, 0);
        return undefined;
      }
    }
  } catch (e) {
    return (e as Error).message;
  }
}

/** Carry out `ops` in order in this process (no confinement beyond the descriptors); one result per op. */
export function runRepairs(ops: readonly RepairOp[]): RepairResult[] {
  const fds = new DirFds();
  try {
    return ops.map((op) => applyOp(op, fds));
  } finally {
    fds.close();
  }
}
