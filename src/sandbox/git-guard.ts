/**
 * The git guard (issue 34, docs/git-guard.md): after every call, the git control state of every repository under
 * the call's writable roots is as it was before the call, or the tool result says what could not be put back.
 *
 * git runs what its control files say — hooks, `core.fsmonitor`, `core.sshCommand`, filter drivers, aliases — and
 * it runs them on the host, outside any sandbox, the next time the human types `git commit` or `git status`. Where
 * the kernel can keep those files read-only (bubblewrap binds `.git` read-only), it does; where it cannot (Landlock:
 * every file under a writable root is writable), a call could plant a hook for the human's next commit. And an
 * escalated `git add` in a room, which may write the index, can record a nested repository the sandbox made (a
 * gitlink) whose own config git then runs on the human's next `git status`.
 *
 * So, per call:
 * 1. {@link GitGuard.snapshot}, before the command runs: find the repositories under the writable roots (a bounded
 *    breadth-first search: {@link MAX_SEARCH_DEPTH} levels, {@link MAX_SEARCH_DIRS} folders in all) and record, for
 *    each git dir, every control entry the sandbox could write: `config`, `config.worktree`, `commondir`, `gitdir`,
 *    `hooks/` and `info/` with their contents (bytes, mode, symlink targets), the work tree's `.git` pointer file,
 *    the same for linked worktrees (`worktrees/*`) and submodule git dirs (`modules/**`), the `.git` of every
 *    gitlink of the index, and the index itself (its bytes, kept across calls while its stat is unchanged).
 * 2. {@link GitGuard.check}, once every process of the call has ended (rooms included): compare, and undo each
 *    change — restore content and mode, remove what appeared, restore what disappeared, move aside what cannot be
 *    put back — and restore the index from the snapshot when it gained a gitlink whose nested repository the
 *    sandbox could write. The report ({@link formatGitGuardReport}) is written for a model to pass on to a human.
 *
 * Everything the sandbox could have written is read through ../untrusted-fs.ts (no FIFO or device can block the
 * server, no symlink is followed) or with `lstat`/`readdir`/`readlink`, which never follow the last link; restores
 * never follow a link either: every folder on the way is checked with `lstat` from the git dir down (nothing of the
 * call runs any more, so nothing races the check), files are written to a new name with `O_EXCL | O_NOFOLLOW` and
 * renamed over the old entry (a link is replaced, never written through), and a `hooks/` that became a symlink is
 * removed and made a folder again before its hooks are restored.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeSync,
  type BigIntStats,
} from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import { gitlinksOf } from "./git-layout.ts";
import { discoverGitDirs, FIRST_SEARCH_MAX_DIRS, MAX_FRONTIER_BINDS } from "./git/discover.ts";
import { MAX_INDEX_BYTES, readUntrusted, readUntrustedText } from "../untrusted-fs.ts";
import { visible } from "../safe-text.ts";
import { isUnder } from "./policy.ts";
import { canonicalPath, canWrite, type WritableView } from "./writable.ts";
import { noteGitDirSeen, noteGuardWrite, untaintedNow } from "./git-taint.ts";

/** Folder levels searched below each writable root for repositories (the root itself is level 0). */
export const MAX_SEARCH_DEPTH = 4;
/** Folders read in all, per call, while searching for repositories (breadth-first: shallow ones first). */
export const MAX_SEARCH_DIRS = 3000;
/** Git dirs recorded per call (repositories, linked worktrees and submodule git dirs together). */
export const MAX_GIT_DIRS = 200;
/** Entries recorded below one `hooks/` or `info/` folder (more: the folder is recorded as changed-or-not only). */
const MAX_DIR_ENTRIES = 256;
/** Gitlinks of one index whose `.git` is recorded. */
const MAX_GITLINKS = 256;
/** How deep `modules/` (submodule git dirs, nested by name) and `hooks/`/`info/` sub-folders are followed. */
const MAX_NESTING = 4;
/** Index bytes kept in memory per repository to restore it; a larger index is moved aside instead. */
export const MAX_KEPT_INDEX_BYTES = 16 << 20;
/**
 * Bytes of control files (hooks, `info/`, config, pointers) kept per snapshot, and index bytes kept per server: past
 * these a file is compared by its stat key only (a change is reported as not put back) and an index is moved aside
 * rather than restored. Without them the sandbox chose the server's memory: sparse 1 MiB files in the hooks of 200
 * nested repositories (review of issue 34, hole 3).
 */
