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
 * 2. {@link GitGuard.check}, once every process of the call has ended (rooms included): compare with the state
 *    the guard last accepted for each entry (not a "before" of the call: see "Who changed it" below), and undo each
 *    change — restore content and mode, remove what appeared, restore what disappeared, move aside what cannot be
 *    put back — and restore the index from the snapshot when it gained a gitlink whose nested repository the
 *    sandbox could write. The report ({@link formatGitGuardReport}) is written for a model to pass on to a human.
 *
 * Everything the sandbox could have written is read through ../untrusted-fs.ts (no FIFO or device can block the
 * server, no symlink is followed) or with `lstat`/`readdir`/`readlink`, which never follow the last link. Restores
 * never follow a link either, and no longer trust that nothing runs meanwhile (sessions and parallel calls do):
 * each goes through a descriptor of its folder reached from `/` without links and checked against the identity
 * recorded at the snapshot, then `*at` calls relative to it (./git/repair.ts); under `serve` a batch runs in a child
 * confined by Landlock to those folders (./linux/git-repair-child.ts, given as {@link GitGuardOptions.repair}).
 * Files are written to a new name with `O_EXCL | O_NOFOLLOW` and renamed over the old entry (a link is replaced,
 * never written through), and a `hooks/` that became a symlink is removed and made a folder again first.
 *
 * Who changed it (issue 38 item 2): the guard keeps per entry the state it last accepted and the intervals when a
 * sandbox of this server could run (each call and session, snapshot to check, with its writable view). A change
 * no sandbox able to make it could have made since the entry's last comparison is the user's, accepted and kept;
 * any other is undone, its changed version first copied aside under {@link GitGuardOptions.keptDir}.
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
import { gitlinksOf } from "./layout.ts";
import { discoverGitDirs, FIRST_SEARCH_MAX_DIRS, MAX_FRONTIER_BINDS } from "./discover.ts";
import { MAX_INDEX_BYTES, readUntrusted, readUntrustedText } from "../../untrusted-fs.ts";
import { visible } from "../../safe-text.ts";
import { isUnder } from "../paths.ts";
import { canonicalPath, canReplaceEntry, canWrite, type WritableView } from "../writable.ts";
import { noteGitDirSeen, noteGuardWrite, untaintedNow } from "./taint.ts";
import { DirFds, runRepairs, type RepairOp, type RepairResult } from "./repair.ts";

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
/** Bytes of control files kept across calls as the guard's known states (see {@link GitGuard}); past it, by stat. */
export const MAX_KEPT_KNOWN_BYTES = 64 << 20;

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
   * sandbox, ./taint.ts): what the guard puts back is trusted only then.
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
  /** `dev:ino` of every folder the guard may write in (git dirs, work trees, `hooks/`, `info/`), when recorded. */
  folders: Map<string, string>;
  /** This call's sandbox, in the guard's list of running ones until {@link GitGuard.check}. */
  run: Run;
  /** Changes the snapshot found and undid (a running sandbox's), reported with this call's result. */
  undone: string[];
  failed: string[];
}

/** One sandbox of the server (a call or a session): its writable view; `end`: the comparison it ended before. */
export interface Run {
  view: WritableView;
  /** The comparison its snapshot made (it ran after it). */
  start: number;
  end?: number;
}

/** Who made a change found at a snapshot (for the report). */
const WHILE_RUNNING = "while another call or session of this server was running";
/** Who made a change found at a check while other sandboxes ran too. */
const DURING_CALL = "while this command ran (by it, or by another call or session of this server running then)";

