/**
 * The exec policy: prefix rules, host executables and network rules, and how a command is matched against
 * them (docs/execpolicy.md, "Matching a command" and "Combining matches"). Pure logic; no I/O.
 */
import { userHome } from "../self.ts";
import { isAbsolute, normalize, resolve } from "node:path";

/** Decision of one `prefix_rule`, as in Codex: the most severe matching decision wins. */
export type Decision = "allow" | "prompt" | "forbidden";

const SEVERITY: Record<Decision, number> = { allow: 0, prompt: 1, forbidden: 2 };

/** Most severe of `decisions`; `undefined` when there are none. */
export function strictest(decisions: readonly Decision[]): Decision | undefined {
  return decisions.reduce<Decision | undefined>(
    (worst, d) => (worst === undefined || SEVERITY[d] > SEVERITY[worst] ? d : worst),
    undefined,
  );
}

/** One pattern position: a literal token or a set of alternatives. */
export type PatternToken = { single: string } | { alts: string[] };

/** A prefix rule after first-token expansion (one rule per first-token alternative). */
export interface PrefixRule {
  first: string;
  rest: PatternToken[];
  decision: Decision;
  justification?: string;
}

/** A match of one prefix rule, serialised exactly as Codex (`prefixRuleMatch`). */
export interface PrefixRuleMatch {
  matchedPrefix: string[];
  decision: Decision;
  resolvedProgram?: string;
  justification?: string;
}

/** One entry of `matchedRules`. */
export type RuleMatch = { prefixRuleMatch: PrefixRuleMatch } | { heuristicsRuleMatch: { command: string[]; decision: Decision } };

/** Result of evaluating a command. `decision` is undefined when nothing matched (no fallback). */
export interface Evaluation {
  matchedRules: RuleMatch[];
  decision?: Decision;
}

/** A validated `network_rule`. */
export interface NetworkRule {
  host: string;
  protocol: "http" | "https" | "socks5_tcp" | "socks5_udp";
  decision: Decision;
  justification?: string;
}

/** Options of {@link Policy.matchesFor}. */
export interface MatchOptions {
  /** Fall back from an absolute (or relative) program path to rules for its basename (`--resolve-host-executables`). */
  resolveHostExecutables?: boolean;
  /** Directory that relative program paths resolve against (default: the process cwd). */
  cwd?: string;
}

function tokenMatches(t: PatternToken, word: string): boolean {
  return "single" in t ? t.single === word : t.alts.includes(word);
}

/** Match one rule against `cmd` (exact, case-sensitive, token by token). */
export function matchRule(rule: PrefixRule, cmd: readonly string[]): PrefixRuleMatch | undefined {
  const n = 1 + rule.rest.length;
  if (cmd.length < n || cmd[0] !== rule.first) return undefined;
  for (let i = 1; i < n; i++) if (!tokenMatches(rule.rest[i - 1]!, cmd[i]!)) return undefined;
  const m: PrefixRuleMatch = { matchedPrefix: cmd.slice(0, n), decision: rule.decision };
  if (rule.justification !== undefined) m.justification = rule.justification;
  return m;
}

/** Absolute, lexically normalised form of a program path (`~` expanded, relative against `cwd`). */
export function absoluteProgram(p: string, cwd: string = process.cwd()): string {
  let q = p;
  if (q === "~") q = userHome();
  else if (q.startsWith("~/")) q = userHome() + q.slice(1);
  return normalize(isAbsolute(q) ? q : resolve(cwd, q));
}

function basename(p: string): string | undefined {
  const trimmed = p.replace(/\/+$/, "");
  const b = trimmed.slice(trimmed.lastIndexOf("/") + 1);
  return b === "" || b === "." || b === ".." ? undefined : b;
}

/** An exec policy: rules in insertion order, host-executable allowlists, network rules. */
export class Policy {
  /** Rules by first token, each list in insertion order. */
  readonly rulesByProgram = new Map<string, PrefixRule[]>();
  /** Allowlisted absolute paths per bare executable name (last definition wins). */
  readonly hostExecutables = new Map<string, string[]>();
  /** Network rules in insertion order. */
  readonly networkRules: NetworkRule[] = [];

  /** Append a rule. */
  addRule(rule: PrefixRule): void {
    const list = this.rulesByProgram.get(rule.first);
    if (list === undefined) this.rulesByProgram.set(rule.first, [rule]);
    else list.push(rule);
  }

  /** Total number of prefix rules. */
  get ruleCount(): number {
    let n = 0;
    for (const l of this.rulesByProgram.values()) n += l.length;
    return n;
  }