export const MAX_KEPT_FILE_BYTES = 32 << 20;
export const MAX_KEPT_INDEX_TOTAL_BYTES = 64 << 20;

/** Control files at the top of a git dir: git reads commands or another git dir's location from each. */
const CONTROL_FILES = ["config", "config.worktree", "commondir", "gitdir"];
/** Control folders of a git dir: their files are executed (hooks) or read as configuration (info). */
const CONTROL_DIRS = ["hooks", "info"];

/** What one path was (or is): how it compares and how it is put back. */
type EntryState =
  | { kind: "absent" }
  | { kind: "file"; data: Buffer; mode: number }
  | { kind: "dir"; mode: number }
  | { kind: "link"; target: string }
  /** Not restorable (a FIFO, a device, a file over the size cap, unreadable): compared by its stat. */
  | { kind: "other"; what: string; fingerprint: string; byStat?: true };

/** One recorded path. `children`: a folder whose entries are all recorded (anything new in it is removed). */
interface Entry {
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
   * sandbox, ./git-taint.ts): what the guard puts back is trusted only then.
   */
  clean?: boolean;
  /** Device and inode when recorded (a folder the guard wrote in is trusted again only while it is the same one). */
  ident?: string;
}

/** An index as recorded: its stat key, bytes (when kept) and gitlinks (undefined: not parseable). */
interface IndexState {
  path: string;
  workTree: string;
  key: string;
  data?: Buffer;
  gitlinks?: Set<string>;
  label: string;
}

/**
 * The git control state of one call, taken by {@link GitGuard.snapshot} before the command runs: the entries to
 * compare, the indexes, the roots whose search stopped at a bound, and how long taking it took (ms).
 */
export interface GitSnapshot {
  entries: Entry[];
  indexes: IndexState[];
  /** Writable roots where the search stopped at {@link MAX_SEARCH_DIRS} or {@link MAX_GIT_DIRS} (not at the depth bound). */
  truncated: string[];
  /** Repositories (git dirs) found. */
  gitDirs: number;
  tookMs: number;
}

/**
 * What {@link GitGuard.check} did: `undone` (one line per change put back, with what the command had done),
 * `failed` (changes that could not be put back, with why: the human must look), `truncated` (roots not fully
 * searched, reported once per server), and how long the check took (ms).
 */
export interface GitGuardReport {
  undone: string[];
  failed: string[];
  truncated: string[];
  tookMs: number;
}

/**
 * The guard of one server: keeps what is worth keeping between calls (index bytes by stat key, roots already
 * reported as not fully searched). One per `serve` process; not shared between threads.
 */
export class GitGuard {
  private readonly indexCache = new Map<string, { key: string; data?: Buffer; gitlinks?: Set<string> }>();
  private readonly reportedTruncated = new Set<string>();
  /**
   * Calls between their snapshot and their check, and the state before the first of them: a call that starts while
   * another runs takes that state for every path both record, so it never takes what the running call's command
   * wrote for "before" (and puts it back after the running call's check removed it).
   */
  private active = 0;
  private baseline:
    | {
        entries: Map<string, EntryState>;
        /** Whether each entry's state was trusted when recorded, and what it was (see {@link Entry.clean}). */
        clean: Map<string, { clean: boolean; ident?: string }>;
        indexes: Map<string, IndexState>;
        folders: Set<string>;
        appeared: Set<string>;
      }
    | undefined;
  /** File states of the last snapshot by path, reused while the file's stat key is unchanged. */
  private files: FileCache = new Map();

