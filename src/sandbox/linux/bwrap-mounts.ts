/**
 * The mount part of a bubblewrap argv ({@link bwrapMounts}, docs/sandbox.md "Bubblewrap backend"): what a plan's
 * view of the filesystem is made of, in the order that decides what wins (a later bind covers an earlier one) —
 * `/`, a fresh `/dev`, the writable roots and the folders pinned so that no read-only entry can be moved, the
 * read-only re-binds with what is writable again inside them, the denied paths, Codex's daemon folder. Shared by the
 * call's sandbox (./bwrap.ts `planBwrap`) and the escalation room (../../escalate/rooms/build.ts).
 */
import { chmodSync, existsSync, lstatSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join, sep } from "node:path";
import { ShellmcpError } from "../../errors.ts";
import type { FilesystemPlan } from "../filesystem-plan.ts";
import { FIRST_SEARCH_MAX_DIRS, frontierTooLarge } from "../git/discover.ts";
import { foundByDiscovery } from "../git/nested.ts";
import { configCarveOuts, rootInConfigDir } from "../protected-config.ts";
import { outermost } from "../secrets.ts";
import { pinFolders, type WritableRoot } from "../writable-model.ts";
import { DENY_FILE } from "./mount-markers.ts";
import { denyDir, holdMountPoint } from "./mount-points.ts";
import { closedFolderOnTheWay } from "./sandbox-reach.ts";

/**
 * The mount part of a bwrap argv for `plan` (docs/sandbox.md, "Bubblewrap backend"): `/` read-only (or writable),
 * a fresh `/dev`, every writable root (except one inside a protected config folder), then every read-only re-bind
 * (the plan's, and the protected config folders inside any writable root: policy.ts `configCarveOuts`), then the
 * denied paths, then Codex's daemon folder hidden. Host-side mount points it creates are appended to `created`,
 * temporary folders to `tempDirs` (give both back with ./mount-points.ts `releaseBwrapPlan`). Throws
 * `SANDBOX_UNAVAILABLE` when a protected or denied path is a symlink, or when a root holds more folders than its
 * git-dir search could look at. Shared by the call's sandbox (./bwrap.ts `planBwrap`) and the escalation room
 * (../../escalate/rooms/build.ts).
 */
export function bwrapMounts(plan: FilesystemPlan, created: string[], tempDirs: string[]): string[] {
  const argv: string[] = [];
  argv.push(...(plan.fullWrite ? ["--bind", "/", "/"] : ["--ro-bind", "/", "/"]));
  argv.push("--dev", "/dev");
  // Mount order decides what wins: a later bind covers an earlier one. Every writable root is bound first,
  // shallowest first (a nested writable root stays writable); then every read-only re-bind, shallowest first,
  // so that no writable bind — `/tmp` and `$TMPDIR` included, whatever their order in the policy — can cover
  // a protected path (a project under /tmp keeps its `.git` read-only).
  const roots = boundRoots(plan);
  const layout = mountLayout(plan, roots);
  argv.push(...writableBinds(layout));
  refuseSymlinks(layout.subpaths);
  argv.push(...readOnlyLayers(layout, created));
  argv.push(...deniedMounts(plan, roots, created, tempDirs));
  // Hide Codex's app-server socket folder, as Codex 0.169 does: a sandboxed command must not reach a daemon
  // that runs outside the sandbox. (After the writable binds, which may re-expose /tmp.)
  const daemonDir = `/tmp/codex-daemon-${process.getuid?.() ?? 0}`;
  if (existsSync(daemonDir)) argv.push("--perms", "000", "--tmpfs", daemonDir, "--remount-ro", daemonDir);
  return argv;
}

