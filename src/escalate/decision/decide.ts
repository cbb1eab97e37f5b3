/**
 * What `serve` does with each intercepted exec (docs/escalation.md, "Decisions"), given the loaded `.rules`:
 *
 * | outcome          | a rule decided        | no rule matched (heuristic) |
 * |------------------|-----------------------|-----------------------------|
 * | forbidden        | Deny "Execution forbidden by policy" | —            |
 * | allow            | Escalate (outside the sandbox)       | Run (inside) |
 * | prompt → accept  | Escalate              | Run                         |
 * | prompt → decline | Deny "User declined execution"                      |
 * | prompt → cancel  | Deny "User cancelled execution"                     |
 *
 * The program is matched as `[absolute path, argv[1..]]` with host-executable resolution, so bare-name rules
 * (`git`) and path rules (`/usr/bin/git`, which win) both work; `--preserve-program-paths` matches the absolute
 * path only, as Codex's flag. Better than Codex: approvals are remembered for the session (same program, argv and
 * workdir; a decline means "not now", so the next attempt asks again);
 * an "always allow" answer appends a rule to `$CODEX_HOME/rules/default.rules`; a client without elicitation
 * gets a clear Deny (or Run in the sandbox, by choice) instead of a hung request.
 *
 * Nothing here knows MCP: a question goes to `hooks.ask` with an {@link ApprovalForm} (src/mcp/elicitation.ts turns
 * it into an elicitation form), and a Deny is reported as an {@link ExecDenial} (src/serve/call.ts turns it into a
 * blocked action). Codex's counterpart is the `EscalationPolicy` its `shell-escalation` server is given
 * (`determine_action`: Run, Escalate or Deny for one exec).
 */
import { amendPolicyInMemory, appendAllowRule } from "../../execpolicy/amend.ts";
import { isPolicyDriven, type Evaluation, type Policy } from "../../execpolicy/policy.ts";
import { shlexJoin } from "../../execpolicy/shlex.ts";
import type { Grant } from "./boundary.ts";
import type { Decided, ResolvedRequest } from "./request.ts";
import { isErrorCode } from "../../errors.ts";
import { log } from "../../log.ts";
import { commandMightBeDangerous } from "./heuristics.ts";
import { bounded } from "../../safe-text.ts";

/**
 * A human's answer to an exec question, in the shape of an MCP elicitation result (which the local approver's
 * answers share): `accept`, `decline` or `cancel`; `content.always_allow === true` with `accept` asks for the rule
 * to be remembered (the other fields are not read here).
 */
export interface ApprovalAnswer {
  action: "accept" | "decline" | "cancel";
  content?: Record<string, unknown>;
}

/**
 * Which form a question is asked with: `general` (the danger heuristic asks) offers "always allow", which appends an
 * allow rule; `rule` (a `prompt` rule asks) does not, since an allow rule would change nothing there (the strictest
 * matching rule wins). The forms themselves are the asker's (src/mcp/elicitation.ts for MCP).
 */
export type ApprovalForm = "general" | "rule";

/**
 * A Deny as data, for whoever reports it (src/blocked/ through src/serve/call.ts): `forbidden` names the matching
 * `forbidden` rule's prefix when one matched; `approval` gives the Deny's reason (declined, cancelled, unanswered, no
 * way to ask). `command`: the program as the rules name it (base name unless `--preserve-program-paths`) and argv[1..].
 */
export type ExecDenial =
  { kind: "forbidden"; command: string[]; prefix?: readonly string[] } | { kind: "approval"; command: string[]; reason: string };

/** What to do with a `prompt` when the client cannot ask a human. */
export type OnPrompt = "deny" | "run-in-sandbox";

/** Settings shared by every call of a server. */
export interface EscalationSettings {
  /** The loaded `.rules` (amended in memory by an "always allow"). */
  policy: Policy;
  /** `$CODEX_HOME`: its `rules/default.rules` receives "always allow" rules, and remedies name its `rules/`. */
  codexHome: string;
  /** `--preserve-program-paths`: match the absolute program path only (Codex's flag), not its base name too. */
  preserveProgramPaths: boolean;
  /** What a `prompt` becomes when nobody can be asked. */
  onPrompt: OnPrompt;
  /** Approvals remembered for this session (key → true). Declines are not remembered. */
  memory: Map<string, boolean>;
}

/**
 * Per call: how to ask a human (undefined when nobody can be asked: the client has no elicitation and no approver
 * stands in), the stopwatch, and where Denies are reported.
 */