  /**
   * Record the git control state under the writable roots of `view` (see the module's docs). Undefined when the
   * view is full-write (an unsandboxed call: nothing to guard). Never throws: a path that cannot be read is recorded
   * as such and compared by its stat.
   */
  snapshot(view: WritableView): GitSnapshot | undefined {
    if (view.full) return undefined;
    const t0 = performance.now();
    const previous = this.files;
    const files: FileCache = new Map();
    this.files = files;
    let kept = 0;
    const stateOf = (p: string) => {
      const st = cachedStateOf(p, previous, files, kept < MAX_KEPT_FILE_BYTES);
      if (st.kind === "file") kept += st.data.length;
      return st;
    };
    const found = findGitDirs(view.roots, view);
    const entries: Entry[] = [];
    const indexes: IndexState[] = [];
    const seen = new Set<string>();
    const guarded = (p: string) => changeable(view, p);
    for (const repo of found.repos) {
      if (repo.pointer !== undefined && guarded(repo.pointer)) {
        entries.push({ path: repo.pointer, state: stateOf(repo.pointer), base: dirname(repo.pointer), label: labelOf(repo.pointer) });
      }
      if (repo.gitDir === undefined || seen.has(repo.gitDir)) continue;
      for (const g of gitDirFamily(repo.gitDir)) {
        if (seen.has(g) || seen.size >= MAX_GIT_DIRS) continue;
        seen.add(g);
        noteGitDirSeen(g); // the escalation boundary's "was it there before" (./git-taint.ts)
        recordGitDir(g, guarded, entries, stateOf);
      }
      if (repo.workTree !== undefined) {
        const idx = this.indexOf(join(repo.gitDir, "index"), repo.workTree);
        if (idx !== undefined) {
          indexes.push(idx);
          // The `.git` of each gitlink: what git enters on `git status`.
          for (const p of [...(idx.gitlinks ?? [])].slice(0, MAX_GITLINKS)) {
            const dotGit = join(repo.workTree, p, ".git");
            if (guarded(dotGit))
              entries.push({
                path: dotGit,
                state: stateOf(dotGit),
                base: repo.workTree,
                gitlink: { workTree: repo.workTree, path: p },
                label: labelOf(dotGit),
              });
          }
        }
      }
    }
    const truncated = seen.size >= MAX_GIT_DIRS ? [...new Set([...found.truncated, ...view.roots])] : found.truncated;
    for (const e of entries) {
      e.clean = untaintedNow(e.path);
      const ident = identOf(e.path);
      if (ident !== undefined) e.ident = ident;
    }
    if (this.active === 0) {
      // Forget the indexes of repositories no longer found (their bytes are the cache's memory).
      const live = new Set(indexes.map((i) => i.path));
      for (const k of [...this.indexCache.keys()]) if (!live.has(k)) this.indexCache.delete(k);
    }
    if (this.active === 0 || this.baseline === undefined) {
      this.baseline = {
        entries: new Map(entries.map((e) => [e.path, e.state])),
        clean: new Map(entries.map((e) => [e.path, { clean: e.clean === true, ...(e.ident !== undefined ? { ident: e.ident } : {}) }])),
        indexes: new Map(indexes.map((i) => [i.path, i])),
        folders: new Set(entries.filter((e) => e.children === true).map((e) => e.path)),
        appeared: new Set(),
      };
    } else {
      const base = this.baseline;
      for (const e of entries) {
        const b = base.entries.get(e.path);
        if (b !== undefined) {
          e.state = b;
          const c = base.clean.get(e.path);
          e.clean = c?.clean === true;
          if (c?.ident !== undefined) e.ident = c.ident;
          else delete e.ident;
        }
        // Not recorded before but inside a folder whose every entry was: it appeared since (the running call's).
        else if (base.folders.has(dirname(e.path)) || base.appeared.has(dirname(e.path))) {
          e.state = { kind: "absent" };
          e.clean = true;
          base.appeared.add(e.path);
        } else {
          base.entries.set(e.path, e.state);
          base.clean.set(e.path, { clean: e.clean === true, ...(e.ident !== undefined ? { ident: e.ident } : {}) });
        }
      }
      for (let i = 0; i < indexes.length; i++) {
        const b = base.indexes.get(indexes[i]!.path);
        if (b !== undefined) indexes[i] = b;
        else base.indexes.set(indexes[i]!.path, indexes[i]!);
      }
    }
    this.active++;
    return { entries, indexes, truncated, gitDirs: seen.size, tookMs: performance.now() - t0 };
  }

