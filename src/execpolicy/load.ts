/**
 * Loading `.rules` files into a {@link Policy}: the builtins `prefix_rule`, `host_executable` and
 * `network_rule` with Codex's validation order and messages (docs/execpolicy.md, "Builtins" and "Errors"), deferred per-call
 * `match`/`not_match` self-tests (docs/execpolicy.md, "Self-tests"), and errors that name file, line and column.
 */
import { readUntrustedText } from "../untrusted-fs.ts";
import { ShellmcpError } from "../errors.ts";
import {
  absoluteProgram,
  debugMatch,
  debugRule,
  Policy,
  rustDebugString,
  type Decision,
  type NetworkRule,
  type PatternToken,
  type PrefixRule,
} from "./policy.ts";
import { shlexJoin, shlexSplit } from "./shlex.ts";
import { Evaluator, SBuiltin, SList, repr, typeName, type CallSite, type Value } from "./starlark/eval.ts";
import { lineCol, renderDiagnostic, StarlarkError, type SourceFile } from "./starlark/syntax.ts";

/**
 * A rules file that could not be read or loaded. `code` is `RULES_PARSE`; `data` has `path`, and for load
 * errors `line`, `col` and `detail` (the error without the "failed to parse policy" header).
 * `message` is what `codex execpolicy check` prints after `Error: `.
 */
export class RulesError extends ShellmcpError {
  constructor(kind: "read" | "parse", path: string, detail: string, where?: { line: number; col: number }) {
    const head = kind === "read" ? `failed to read policy at ${path}` : `failed to parse policy at ${path}`;
    super("RULES_PARSE", `${head}\n\nCaused by:\n${detail.replace(/^/gm, "    ")}`, { path, detail, ...where });
    this.name = "RulesError";
  }
}

const DECISIONS = new Set(["allow", "prompt", "forbidden"]);

/** Largest rules file read, bytes (8 MiB: tens of thousands of rules). */
export const MAX_RULES_FILE_BYTES = 8 << 20;

/** An error raised by a builtin: message with Codex's prefix (`invalid decision: `, …). */
function builtinError(message: string, site: CallSite): StarlarkError {
  return new StarlarkError(message, site.span, site.file);
}

/** Run `f`; a plain `Error` it throws (argument binding, type checks) becomes an error at the call site. */
function atCall<T>(site: CallSite, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof StarlarkError) throw e;
    throw builtinError((e as Error).message, site);
  }
}

/** A pending `match`/`not_match` self-test of one `prefix_rule` call. */
interface PendingExamples {
  rules: PrefixRule[];
  matches: string[][];
  notMatches: string[][];
  site: CallSite;
}

type ParamSpec = { name: string; required: boolean };

/**
 * Bind positional and named arguments to `spec` as starlark-rust does for native functions: positionals in
 * order, then names; `None` counts as absent for optional parameters.
 */
function bindArgs(fn: string, spec: ParamSpec[], args: Value[], kwargs: [string, Value][]): Map<string, Value> {
  const out = new Map<string, Value>();
  if (args.length > spec.length) throw new Error(`Found ${args.length - spec.length} extra positional parameter(s) for call to ${fn}`);
  args.forEach((v, i) => out.set(spec[i]!.name, v));
  const extra: string[] = [];
  for (const [k, v] of kwargs) {
    if (!spec.some((p) => p.name === k)) extra.push(k);
    else if (out.has(k)) throw new Error(`Multiple values for parameter \`${k}\` in call to \`${fn}\``);
    else out.set(k, v);
  }
  if (extra.length > 0) throw new Error(`Found \`${extra.join("`, `")}\` extra named parameter(s) for call to ${fn}`);
  for (const p of spec) {
    if (p.required && !out.has(p.name)) throw new Error(`Missing parameter \`${p.name}\` for call to \`${fn}\``);
    if (!p.required && out.get(p.name) === null) out.delete(p.name);
  }
  return out;
}

