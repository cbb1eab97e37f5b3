/**
 * Blocked-action feedback (issue 41, docs/blocked-actions.md): what the sandbox, a rule, the escalation boundary,
 * the network proxy or an approval refused during one call, said to the model in words it can pass on — one line per
 * refusal starting `shellmcp: blocked`, naming the layer, the object and how a human can allow it — and as data in
 * the result's `_meta["shellmcp/blocked"]`. Codex has no such report (its model reads the raw OS error).
 */
import { bounded } from "../safe-text.ts";

/**
 * The layer that refused:
 * - `sandbox-write`: the kernel sandbox refused a write outside the writable roots;
 * - `protected-path`: a write inside a writable root to a path kept read-only (`.git`, `.codex`, `.agents`, …);
 * - `network`: the call's sandbox has no network, or the network proxy refused a destination;
 * - `rule`: a `prefix_rule(..., decision="forbidden")` denied a program;
 * - `escalation`: a program a rule allowed out of the sandbox ran inside it instead (the escalation boundary);
 * - `approval`: a program needed a human's approval and did not get it (declined, cancelled, unanswered, no way to ask).
 */
export type BlockedLayer = "sandbox-write" | "protected-path" | "network" | "rule" | "escalation" | "approval";

/** One refused action: `target` is a path, `host:port`, or a program's argv as one string; `remedy` what a human can do. */
export interface BlockedAction {
  layer: BlockedLayer;
  target: string;
  remedy: string;
}

/** `_meta` key of the structured report in a tool result. */
export const BLOCKED_META_KEY = "shellmcp/blocked";

/** Most refusals one result reports (distinct layer + target); the rest are counted in one line. */
export const MAX_BLOCKED_REPORTED = 20;

/** Bytes of a target shown (paths, hosts and argv are the model's or a program's: rendered by ../safe-text.ts). */
const TARGET_BUDGET_BYTES = 300;

/**
 * Collects the refusals of one call, each distinct (layer, target) once, at most {@link MAX_BLOCKED_REPORTED}; later
 * duplicates are dropped, later distinct ones counted in {@link BlockedLog.omitted}.
 */
export class BlockedLog {
  readonly actions: BlockedAction[] = [];
  omitted = 0;
  private readonly seen = new Set<string>();

  /** Record `a` (its target rendered visible and bounded). */
  add(a: BlockedAction): void {
    const target = bounded(a.target, TARGET_BUDGET_BYTES);
    const key = `${a.layer}\0${target}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    if (this.actions.length >= MAX_BLOCKED_REPORTED) {
      this.omitted++;
      return;
    }
    this.actions.push({ layer: a.layer, target, remedy: a.remedy });
  }

  /** Record each of `all`. */
  addAll(all: readonly BlockedAction[]): void {
    for (const a of all) this.add(a);
  }
}

/**
 * The lines for the model: `shellmcp: blocked (<layer>) <target>: <remedy>` each, then a count of the omitted ones;
 * "" when nothing was blocked. Starts with a line break so it never joins the command's last line.
 */
export function blockedText(log: BlockedLog): string {
  if (log.actions.length === 0) return "";
  const lines = log.actions.map((a) => `shellmcp: blocked (${a.layer}) ${a.target}: ${a.remedy}`);
  if (log.omitted > 0) lines.push(`shellmcp: blocked: ${log.omitted} more refusals not listed (see the server's log)`);
  return `\n${lines.join("\n")}\n`;
}

/** `_meta` of a result that reports `log` (undefined when nothing was blocked). */
export function blockedMeta(log: BlockedLog): Record<string, unknown> | undefined {
  return log.actions.length === 0 ? undefined : { [BLOCKED_META_KEY]: log.actions.map((a) => ({ ...a })) };
}