  /**
   * Compare the state now with `snap` and undo every change (see the module's docs); `view` is the call's writable
   * view (the same as the snapshot's). Call exactly once per snapshot, once every process of the call has ended
   * (other calls may still run: their changes to control files are undone too). Never throws.
   */
  check(snap: GitSnapshot, view: WritableView): GitGuardReport {
    this.active = Math.max(0, this.active - 1);
    if (this.active === 0) this.baseline = undefined;
    const t0 = performance.now();
    const undone: string[] = [];
    const failed: string[] = [];
    // Parents before children: a `hooks/` put back as a folder before the hooks in it.
    const ordered = [...snap.entries].sort((a, b) => a.path.length - b.path.length);
    const recorded = new Set(ordered.map((e) => e.path));
    const byPath = new Map(ordered.map((e) => [e.path, e]));
    // A hooks folder's ctime moves when the guard writes or removes an entry in it (the boundary judges a folder by
    // it: a folder renamed into place keeps its entries' old ctimes). Trusted again when it was trusted before and is
    // still the same folder.
    const folderWritten = (child: Entry) => {
      const f = byPath.get(dirname(child.path));
      if (f === undefined || f.state.kind !== "dir") return;
      noteGuardWrite(f.path, f.clean === true, () => f.ident !== undefined && identOf(f.path) === f.ident);
    };
    for (const e of ordered) {
      const now = currentState(e, this.files);
      if (!sameState(e.state, now) && (e.gitlink === undefined || nestedRepoWritable(e.gitlink.workTree, e.gitlink.path, view))) {
        const why = restore(e, now);
        // What the guard writes moves ctime: the escalation boundary trusts it when the state put back was trusted
        // (./git-taint.ts) and is what is there now (a call running beside this one may write it meanwhile).
        if (why === undefined) noteGuardWrite(e.path, e.clean === true, () => sameState(e.state, stateOf(e.path)));
        else noteGuardWrite(e.path, false);
        folderWritten(e);
        if (why === undefined) undone.push(`${e.label}: ${describeChange(e.state, now)}; put back as it was`);
        else failed.push(`${e.label}: ${describeChange(e.state, now)}; could not be put back (${why})`);
      }
      if (e.children === true && e.state.kind === "dir") {
        for (const extra of extraChildren(e, recorded)) {
          const label = labelOf(extra);
          const why = removeEntry(e.base, extra);
          folderWritten({ ...e, path: extra });
          if (why === undefined) undone.push(`${label}: created by the command; removed`);
          else failed.push(`${label}: created by the command; could not be removed (${why})`);
        }
      }
    }
    for (const idx of snap.indexes) {
      const r = this.checkIndex(idx, view);
      if (r !== undefined) (r.ok ? undone : failed).push(r.line);
    }
    const truncated = snap.truncated.filter((r) => !this.reportedTruncated.has(r));
    for (const r of truncated) this.reportedTruncated.add(r);
    return { undone, failed, truncated, tookMs: performance.now() - t0 };
  }

  /** Index bytes kept in the cache for every repository but `except`. */
  private keptIndexBytes(except: string): number {
    let n = 0;
    for (const [k, v] of this.indexCache) if (k !== except) n += v.data?.length ?? 0;
    return n;
  }

