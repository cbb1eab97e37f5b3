/**
 * arg0 role `codex-execve-wrapper`: the exec wrapper the patched shell runs instead of every program.
 * Argv contract (escalation-mcp.md §5.3): `[WRAPPER, TARGET_PATH, ORIG_ARGV0, ORIG_ARGV1, …]`, so `args`
 * here is `[TARGET_PATH, ORIG_ARGV0, …]`. No option parsing: argv[0] may start with `-` (`exec -l`).
 */
import { writeStderr } from "../stderr.ts";

/** Exit status for a call without a target path (Codex's clap usage error is 2 as well). */
export const WRAPPER_USAGE_EXIT = 2;

/** Run the wrapper role; returns the exit status when it does not exec. */
export function wrapperMain(args: string[]): number {
  if (args.length === 0) {
    writeStderr("usage: codex-execve-wrapper FILE [ARGV0 [ARG...]]\n");
    return WRAPPER_USAGE_EXIT;
  }
  writeStderr("shellmcp: the codex-execve-wrapper role is not implemented yet\n");
  return 2;
}
