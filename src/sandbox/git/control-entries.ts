/**
 * What the git guard records (./guard.ts, docs/git-guard.md "What is guarded"): the repositories under a call's
 * writable roots, from the one discovery (./discover.ts), and of each git dir the control entries the sandbox
 * could write — {@link CONTROL_FILES} at its top, {@link CONTROL_DIRS} with everything in them — with the git dirs
 * it holds or names (linked worktrees, submodule git dirs, its common dir). Also whether a sandbox can change a path
 * at all ({@link changeable}) and whether a gitlink leads to a repository it could write ({@link nestedRepoWritable}).
 *
 * Everything here is read with `lstat`/`readdir` or through ../../untrusted-fs.ts: no link is followed, nothing blocks.
 */
import { readdirSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { readUntrustedText } from "../../untrusted-fs.ts";
import { visible } from "../../safe-text.ts";
import { isUnder } from "../paths.ts";
import { canonicalPath, canReplaceEntry, canWrite, type WritableView } from "../writable.ts";
import { discoverGitDirs, FIRST_SEARCH_MAX_DIRS, MAX_FRONTIER_BINDS } from "./discover.ts";
import { labelOf, lstatQuiet, type Entry, type EntryState } from "./entry-state.ts";

/** Entries recorded below one `hooks/` or `info/` folder (more: the folder is recorded as changed-or-not only). */
const MAX_DIR_ENTRIES = 256;
/** How deep `modules/` (submodule git dirs, nested by name) and `hooks/`/`info/` sub-folders are followed. */
const MAX_NESTING = 4;
/** Control files at the top of a git dir: git reads commands or another git dir's location from each. */
const CONTROL_FILES = ["config", "config.worktree", "commondir", "gitdir"];
/** Control folders of a git dir: their files are executed (hooks) or read as configuration (info). */
const CONTROL_DIRS = ["hooks", "info"];

/**
 * Whether the repository git would enter at `workTree/path` (a gitlink's folder) has a git dir the sandbox of `view`
 * could write (config, hooks, commondir): true also when there is no `.git` yet but the sandbox could create one,
 * and when its `.git` is anything but a folder or a readable `gitdir:` file (fail closed).
 */
export function nestedRepoWritable(workTree: string, path: string, view: WritableView): boolean {
  if (path.split("/").includes("..") || isAbsolute(path)) return true;
  const dotGit = join(workTree, path, ".git");
  const st = lstatQuiet(dotGit);
  if (st === undefined) return changeable(view, dotGit);
  let gitDir: string;
  if (st.isDirectory()) gitDir = dotGit;
  else if (st.isFile()) {
    const target = pointerTarget(dotGit);
    if (target === undefined) return true;
    gitDir = target;
  } else return true;
  const dirs = [gitDir];
  const common = readUntrustedText(join(gitDir, "commondir"));
  if (common.ok) dirs.push(resolve(gitDir, common.text.trim()));
  else if (common.why !== "missing") return true;
  return dirs.some((d) => [...CONTROL_FILES, ...CONTROL_DIRS].some((f) => changeable(view, join(d, f))));
}

/**
 * Whether the sandbox of `view` can change what is at `p`: write it (through a symlink, where it leads), or replace
 * the entry itself (a symlink `hooks -> /elsewhere` in a writable git dir can be swapped for a folder even when
 * `/elsewhere` is read-only).
 */
export function changeable(view: WritableView, p: string): boolean {
  if (view.full || canWrite(view, p)) return true;
  return canReplaceEntry(view, join(canonicalPath(dirname(p)), basename(p)));
}

/** One repository found: its `.git` pointer file, git dir and work tree, each when it has one. */
export interface FoundRepo {
  /** The folder's `.git` file, when it is one (a linked worktree or an absorbed submodule). */
  pointer?: string;
  gitDir?: string;
  workTree?: string;
}

/**
 * Repositories under `roots`, from the one discovery (./discover.ts: work trees' `.git` folders and files, bare
 * repositories and other git dirs at any depth, the originals recorded when each root was first planned, first).
 * `truncated` stays empty: a root whose complete search stopped at its bound has a frontier of folders not searched,
 * and when `view` lets the sandbox write one of them (Landlock, or more than bubblewrap binds) this throws, so the
 * call is refused with the reason instead of running with repositories nobody checks.
 */
export function findGitDirs(roots: readonly string[], view: WritableView): { repos: FoundRepo[]; truncated: string[] } {
  const found = discoverGitDirs(roots);
  const open = found.frontier.find((f) => canWrite(view, f));
  if (open !== undefined) {
    const root = roots.find((r) => isUnder(open, r)) ?? open;
    throw new Error(
      `${visible(root)} holds more than ${FIRST_SEARCH_MAX_DIRS} folders, so shellmcp could not search all of it for git repositories, ` +
        `and this sandbox cannot keep the ${found.frontier.length} folders it did not search (${visible(open)}, …) read-only; ` +
        `narrow the writable folders (a smaller working folder, \`exclude_slash_tmp\`, fewer \`writable_roots\`)` +
        `${found.frontier.length <= MAX_FRONTIER_BINDS ? ", or use the bubblewrap backend" : ""}`,
    );
  }
  return {
    repos: found.repos.map((e) => ({
      ...(e.pointer !== undefined ? { pointer: e.pointer } : {}),
      ...(e.gitDir !== undefined ? { gitDir: e.gitDir } : {}),
      ...(e.workTree !== undefined ? { workTree: e.workTree } : {}),
    })),
    truncated: [],
  };
}

/** The git dir a `.git` file points at (`gitdir: <path>`, relative to the file's folder), or undefined. */
function pointerTarget(dotGit: string): string | undefined {
  const r = readUntrustedText(dotGit, { maxBytes: 4096 });
  if (!r.ok) return undefined;
  const m = /^gitdir:\s*(.+?)\s*$/m.exec(r.text);
  if (m === null) return undefined;
  const target = canonicalPath(resolve(dirname(dotGit), m[1]!));
  return lstatQuiet(target)?.isDirectory() === true ? target : undefined;
}

/**
 * `gitDir` and the git dirs it holds or names: its linked worktrees' admin folders (`worktrees/*`), its submodule
 * git dirs (`modules/**`), and its common dir (`commondir`, for a linked worktree's admin folder).
 */
export function gitDirFamily(gitDir: string): string[] {
  const out = [gitDir];
  const common = readUntrustedText(join(gitDir, "commondir"), { maxBytes: 4096 });
  if (common.ok) {
    const c = canonicalPath(resolve(gitDir, common.text.trim()));
    if (lstatQuiet(c)?.isDirectory() === true) out.push(c);
  }
  for (const g of [...out]) {
    for (const w of subdirs(join(g, "worktrees"))) out.push(w);
    out.push(...moduleGitDirs(join(g, "modules"), 0));
  }
  return out;
}

/** Submodule git dirs below `dir` (names with slashes are nested folders; a git dir holds `objects/`). */
function moduleGitDirs(dir: string, depth: number): string[] {
  if (depth > MAX_NESTING) return [];
  return subdirs(dir).flatMap((c) =>
    lstatQuiet(join(c, "objects"))?.isDirectory() === true
      ? [c, ...moduleGitDirs(join(c, "modules"), depth + 1)]
      : moduleGitDirs(c, depth + 1),
  );
}

/** Real sub-folders of `dir` (not symlinks). */
function subdirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => join(dir, d.name));
  } catch {
    return [];
  }
}

