/**
 * The git guard's watch on each repository's index (./guard.ts; docs/git-guard.md): an escalated `git add` in a
 * room may write the index and record there a nested repository the sandbox made (a gitlink), whose own config git
 * then runs on the human's next `git status`. The snapshot records each index (its stat key, its bytes while they fit
 * the bounds, and its gitlinks; kept across calls while its stat key is unchanged); the check restores the index
 * from the snapshot (or moves it aside) when it gained a gitlink whose repository the sandbox could write, and
 * disables that repository's `.git`.
 */
import { basename, dirname, isAbsolute, join } from "node:path";
import { MAX_INDEX_BYTES, readUntrusted } from "../../untrusted-fs.ts";
import type { WritableView } from "../writable.ts";
import { nestedRepoWritable } from "./control-entries.ts";
import { labelOf, lstatQuiet, statKey } from "./entry-state.ts";
import { gitlinksOf } from "./layout.ts";
import type { Repairs } from "./restore.ts";

/** Index bytes kept in memory per repository to restore it; a larger index is moved aside instead. */
export const MAX_KEPT_INDEX_BYTES = 16 << 20;
/**
 * Index bytes kept per server, all repositories together: past it an index is moved aside rather than restored
 * (see ./guard.ts `MAX_KEPT_FILE_BYTES`, review of issue 34, hole 3).
 */
export const MAX_KEPT_INDEX_TOTAL_BYTES = 64 << 20;

/**
 * An index as recorded: its `path` and the `workTree` it belongs to, its stat key (`"absent"` when there is none),
 * bytes (when kept), gitlinks (paths relative to the work tree; undefined: not parseable) and its report label.
 */
export interface IndexState {
  path: string;
  workTree: string;
  key: string;
  data?: Buffer;
  gitlinks?: Set<string>;
  label: string;
}

/**
 * The indexes of one guard: their states kept across calls by stat key, and the baseline the calls in flight are
 * checked against. One per guard (./guard.ts `GitGuard`); not shared between threads.
 */
export class IndexWatch {
  private readonly indexCache = new Map<string, { key: string; data?: Buffer; gitlinks?: Set<string> }>();
  /** Indexes as recorded by the first of the calls in flight (see {@link checkIndex}). */
  private indexBaseline = new Map<string, IndexState>();

  /**
   * Settle the indexes a snapshot recorded against the calls in flight (`running`: sandboxes running before this
   * one). With none, they become the baseline and the cache forgets the indexes of repositories no longer found;
   * otherwise each index already in the baseline is replaced in `indexes` (in place) by the baseline's state, so a
   * change made by a call in flight is still found, and the others join the baseline.
   */
  useBaseline(indexes: IndexState[], running: number): void {
    if (running === 0) {
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
  }

  /** Forget the baseline (no sandbox of the guard runs any more). */
  clearBaseline(): void {
    this.indexBaseline.clear();
  }

  /** Index bytes kept in the cache for every repository but `except`. */
  private keptIndexBytes(except: string): number {
    let n = 0;
    for (const [k, v] of this.indexCache) if (k !== except) n += v.data?.length ?? 0;
    return n;
  }

  /** The index at `path` as recorded now (bytes reused while its stat key is unchanged). */
  indexOf(path: string, workTree: string): IndexState | undefined {
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
  checkIndex(idx: IndexState, view: WritableView, repair: Repairs): (() => { ok: boolean; line: string }) | undefined {
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