/**
 * The writable roots of `plan` that are bound writable: all but one inside a protected config folder (CODEX_HOME
 * and /etc/codex are never writable, whatever plan this is — a call's, or a room's with the roots it adds; one
 * inside a root is re-bound read-only by {@link mountLayout}, or, missing, kept from being created). Throws
 * `SANDBOX_UNAVAILABLE` (with `path`) for a root whose git-dir search stopped with more folders unsearched than can
 * be bound (../git/discover.ts): in the server the git guard refuses such a call before it gets here; a helper
 * process planning its own mounts refuses too.
 */
function boundRoots(plan: FilesystemPlan): WritableRoot[] {
  const roots = plan.writableRoots.filter((w) => rootInConfigDir(w.root) === undefined);
  for (const w of roots) {
    const n = frontierTooLarge(w.root);
    if (n !== undefined)
      throw new ShellmcpError(
        "SANDBOX_UNAVAILABLE",
        `${w.root} holds more than ${FIRST_SEARCH_MAX_DIRS} folders, so its ${n} folders not searched for git repositories cannot be kept read-only: narrow the writable folders`,
        { path: w.root },
      );
  }
  return roots;
}

/**
 * What the binds of a plan's writable roots are made of ({@link mountLayout}); every path canonical and absolute.
 * Lists in depth order are shallowest first, then by name.
 */
interface MountLayout {
  /** The writable roots bound ({@link boundRoots}), in depth order. */
  sortedRoots: WritableRoot[];
  /** Every root's read-only subpaths and the protected config folders inside it, deduplicated, in depth order. */
  subpaths: string[];
  /**
   * Folders bound writable again inside a read-only subpath (a bare repository's `objects/`, `refs/`: policy.ts
   * `nestedGit`), each after its read-only parent, with what lies read-only inside them after them.
   */
  again: string[];
  /**
   * Roots that lie inside another root's read-only subpath (a room's submodule git dir inside the call's read-only
   * `.git`): bound again after that subpath, with their own read-only subpaths after them.
   */
  nestedInReadOnly: WritableRoot[];
  /**
   * The folders above a read-only entry that the sandbox could rename (a nested repository's folder, with its
   * read-only .git inside), bound onto themselves: a mount point cannot be renamed (../writable-model.ts
   * `pinFolders`).
   */
  pins: string[];
  /** {@link MountLayout.pins} as a set. */
  pinSet: Set<string>;
  /**
   * The paths whose bind must succeed (`--bind`, `--ro-bind`: a missing one fails the call); the others are the git
   * control entries the discovery found and the folders pinned only for them, bound with `-try`.
   */
  strict: Set<string>;
}

/**
 * The layout of the binds for `roots` (from {@link boundRoots}) and `plan`'s denied paths (which are pinned around
 * too). Reads which folders exist (for the pins); throws nothing of its own.
 */