export interface CallHooks {
  /**
   * Ask a human `message` with the {@link ApprovalForm} `form`. Rejects with a `ShellmcpError` `UNANSWERED` when nobody
   * answered in time (the local approver): that becomes a Deny with its message; any other rejection propagates (the
   * server denies the exec with "escalation policy error").
   */
  ask?: (message: string, form: ApprovalForm) => Promise<ApprovalAnswer>;
  /** Run `f` with the call's timeout paused. */
  paused: <T>(f: () => Promise<T>) => Promise<T>;
  /** Told of every Deny (the rule or the missing approval behind it: {@link ExecDenial}). */
  denied?: (d: ExecDenial) => void;
}

function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}

/** Byte budgets of the untrusted parts of the exec question (UTF-8, after rendering; see ../../safe-text.ts). */
export const QUESTION_BUDGET_BYTES = { command: 1024, workdir: 512, argv0: 256, justification: 512 } as const;

/**
 * The elicitation message, as Codex: ``Allow agent to run `<file> <args>` in `<workdir>`?``, plus
 * `` (as argv[0] `<name>`)`` when `argv[0]` is neither the file's path nor its base name: programs dispatch on
 * it, so the human must see it (Codex leaves it out), plus a second line ``Reason given by the rule: <text>``
 * when the `prompt` rule that asks has a `justification`.
 *
 * Every part the model or a repository chose (program path, arguments, argv[0], folder, justification) is rendered
 * by ../../safe-text.ts `bounded`: control and bidi/format characters as visible escapes (`\r`, `\x1b`, `\u202e`), each
 * part cut at its {@link QUESTION_BUDGET_BYTES} budget with `… N more bytes`; so the question is at most ~2.5 KB and
 * a person reads, on one line, the command that will run.
 */
export function elicitationMessage(r: ResolvedRequest, justification?: string): string {
  const args = r.argv.slice(1);
  const cmd = bounded(args.length === 0 ? r.file : `${r.file} ${shlexJoin(args)}`, QUESTION_BUDGET_BYTES.command);
  const argv0 = r.argv[0] ?? "";
  const as = argv0 === r.file || argv0 === basename(r.file) ? "" : ` (as argv[0] \`${bounded(argv0, QUESTION_BUDGET_BYTES.argv0)}\`)`;
  const why =
    justification === undefined ? "" : `\nReason given by the rule: ${bounded(justification, QUESTION_BUDGET_BYTES.justification)}`;
  return `Allow agent to run \`${cmd}\`${as} in \`${bounded(r.workdir, QUESTION_BUDGET_BYTES.workdir)}\`?${why}`;
}

/**
 * The program a decision grants (see {@link Grant}): the first token of the rule that produced the decision, with
 * the `host_executable` paths listed for it.
 */
function grantOf(s: EscalationSettings, e: Evaluation): Grant | undefined {
  for (const m of e.matchedRules) {
    if (!("prefixRuleMatch" in m) || m.prefixRuleMatch.decision !== e.decision) continue;
    const program = m.prefixRuleMatch.matchedPrefix[0]!;
    const hostExecutables = program.includes("/") ? undefined : s.policy.hostExecutables.get(program);
    return hostExecutables === undefined ? { program } : { program, hostExecutables };
  }
  return undefined;
}

/**
 * Decide one intercepted exec `r` (Codex's `determine_action`, with the table above): resolves to `Run`, `Deny` with
 * its reason (also told to `hooks.denied`), or `Escalate` carrying the {@link Grant} of the rule behind it, which the
 * escalation boundary checks against what will really run. May ask a human through `hooks.ask` (with the call's
 * timeout paused), remember an approval in `s.memory`, and append an "always allow" rule to
 * `$CODEX_HOME/rules/default.rules` (a failure to append is logged, not thrown). Rejects only when `hooks.ask`
 * rejects with anything but `UNANSWERED`.
 */
export async function decideExec(s: EscalationSettings, hooks: CallHooks, r: ResolvedRequest): Promise<Decided> {
  const d = await decide(s, hooks, r);
  if (d.kind === "Deny" && hooks.denied !== undefined) hooks.denied(denialOf(s, r, d.reason ?? "denied"));
  return d;
}

/** What a Deny of `r` was: a `forbidden` rule (its prefix named when one matched), else a missing approval. */
function denialOf(s: EscalationSettings, r: ResolvedRequest, reason: string): ExecDenial {
  const name = s.preserveProgramPaths ? r.file : basename(r.file);
  const command = [name, ...r.argv.slice(1)];
  if (reason === FORBIDDEN_REASON) {
    const e = s.policy.check(
      [r.file, ...r.argv.slice(1)],
      { resolveHostExecutables: !s.preserveProgramPaths, cwd: r.workdir },
      () => "allow",
    );
    const m = e.matchedRules.find((x) => "prefixRuleMatch" in x && x.prefixRuleMatch.decision === "forbidden");
    const prefix = m !== undefined && "prefixRuleMatch" in m ? m.prefixRuleMatch.matchedPrefix : undefined;
    return prefix !== undefined ? { kind: "forbidden", command, prefix } : { kind: "forbidden", command };
  }
  return { kind: "approval", command, reason };
}

