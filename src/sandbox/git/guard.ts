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
 *    sandbox could write. The report (./report.ts `formatGitGuardReport`) is written for a model to pass on to a
 *    human.
 *
 * Everything the sandbox could have written is read through ../untrusted-fs.ts (no FIFO or device can block the
 * server, no symlink is followed) or with `lstat`/`readdir`/`readlink`, which never follow the last link. Restores
 * never follow a link either, and no longer trust that nothing runs meanwhile (sessions and parallel calls do):
 * each goes through a descriptor of its folder reached from `/` without links and checked against the identity
 * recorded at the snapshot, then `*at` calls relative to it (./repair.ts, through ./restore.ts); under `serve` a
 * batch runs in a child confined by Landlock to those folders (../linux/git-repair-child.ts, given as
 * {@link GitGuardOptions.repair}).
 * Files are written to a new name with `O_EXCL | O_NOFOLLOW` and renamed over the old entry (a link is replaced,
 * never written through), and a `hooks/` that became a symlink is removed and made a folder again first.
 *
 * Who changed it (issue 38 item 2): the guard keeps per entry the state it last accepted and the intervals when a
 * sandbox of this server could run (each call and session, snapshot to check, with its writable view). A change
 * no sandbox able to make it could have made since the entry's last comparison is the user's, accepted and kept;
 * any other is undone, its changed version first copied aside under {@link GitGuardOptions.keptDir}.
 *
 * This file is the guard itself: the known states, the sandboxes that ran, and the judgement of who changed what.
 * Beside it, one file per concern: ./control-entries.ts (which repositories and entries are recorded),
 * ./entry-state.ts (an entry's state: read, compared, described), ./index-watch.ts (the index and the gitlinks it
 * gains), ./restore.ts (putting entries back, one batch per comparison), ./kept-aside.ts (copies of the changed
 * versions), ./report.ts (the words in the result).
 */
import { dirname, join } from "node:path";
import type { WritableView } from "../writable.ts";
import { changeable, findGitDirs, gitDirFamily, nestedRepoWritable, recordGitDir } from "./control-entries.ts";
import {
  cachedStateOf,
  currentState,
  describeChange,
  identOf,
  labelOf,
  lstatQuiet,
  sameState,
  stateOf,
  statKey,
  type Entry,
  type EntryState,
  type FileCache,
} from "./entry-state.ts";
import { IndexWatch, type IndexState } from "./index-watch.ts";
import { keepAside, type AsideFolder } from "./kept-aside.ts";
import { runRepairs, type RepairOp, type RepairResult } from "./repair.ts";
import { extraChildren, recordIdents, Repairs, restoreEntry } from "./restore.ts";
import { noteGitDirSeen, noteGuardWrite, untaintedNow } from "./taint.ts";

/** Folder levels searched below each writable root for repositories (the root itself is level 0). */
export const MAX_SEARCH_DEPTH = 4;
/** Folders read in all, per call, while searching for repositories (breadth-first: shallow ones first). */
export const MAX_SEARCH_DIRS = 3000;
/** Git dirs recorded per call (repositories, linked worktrees and submodule git dirs together). */
export const MAX_GIT_DIRS = 200;
/** Gitlinks of one index whose `.git` is recorded. */
const MAX_GITLINKS = 256;

/**
 * Bytes of control files (hooks, `info/`, config, pointers) kept per snapshot (index bytes kept per server:
 * ./index-watch.ts `MAX_KEPT_INDEX_TOTAL_BYTES`): past it a file is compared by its stat key only (a change is
 * reported as not put back). Without it the sandbox chose the server's memory: sparse 1 MiB files in the hooks of
 * 200 nested repositories (review of issue 34, hole 3).
 */
export const MAX_KEPT_FILE_BYTES = 32 << 20;
/** Bytes of control files kept across calls as the guard's known states (see {@link GitGuard}); past it, by stat. */
export const MAX_KEPT_KNOWN_BYTES = 64 << 20;

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
   * this process, through the same checked folder descriptors (./repair.ts).
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
  /** The indexes: kept by stat key across calls, and the baseline of the calls in flight (./index-watch.ts). */
  private readonly indexes = new IndexWatch();
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
   * view is full-write (an unsandboxed call: nothing to guard). A path that cannot be read is recorded as such and
   * compared by its stat. Throws (an `Error` whose message says why and what to narrow) only when the search for
   * repositories stopped at its bound in a folder this sandbox could write (./control-entries.ts `findGitDirs`): the
   * call is then refused before anything runs. A change found now is the user's, and kept, when no sandbox of this server
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
    const { entries, indexes, gitDirs, truncated } = this.record(view, stateOf);
    // The identity of every folder the guard may write in: a repair refuses a folder that is not this one.
    const folders = recordIdents(
      entries,
      indexes.map((i) => i.path),
    );
    this.indexes.useBaseline(indexes, this.running);
    // Compare with what the guard accepted last.
    const seq = ++this.seq;
    const { undone, failed } = this.compareWithKnown(entries, folders, seq);
    this.boundKnown(new Set(entries.map((e) => e.path)));
    const run: Run = { view, start: seq };
    this.runs.push(run);
    return { entries, indexes, truncated, gitDirs, tookMs: performance.now() - t0, folders, run, undone, failed };
  }

  /**
   * The first step of {@link snapshot}: find the repositories under the writable roots of `view` and record, of each
   * (up to {@link MAX_GIT_DIRS} git dirs), the control entries the sandbox could change, read with `stateOf`, and
   * its index with the `.git` of its gitlinks. `gitDirs`: git dirs recorded; `truncated`: the roots not fully
   * searched (all of them when the git dir bound was reached). Throws what ./control-entries.ts `findGitDirs` throws.
   */
  private record(
    view: WritableView,
    stateOf: (p: string) => EntryState,
  ): { entries: Entry[]; indexes: IndexState[]; gitDirs: number; truncated: string[] } {
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
        const idx = this.indexes.indexOf(join(repo.gitDir, "index"), repo.workTree);
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
    return { entries, indexes, gitDirs: seen.size, truncated };
  }

  /**
   * The comparison of {@link snapshot} (number `seq`): each entry against the state the guard last accepted. A new
   * or changed entry no sandbox of this server able to change it could have touched since is the user's, accepted;
   * any other is undone (the changed version kept aside) through the checked `folders`, and a folder put back gets
   * its new identity there. Entries are updated in place (their state becomes the one put back; the entries of a
   * folder made again are appended). Returns the report lines: `undone`, and `failed` (could not be put back).
   */
  private compareWithKnown(entries: Entry[], folders: Map<string, string>, seq: number): { undone: string[]; failed: string[] } {
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
    return { undone, failed };
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
  private asideFolder(): AsideFolder | undefined {
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
    aside: AsideFolder | undefined,
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
        const r = this.indexes.checkIndex(idx, view, repair);
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
    if (this.running === 0) this.indexes.clearBaseline();
    const truncated = snap.truncated.filter((r) => !this.reportedTruncated.has(r));
    for (const r of truncated) this.reportedTruncated.add(r);
    return { undone, failed, truncated, tookMs: performance.now() - t0 };
  }
}
