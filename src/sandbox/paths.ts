/**
 * Path helpers of the sandbox plans: canonical forms of paths that may not exist, the symlinks on the way to a
 * path, and whether one path lies under another (component-wise).
 */
import { lstatSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, join, normalize, sep } from "node:path";

/** `p` resolved through symlinks (`realpath`), or normalised lexically when it cannot be (missing, unreadable). */
export function canonical(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return normalize(p);
  }
}

/** Whether `p` is a directory (symlinks followed); false when it does not exist or cannot be read. */
export function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Canonical form of an absolute path that may not exist: the real path of its nearest existing ancestor with the
 * missing components appended (a dangling last link is not followed).
 */
export function canonicalMissing(p: string): string {
  const abs = normalize(p);
  try {
    return realpathSync(abs);
  } catch {
    const parent = dirname(abs);
    return parent === abs ? abs : join(canonicalMissing(parent), basename(abs));
  }
}

/**
 * The symlinks on the way to `p` as written (absolute): each component that is a link, by its own path (its
 * parent's real path + its name), following each to go on. A sandbox that can write where such a link lies can
 * re-point it, and with it the folder `p` names.
 */
export function symlinksOnTheWay(p: string): string[] {
  const out: string[] = [];
  let cur: string = sep;
  for (const part of normalize(p).split(sep).filter(Boolean)) {
    const next = join(cur, part);
    try {
      if (lstatSync(next).isSymbolicLink()) {
        out.push(next);
        cur = realpathSync(next);
      } else cur = next;
    } catch {
      break; // missing (or a dangling link, listed above): nothing further to follow
    }
  }
  return out;
}

/** Whether `path` lies under `root` (component-wise). */
export function isUnder(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/**
 * Whether `path` is a real folder (`dir`) or regular file owned by `uid` that neither group nor others can write:
 * not a symlink (lstat), false when it cannot be stat'ed. A folder of this process's own state (a cache, a cgroup,
 * mount markers) is trusted only then.
 */
export function ownedAndPrivate(path: string, uid: number, dir: boolean): boolean {
  try {
    const st = lstatSync(path);
    if (st.isSymbolicLink() || (dir ? !st.isDirectory() : !st.isFile())) return false;
    return st.uid === uid && (st.mode & 0o022) === 0;
  } catch {
    return false;
  }
}
