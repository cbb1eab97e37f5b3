/**
 * The git control state of repositories below a writable root's top (docs/sandbox.md, "Protected paths inside
 * writable roots"): which `.git` entries, git dirs and control files a bubblewrap plan keeps read-only, which folders
 * of a bare repository it binds writable again, from the one discovery (./discover.ts `discoverRoot`).
 */
import { existsSync, lstatSync, realpathSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { readUntrustedText } from "../../untrusted-fs.ts";
import { canonicalMissing, isUnder } from "../paths.ts";
import { writableInModel } from "../writable-model.ts";
import { discoverRoot, frontierBindLimit, MAX_FRONTIER_BINDS } from "./discover.ts";

/**
 * The gitdir a `.git` *file* points at (`gitdir: <path>`, relative to the file's folder), if it exists. The file
 * may have been written by a sandboxed command: it is read through ../untrusted-fs.ts (never blocks on a FIFO,
 * refuses a symlink, a non-regular or an oversized file), and anything but a small regular file gives undefined.
 */
export function gitdirPointer(dotGit: string): string | undefined {
  const r = readUntrustedText(dotGit, { maxBytes: 4096 });
  if (!r.ok) return undefined;
  const text = r.text;
  const i = text.indexOf(":");
  if (i < 0 || text.slice(0, i).trim() !== "gitdir") return undefined;
  const target = resolve(dirname(dotGit), text.slice(i + 1).trim());
  return existsSync(target) ? target : undefined;
}

/**
 * The control entries of a git dir that git reads commands or another git dir's location from: kept read-only under
 * bubblewrap in every git dir found that is not already inside a read-only `.git` (bare repositories, git dirs named
 * otherwise). Folders (`hooks/`, `info/`) are kept from being created when missing; missing files are not (a mount
 * point for a file would have to be made on the host, where git reads it: the git guard checks them after the call).
 */
export const GIT_CONTROL_FILES = ["config", "config.worktree", "commondir", "gitdir"] as const;
/** See {@link GIT_CONTROL_FILES}: the control folders (hooks run, info read as configuration). */
export const GIT_CONTROL_DIRS = ["hooks", "info"] as const;

/**
 * The git control paths of the `.git` entry `dotGit` (an `lstat`ed entry): the entry itself when it is a folder
 * or a file, plus — for a file — the gitdir it points at when that is a git dir (holds `HEAD`) strictly inside
 * one of `roots` that contains no writable root (a pointer a sandboxed command wrote must not turn a writable
 * root read-only). A symlink gives nothing: a sandboxed command can make one anywhere, and refusing every later
 * call over it would hand it the session (top-level `.git` links are still refused, see bwrap.ts).
 */
function gitEntryPaths(dotGit: string, kind: "dir" | "file" | "other", roots: readonly string[]): string[] {
  if (kind === "dir") return [dotGit];
  if (kind !== "file") return [];
  const out = [dotGit];
  const target = gitdirPointer(dotGit);
  if (target !== undefined) {
    const t = canonicalMissing(target);
    const inside = roots.some((r) => t !== r && isUnder(t, r));
    const holdsRoot = roots.some((r) => isUnder(r, t));
    let head = false;
    try {
      head = lstatSync(join(t, "HEAD")).isFile();
    } catch {
      head = false;
    }
    if (inside && !holdsRoot && head) out.unshift(t);
  }
  return out;
}

function entryKind(p: string): "dir" | "file" | "other" | undefined {
  try {
    const st = lstatSync(p);
    return st.isDirectory() ? "dir" : st.isFile() ? "file" : "other";
  } catch {
    return undefined;
  }
}

/**
 * The read-only paths that keep the git control state of every git dir below the writable `root` (canonical) out of
 * the sandbox's reach, from the one discovery (./git/discover.ts `discoverRoot`: complete the first time a root is
 * planned, recorded by identity, no depth limit, symlinks never followed, `node_modules` never entered):
 * - every work tree's `.git` folder or file below the top, whole, plus the git dir a `.git` file names (see
 *   {@link gitEntryPaths}); `root`'s own `.git` is not listed ({@link protectedSubpaths} has it);
 * - every other git dir (bare repositories, `--separate-git-dir` folders, linked worktrees' admin folders, submodule
 *   git dirs) not inside one of those: one with no `commondir` (all but a linked worktree's admin folder) whole,
 *   with its {@link GIT_WRITABLE_AGAIN} folders bound writable again ({@link nestedGit}); an admin folder its
 *   {@link GIT_CONTROL_FILES} that exist and its {@link GIT_CONTROL_DIRS} (held when missing); when one of them is a
 *   symlink, the whole git dir (a link cannot be covered by a mount, and the sandbox could replace it), plus the
 *   link's target when that lies inside `root`;
 * - the folders the complete search did not read (its bound was reached): unknown, so read-only; past
 *   {@link MAX_FRONTIER_BINDS} of them none (the git guard then refuses the call, with the reason);
 * - every `.git` on the way from `workdir` (when it lies below `root`) up to `root`.
 * `roots`: every writable root of the plan (canonical), for the pointer checks. Never throws.
 */
export function nestedGitPaths(root: string, roots: readonly string[], workdir?: string): string[] {
  return nestedGit(root, roots, workdir).readOnly;
}

/**
 * The folders of a bare repository bound writable again inside its read-only folder: what git writes there on a
 * push (objects, loose refs, reflogs) and a linked worktree's admin folder. A push that deletes a packed ref or a
 * fetch run inside the repository writes its top (`packed-refs`, `FETCH_HEAD`) and fails under bubblewrap.
 */
export const GIT_WRITABLE_AGAIN = ["objects", "refs", "logs", "worktrees", "reftable"] as const;

/**
 * The {@link GIT_WRITABLE_AGAIN} folders listed even when missing (git makes them on first use: a reflog in a linked
 * worktree's commit, `git worktree add`): bubblewrap makes an empty folder on the host to bind writable
 * (../linux/mount-points.ts `holdMountPoint`, removed after the call when still empty).
 */
export const GIT_HELD_WRITABLE = ["logs", "worktrees"] as const;

/**
 * {@link nestedGitPaths} with the folders bound writable again inside them: a git dir that is not a work tree's
 * `.git` folder and has no `commondir` (a bare repository, a `--separate-git-dir` folder, a submodule git dir) is
 * read-only whole, so that no control file (above all `commondir`, which a placeholder cannot hold) can be created
 * at its top, with its {@link GIT_WRITABLE_AGAIN} folders (real folders, not links; existing, or missing and in
 * {@link GIT_HELD_WRITABLE}) writable again; a
 * linked worktree's admin folder (it has a `commondir`) keeps its control entries read-only one by one.
 */
export function nestedGit(root: string, roots: readonly string[], workdir?: string): { readOnly: string[]; writableAgain: string[] } {
  const found = discoverRoot(root);
  const whole: string[] = [];
  const ownGit = join(root, ".git");
  if (entryKind(ownGit) === "dir") whole.push(ownGit);
  const others: string[] = [];
  for (const e of found.repos) {
    if (e.dotGit && e.workTree !== undefined) {
      const dotGit = e.pointer ?? join(e.workTree, ".git");
      if (e.workTree === root) continue;
      const kind = entryKind(dotGit);
      if (kind !== undefined) whole.push(...gitEntryPaths(dotGit, kind, roots));
    } else if (e.gitDir !== undefined) others.push(e.gitDir);
  }
  const out = [...whole.filter((p) => p !== ownGit)];
  const again: string[] = [];
  const covered = (p: string) => whole.some((w) => isUnder(p, w)) || !writableInModel(p, [root], out, again);
  // Shallowest first: a bare repository's `worktrees/` is writable again before its admin folders are seen.
  for (const g of [...new Set(others)].sort((a, b) => a.length - b.length)) {
    if (!isUnder(g, root) || roots.some((r) => isUnder(r, g)) || covered(g)) continue;
    const entries = controlEntries(g, root);
    if (entryKind(join(g, "commondir")) !== undefined || entries.includes(g)) {
      out.push(...entries);
      continue;
    }
    out.push(g);
    for (const name of GIT_WRITABLE_AGAIN) {
      const kind = entryKind(join(g, name));
      if (kind === "dir" || (kind === undefined && (GIT_HELD_WRITABLE as readonly string[]).includes(name))) again.push(join(g, name));
    }
  }
  const frontier = found.frontier.filter((f) => isUnder(f, root) && entryKind(f) === "dir" && !covered(f));
  // Too many to bind one by one: none is listed, so the writable model lets the sandbox write them and the git
  // guard refuses the call with the reason (./control-entries.ts `findGitDirs`).
  if (frontier.length <= frontierBindLimit()) out.push(...frontier);
  if (workdir !== undefined) {
    const w = canonicalMissing(workdir);
    if (w !== root && isUnder(w, root)) {
      for (let d = w; d !== root && isUnder(d, root); d = dirname(d)) {
        const g = join(d, ".git");
        const kind = entryKind(g);
        if (kind !== undefined) out.push(...gitEntryPaths(g, kind, roots));
      }
    }
  }
  // An entry inside another (a submodule's `.git` kept in a read-only `.git/modules/`) needs no mount of its own,
  // unless a writable-again folder lies between them.
  const all = [...new Set(out)];
  const outer = [...all, ...whole.filter((w) => w === ownGit)];
  const listed = all.filter((p) =>
    writableInModel(
      p,
      [root, ...roots],
      outer.filter((o) => o !== p),
      again,
    ),
  );
  const keptAgain = again.filter((a) => listed.includes(dirname(a)));
  if (discoveredPaths.size > MAX_FOUND_REMEMBERED) discoveredPaths.clear();
  for (const p of [...listed, ...keptAgain]) if (p !== root) discoveredPaths.add(p);
  return { readOnly: listed, writableAgain: keptAgain };
}

/** Paths {@link nestedGitPaths} listed (at most {@link MAX_FOUND_REMEMBERED}; past it the set starts again). */
const discoveredPaths = new Set<string>();
const MAX_FOUND_REMEMBERED = 100_000;

/**
 * Whether `p` is a read-only path {@link nestedGitPaths} listed in this process (a git control entry or a folder the
 * discovery did not read): bubblewrap binds such a path with `-try`, since the folder it lies in may be removed by
 * another process before the mounts are made (./linux/bwrap.ts). A path forgotten is bound strictly (safe, only
 * less forgiving).
 */
export function foundByDiscovery(p: string): boolean {
  return discoveredPaths.has(p);
}

/** The read-only entries of git dir `g` inside `root` (see {@link nestedGitPaths}). */
function controlEntries(g: string, root: string): string[] {
  const out: string[] = [];
  for (const name of [...GIT_CONTROL_FILES, ...GIT_CONTROL_DIRS]) {
    const p = join(g, name);
    const kind = entryKind(p);
    if (kind === undefined) {
      if ((GIT_CONTROL_DIRS as readonly string[]).includes(name)) out.push(p);
      continue;
    }
    if (kind === "other") {
      let target: string | undefined;
      try {
        target = lstatSync(p).isSymbolicLink() ? realpathSync(p) : undefined;
      } catch {
        target = undefined;
      }
      // The link's target too, when it lies in the root — for a git dir of this user's only: another local user's
      // repository in a shared /tmp must not choose a folder of ours to make read-only.
      const mine = (() => {
        try {
          return lstatSync(g).uid === process.getuid?.();
        } catch {
          return false;
        }
      })();
      const links = mine && target !== undefined && target !== root && isUnder(target, root) && !isUnder(g, target) ? [target] : [];
      return [g, ...links];
    }
    out.push(p);
  }
  return out;
}