/** How a {@link GitGuard} is set up. */
export interface GitGuardOptions {
  /**
   * Folder (outside every writable root: the server's `$CODEX_HOME/shellmcp/git-kept`) where the changed version
   * of each entry the guard undoes is copied first (files mode 0600, folders 0700), so that a user whose own edit
   * was undone can take it back; undefined: nothing is kept.
   */
  keptDir?: string;
  /**
   * How a batch of repairs is carried out on Linux, one result per op (serve: in a short-lived child of this
   * executable confined by Landlock to the folders it repairs, src/sandbox/linux/git-repair-child.ts). Default: in
   * this process, through the same checked folder descriptors (./git/repair.ts).
   */
  repair?: (ops: readonly RepairOp[]) => RepairResult[];
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
   * Per entry, the state the guard last accepted (found when no sandbox of this server could have changed it, or
   * put back), whether it was trusted by the escalation boundary then, and the comparison (`seq`) it was last
   * confirmed at. A change is judged against this, never against a "before" a session took hours ago.
   */
  private readonly known = new Map<string, { state: EntryState; clean: boolean; ident?: string; seq: number; children?: boolean }>();
  /** Comparisons and sandbox starts/ends, numbered. */
  private seq = 0;
  /**
   * The sandboxes of this server (calls and sessions, by their writable view) running or ended since: a change to
   * an entry since its last comparison may be a sandbox's only when one that could change it ran since.
   */
  private runs: Run[] = [];
  /** Ended runs forgotten (bounded memory): an entry last compared before this counts as possibly changed by one. */
  private forgottenBefore = 0;
  /** Indexes as recorded by the first of the calls in flight (see {@link checkIndex}). */
  private indexBaseline = new Map<string, IndexState>();
  /** File states of the last snapshot by path, reused while the file's stat key is unchanged. */
  private files: FileCache = new Map();
  /** Where changed versions the guard undoes are kept aside (see {@link GitGuardOptions.keptDir}). */
  private readonly keptDir: string | undefined;
  private keptCount = 0;
  /** See {@link GitGuardOptions.repair}. */
  private readonly repairExe: (ops: readonly RepairOp[]) => RepairResult[];

  /** See {@link GitGuardOptions}. */
  constructor(o: GitGuardOptions = {}) {
    this.keptDir = o.keptDir;
    this.repairExe = o.repair ?? runRepairs;
  }

  /** Sandboxes running now (calls and sessions between their snapshot and their check). */
  get running(): number {
    return this.runs.filter((r) => r.end === undefined).length;
  }

  /** Whether a sandbox of this server that could change `p` may have run since comparison `since`. */
  private sandboxMayHaveChanged(p: string, since: number): boolean {
    if (since < this.forgottenBefore) return true;
    return this.runs.some((r) => (r.end === undefined || r.end > since) && changeable(r.view, p));
  }

