/**
 * `shellmcp execpolicy check`: the same JSON as `codex execpolicy check` (docs/execpolicy.md, "`execpolicy check`").
 */
import type { Evaluation } from "./policy.ts";

/** Compact JSON exactly as Codex prints it: `matchedRules` first, `decision` omitted when nothing matched. */
export function renderCheckJson(e: Evaluation, pretty = false): string {
  const out: Record<string, unknown> = { matchedRules: e.matchedRules };
  if (e.decision !== undefined) out.decision = e.decision;
  return pretty ? JSON.stringify(out, null, 2) : JSON.stringify(out);
}

/** Options of {@link execpolicyCheck}. */
export interface CheckOptions {
  rules: string[];
  pretty?: boolean;
  resolveHostExecutables?: boolean;
}

/** Exit status for a rules file that cannot be read or loaded, and for usage errors. */
export const CHECK_ERROR_EXIT = 2;

/**
 * Run `execpolicy check`: load `rules` in order, evaluate `command` (no heuristics fallback), print the JSON
 * on stdout. Returns the exit status: 0 whenever evaluation ran (forbidden included), 2 for a bad rules file
 * (message on stderr, like Codex's `Error: failed to parse policy at …` / `Caused by:`).
 */
export async function execpolicyCheck(command: string[], o: CheckOptions): Promise<number> {
  const { policyFromFiles, RulesError } = await import("./load.ts");
  const { writeStderr } = await import("../stderr.ts");
  if (o.rules.length === 0) {
    writeStderr("error: the following required arguments were not provided:\n  --rules <PATH>\n");
    return CHECK_ERROR_EXIT;
  }
  if (command.length === 0) {
    writeStderr(
      "error: the following required arguments were not provided:\n  <COMMAND>...\n\nUsage: shellmcp execpolicy check --rules <PATH> <COMMAND>...\n",
    );
    return CHECK_ERROR_EXIT;
  }
  let policy;
  try {
    policy = policyFromFiles(o.rules);
  } catch (e) {
    if (e instanceof RulesError) {
      writeStderr(`Error: ${e.message}\n`);
      return CHECK_ERROR_EXIT;
    }
    throw e;
  }
  const json = renderCheckJson(policy.check(command, { resolveHostExecutables: o.resolveHostExecutables ?? false }), o.pretty ?? false);
  process.stdout.write(json + "\n");
  return 0;
}
