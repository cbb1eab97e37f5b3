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
import { isPolicyDriven, type Policy } from "../execpolicy/policy.ts";
import { shlexJoin } from "../execpolicy/shlex.ts";
import type { EscalateAction } from "../escalate/protocol.ts";
import type { ResolvedRequest } from "../escalate/server.ts";
import { log } from "../log.ts";
import { commandMightBeDangerous } from "./heuristics.ts";

/** Elicitation answer, as MCP defines it. */
export interface ElicitAnswer {
  action: "accept" | "decline" | "cancel";
  content?: Record<string, unknown>;
}

/** The form shown to the human: the original's `reason` field, plus our optional "always allow". */
export const ELICITATION_SCHEMA = {
  type: "object",
  title: "Execution Permission Request",
  properties: {
    reason: { type: "string", description: "Optional reason for allowing or denying execution" },
    always_allow: {
      type: "boolean",
      title: "Always allow",
      description: "Also allow this command in future sessions (adds a prefix_rule to ~/.codex/rules/default.rules)",
    },
  },
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
  elicit?: (message: string, schema: typeof ELICITATION_SCHEMA) => Promise<ElicitAnswer>;
  /** Run `f` with the call's timeout paused. */
  paused: <T>(f: () => Promise<T>) => Promise<T>;
}

function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}

/** The elicitation message, exactly as Codex: ``Allow agent to run `<file> <args>` in `<workdir>`?``. */
export function elicitationMessage(r: ResolvedRequest): string {
  const args = r.argv.slice(1);
  const cmd = args.length === 0 ? r.file : `${r.file} ${shlexJoin(args)}`;
  return `Allow agent to run \`${cmd}\` in \`${r.workdir}\`?`;
}

/** Decide one intercepted exec. */
export async function decideExec(s: EscalationSettings, hooks: CallHooks, r: ResolvedRequest): Promise<EscalateAction> {
  const name = s.preserveProgramPaths ? r.file : basename(r.file);
  const heuristicCmd = [name, ...r.argv.slice(1)];
  const policyCmd = [r.file, ...r.argv.slice(1)];
  const e = s.policy.check(policyCmd, { resolveHostExecutables: !s.preserveProgramPaths, cwd: r.workdir }, () =>
    commandMightBeDangerous(heuristicCmd) ? "prompt" : "allow",
  );
  const driven = isPolicyDriven(e);
  const approved: EscalateAction = driven ? { kind: "Escalate" } : { kind: "Run" };
  log.debug("exec decision", { file: r.file, argv: r.argv, decision: e.decision, driven });
  switch (e.decision) {
    case "forbidden":
      return { kind: "Deny", reason: "Execution forbidden by policy" };
    case "allow":
    case undefined:
      return approved;
    case "prompt":
      break;
  }
  const key = JSON.stringify([r.file, ...r.argv.slice(1), r.workdir]);
  const remembered = s.memory.get(key);
  if (remembered === true) return approved;
  if (hooks.elicit === undefined) {
    if (s.onPrompt === "run-in-sandbox") return { kind: "Run" };
    return {
      kind: "Deny",
      reason: `this command needs a human's approval, and this MCP client cannot ask for it (no elicitation support). A human can allow it by adding a rule to ${s.codexHome}/rules/default.rules, e.g. prefix_rule(pattern=${JSON.stringify(heuristicCmd.slice(0, 2))}, decision="allow")`,
    };
  }
  const answer = await hooks.paused(() => hooks.elicit!(elicitationMessage(r), ELICITATION_SCHEMA));
  switch (answer.action) {
    case "accept":
      s.memory.set(key, true);
      if (answer.content?.always_allow === true) {
        try {
          appendAllowRule(s.codexHome, heuristicCmd);
          amendPolicyInMemory(s.policy, heuristicCmd);
          return { kind: "Escalate" }; // now allowed by a rule
        } catch (err) {
          log.warn("could not add the always-allow rule", { error: (err as Error).message });
        }
      }
      return approved;
    case "decline":
      return { kind: "Deny", reason: "User declined execution" };
    default:
      return { kind: "Deny", reason: "User cancelled execution" };
  }
}
