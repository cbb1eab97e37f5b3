/**
 * What a sandboxed command can write on the host: the question the escalation boundary asks before it runs a
 * program outside the sandbox (docs/escalation.md, "The escalation boundary: what an allow rule grants").
 *
 * A {@link WritableView} is taken when a shell starts, from the same inputs the sandbox helper uses (policy,
 * policy cwd, the shell's environment for `$TMPDIR`), so it describes the sandbox that shell runs in:
 * - full disk write (`danger-full-access`, `external-sandbox`, or no sandbox at all): everything;
 * - otherwise the writable roots (canonical), minus the read-only subpaths (`.git`, `.codex`, `.agents`, a `.git`
 *   file's gitdir, the `.git` of repositories below a root's top, CODEX_HOME and `/etc/codex`) when the backend
 *   enforces them (bubblewrap does; Landlock cannot, so there they are writable — and a Landlock call whose roots
 *   hold CODEX_HOME is refused, filesystem-plan.ts `landlockCanEnforce`);
 * - under Landlock, `/dev/shm` too (granted so Python multiprocessing works).
 * A path that does not exist yet is writable when the sandbox could create it: its nearest existing ancestor
 * decides. Paths are canonicalised (symlinks resolved) first, so a link cannot make a writable file look safe.
 */
import { existsSync, lstatSync, readlinkSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, normalize, resolve } from "node:path";
import type { FilesystemPlan } from "./filesystem-plan.ts";
import { hasFullDiskWrite, type SandboxPolicy } from "./policy.ts";
import { pinFolders, writableInModel, type WritableRoot } from "./writable-model.ts";
import { writableRoots } from "./roots.ts";

/** Which mechanism confines the shell's writes. `none`: the shell runs unsandboxed. */
export type WriteEnforcement = "bwrap" | "landlock" | "none";

/**
 * Writable places of one sandbox, as the host sees them ({@link writableView}, {@link planWritableView}): what the
 * escalation boundary judges a path by ({@link canWrite}, {@link canReplaceEntry}). Every path is canonical and
 * absolute. Never narrower than what the sandbox really allows: a read-only entry is listed only where the backend
 * enforces it and no folder above it can be renamed ({@link pinnedReadOnly}).
 */
export interface WritableView {
  /** Everything is writable (no sandbox, or one that writes everywhere); `roots` and `readOnly` are then empty. */
  full: boolean;
  /** Canonical writable roots: the sandbox's, and under Landlock `/dev/shm` ({@link LANDLOCK_EXTRA_WRITABLE}). */
  roots: string[];
  /**
   * Canonical paths inside `roots` that stay read-only (files or folders, existing or not): under bubblewrap the
   * protected subpaths (`.git`, `.codex`, `.agents`, CODEX_HOME …) and, from a plan, its denied paths; empty under
   * Landlock, which cannot enforce them.
   */
  readOnly: string[];
  /**
   * Canonical folders inside a `readOnly` entry that are bound writable again (bubblewrap: a bare repository's
   * `objects/`, `refs/`, `logs/`, `worktrees/`, git/nested.ts `nestedGit`); absent means none. A path is writable when
   * it lies under a root and under no read-only entry, or under a writable-again folder deeper than every read-only
   * entry holding it (writable-model.ts `writableInModel`; {@link canWrite} is the one place that asks).
   */
  writableAgain?: string[];
}

/** Folders the Landlock backend grants write access to besides the writable roots (see landlock.ts). */
export const LANDLOCK_EXTRA_WRITABLE = ["/dev/shm"];

/**
 * The writable view of a shell started under `policy` with `cwd` as the policy cwd and `env` as its environment.
 * `enforcement` says which backend runs it (`none` when the shell is not sandboxed at all). `workdir`: the folder
 * the shell starts in, as given to the sandbox's plan (its repository's `.git` is read-only at any depth under
 * bubblewrap, git/nested.ts `nestedGitPaths`): the view must be planned from the same inputs as the sandbox. `planned`: the
 * writable roots of the call's own filesystem plan when the caller has them, computed by roots.ts `writableRoots`
 * from these same inputs (filesystem-plan.ts `planSandboxPolicy`; not searched again: one search per call, and the
 * view describes exactly the roots the sandbox binds); else they are computed here.
 */
export function writableView(
  policy: SandboxPolicy,
  cwd: string,
  enforcement: WriteEnforcement,
  env: Record<string, string | undefined>,
  workdir?: string,
  pinned = false,
  planned?: readonly WritableRoot[],
): WritableView {
  if (enforcement === "none" || policy.type === "danger-full-access" || hasFullDiskWrite(policy))
    return { full: true, roots: [], readOnly: [] };
  // Nested repositories only where the backend enforces them (the same search the bubblewrap plan makes).
  const roots = planned ?? writableRoots(policy, cwd, env, enforcement === "bwrap" ? { workdir } : undefined);
  const extra = enforcement === "landlock" ? LANDLOCK_EXTRA_WRITABLE.filter((p) => existsSync(p)).map((p) => canonicalPath(p)) : [];
  const again = enforcement === "bwrap" ? roots.flatMap((r) => r.writableAgain ?? []).map((p) => canonicalPath(p)) : [];
  return {
    full: false,
    roots: [...roots.map((r) => r.root), ...extra],
    readOnly:
      enforcement === "bwrap"
        ? pinnedReadOnly(
            roots.map((r) => r.root),
            roots.flatMap((r) => r.readOnlySubpaths).map((p) => canonicalPath(p)),
            pinned,
            again,
          )
        : [],
    ...(again.length > 0 ? { writableAgain: again } : {}),
  };
}