function typeMismatch(param: string, expected: string, v: Value): Error {
  return new Error(`Type of parameter \`${param}\` doesn't match, expected \`${expected}\`, actual \`${typeName(v)} (repr: ${repr(v)})\``);
}

function listParam(param: string, v: Value | undefined): Value[] | undefined {
  if (v === undefined) return undefined;
  if (!(v instanceof SList)) throw typeMismatch(param, "list", v);
  return v.items;
}

function strParam(param: string, v: Value | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw typeMismatch(param, "str", v);
  return v;
}

function parseExamples(items: Value[] | undefined, site: CallSite): string[][] {
  return (items ?? []).map((ex) => {
    if (typeof ex === "string") {
      const words = shlexSplit(ex);
      if (words === undefined) throw builtinError("invalid example: example string has invalid shell syntax", site);
      if (words.length === 0) throw builtinError("invalid example: example cannot be an empty string", site);
      return words;
    }
    if (ex instanceof SList) {
      if (ex.items.length === 0) throw builtinError("invalid example: example cannot be an empty list", site);
      return ex.items.map((t) => {
        if (typeof t !== "string") throw builtinError(`invalid example: example tokens must be strings (got ${typeName(t)})`, site);
        return t;
      });
    }
    throw builtinError(`invalid example: example must be a string or list of strings (got ${typeName(ex)})`, site);
  });
}

