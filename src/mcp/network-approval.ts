/**
 * Asking a person about a host the network policy does not list (`not_allowed`; issue 24): the MCP elicitation
 * "Allow network access to host:port?" with how long a yes holds — this command only, this session (both for
 * that host, port and protocol only: a yes for `host:443` is no yes for `host:22`), or always (Codex's amendment:
 * a `network_rule` appended to `$CODEX_HOME/rules/default.rules`, which names the host: every port of it, as the
 * option says). The question goes where a `prompt`'s goes (src/serve/call.ts): the client's elicitation (in the
 * 2026-07-28 era, `input_required`), or the local approver (src/approvals/), which also gets the host, port and
 * protocol apart. No way to ask, a decline, a cancel, an error or no answer within {@link NETWORK_ASK_TIMEOUT_MS}
 * → refused.
 */
import { appendNetworkAllowRule, type NetworkRuleProtocol } from "../execpolicy/amend.ts";
import { log } from "../log.ts";
import type { ApprovalScope, ProxyProtocol } from "../network/proxy.ts";
import type { ElicitAnswer } from "./elicitation.ts";
import { bounded } from "../safe-text.ts";

/** How long a network question waits for its answer, ms (then the request is refused). */
export const NETWORK_ASK_TIMEOUT_MS = 5 * 60_000;

/**
 * The form: one choice of scope (MCP elicitation: a string with `enum`). No top-level `title`, which Codex 0.169's
 * TUI refuses (see ELICITATION_SCHEMA in elicitation.ts).
 */
export const NETWORK_ELICITATION_SCHEMA = {
  type: "object",
  properties: {
    scope: {
      type: "string",
      title: "Allow for",
      description:
        "once: this command, this host and port only; session: this host and port until the server stops; always: every port of this host, from now on (adds a network_rule to ~/.codex/rules/default.rules)",
      enum: ["once", "session", "always"],
      enumNames: ["This command (this port)", "This session (this port)", "Always (any port of this host)"],
      default: "once",
    },
  },
} as const;

/** The question: `Allow network access to other.test:443? (the command's https_connect request is not in the allow list)`. */
export function networkElicitationMessage(host: string, port: number, protocol: ProxyProtocol): string {
  // The host is the command's choice: rendered (../safe-text.ts) and bounded like every part of a question.
  const h = bounded(host.includes(":") ? `[${host}]` : host, 256);
  return `Allow network access to ${h}:${port}? (the command's ${protocol} request is not in the network allow list)`;
}

/** What a network question is about, for an asker that shows it apart from the message (the local approver). */
export interface NetworkQuestion {
  host: string;
  port: number;
  protocol: ProxyProtocol;
}

/**
 * How a network question is asked: an MCP elicitation (which ignores `about`), or the local approver's `elicit`
 * (src/approvals/server.ts).
 */
export type NetworkElicit = (message: string, schema: typeof NETWORK_ELICITATION_SCHEMA, about?: NetworkQuestion) => Promise<ElicitAnswer>;

/** `network_rule`'s protocol for a request that came by `wire`. */
function ruleProtocol(wire: ProxyProtocol): NetworkRuleProtocol {
  return wire === "https_connect" ? "https" : wire;
}

/**
 * The proxy's `ask` for one call, given how to ask (`elicit`: the client's elicitation or the local approver;
 * undefined: no way to ask, so no question and every unknown host is refused). "always" appends the rule to
 * `codexHome`'s rules file; a failure to write it is logged and the yes holds for the session.
 */
export function networkAsker(
  elicit: NetworkElicit | undefined,
  codexHome: string,
  timeoutMs = NETWORK_ASK_TIMEOUT_MS,
): ((q: { host: string; port: number; protocol: ProxyProtocol }) => Promise<ApprovalScope | undefined>) | undefined {
  if (elicit === undefined) return undefined;
  return async ({ host, port, protocol }) => {
    let timer: Timer | undefined;
    const timeout = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), timeoutMs)));
    const answer = await Promise.race([
      elicit(networkElicitationMessage(host, port, protocol), NETWORK_ELICITATION_SCHEMA, {
        host,
        port,
        protocol,
      }).catch((e: unknown) => {
        // The approver's timeout, a closed approver, an elicitation that failed: no answer.
        log.info("network question not answered", { host, error: e instanceof Error ? e.message : String(e) });
        return undefined;
      }),
      timeout,
    ]).finally(() => clearTimeout(timer));
    if (answer === undefined || answer.action !== "accept") {
      log.notice("network host not approved", { host, port, protocol, answer: answer?.action ?? "timeout" });
      return undefined;
    }
    const raw = answer.content?.scope;
    const scope: ApprovalScope = raw === "session" || raw === "always" ? raw : "once";
    if (scope === "always") {
      try {
        appendNetworkAllowRule(codexHome, host, ruleProtocol(protocol), protocol);
      } catch (e) {
        log.warn("could not add the network_rule", { host, error: (e as Error).message });
      }
    }
    log.notice("network host approved", { host, port, protocol, scope });
    return scope;
  };
}
