/**
 * The MCP side of an exec question (docs/escalation.md, "Decisions"): the elicitation forms a `prompt` is asked with,
 * the answer's shape, and {@link execAsker}, which turns a client's elicitation (or the local approver standing in
 * for it) into the decision's `ask` (src/escalate/decision/decide.ts). The decision itself knows no MCP.
 */
import type { ApprovalForm, CallHooks } from "../escalate/decision/decide.ts";

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

/** How an exec question is put to a human: a client's elicitation, or the local approver's `elicit` (src/approvals/server.ts). */
export type ExecElicit = (message: string, schema: typeof ELICITATION_SCHEMA | typeof ELICITATION_SCHEMA_RULE) => Promise<ElicitAnswer>;

/**
 * The decision's `ask` over `elicit`: the `general` form is {@link ELICITATION_SCHEMA}, the `rule` form
 * {@link ELICITATION_SCHEMA_RULE}; the message and the answer pass through unchanged, and so does a rejection.
 * `undefined` (nobody can be asked) stays `undefined`.
 */
export function execAsker(elicit: ExecElicit | undefined): CallHooks["ask"] {
  if (elicit === undefined) return undefined;
  return (message: string, form: ApprovalForm) => elicit(message, form === "rule" ? ELICITATION_SCHEMA_RULE : ELICITATION_SCHEMA);
}