function normaliseHost(raw: string, site: CallSite): string {
  const bad = (m: string) => builtinError(`invalid rule: network_rule ${m}`, site);
  let h = raw.trim();
  if (h === "") throw bad("host cannot be empty");
  if (h.includes("://") || /[/?#]/.test(h)) throw bad("host must be a hostname or IP literal (without scheme or path)");
  if (h.startsWith("[")) {
    const close = h.indexOf("]");
    if (close < 0) throw bad("host has an invalid bracketed IPv6 literal");
    const rest = h.slice(close + 1);
    if (rest !== "" && !/^:\d+$/.test(rest)) throw bad(`host contains an unsupported suffix: ${raw}`);
    h = h.slice(1, close);
    if (h === "") throw bad("host has an invalid bracketed IPv6 literal");
  } else if ((h.match(/:/g) ?? []).length === 1 && /:\d+$/.test(h)) {
    h = h.replace(/:\d+$/, "");
  }
  h = h.replace(/\.+$/, "").toLowerCase();
  if (h.includes("*")) throw bad("host must be a specific host; wildcards are not allowed");
  if (/\s/.test(h)) throw bad("host cannot contain whitespace");
  if (h === "") throw bad("host cannot be empty");
  return h;
}

/**
 * Accumulates a policy across files (in order), like Codex's `PolicyParser`. Each file runs in a fresh
 * module; its pending example checks run at the end of that file.
 */
export class PolicyBuilder {
  readonly policy = new Policy();
  private pending: PendingExamples[] = [];

  /** The builtins exposed to rules files. */
  private globals(): Record<string, Value> {
    return {
      prefix_rule: new SBuiltin("prefix_rule", (args, kwargs, site) => {
        this.prefixRule(args, kwargs, site);
        return null;
      }),
      host_executable: new SBuiltin("host_executable", (args, kwargs, site) => {
        this.hostExecutable(args, kwargs, site);
        return null;
      }),
      network_rule: new SBuiltin("network_rule", (args, kwargs, site) => {
        this.networkRule(args, kwargs, site);
        return null;
      }),
    };
  }

  /** Parse and evaluate one file's `text` as `path`. Throws {@link RulesError}. */
  addSource(path: string, text: string): void {
    const file: SourceFile = { path, text };
    this.pending = [];
    try {
      new Evaluator(file, this.globals()).run();
    } catch (e) {
      if (e instanceof StarlarkError) throw this.toRulesError(path, e);
      throw e;
    }
    for (const p of this.pending) this.validateExamples(path, p);
    this.pending = [];
  }

  /**
   * Read and add a file from disk: through ../untrusted-fs.ts (a project's `.codex/rules` may have been
   * written by a sandboxed command), so a FIFO, device or a file over {@link MAX_RULES_FILE_BYTES} is a read
   * error instead of a server that blocks at start-up; a symlink named on the command line is followed (folders
   * skip symlinks already, see discovery.ts). Throws {@link RulesError} for read and parse failures.
   */
  addFile(path: string, displayPath: string = path): void {
    const r = readUntrustedText(path, { follow: true, maxBytes: MAX_RULES_FILE_BYTES });
    if (!r.ok) throw new RulesError("read", displayPath, r.reason);
    this.addSource(displayPath, r.text);
  }

  private toRulesError(path: string, e: StarlarkError): RulesError {
    const where = e.span !== undefined && e.file !== undefined ? lineCol(e.file.text, e.span.start) : undefined;
    const prefix = e.kind === "starlark" ? "starlark error: " : "";
    return new RulesError("parse", path, prefix + renderDiagnostic(e.message, e.file, e.span), where);
  }

  private prefixRule(args: Value[], kwargs: [string, Value][], site: CallSite): void {
    const spec = ["pattern", "decision", "match", "not_match", "justification"].map((name, i) => ({ name, required: i === 0 }));
    const { pattern, decisionRaw, matchItems, notMatchItems, justification } = atCall(site, () => {
      const p = bindArgs("prefix_rule", spec, args, kwargs);
      return {
        pattern: listParam("pattern", p.get("pattern"))!,
        decisionRaw: strParam("decision", p.get("decision")),
        matchItems: listParam("match", p.get("match")),
        notMatchItems: listParam("not_match", p.get("not_match")),
        justification: strParam("justification", p.get("justification")),
      };
    });
    const fail = (m: string) => builtinError(m, site);
    // Validation order as Codex: decision, justification, pattern, match, not_match.
    const decision = (decisionRaw ?? "allow") as Decision;
    if (!DECISIONS.has(decision)) throw fail(`invalid decision: ${decisionRaw}`);
    if (justification !== undefined && justification.trim() === "") throw fail("invalid rule: justification cannot be empty");
    const tokens: PatternToken[] = pattern.map((el) => {
      if (typeof el === "string") return { single: el };
      if (el instanceof SList) {
        if (el.items.length === 0) throw fail("invalid pattern element: pattern alternatives cannot be empty");
        const alts = el.items.map((a) => {
          if (typeof a !== "string") throw fail(`invalid pattern element: pattern alternative must be a string (got ${typeName(a)})`);
          return a;
        });
        return alts.length === 1 ? { single: alts[0]! } : { alts };
      }
      throw fail(`invalid pattern element: pattern element must be a string or list of strings (got ${typeName(el)})`);
    });
    if (tokens.length === 0) throw fail("invalid pattern element: pattern cannot be empty");
    const matches = parseExamples(matchItems, site);
    const notMatches = parseExamples(notMatchItems, site);

    const [first, ...rest] = tokens;
    const firsts = "single" in first! ? [first.single] : first!.alts;
    const rules = firsts.map((f) => {
      const r: PrefixRule = { first: f, rest, decision };
      if (justification !== undefined) r.justification = justification;
      return r;
    });
    rules.forEach((r) => this.policy.addRule(r));
    if (matches.length > 0 || notMatches.length > 0) this.pending.push({ rules, matches, notMatches, site });
  }

  private hostExecutable(args: Value[], kwargs: [string, Value][], site: CallSite): void {
    const fail = (m: string) => builtinError(m, site);
    const { name, paths } = atCall(site, () => {
      const p = bindArgs(
        "host_executable",
        [
          { name: "name", required: true },
          { name: "paths", required: true },
        ],
        args,
        kwargs,
      );
      return { name: strParam("name", p.get("name"))!, paths: listParam("paths", p.get("paths"))! };
    });
    if (name === "") throw fail("invalid rule: host_executable name cannot be empty");
    if (name.includes("/") || name === "." || name === "..")
      throw fail(`invalid rule: host_executable name must be a bare executable name (got ${name})`);
    const out: string[] = [];
    for (const raw of paths) {
      if (typeof raw !== "string") throw fail(`invalid rule: host_executable paths must be strings (got ${typeName(raw)})`);
      if (!(raw.startsWith("/") || raw === "~" || raw.startsWith("~/")))
        throw fail(`invalid rule: host_executable paths must be absolute (got ${raw})`);
      const abs = absoluteProgram(raw);
      if (abs.slice(abs.lastIndexOf("/") + 1) !== name)
        throw fail(`invalid rule: host_executable path \`${raw}\` must have basename \`${name}\``);
      if (!out.includes(abs)) out.push(abs);
    }
    this.policy.hostExecutables.set(name, out);
  }

  private networkRule(args: Value[], kwargs: [string, Value][], site: CallSite): void {
    const fail = (m: string) => builtinError(m, site);
    const spec = ["host", "protocol", "decision", "justification"].map((name, i) => ({ name, required: i < 3 }));
    const { host, protocol, decision, justification } = atCall(site, () => {
      const p = bindArgs("network_rule", spec, args, kwargs);
      return {
        host: strParam("host", p.get("host"))!,
        protocol: strParam("protocol", p.get("protocol"))!,
        decision: strParam("decision", p.get("decision"))!,
        justification: strParam("justification", p.get("justification")),
      };
    });
    const proto = protocol === "https_connect" || protocol === "http-connect" ? "https" : protocol;
    if (!["http", "https", "socks5_tcp", "socks5_udp"].includes(proto)) {
      throw fail(`invalid rule: network_rule protocol must be one of http, https, socks5_tcp, socks5_udp (got ${protocol})`);
    }
    const d = decision === "deny" ? "forbidden" : decision;
    if (!DECISIONS.has(d)) throw fail(`invalid decision: ${decision}`);
    if (justification !== undefined && justification.trim() === "") throw fail("invalid rule: justification cannot be empty");
    const rule: NetworkRule = { host: normaliseHost(host, site), protocol: proto as NetworkRule["protocol"], decision: d as Decision };
    if (justification !== undefined) rule.justification = justification;
    this.policy.networkRules.push(rule);
  }

  /** Run one call's self-tests against a policy of only its rules plus the host executables so far. */
  private validateExamples(path: string, p: PendingExamples): void {
    const mini = new Policy();
    p.rules.forEach((r) => mini.addRule(r));
    for (const [k, v] of this.policy.hostExecutables) mini.hostExecutables.set(k, v);
    const where = lineCol(p.site.file.text, p.site.span.start);
    const loc = `\n --> ${path}:${where.line}:${where.col}`;
    for (const ex of p.notMatches) {
      const m = mini.matchesFor(ex, { resolveHostExecutables: true });
      if (m.length > 0)
        throw new RulesError("parse", path, `expected example to not match rule \`${debugMatch(m[0]!)}\`: ${shlexJoin(ex)}${loc}`, where);
    }
    const unmatched = p.matches.filter((ex) => mini.matchesFor(ex, { resolveHostExecutables: true }).length === 0);
    if (unmatched.length > 0) {
      const rules = `[${p.rules.map((r) => rustDebugString(debugRule(r))).join(", ")}]`;
      const exs = `[${unmatched.map((ex) => rustDebugString(shlexJoin(ex))).join(", ")}]`;
      throw new RulesError(
        "parse",
        path,
        `expected every example to match at least one rule. rules: ${rules}; unmatched examples: ${exs}${loc}`,
        where,
      );
    }
  }
}

/** Parse rules sources (in order) into one policy. Throws {@link RulesError} for the first bad file. */
export function policyFromSources(sources: readonly { path: string; text: string }[]): Policy {
  const b = new PolicyBuilder();
  for (const s of sources) b.addSource(s.path, s.text);
  return b.policy;
}

/** Load rules files from disk (in order) into one policy. Throws {@link RulesError}. */
export function policyFromFiles(paths: readonly string[]): Policy {
  const b = new PolicyBuilder();
  for (const p of paths) b.addFile(p);
  return b.policy;
}