  /** The index at `path` as recorded now (bytes reused while its stat key is unchanged). */
  private indexOf(path: string, workTree: string): IndexState | undefined {
    const st = lstatQuiet(path);
    if (st === undefined) return { path, workTree, key: "absent", gitlinks: new Set(), label: labelOf(path) };
    const key = statKey(st);
    const cached = this.indexCache.get(path);
    if (cached !== undefined && cached.key === key) return { path, workTree, ...cached, label: labelOf(path) };
    let data: Buffer | undefined;
    let gitlinks: Set<string> | undefined;
    if (st.isFile()) {
      const r = readUntrusted(path, { maxBytes: MAX_INDEX_BYTES });
      if (r.ok) {
        const links = gitlinksOf(r.data);
        gitlinks = links === undefined ? undefined : new Set(links);
        if (r.data.length <= MAX_KEPT_INDEX_BYTES && this.keptIndexBytes(path) + r.data.length <= MAX_KEPT_INDEX_TOTAL_BYTES) data = r.data;
      }
    }
    const entry = { key, ...(data !== undefined ? { data } : {}), ...(gitlinks !== undefined ? { gitlinks } : {}) };
    this.indexCache.set(path, entry);
    return { path, workTree, ...entry, label: labelOf(path) };
  }

  /**
   * Whether the index gained a gitlink whose nested repository the sandbox could write; if so, restore it from the
   * snapshot (or move it aside when its bytes were not kept). Undefined when there is nothing to report.
   */
  private checkIndex(idx: IndexState, view: WritableView): { ok: boolean; line: string } | undefined {
    const st = lstatQuiet(idx.path);
    const key = st === undefined ? "absent" : statKey(st);
    if (key === idx.key) return undefined;
    let now: Set<string> | undefined = new Set();
    if (st !== undefined) {
      if (!st.isFile()) now = undefined;
      else {
        const r = readUntrusted(idx.path, { maxBytes: MAX_INDEX_BYTES });
        const links = r.ok ? gitlinksOf(r.data) : undefined;
        now = links === undefined ? undefined : new Set(links);
        if (r.ok && links !== undefined) {
          // Remember it: the next call's snapshot need not read it again.
          this.indexCache.set(idx.path, {
            key,
            ...(r.data.length <= MAX_KEPT_INDEX_BYTES && this.keptIndexBytes(idx.path) + r.data.length <= MAX_KEPT_INDEX_TOTAL_BYTES
              ? { data: r.data }
              : {}),
            gitlinks: now,
          });
        }
      }
    }
    let bad: string[];
    if (now === undefined) bad = ["(the index can no longer be read, so its gitlinks are unknown)"];
    else {
      const before = idx.gitlinks ?? new Set<string>();
      bad = [...now].filter((p) => !before.has(p) && nestedRepoWritable(idx.workTree, p, view));
    }
    if (bad.length === 0) return undefined;
    this.indexCache.delete(idx.path);
    const what = `${idx.label}: the command recorded ${bad.map((p) => JSON.stringify(p)).join(", ")} as a submodule (gitlink) whose repository it could write itself, so the human's next \`git status\` would run that repository's config`;
    // The nested repositories stay in the work tree, where the human's next `git add -A` would record them again:
    // their `.git` is renamed so that no git command enters them.
    const disabled = now === undefined ? "" : disableNested(idx.workTree, bad);
    if (idx.data !== undefined || idx.key === "absent") {
      const why =
        idx.key === "absent" ? removeEntry(dirname(idx.path), idx.path) : writeFileAt(dirname(idx.path), idx.path, idx.data!, 0o644);
      if (why === undefined)
        return {
          ok: true,
          line: `${what}; the index was restored to its state before the command (other changes this command staged are unstaged again)${disabled}`,
        };
      return { ok: false, line: `${what}; the index could not be restored (${why})` };
    }
    const aside = `${idx.path}.shellmcp-unsafe`;
    const unsafe = unsafeParents(dirname(idx.path), idx.path);
    if (unsafe !== undefined) return { ok: false, line: `${what}; the index could not be moved aside (${unsafe})` };
    try {
      rmSync(aside, { force: true, recursive: true });
      renameSync(idx.path, aside);
    } catch (e) {
      return { ok: false, line: `${what}; the index could not be moved aside (${(e as Error).message})` };
    }
    return {
      ok: true,
      line: `${what}; the index was too large to keep a copy, so it was moved aside to ${aside} (run \`git reset\` to rebuild it from HEAD)${disabled}`,
    };
  }
}