  /**
   * Every rule matching `cmd`, in insertion order (docs/execpolicy.md, "Matching a command"): exact first-token matches; only when
   * there are none and `resolveHostExecutables` is on, rules for the basename of the program path, restricted
   * by `host_executable` allowlists, reported with `resolvedProgram`.
   */
  matchesFor(cmd: readonly string[], opts: MatchOptions = {}): PrefixRuleMatch[] {
    if (cmd.length === 0) return [];
    const exact = (this.rulesByProgram.get(cmd[0]!) ?? [])
      .map((r) => matchRule(r, cmd))
      .filter((m): m is PrefixRuleMatch => m !== undefined);
    if (exact.length > 0 || !opts.resolveHostExecutables) return exact;
    const base = basename(cmd[0]!);
    if (base === undefined) return [];
    const rules = this.rulesByProgram.get(base);
    if (rules === undefined) return [];
    const prog = absoluteProgram(cmd[0]!, opts.cwd);
    const allow = this.hostExecutables.get(base);
    if (allow !== undefined && !allow.includes(prog)) return [];
    const renamed = [base, ...cmd.slice(1)];
    const out: PrefixRuleMatch[] = [];
    for (const r of rules) {
      const m = matchRule(r, renamed);
      if (m === undefined) continue;
      const withProg: PrefixRuleMatch = { matchedPrefix: m.matchedPrefix, decision: m.decision, resolvedProgram: prog };
      if (m.justification !== undefined) withProg.justification = m.justification;
      out.push(withProg);
    }
    return out;
  }

  /**
   * Evaluate one command. Without `fallback` (as `execpolicy check`), an unmatched command gives no decision;
   * with it, an unmatched command yields one `heuristicsRuleMatch` with `fallback(cmd)`.
   */
  check(cmd: readonly string[], opts: MatchOptions = {}, fallback?: (cmd: readonly string[]) => Decision): Evaluation {
    const matches: RuleMatch[] = this.matchesFor(cmd, opts).map((m) => ({ prefixRuleMatch: m }));
    if (matches.length === 0 && fallback !== undefined)
      matches.push({ heuristicsRuleMatch: { command: [...cmd], decision: fallback(cmd) } });
    const decision = strictest(matches.map(ruleDecision));
    return decision === undefined ? { matchedRules: matches } : { matchedRules: matches, decision };
  }

  /** Network allow/deny host lists compiled from the rules (docs/execpolicy.md, "Builtins"): later writes move a host. */
  networkLists(): { allowed: string[]; denied: string[] } {
    const allowed: string[] = [];
    const denied: string[] = [];
    const drop = (l: string[], h: string) => {
      const i = l.indexOf(h);
      if (i >= 0) l.splice(i, 1);
    };
    for (const r of this.networkRules) {
      if (r.decision === "allow") {
        drop(denied, r.host);
        drop(allowed, r.host);
        allowed.push(r.host);
      } else if (r.decision === "forbidden") {
        drop(allowed, r.host);
        drop(denied, r.host);
        denied.push(r.host);
      }
    }
    return { allowed, denied };
  }
}

/** Decision carried by a match entry. */
export function ruleDecision(m: RuleMatch): Decision {
  return "prefixRuleMatch" in m ? m.prefixRuleMatch.decision : m.heuristicsRuleMatch.decision;
}

/** Whether the decision comes from a real rule (some non-heuristic match has the overall decision). */
export function isPolicyDriven(e: Evaluation): boolean {
  return e.decision !== undefined && e.matchedRules.some((m) => "prefixRuleMatch" in m && m.prefixRuleMatch.decision === e.decision);
}

// ---------------------------------------------------------------------------------------------------------
// Rust Debug renderings used in Codex's example-validation messages

/** Rust `{:?}` of a string. */
export function rustDebugString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c === 0) out += "\\0";
    else if (c < 0x20 || c === 0x7f) out += `\\u{${c.toString(16)}}`;
    else out += ch;
  }
  return out + '"';
}

const DEBUG_DECISION: Record<Decision, string> = { allow: "Allow", prompt: "Prompt", forbidden: "Forbidden" };
const opt = (v: string | undefined) => (v === undefined ? "None" : `Some(${rustDebugString(v)})`);

/** Codex's `{:?}` of a `PrefixRule`. */
export function debugRule(r: PrefixRule): string {
  const rest = r.rest
    .map((t) => ("single" in t ? `Single(${rustDebugString(t.single)})` : `Alts([${t.alts.map(rustDebugString).join(", ")}])`))
    .join(", ");
  return `PrefixRule { pattern: PrefixPattern { canonical_matching: false, first: ${rustDebugString(r.first)}, rest: [${rest}] }, decision: ${DEBUG_DECISION[r.decision]}, justification: ${opt(r.justification)} }`;
}

/** Codex's `{:?}` of a `PrefixRuleMatch`. */
export function debugMatch(m: PrefixRuleMatch): string {
  return `PrefixRuleMatch { matched_prefix: [${m.matchedPrefix.map(rustDebugString).join(", ")}], decision: ${DEBUG_DECISION[m.decision]}, resolved_program: ${opt(m.resolvedProgram)}, justification: ${opt(m.justification)} }`;
}
