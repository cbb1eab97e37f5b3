/**
 * `shellmcp execpolicy check`: the same JSON as `codex execpolicy check` (execpolicy.md §4).
 */
import type { Evaluation } from "./policy.ts";

/** Compact JSON exactly as Codex prints it: `matchedRules` first, `decision` omitted when nothing matched. */
export function renderCheckJson(e: Evaluation, pretty = false): string {
  const out: Record<string, unknown> = { matchedRules: e.matchedRules };
  if (e.decision !== undefined) out.decision = e.decision;
  return pretty ? JSON.stringify(out, null, 2) : JSON.stringify(out);
}
