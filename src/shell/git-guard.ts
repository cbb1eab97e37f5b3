/**
 * The git guard of one process that starts sandboxes (`serve`, `exec-server`, `sandbox linux`): one construction
 * for all of them (issue 39, "one launch path"), so each keeps what it undoes in the same place and repairs in the
 * same confined child.
 */
import { join } from "node:path";
import { GitGuard } from "../sandbox/git/guard.ts";
import { repairBatch } from "../sandbox/linux/git-repair-child.ts";
import { selfExecCommand } from "../self.ts";

/**
 * A new git guard (../sandbox/git/guard.ts) for a process whose CODEX_HOME is `codexHome` (absolute): changed
 * versions it undoes are kept aside in `$CODEX_HOME/shellmcp/git-kept` (outside every writable root: no sandbox
 * writes CODEX_HOME, docs/git-guard.md), and on Linux its repairs run in a child confined by Landlock to the folders
 * it repairs (../sandbox/linux/git-repair-child.ts). Keep one per process: it remembers what it accepted.
 */
export function hostGitGuard(codexHome: string, platform: NodeJS.Platform = process.platform): GitGuard {
  return new GitGuard({
    keptDir: join(codexHome, "shellmcp", "git-kept"),
    repair: platform === "linux" ? (ops) => repairBatch(ops, selfExecCommand()) : undefined,
  });
}
