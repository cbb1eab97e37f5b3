/**
 * The writable model every reader of a plan judges with: a {@link WritableRoot} (a root, the paths inside it that stay
 * read-only, the folders inside those bound writable again), the one rule of what is writable in it
 * ({@link writableInModel}), and the folders a bubblewrap plan pins so that no read-only entry can be moved
 * ({@link pinFolders}). Pure path logic, except that {@link pinFolders} checks which folders exist.
 */
import { lstatSync } from "node:fs";
import { dirname } from "node:path";
import { isUnder } from "./paths.ts";

/**
 * A writable root, the paths inside it that stay read-only, and the paths inside those that are writable again.
 * What the sandbox can write below `root` is decided by the deepest entry holding a path ({@link writableInModel}):
 * only bubblewrap plans have `writableAgain` (a bare repository's folder read-only, its `objects/`, `refs/`, `logs/`
 * and `worktrees/` bound writable again, {@link nestedGitPaths}); absent means none.
 */
export interface WritableRoot {
  root: string;
  readOnlySubpaths: string[];
  /** Canonical folders inside one of `readOnlySubpaths` that are bound writable again (after it). */
  writableAgain?: string[];
}

/**
 * Whether canonical `p` is writable in the model of `roots` (writable), `readOnly` (read-only inside them) and
 * `writableAgain` (writable again inside a read-only entry): under a root, and either under no read-only entry or
 * under a writable-again entry that lies strictly deeper than every read-only entry holding `p` (the deepest wins,
 * as the bubblewrap binds made in depth order; a read-only entry beats a root at any depth, as before). The one
 * rule every reader of the writable model uses (writable.ts `canWrite`, {@link pinFolders}).
 */
export function writableInModel(
  p: string,
  roots: readonly string[],
  readOnly: readonly string[],
  writableAgain: readonly string[] = [],
): boolean {
  if (!roots.some((r) => isUnder(p, r))) return false;
  let ro: string | undefined;
  for (const r of readOnly) if (isUnder(p, r) && (ro === undefined || r.length > ro.length)) ro = r;
  if (ro === undefined) return true;
  return writableAgain.some((a) => isUnder(p, a) && a !== ro && isUnder(a, ro));
}

/**
 * The folders a bubblewrap plan binds onto themselves (writable, as they were) so that none of the `readOnly` entries
 * inside the writable `roots` can be moved: a bind mount moves with its parent folder, and a folder that is a mount
 * point cannot be renamed (EBUSY). Without them the sandbox could rename the folder of a nested repository (its `.git`
 * bound read-only inside) and make another one, with a writable `.git`, at the old path. One per folder above an
 * entry that is not a mount point (a root, an entry, a folder bound writable again: `writableAgain`, see
 * {@link WritableRoot}) and lies in a folder the sandbox can write ({@link writableInModel}); only existing
 * folders (canonical paths in, canonical out). writable.ts `pinnedReadOnly` trusts an entry by path only where
 * these are bound.
 */
export function pinFolders(roots: readonly string[], readOnly: readonly string[], writableAgain: readonly string[] = []): string[] {
  const mounts = new Set([...roots, ...readOnly, ...writableAgain]);
  const writableDir = (d: string) => writableInModel(d, roots, readOnly, writableAgain);
  const out = new Set<string>();
  for (const p of readOnly)
    for (let a = dirname(p); a !== dirname(a); a = dirname(a)) {
      if (mounts.has(a) || out.has(a) || !writableDir(dirname(a))) continue;
      try {
        if (lstatSync(a).isDirectory()) out.add(a);
      } catch {
        // missing: the entry below it stays unpinned (writable.ts treats it as writable)
      }
    }
  return [...out];
}