/** Suffix a disabled nested `.git` gets (see {@link disableNested}). */
const DISABLED_SUFFIX = ".shellmcp-disabled";

/**
 * Rename the `.git` of each nested repository `paths` (relative to `workTree`) to `.git` + {@link DISABLED_SUFFIX},
 * never through a symlink; returns the sentence for the report ("" when there was nothing to rename).
 */
function disableNested(workTree: string, paths: readonly string[]): string {
  const done: string[] = [];
  const failed: string[] = [];
  for (const p of paths) {
    if (p.split("/").includes("..") || isAbsolute(p)) continue;
    const dotGit = join(workTree, p, ".git");
    if (lstatQuiet(dotGit) === undefined) continue;
    const why = unsafeParents(workTree, dotGit);
    if (why !== undefined) {
      failed.push(`${p}/.git (${why})`);
      continue;
    }
    try {
      const target = dotGit + DISABLED_SUFFIX;
      rmSync(target, { recursive: true, force: true });
      renameSync(dotGit, target);
      done.push(`${p}/.git`);
    } catch (e) {
      failed.push(`${p}/.git (${(e as Error).message})`);
    }
  }
  let out = "";
  if (done.length > 0)
    out += `; ${done.join(", ")} renamed to ${done.length === 1 ? "" : "each "}.git${DISABLED_SUFFIX} so that no git command enters ${done.length === 1 ? "it" : "them"} (rename it back only if you trust its config and hooks)`;
  if (failed.length > 0) out += `; could not rename ${failed.join(", ")}`;
  return out;
}

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
function changeable(view: WritableView, p: string): boolean {
  if (view.full || canWrite(view, p)) return true;
  const entry = join(canonicalPath(dirname(p)), basename(p));
  return !view.readOnly.some((r) => isUnder(entry, r)) && view.roots.some((r) => isUnder(entry, r));
}

/**
 * The text appended to a call's result for `report`; empty when there is nothing to say. `withTruncated`: also say
 * which roots were not fully searched (where the guard is the only protection, under Landlock; elsewhere the caller
 * logs them).
 */
export function formatGitGuardReport(report: GitGuardReport, withTruncated = true): string {
  const parts: string[] = [];
  if (report.undone.length > 0 || report.failed.length > 0) {
    parts.push(
      "shellmcp: this command changed git control files (hooks, config, submodule links) that git would later run outside the sandbox, on the user's next git command. " +
        (report.failed.length === 0
          ? "They were put back as they were before the command."
          : "Some could NOT be put back: the user must check them before running git there.") +
        " Tell the user; if a change was intended, the user can make it outside the sandbox.",
    );
    // Labels, link targets and reasons hold names the command chose: rendered by ../safe-text.ts (one line each).
    for (const l of report.undone) parts.push(`  undone: ${visible(l)}`);
    for (const l of report.failed) parts.push(`  NOT UNDONE: ${visible(l)}`);
  }
  for (const r of withTruncated ? report.truncated : [])
    parts.push(
      `shellmcp: ${visible(r)} holds more folders than the git guard searches per call (${MAX_SEARCH_DIRS} folders, ${MAX_GIT_DIRS} git dirs, breadth-first): git repositories in the part not searched are not checked after calls.`,
    );
  return parts.length === 0 ? "" : `\n${parts.join("\n")}\n`;
}

// ---------------------------------------------------------------------------------------------------------
// Finding repositories

interface FoundRepo {
  /** The folder's `.git` file, when it is one (a linked worktree or an absorbed submodule). */
  pointer?: string;
  gitDir?: string;
  workTree?: string;
}

/**
 * Repositories under `roots`, from the one discovery (./git/discover.ts: work trees' `.git` folders and files, bare
 * repositories and other git dirs at any depth, the originals recorded when each root was first planned, first).
 * `truncated` stays empty: a root whose complete search stopped at its bound has a frontier of folders not searched,
 * and when `view` lets the sandbox write one of them (Landlock, or more than bubblewrap binds) this throws, so the
 * call is refused with the reason instead of running with repositories nobody checks.
 */