function mountLayout(plan: FilesystemPlan, roots: WritableRoot[]): MountLayout {
  const sortedRoots = [...roots].sort(byDepth((r) => r.root));
  // A git control entry the discovery found behind another user's private folder cannot be bound by a root server's
  // bubblewrap (./sandbox-reach.ts): that folder is bound read-only instead, which holds whatever lies inside it.
  const closed = new Set<string>();
  const asRoot = process.getuid?.() === 0;
  const reachable = (p: string): string => {
    if (!asRoot || !foundByDiscovery(p)) return p;
    const root = sortedRoots.findLast((w) => w.root !== p && isUnderPath(p, w.root));
    const c = root === undefined ? undefined : closedFolderOnTheWay(p, root.root);
    if (c === undefined) return p;
    closed.add(c);
    return c;
  };
  const subpaths = [...new Set(roots.flatMap((w) => [...w.readOnlySubpaths, ...configCarveOuts(w.root)]).map(reachable))].sort(
    byDepth((p) => p),
  );
  const inClosed = (p: string) => [...closed].some((c) => p !== c && isUnderPath(p, c));
  const again = [...new Set(roots.flatMap((w) => w.writableAgain ?? []))].filter(
    (a) => subpaths.some((s) => s !== a && isUnderPath(a, s)) && !inClosed(a),
  );
  const nestedInReadOnly = sortedRoots.filter((w) => subpaths.some((sub) => sub !== w.root && isUnderPath(w.root, sub)));
  // The pins are bound with the roots, shallowest first; one inside a read-only subpath (below a folder bound
  // writable again) is bound after that folder.
  const pins = pinFolders(
    roots.map((w) => w.root),
    [...subpaths, ...plan.deniedPaths],
    again,
  );
  // A writable folder such as /tmp changes under the plan: another process may remove a repository the discovery
  // found between the plan and bwrap's mounts, and a bind of a missing source fails the whole sandbox. The git
  // control entries the discovery found (policy.ts `foundByDiscovery`) and the folders pinned only for them are
  // therefore bound with `-try` (skipped when gone: what is gone protects nothing, and what a command creates there
  // later is new, as for any folder it makes; the escalation boundary distrusts a control file made after its place
  // was handed out, ../git/taint.ts). Everything else stays strict: a missing one fails the call.
  const strict = new Set<string>(subpaths.filter((p) => !foundByDiscovery(p) && !closed.has(p)));
  for (const a of again) if (!foundByDiscovery(a)) strict.add(a);
  for (const pin of pins) if ([...strict].some((p) => isUnderPath(p, pin))) strict.add(pin);
  return { sortedRoots, subpaths, again, nestedInReadOnly, pins, pinSet: new Set(pins), strict };
}

/** Whether `p` lies strictly inside one of `layout`'s read-only subpaths. */
function insideReadOnly(layout: MountLayout, p: string): boolean {
  return layout.subpaths.some((s) => s !== p && isUnderPath(p, s));
}

/**
 * The writable binds (argv words, three per bind): the roots, and the pins not inside a read-only subpath, in one
 * depth order; a pin that is not strict with `--bind-try`.
 */
function writableBinds(layout: MountLayout): string[] {
  const argv: string[] = [];
  const binds = [...layout.sortedRoots.map((w) => w.root), ...layout.pins.filter((p) => !insideReadOnly(layout, p))].sort(
    byDepth((p) => p),
  );
  for (const b of binds) argv.push(layout.pinSet.has(b) && !layout.strict.has(b) ? "--bind-try" : "--bind", b, b);
  return argv;
}

/**
 * Throws `SANDBOX_UNAVAILABLE` (with `path`) when one of the read-only `subpaths` is a symlink: writing through it
 * would escape the read-only re-bind (Codex 0.169: "crosses writable symlink").
 */
function refuseSymlinks(subpaths: readonly string[]): void {
  for (const sub of subpaths) {
    let isLink = false;
    try {
      isLink = readlinkSync(sub) !== undefined;
    } catch {
      isLink = false;
    }
    if (isLink) {
      throw new ShellmcpError(
        "SANDBOX_UNAVAILABLE",
        `cannot enforce sandbox read-only path ${sub} because it crosses writable symlink ${sub}`,
        { path: sub },
      );
    }
  }
}

/**
 * The read-only layers (argv words, three per bind): the read-only subpaths, and inside them the folders bound
 * writable again and what is pinned or read-only below those, in one depth order (each covers what is above it);
 * then each root nested in a read-only subpath, bound again with its pins and layers after it. A missing subpath
 * gets an empty mount point made on the host (appended to `created`; a missing `.codex` in the cwd is kept from
 * being created, a missing folder bound writable again — a bare repository's `logs/`, policy.ts
 * `GIT_HELD_WRITABLE` — is made, bound writable); one that cannot be held is left out.
 */