/**
 * The entries of `readOnly` (canonical paths bound read-only inside the writable `roots`) that stay read-only *by
 * path*: a bind mount moves with its parent, so the sandbox can rename an ordinary folder that holds one (the
 * folder of a nested repository) and make a new folder, with a writable `.git` of its own, at the old path. An entry
 * is kept only when no folder above it can be renamed: each is a mount point (a root, a read-only entry, and with
 * `pinned` — our bubblewrap plans, ./linux/bwrap.ts — the folders policy.ts `pinFolders` binds) or lies in a folder
 * the sandbox cannot write. Codex's own helper binds no such folders: there a nested entry is writable.
 * `writableAgain`: the folders bound writable again inside the entries (mount points too).
 */
export function pinnedReadOnly(
  roots: readonly string[],
  readOnly: readonly string[],
  pinned = false,
  writableAgain: readonly string[] = [],
): string[] {
  const mounts = new Set([...roots, ...readOnly, ...writableAgain, ...(pinned ? pinFolders(roots, readOnly, writableAgain) : [])]);
  const writableDir = (d: string) => writableInModel(d, roots, readOnly, writableAgain);
  const held = (p: string) => {
    for (let a = dirname(p); a !== dirname(a); a = dirname(a)) if (!mounts.has(a) && writableDir(dirname(a))) return false;
    return true;
  };
  return readOnly.filter(held);
}

/**
 * Canonical form of an absolute path that may not exist: the real path of its nearest existing ancestor, with
 * the missing components appended.
 */
export function canonicalPath(path: string, depth = 0): string {
  const p = normalize(path);
  try {
    return realpathSync(p);
  } catch {
    // A dangling symlink is judged by where it points (the sandbox may create its target later).
    try {
      if (depth < 40 && lstatSync(p).isSymbolicLink()) return canonicalPath(resolve(dirname(p), readlinkSync(p)), depth + 1);
    } catch {
      // not there at all
    }
    const parent = dirname(p);
    if (parent === p) return p;
    return join(canonicalPath(parent, depth), basename(p));
  }
}

/** Whether the sandboxed command can write `path` (or create it, when it does not exist). */
export function canWrite(view: WritableView, path: string): boolean {
  if (view.full) return true;
  if (!isAbsolute(path)) return true; // relative to something the sandbox chooses: assume the worst
  return writableInModel(canonicalPath(path), view.roots, view.readOnly, view.writableAgain);
}

/**
 * Whether the sandbox of `view` can replace the directory entry at canonical `entry` itself (its folder canonical,
 * its last component not followed: a link there can be removed and made again naming anything): its folder is
 * writable in the model and the entry is not a read-only entry or a folder bound writable again (mount points
 * that cannot be renamed). Always true for a full-write view.
 */
export function canReplaceEntry(view: WritableView, entry: string): boolean {
  if (view.full) return true;
  if (view.readOnly.includes(entry) || (view.writableAgain ?? []).includes(entry)) return false;
  return writableInModel(dirname(entry), view.roots, view.readOnly, view.writableAgain);
}

/**
 * What a shell started under `plan` can write, for the escalation boundary (writable.ts): everything when
 * unsandboxed or `fullWrite`; else the writable roots (plus `/dev/shm` under Landlock), minus — only where the
 * backend enforces them (bubblewrap) — the read-only subpaths and denied paths. Never narrower than what the
 * sandbox really allows, so the boundary never trusts a path the command could have written.
 */
export function planWritableView(plan: FilesystemPlan, enforcement: WriteEnforcement, pinned = false): WritableView {
  if (enforcement === "none" || !plan.sandboxed || plan.fullWrite) return { full: true, roots: [], readOnly: [] };
  const extra = enforcement === "landlock" ? LANDLOCK_EXTRA_WRITABLE.filter((p) => existsSync(p)).map((p) => canonicalPath(p)) : [];
  const again = enforcement === "bwrap" ? plan.writableRoots.flatMap((w) => w.writableAgain ?? []).map((p) => canonicalPath(p)) : [];
  return {
    full: false,
    roots: [...plan.writableRoots.map((w) => canonicalPath(w.root)), ...extra],
    readOnly:
      enforcement === "bwrap"
        ? pinnedReadOnly(
            plan.writableRoots.map((w) => canonicalPath(w.root)),
            [...plan.writableRoots.flatMap((w) => w.readOnlySubpaths), ...plan.deniedPaths].map((p) => canonicalPath(p)),
            pinned,
            again,
          )
        : [],
    ...(again.length > 0 ? { writableAgain: again } : {}),
  };
}