function findGitDirs(roots: readonly string[], view: WritableView): { repos: FoundRepo[]; truncated: string[] } {
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
function gitDirFamily(gitDir: string): string[] {
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
function recordGitDir(g: string, guarded: (p: string) => boolean, entries: Entry[], stateOf: (p: string) => EntryState): void {
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

// ---------------------------------------------------------------------------------------------------------
// States, comparing, restoring

function lstatQuiet(p: string): BigIntStats | undefined {
  try {
    return lstatSync(p, { bigint: true });
  } catch {
    return undefined;
  }
}

/** `dev:ino` of `p` (not followed), or undefined when it cannot be had. */
function identOf(p: string): string | undefined {
  const st = lstatQuiet(p);
  return st === undefined ? undefined : `${st.dev}:${st.ino}`;
}

/** dev, inode, size, mtime and ctime (ns): any write changes ctime, which no unprivileged program can set back. */
function statKey(st: BigIntStats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}:${st.mode}`;
}

/** States of regular files by path, with the stat key they were read under. */
type FileCache = Map<string, { key: string; state: EntryState }>;

/**
 * {@link stateOf}, reusing the state in `previous` when the file's stat key is unchanged (a write changes ctime,
 * which no unprivileged program can set back); what it reads is remembered in `next`.
 */
function cachedStateOf(p: string, previous: FileCache, next: FileCache, keep = true): EntryState {
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
function currentState(e: Entry, files: FileCache): EntryState {
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
function stateOf(p: string): EntryState {
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

function sameState(a: EntryState, b: EntryState): boolean {
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
function describeChange(before: EntryState, now: EntryState): string {
  if (before.kind === "absent") return `created by the command (${describeState(now)})`;
  if (now.kind === "absent") return "removed by the command";
  if (before.kind === "file" && now.kind === "file") {
    if (before.data.equals(now.data)) return `its mode changed (${before.mode.toString(8)} → ${now.mode.toString(8)})`;
    return "its content was changed by the command";
  }
  if (before.kind === "dir" && now.kind === "dir") return `its mode changed (${before.mode.toString(8)} → ${now.mode.toString(8)})`;
  return `${describeState(before)} was replaced by ${describeState(now)}`;
}

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

/** Put entry `e` back as recorded; `now` is what is there. Undefined on success, else why not. */
function restore(e: Entry, now: EntryState): string | undefined {
  const s = e.state;
  switch (s.kind) {
    case "absent":
      return removeEntry(e.base, e.path);
    case "file":
      return writeFileAt(e.base, e.path, s.data, s.mode);
    case "dir": {
      const why = unsafeParents(e.base, e.path);
      if (why !== undefined) return why;
      try {
        if (now.kind !== "dir") {
          if (now.kind !== "absent") unlinkSync(e.path);
          mkdirSync(e.path, { mode: s.mode });
        }
        const fd = openSync(e.path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
        try {
          fchmodSync(fd, s.mode);
        } finally {
          closeSync(fd);
        }
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    }
    case "link": {
      const why = removeEntry(e.base, e.path);
      if (why !== undefined) return why;
      try {
        symlinkSync(s.target, e.path);
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    }
    case "other":
      return `it was ${s.what}, which is not kept`;
  }
}

/** Entries of folder `e` that were not recorded (created by the command). */
function extraChildren(e: Entry, recorded: ReadonlySet<string>): string[] {
  if (unsafeParents(e.base, join(e.path, "x")) !== undefined) return [];
  try {
    return readdirSync(e.path)
      .map((n) => join(e.path, n))
      .filter((p) => !recorded.has(p));
  } catch {
    return [];
  }
}

/** A short name for `p`: from the folder that holds its `.git` (or the bare repository's folder) on. */
function labelOf(p: string): string {
  const i = p.lastIndexOf("/.git/");
  if (i >= 0) return p.slice(dirname(p.slice(0, i)).length + 1);
  return p;
}
