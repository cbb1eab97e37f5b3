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
 */
import { amendPolicyInMemory, appendAllowRule } from "../execpolicy/amend.ts";
import { isPolicyDriven, type Evaluation, type Policy } from "../execpolicy/policy.ts";
import { shlexJoin } from "../execpolicy/shlex.ts";
import type { Grant } from "../escalate/decision/boundary.ts";
import type { Decided, ResolvedRequest } from "../escalate/server.ts";
import { isErrorCode } from "../errors.ts";
import { log } from "../log.ts";
import { commandMightBeDangerous } from "../escalate/decision/heuristics.ts";
import { bounded } from "../safe-text.ts";
import type { BlockedAction } from "../blocked/report.ts";
import { approvalRemedy, ruleRemedy } from "../blocked/remedies.ts";

/** Elicitation answer, as MCP defines it. */
export interface ElicitAnswer {
  action: "accept" | "decline" | "cancel";
  content?: Record<string, unknown>;
}

/**
 * The form shown to the human: the original's `reason` field, plus our optional "always allow". No top-level
 * `title`: the MCP schema's `requestedSchema` has `$schema`, `type`, `properties` and `required` only, and Codex
 * 0.169's TUI (its app server parses the form with `deny_unknown_fields`) answers any other member with `cancel`
 * and shows nothing (docs/clients.md, "Codex TUI approvals").
 */
export const ELICITATION_SCHEMA = {
  type: "object",
  properties: {
    reason: { type: "string", description: "Optional reason for allowing or denying execution" },
    always_allow: {
      type: "boolean",
      title: "Always allow",
      default: false,
      description: "Also allow this command in future sessions (adds a prefix_rule to ~/.codex/rules/default.rules)",
    },
  },
} as const;

/**
 * The form for a prompt that a `prompt` *rule* produced: no "always allow", which would append an `allow` rule
 * that changes nothing (the strictest matching rule wins, and the prompt rule stays).
 */
export const ELICITATION_SCHEMA_RULE = {
  type: "object",
  properties: { reason: ELICITATION_SCHEMA.properties.reason },
} as const;

/** What to do with a `prompt` when the client cannot ask a human. */
export type OnPrompt = "deny" | "run-in-sandbox";

/** Settings shared by every call of a server. */
export interface EscalationSettings {
  policy: Policy;
  codexHome: string;
  preserveProgramPaths: boolean;
  onPrompt: OnPrompt;
  /** Approvals remembered for this session (key → true). Declines are not remembered. */
  memory: Map<string, boolean>;
}

/** Per call: how to ask (undefined when the client has no elicitation capability), and the stopwatch. */
export interface CallHooks {
  elicit?: (message: string, schema: typeof ELICITATION_SCHEMA | typeof ELICITATION_SCHEMA_RULE) => Promise<ElicitAnswer>;
  /** Run `f` with the call's timeout paused. */
  paused: <T>(f: () => Promise<T>) => Promise<T>;
  /** Told of every Deny (layer `rule` or `approval`, the program and how a human can allow it: ../blocked/report.ts). */
  blocked?: (a: BlockedAction) => void;
}

function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}

/** Byte budgets of the untrusted parts of the exec question (UTF-8, after rendering; see ../safe-text.ts). */
export const QUESTION_BUDGET_BYTES = { command: 1024, workdir: 512, argv0: 256, justification: 512 } as const;

/**
 * The elicitation message, as Codex: ``Allow agent to run `<file> <args>` in `<workdir>`?``, plus
 * `` (as argv[0] `<name>`)`` when `argv[0]` is neither the file's path nor its base name: programs dispatch on
 * it, so the human must see it (Codex leaves it out), plus a second line ``Reason given by the rule: <text>``
 * when the `prompt` rule that asks has a `justification`.
 *
 * Every part the model or a repository chose (program path, arguments, argv[0], folder, justification) is rendered
 * by ../safe-text.ts `bounded`: control and bidi/format characters as visible escapes (`\r`, `\x1b`, `\u202e`), each
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
 * Decide one intercepted exec. An `Escalate` carries the {@link Grant} of the rule behind it, which the escalation
 * boundary checks against what will really run.
 */
export async function decideExec(s: EscalationSettings, hooks: CallHooks, r: ResolvedRequest): Promise<Decided> {
  const d = await decide(s, hooks, r);
  if (d.kind === "Deny" && hooks.blocked !== undefined) hooks.blocked(blockedOf(s, r, d.reason ?? "denied"));
  return d;
}

/** What a Deny of `r` blocked: a `forbidden` rule (its prefix named when one matched), else a missing approval. */
function blockedOf(s: EscalationSettings, r: ResolvedRequest, reason: string): BlockedAction {
  const name = s.preserveProgramPaths ? r.file : basename(r.file);
  const cmd = [name, ...r.argv.slice(1)];
  const target = shlexJoin(cmd);
  const rulesDir = `${s.codexHome}/rules`;
  if (reason === FORBIDDEN_REASON) {
    const e = s.policy.check(
      [r.file, ...r.argv.slice(1)],
      { resolveHostExecutables: !s.preserveProgramPaths, cwd: r.workdir },
      () => "allow",
    );
    const m = e.matchedRules.find((x) => "prefixRuleMatch" in x && x.prefixRuleMatch.decision === "forbidden");
    const prefix = m !== undefined && "prefixRuleMatch" in m ? m.prefixRuleMatch.matchedPrefix : undefined;
    return { layer: "rule", target, remedy: ruleRemedy(prefix, rulesDir) };
  }
  return { layer: "approval", target, remedy: approvalRemedy(cmd, rulesDir, reason) };
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
  if (hooks.elicit === undefined) {
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
  const schema = rulePrefix !== undefined ? ELICITATION_SCHEMA_RULE : ELICITATION_SCHEMA;
  const justification = promptRule !== undefined && "prefixRuleMatch" in promptRule ? promptRule.prefixRuleMatch.justification : undefined;
  let answer: ElicitAnswer;
  try {
    answer = await hooks.paused(() => hooks.elicit!(elicitationMessage(r, justification), schema));
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
