/**
 * The git guard of one process that starts sandboxes (`serve`, `exec-server`, `sandbox linux`): one construction
 * for all of them (issue 39, "one launch path"), so each keeps what it undoes in the same place and repairs in the
 * same confined child.
 */
import { join } from "node:path";
import { GitGuard } from "../sandbox/git/guard.ts";
import { HOST_PLATFORM } from "../sandbox/host-platform.ts";

/**
 * A new git guard (../sandbox/git/guard.ts) for a process whose CODEX_HOME is `codexHome` (absolute): changed
 * versions it undoes are kept aside in `$CODEX_HOME/shellmcp/git-kept` (outside every writable root: no sandbox
 * writes CODEX_HOME, docs/git-guard.md), and on Linux its repairs run in a child confined by Landlock to the folders
 * it repairs (the platform's `gitRepair`, ../sandbox/platform.ts, from ../sandbox/host-platform.ts). Keep one per
 * process: it remembers what it accepted.
 */
export function hostGitGuard(codexHome: string, platform: NodeJS.Platform = process.platform): GitGuard {
  return new GitGuard({
    keptDir: join(codexHome, "shellmcp", "git-kept"),
    repair: HOST_PLATFORM.gitRepair(platform),
  });
}