  /**
   * Record the git control state under the writable roots of `view` (see the module's docs). Undefined when the
   * view is full-write (an unsandboxed call: nothing to guard). Never throws: a path that cannot be read is recorded
   * as such and compared by its stat. A change found now is the user's, and kept, when no sandbox of this server
   * that could make it has run since the entry was last compared; otherwise it is undone here (the changed version
   * kept aside) and reported with this call's result.
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
        noteGitDirSeen(g); // the escalation boundary's "was it there before" (./taint.ts)
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
    // The identity of every folder the guard may write in: a repair refuses a folder that is not this one.
    const folders = new Map<string, string>();
    for (const e of entries) {
      const ident = identOf(e.path);
      if (ident !== undefined) e.ident = ident;
      if (e.state.kind === "dir" && ident !== undefined) folders.set(e.path, ident);
    }
    for (const d of new Set([...entries.map((e) => dirname(e.path)), ...indexes.map((i) => dirname(i.path))]))
      if (!folders.has(d)) {
        const ident = identOf(d);
        if (ident !== undefined) folders.set(d, ident);
      }
    if (this.running === 0) {
      // Forget the indexes of repositories no longer found (their bytes are the cache's memory).
      const live = new Set(indexes.map((i) => i.path));
      for (const k of [...this.indexCache.keys()]) if (!live.has(k)) this.indexCache.delete(k);
      this.indexBaseline = new Map(indexes.map((i) => [i.path, i]));
    } else
      for (let i = 0; i < indexes.length; i++) {
        const b = this.indexBaseline.get(indexes[i]!.path);
        if (b !== undefined) indexes[i] = b;
        else this.indexBaseline.set(indexes[i]!.path, indexes[i]!);
      }
    // Compare with what the guard accepted last.
    const seq = ++this.seq;
    const undone: string[] = [];
    const failed: string[] = [];
    const aside = this.asideFolder();
    const repair = new Repairs(folders, this.repairExe);
    const pending: (() => { ok: boolean; text: string })[] = [];
    try {
      for (const e of [...entries].sort((a, b) => a.path.length - b.path.length)) {
        const k = this.known.get(e.path);
        const parent = this.known.get(dirname(e.path));
        if (k === undefined) {
          // New since the last comparison: inside a folder whose every entry was known and that a sandbox could
          // have written since, it was created by one (or by the user meanwhile: kept aside).
          if (parent?.children === true && parent.state.kind === "dir" && this.sandboxMayHaveChanged(e.path, parent.seq)) {
            pending.push(this.undo(e, { kind: "absent" }, e.state, repair, aside, WHILE_RUNNING));
            this.known.set(e.path, { state: { kind: "absent" }, clean: true, seq });
            e.state = { kind: "absent" };
            e.clean = true;
            continue;
          }
          e.clean = untaintedNow(e.path);
          this.known.set(e.path, { state: e.state, clean: e.clean, seq, ...(e.children ? { children: true } : {}) });
          continue;
        }
        // A state kept by its stat key only (memory bound): unchanged while the key is; then kept in full again.
        if (k.state.kind === "other" && k.state.byStat === true && e.state.kind === "file") {
          const st = lstatQuiet(e.path);
          if (st !== undefined && statKey(st) === k.state.fingerprint) k.state = e.state;
        }
        if (sameState(k.state, e.state)) {
          k.seq = seq;
          if (e.children === true) k.children = true;
          else delete k.children;
          e.clean = k.clean;
          continue;
        }
        if (this.sandboxMayHaveChanged(e.path, k.seq)) {
          pending.push(this.undo(e, k.state, e.state, repair, aside, WHILE_RUNNING));
          k.seq = seq;
          // A folder whose entries were all known (`hooks/`) that is a link or file now: made a folder again, with
          // the entries it had (this snapshot could not record them through the link).
          if (k.state.kind === "dir" && k.children === true && e.state.kind !== "dir") {
            e.children = true;
            const below = [...this.known.entries()].filter(([p]) => p.startsWith(`${e.path}/`)).sort((x, y) => x[0].length - y[0].length);
            for (const [p, kk] of below) {
              const child: Entry = { path: p, state: kk.state, base: e.base, label: labelOf(p), clean: kk.clean };
              if (kk.children === true) child.children = true;
              entries.push(child);
              if (kk.state.kind !== "absent") pending.push(this.undo(child, kk.state, { kind: "absent" }, repair, aside, WHILE_RUNNING));
              kk.seq = seq;
            }
          }
          e.state = k.state;
          e.clean = k.clean;
          continue;
        }
        // Changed while no sandbox of this server could change it: the user's; accepted.
        e.clean = untaintedNow(e.path);
        this.known.set(e.path, { state: e.state, clean: e.clean, seq, ...(e.children ? { children: true } : {}) });
      }
      repair.flush();
      for (const l of pending) {
        const line = l();
        (line.ok ? undone : failed).push(line.text);
      }
      // A folder put back (a `hooks/` that was a link) is a new one: the check's repairs go into that one.
      if (pending.length > 0)
        for (const e of entries) {
          const ident = identOf(e.path);
          if (e.state.kind === "dir" && ident !== undefined && lstatQuiet(e.path)?.isDirectory() === true) folders.set(e.path, ident);
        }
    } finally {
      repair.close();
    }
    this.boundKnown(new Set(entries.map((e) => e.path)));
    const run: Run = { view, start: seq };
    this.runs.push(run);
    return { entries, indexes, truncated, gitDirs: seen.size, tookMs: performance.now() - t0, folders, run, undone, failed };
  }

  /**
   * Keep the known states' bytes under {@link MAX_KEPT_KNOWN_BYTES}: past it, the files of entries not in `current`
   * (repositories not seen by this snapshot), oldest comparison first, are kept by their stat key only (a change to
   * one is then reported as not put back, never taken for the user's).
   */
  private boundKnown(current: ReadonlySet<string>): void {
    let bytes = 0;
    for (const k of this.known.values()) if (k.state.kind === "file") bytes += k.state.data.length;
    if (bytes <= MAX_KEPT_KNOWN_BYTES) return;
    const old = [...this.known.entries()]
      .filter(([p, k]) => !current.has(p) && k.state.kind === "file")
      .sort((a, b) => a[1].seq - b[1].seq);
    for (const [p, k] of old) {
      if (bytes <= MAX_KEPT_KNOWN_BYTES) break;
      if (k.state.kind !== "file") continue;
      bytes -= k.state.data.length;
      const st = lstatQuiet(p);
      k.state = {
        kind: "other",
        what: "a file past the guard's memory bound",
        fingerprint: st === undefined ? "absent" : statKey(st),
        byStat: true,
      };
    }
  }