/** Record the control entries of git dir `g` that `guarded` says the sandbox could write. */
export function recordGitDir(g: string, guarded: (p: string) => boolean, entries: Entry[], stateOf: (p: string) => EntryState): void {
  for (const f of CONTROL_FILES) {
    const p = join(g, f);
    if (guarded(p)) entries.push({ path: p, state: stateOf(p), base: g, label: labelOf(p) });
  }
  for (const d of CONTROL_DIRS) {
    const p = join(g, d);
    if (guarded(p)) recordTree(p, g, entries, 0, stateOf);
  }
}

/** Record `p` and, when it is a real folder, everything below it (up to {@link MAX_NESTING} levels). */
function recordTree(p: string, base: string, entries: Entry[], depth: number, stateOf: (p: string) => EntryState): void {
  const state = stateOf(p);
  if (state.kind !== "dir") {
    entries.push({ path: p, state, base, label: labelOf(p) });
    return;
  }
  let names: string[];
  try {
    names = readdirSync(p);
  } catch {
    names = [];
  }
  if (names.length > MAX_DIR_ENTRIES || depth >= MAX_NESTING) {
    // Too many to keep: compared by what it holds (names), never emptied.
    entries.push({
      path: p,
      state: { kind: "other", what: "a large folder", fingerprint: names.sort().join("\0") },
      base,
      label: labelOf(p),
    });
    return;
  }
  entries.push({ path: p, state, base, children: true, label: labelOf(p) });
  for (const n of names) recordTree(join(p, n), base, entries, depth + 1, stateOf);
}
