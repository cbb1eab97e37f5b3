/**
 * What the git guard says in a call's result (./guard.ts; docs/git-guard.md): the changes it put back, those it
 * could not (the human must look), and the roots it did not search fully, in words a model passes on to a human.
 * Every name the command chose is rendered by ../../safe-text.ts.
 */
import { visible } from "../../safe-text.ts";
import { MAX_GIT_DIRS, MAX_SEARCH_DIRS, type GitGuardReport } from "./guard.ts";

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
    // Labels, link targets and reasons hold names the command chose: rendered by ../../safe-text.ts (one line each).
    for (const l of report.undone) parts.push(`  undone: ${visible(l)}`);
    for (const l of report.failed) parts.push(`  NOT UNDONE: ${visible(l)}`);
  }
  for (const r of withTruncated ? report.truncated : [])
    parts.push(
      `shellmcp: ${visible(r)} holds more folders than the git guard searches per call (${MAX_SEARCH_DIRS} folders, ${MAX_GIT_DIRS} git dirs, breadth-first): git repositories in the part not searched are not checked after calls.`,
    );
  return parts.length === 0 ? "" : `\n${parts.join("\n")}\n`;
}