  /** The folder changed versions of this comparison are kept aside in (made on first use), or undefined. */
  private asideFolder(): { dir: string | undefined; made: boolean } | undefined {
    if (this.keptDir === undefined) return undefined;
    const stamp = new Date().toISOString().replace(/[:.]/g, "-");
    return { dir: join(this.keptDir, `${stamp}-${process.pid}-${++this.keptCount}`), made: false };
  }

  /**
   * Put `e` back to `want` (what it is now: `now`), keeping the changed version aside; the report line (once the
   * batch is flushed). `who`: who may have made the change, in words replacing "by the command" (undefined: this
   * call's command alone could have).
   */
  private undo(
    e: Entry,
    want: EntryState,
    now: EntryState,
    repair: Repairs,
    aside: { dir: string | undefined; made: boolean } | undefined,
    who: string | undefined,
  ): () => { ok: boolean; text: string } {
    const what = who === undefined ? describeChange(want, now) : describeChange(want, now).replace("by the command", who);
    const keptAt = keepAside(aside, e.label, now);
    const result = restoreEntry(e, want, repair);
    const k = this.known.get(e.path);
    const clean = k?.clean ?? e.clean === true;
    return () => {
      const why = result();
      if (why === undefined) noteGuardWrite(e.path, clean, () => sameState(want, stateOf(e.path)));
      else noteGuardWrite(e.path, false);
      const keptText =
        keptAt !== undefined
          ? `; the changed version is kept aside at ${keptAt} (not executable)`
          : aside?.dir !== undefined && now.kind === "file"
            ? "; no copy of the changed version was kept (the keep-aside folder is at its bound, or could not be written)"
            : "";
      if (why === undefined) return { ok: true, text: `${e.label}: ${what}; put back as it was${keptText}` };
      return { ok: false, text: `${e.label}: ${what}; could not be put back (${why})${keptText}` };
    };
  }

