/**
 * The git guard as a resource of one sandboxed run (issue 39, "one launch path"): {@link GitCheck.take} records the
 * control state under the run's writable roots before anything runs; {@link GitCheck.settle} compares once every
 * process of the run has ended, undoes what changed and gives the report for the result. Exactly one check per
 * snapshot (the guard counts the runs in flight: ./guard.ts), whatever way the run ends: `serve`'s calls and
 * sessions hold it on their `CallResources` stack (../../shell/call-resources.ts), the exec-server's processes and fs
 * operations settle it when they end.
 */
import { log } from "../../log.ts";
import { TRACE_STEPS, traceStep } from "../../trace-steps.ts";
import type { WritableView } from "../writable.ts";
import type { GitGuard, GitSnapshot } from "./guard.ts";
import { formatGitGuardReport } from "./report.ts";

/** One run's snapshot and its single check. */
export class GitCheck {
  private settled: Promise<string> | undefined;
  private report: string | undefined;
  private found: { undone: string[]; failed: string[] } = { undone: [], failed: [] };

  private constructor(
    private readonly guard: GitGuard,
    private readonly snap: GitSnapshot | undefined,
    private readonly view: WritableView,
    private readonly landlock: boolean,
    private readonly what: string,
  ) {}

  /**
   * Record the control state under `view` with `guard` (nothing to record for a view with no writable folder).
   * `landlock`: the run is enforced by Landlock (the report then also names folders not fully searched). `what`
   * names the run in the log ("call", "process p1"…). Throws `Error` with the reason when the state cannot be
   * recorded: the run must then be refused (never run unprotected).
   */
  static take(guard: GitGuard, view: WritableView, landlock: boolean, what = "call"): GitCheck {
    return new GitCheck(guard, guard.snapshot(view), view, landlock, what);
  }

  /** Whether a snapshot was taken (a check is then owed). */
  get owed(): boolean {
    return this.snap !== undefined;
  }

  /**
   * Once `ended` resolves (every process of the run has ended; undefined: now), check: undo what the run changed in
   * git's control files and resolve with the report for the result (empty when nothing changed). Without a snapshot
   * (a view that may write anywhere) it resolves with "" at once, not waiting for `ended`. The first call checks;
   * later calls return the same report. Never rejects: a failed check is reported in the text.
   */
  settle(ended?: Promise<unknown>): Promise<string> {
    // Nothing recorded (a run that may write anywhere): nothing to compare, so nothing to wait for; the run's late
    // releases still settle on their own (the result's `settled`), they just no longer hold up the answer.
    if (this.snap === undefined) this.settled ??= Promise.resolve((this.report = ""));
    this.settled ??= (async () => {
      const t0 = performance.now();
      await ended;
      if (TRACE_STEPS) traceStep("settled");
      const report = this.checkNow(performance.now() - t0);
      if (TRACE_STEPS) traceStep("git-check");
      return report;
    })();
    return this.settled;
  }

  /**
   * Check now, for a caller that knows every process of the run has ended (the exec-server's process, whose report
   * goes on its output before `process/closed`): the report, or the one an earlier check gave. `settledMs`: how long
   * the caller waited for the end (for the log). Never throws.
   */
  checkNow(settledMs = 0): string {
    if (this.report !== undefined) return this.report;
    this.report = this.check(settledMs);
    this.settled ??= Promise.resolve(this.report);
    return this.report;
  }

  /**
   * What the check undid (`undone`) and could not undo (`failed`), one line each (`<path>: <what happened>`): empty
   * before the check and when nothing changed.
   */
  changes(): { undone: readonly string[]; failed: readonly string[] } {
    return this.found;
  }

  private check(settledMs: number): string {
    if (this.snap === undefined) return "";
    try {
      const report = this.guard.check(this.snap, this.view);
      this.found = { undone: report.undone, failed: report.failed };
      log.debug("git guard", {
        run: this.what,
        gitDirs: this.snap.gitDirs,
        snapshotMs: this.snap.tookMs,
        settledMs,
        checkMs: report.tookMs,
      });
      if (report.truncated.length > 0) log.warn("git guard: writable folders not fully searched", { roots: report.truncated });
      if (report.undone.length > 0 || report.failed.length > 0)
        log.warn("git guard undid changes", { run: this.what, undone: report.undone, failed: report.failed });
      return formatGitGuardReport(report, this.landlock);
    } catch (e) {
      log.error("git guard failed", { run: this.what, message: (e as Error).message });
      return `\nshellmcp: the check of git control files after this command failed (${(e as Error).message}): the user must check .git/hooks and .git/config of the repositories in the writable folders before running git there.\n`;
    }
  }
}