function readOnlyLayers(layout: MountLayout, created: string[]): string[] {
  const { pins, pinSet, strict } = layout;
  const argv: string[] = [];
  const layered = (p: string): string[] => {
    if (pinSet.has(p) || layout.again.includes(p)) return [strict.has(p) ? "--bind" : "--bind-try", p, p];
    return [strict.has(p) ? "--ro-bind" : "--ro-bind-try", p, p];
  };
  const layers = [...layout.subpaths, ...layout.again, ...pins.filter((p) => insideReadOnly(layout, p))].sort(byDepth((p) => p));
  for (const p of layers) {
    if (!pinSet.has(p) && !holdMountPoint(p, created)) continue;
    argv.push(...layered(p));
  }
  for (const w of layout.nestedInReadOnly) {
    argv.push("--bind", w.root, w.root);
    const under = (p: string) => isUnderPath(p, w.root) && p !== w.root;
    for (const pin of pins.filter((p) => under(p) && !insideReadOnly(layout, p)).sort(byDepth((p) => p)))
      argv.push(strict.has(pin) ? "--bind" : "--bind-try", pin, pin);
    for (const p of layers.filter(under)) argv.push(...layered(p));
  }
  return argv;
}

/**
 * The mounts over `plan`'s denied paths (permission profiles' `deny`; argv words), after every bind so that none
 * re-exposes them; a denied path inside another one is hidden with it (a mount inside a hidden folder would fail the
 * call). A folder becomes an empty, unreadable, read-only tmpfs (as Codex 0.169); a file is covered by an empty file
 * of mode 000 bound read-only (EACCES: no capability inside can override it), made once in a private folder
 * appended to `tempDirs`; a hidden credential file or secret (../secrets.ts) by /dev/null bound read-only (it cannot
 * be opened there: the mounts of bwrap's user namespace are nodev), no file of ours on the host to clean up. A
 * missing one inside one of the writable `roots` is blocked from being created the same way (its mount point
 * appended to `created`); one elsewhere is left out. Throws `SANDBOX_UNAVAILABLE` (with `path`) for a denied path
 * that is a symlink, and the error of making the private folder or its file.
 */
function deniedMounts(plan: FilesystemPlan, roots: readonly WritableRoot[], created: string[], tempDirs: string[]): string[] {
  const argv: string[] = [];
  let unreadable: string | undefined;
  const hiddenFiles = new Set([...(plan.hidden?.stores ?? []), ...(plan.hidden?.secrets ?? [])]);
  for (const d of outermost(plan.deniedPaths).sort(byDepth((p) => p))) {
    let st: ReturnType<typeof statSync> | undefined;
    try {
      st = lstatSync(d);
    } catch {
      st = undefined;
    }
    if (st?.isSymbolicLink()) {
      throw new ShellmcpError("SANDBOX_UNAVAILABLE", `cannot enforce sandbox denied path ${d} because it is a symlink`, { path: d });
    }
    if (st !== undefined && !st.isDirectory()) {
      if (hiddenFiles.has(d)) {
        argv.push("--ro-bind", "/dev/null", d);
        continue;
      }
      if (unreadable === undefined) {
        const dir = denyDir();
        tempDirs.push(dir);
        unreadable = join(dir, DENY_FILE);
        writeFileSync(unreadable, "", { mode: 0 });
        chmodSync(unreadable, 0);
      }
      argv.push("--ro-bind", unreadable, d);
      continue;
    }
    if (st === undefined) {
      if (!roots.some((w) => isUnderPath(d, w.root))) continue;
      if (!holdMountPoint(d, created)) continue;
    }
    argv.push("--perms", "000", "--tmpfs", d, "--remount-ro", d);
  }
  return argv;
}

/** Sort key: fewer path components first, then by name (a stable, total order). */
function byDepth<T>(path: (t: T) => string): (a: T, b: T) => number {
  const depth = (p: string) => p.split("/").filter(Boolean).length;
  return (a, b) => depth(path(a)) - depth(path(b)) || (path(a) < path(b) ? -1 : path(a) > path(b) ? 1 : 0);
}

/** Whether absolute `path` is `root` or lies below it (by path only). */
function isUnderPath(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