  /**
   * Compare the state now with what the guard accepted and undo every change (see the module's docs); `view` is
   * the call's writable view (the same as the snapshot's). Call exactly once per snapshot, once every process of
   * the call has ended (other calls may still run: their changes to control files are undone too, the changed
   * version kept aside). Never throws.
   */
  check(snap: GitSnapshot, view: WritableView): GitGuardReport {
    const t0 = performance.now();
    const seq = ++this.seq;
    snap.run.end = seq;
    // Whether another sandbox able to change `p` ran during this call: then the words do not blame this command.
    const others = (p: string) =>
      this.runs.some((r) => r !== snap.run && (r.end === undefined || r.end > snap.run.start) && changeable(r.view, p))
        ? DURING_CALL
        : undefined;
    const undone: string[] = [...snap.undone];
    const failed: string[] = [...snap.failed];
    // Parents before children: a `hooks/` put back as a folder before the hooks in it.
    const ordered = [...snap.entries].sort((a, b) => a.path.length - b.path.length);
    const recorded = new Set(ordered.map((e) => e.path));
    const byPath = new Map(ordered.map((e) => [e.path, e]));
    const aside = this.asideFolder();
    const repair = new Repairs(snap.folders, this.repairExe);
    const pending: (() => { ok: boolean; text: string })[] = [];
    // A hooks folder's ctime moves when the guard writes or removes an entry in it (the boundary judges a folder by
    // it: a folder renamed into place keeps its entries' old ctimes). Trusted again when it was trusted before and is
    // still the same folder.
    const folderWritten = (child: Entry) => {
      const f = byPath.get(dirname(child.path));
      if (f === undefined || f.state.kind !== "dir") return;
      noteGuardWrite(f.path, f.clean === true, () => f.ident !== undefined && identOf(f.path) === f.ident);
    };
    try {
      for (const e of ordered) {
        const k = this.known.get(e.path);
        const want = k?.state ?? e.state;
        const now = currentState({ ...e, state: want }, this.files);
        if (!sameState(want, now) && (e.gitlink === undefined || nestedRepoWritable(e.gitlink.workTree, e.gitlink.path, view))) {
          const line = this.undo(e, want, now, repair, aside, others(e.path));
          pending.push(() => {
            folderWritten(e);
            return line();
          });
        }
        if (k !== undefined) k.seq = seq;
        if (e.children === true && want.kind === "dir") {
          for (const extra of extraChildren(e, recorded, repair)) {
            const label = labelOf(extra);
            const x: Entry = { path: extra, state: { kind: "absent" }, base: e.base, label };
            const line = this.undo(x, { kind: "absent" }, stateOf(extra), repair, aside, others(extra));
            pending.push(() => {
              folderWritten(x);
              return line();
            });
          }
        }
      }
      for (const idx of snap.indexes) {
        const r = this.checkIndex(idx, view, repair);
        if (r !== undefined)
          pending.push(() => {
            const x = r();
            return { ok: x.ok, text: x.line };
          });
      }
      repair.flush();
      for (const l of pending) {
        const line = l();
        (line.ok ? undone : failed).push(line.text);
      }
    } finally {
      repair.close();
    }
    // Forget ended runs no comparison needs (bounded): keep the last 64.
    const ended = this.runs.filter((r) => r.end !== undefined);
    if (ended.length > 64) {
      const drop = ended.slice(0, ended.length - 64);
      for (const r of drop) this.forgottenBefore = Math.max(this.forgottenBefore, r.end!);
      this.runs = this.runs.filter((r) => !drop.includes(r));
    }
    if (this.running === 0) this.indexBaseline.clear();
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
  private checkIndex(idx: IndexState, view: WritableView, repair: Repairs): (() => { ok: boolean; line: string }) | undefined {
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
    const disabledLater = now === undefined ? () => "" : disableNested(idx.workTree, bad, repair);
    const gitDir = dirname(idx.path);
    const name = basename(idx.path);
    if (idx.data !== undefined || idx.key === "absent") {
      const result =
        idx.key === "absent"
          ? repair.run({ dir: gitDir, kind: "remove", name })
          : repair.run({ dir: gitDir, kind: "write", name, data: idx.data!, mode: 0o644 });
      return () => {
        const why = result();
        const disabled = disabledLater();
        if (why === undefined)
          return {
            ok: true,
            line: `${what}; the index was restored to its state before the command (other changes this command staged are unstaged again)${disabled}`,
          };
        return { ok: false, line: `${what}; the index could not be restored (${why})` };
      };
    }
    const aside = `${idx.path}.shellmcp-unsafe`;
    const result = repair.run({ dir: gitDir, kind: "rename", name, to: basename(aside) });
    return () => {
      const why = result();
      const disabled = disabledLater();
      if (why !== undefined) return { ok: false, line: `${what}; the index could not be moved aside (${why})` };
      return {
        ok: true,
        line: `${what}; the index was too large to keep a copy, so it was moved aside to ${aside} (run \`git reset\` to rebuild it from HEAD)${disabled}`,
      };
    };
  }
}

/** Suffix a disabled nested `.git` gets (see {@link disableNested}). */
const DISABLED_SUFFIX = ".shellmcp-disabled";

/**
 * Rename the `.git` of each nested repository `paths` (relative to `workTree`) to `.git` + {@link DISABLED_SUFFIX},
 * never through a symlink; returns the sentence for the report ("" when there was nothing to rename).
 */
function disableNested(workTree: string, paths: readonly string[], repair: Repairs): () => string {
  const planned: { p: string; result: () => string | undefined }[] = [];
  for (const p of paths) {
    if (p.split("/").includes("..") || isAbsolute(p)) continue;
    const dotGit = join(workTree, p, ".git");
    if (lstatQuiet(dotGit) === undefined) continue;
    planned.push({ p, result: repair.run({ dir: dirname(dotGit), kind: "rename", name: ".git", to: `.git${DISABLED_SUFFIX}` }) });
  }
  return () => {
    const done: string[] = [];
    const failed: string[] = [];
    for (const { p, result } of planned) {
      const why = result();
      if (why === undefined) done.push(`${p}/.git`);
      else failed.push(`${p}/.git (${why})`);
    }
    let out = "";
    if (done.length > 0)
      out += `; ${done.join(", ")} renamed to ${done.length === 1 ? "" : "each "}.git${DISABLED_SUFFIX} so that no git command enters ${done.length === 1 ? "it" : "them"} (rename it back only if you trust its config and hooks)`;
    if (failed.length > 0) out += `; could not rename ${failed.join(", ")}`;
    return out;
  };
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
  return canReplaceEntry(view, join(canonicalPath(dirname(p)), basename(p)));
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

/**
 * The writes of one comparison: on Linux each through a folder descriptor reached without links and checked
 * against the identity recorded at the snapshot (./git/repair.ts); elsewhere (macOS) by path after an `lstat` walk
 * (docs/git-guard.md, "Through what the guard writes").
 */
class Repairs {
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

/** Plan putting entry `e` back to `want`; the result (after {@link Repairs.flush}): undefined on success, else why not. */
function restoreEntry(e: Entry, want: EntryState, repair: Repairs): () => string | undefined {
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
function extraChildren(e: Entry, recorded: ReadonlySet<string>, repair: Repairs): string[] {
  return repair
    .list(e.path)
    .map((n) => join(e.path, n))
    .filter((p) => !recorded.has(p));
}

/**
 * Copy the changed version `now` of an entry labelled `label` into the comparison's kept-aside folder (made on
 * first use, mode 0700; files 0600, never executable): its path, or undefined when there is nothing to keep (not a
 * file) or no folder. Never throws.
 */
/**
 * Bytes and files this process keeps aside at most (all comparisons together). A sandbox that rewrites large hooks
 * call after call would otherwise fill the disk under CODEX_HOME; past the bound a change is still undone, only not
 * copied (the report then says no copy was kept).
 */
export const MAX_KEPT_ASIDE_BYTES = 64 << 20;
export const MAX_KEPT_ASIDE_FILES = 10_000;
const keptAside = { bytes: 0, files: 0, maxBytes: MAX_KEPT_ASIDE_BYTES };

/** Tests: set the bytes this process may still keep aside (`maxBytes`, counting from 0 again); returns the old bound. */
export function setKeptAsideBoundForTest(maxBytes: number): number {
  const before = keptAside.maxBytes;
  Object.assign(keptAside, { bytes: 0, files: 0, maxBytes });
  return before;
}

function keepAside(aside: { dir: string | undefined; made: boolean } | undefined, label: string, now: EntryState): string | undefined {
  if (aside?.dir === undefined || now.kind !== "file") return undefined;
  if (keptAside.bytes + now.data.length > keptAside.maxBytes || keptAside.files >= MAX_KEPT_ASIDE_FILES) return undefined;
  const parts = label.split("/").filter((c) => c !== "" && c !== "." && c !== "..");
  if (parts.length === 0) return undefined;
  const target = join(aside.dir, ...parts);
  try {
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    aside.made = true;
    const fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      for (let off = 0; off < now.data.length;) off += writeSync(fd, now.data, off, now.data.length - off);
      fchmodSync(fd, 0o600);
    } finally {
      closeSync(fd);
    }
    keptAside.bytes += now.data.length;
    keptAside.files++;
    return target;
  } catch {
    return undefined;
  }
}

/** A short name for `p`: from the folder that holds its `.git` (or the bare repository's folder) on. */
function labelOf(p: string): string {
  const i = p.lastIndexOf("/.git/");
  if (i >= 0) return p.slice(dirname(p.slice(0, i)).length + 1);
  return p;
}