/** The Deny reason of a `forbidden` rule (Codex's words). */
const FORBIDDEN_REASON = "Execution forbidden by policy";

async function decide(s: EscalationSettings, hooks: CallHooks, r: ResolvedRequest): Promise<Decided> {
  const name = s.preserveProgramPaths ? r.file : basename(r.file);
  const heuristicCmd = [name, ...r.argv.slice(1)];
  const policyCmd = [r.file, ...r.argv.slice(1)];
  const e = s.policy.check(policyCmd, { resolveHostExecutables: !s.preserveProgramPaths, cwd: r.workdir }, () =>
    commandMightBeDangerous(heuristicCmd) ? "prompt" : "allow",
  );
  const driven = isPolicyDriven(e);
  const grant = driven ? grantOf(s, e) : undefined;
  const approved: Decided = grant !== undefined ? { kind: "Escalate", grant } : { kind: "Run" };
  log.debug("exec decision", { file: r.file, argv: r.argv, decision: e.decision, driven });
  switch (e.decision) {
    case "forbidden":
      log.notice("denied", { file: r.file, argv: r.argv, reason: "forbidden by policy" });
      return { kind: "Deny", reason: FORBIDDEN_REASON };
    case "allow":
    case undefined:
      return approved;
    case "prompt":
      break;
  }
  // argv[0] is part of what was approved: `exec -a git-archive git …` is another command than `git …`.
  const key = JSON.stringify([r.file, ...r.argv, r.workdir]);
  const remembered = s.memory.get(key);
  if (remembered === true) return approved;
  // A prompt *rule* wins over any allow rule (the strictest matching rule wins): the way out is to change it.
  const promptRule = driven ? e.matchedRules.find((m) => "prefixRuleMatch" in m && m.prefixRuleMatch.decision === "prompt") : undefined;
  const rulePrefix = promptRule !== undefined && "prefixRuleMatch" in promptRule ? promptRule.prefixRuleMatch.matchedPrefix : undefined;
  if (hooks.ask === undefined) {
    log.notice("prompt not asked (the client cannot)", { file: r.file, argv: r.argv, onPrompt: s.onPrompt });
    if (s.onPrompt === "run-in-sandbox") return { kind: "Run" };
    if (rulePrefix !== undefined)
      return {
        kind: "Deny",
        reason: `this command needs a human's approval: a prompt rule matching ${bounded(JSON.stringify(rulePrefix))} asks for it, and this MCP client cannot ask (no elicitation support). To run it without asking, change that rule's decision to "allow" in your rules files (${s.codexHome}/rules/); adding an allow rule changes nothing, because the strictest matching rule wins`,
      };
    return {
      kind: "Deny",
      reason: `this command needs a human's approval, and this MCP client cannot ask for it (no elicitation support). A human can allow it by adding a rule to ${s.codexHome}/rules/default.rules, e.g. prefix_rule(pattern=${bounded(JSON.stringify(heuristicCmd.slice(0, 2)))}, decision="allow")`,
    };
  }
  const form: ApprovalForm = rulePrefix !== undefined ? "rule" : "general";
  const justification = promptRule !== undefined && "prefixRuleMatch" in promptRule ? promptRule.prefixRuleMatch.justification : undefined;
  let answer: ApprovalAnswer;
  try {
    answer = await hooks.paused(() => hooks.ask!(elicitationMessage(r, justification), form));
  } catch (err) {
    // Nobody answered in time (the local approver): a Deny with its reason, not an "escalation policy error".
    if (!isErrorCode(err, "UNANSWERED")) throw err;
    log.notice("denied", { file: r.file, argv: r.argv, reason: "nobody answered" });
    return { kind: "Deny", reason: err.message };
  }
  log.notice("prompted", { file: r.file, argv: r.argv, answer: answer.action });
  switch (answer.action) {
    case "accept":
      s.memory.set(key, true);
      if (answer.content?.always_allow === true) {
        try {
          appendAllowRule(s.codexHome, heuristicCmd);
          amendPolicyInMemory(s.policy, heuristicCmd);
          return { kind: "Escalate", grant: { program: heuristicCmd[0]! } }; // now allowed by a rule
        } catch (err) {
          log.warn("could not add the always-allow rule", { error: (err as Error).message });
        }
      }
      return approved;
    case "decline":
      log.notice("denied", { file: r.file, argv: r.argv, reason: "declined by the user" });
      return { kind: "Deny", reason: "User declined execution" };
    default:
      return { kind: "Deny", reason: "User cancelled execution" };
  }
}
