/**
 * The sandbox described to the model (issue 41): a few sentences for the `shell` tool's description saying what is
 * in effect for this server — where commands may write, that git's and the agent's control folders stay read-only,
 * the network, what a `shellmcp: blocked` line means — and where sessions help. The `initialize` answer's
 * `instructions` cannot carry this: it is written before the configuration is read (./early-initialize.ts), so it
 * says the general part and points here; `tools/list` is answered after start-up, with these facts.
 */
import type { NetworkPolicy } from "../network/policy.ts";
import { hasFullDiskWrite, hasFullNetwork, type SandboxPolicy } from "../sandbox/policy.ts";
import { writableRootPaths } from "../sandbox/roots.ts";
import { bounded } from "../safe-text.ts";

/** Most writable roots and allowed hosts named (the rest are counted). */
const MAX_NAMED = 6;

function list(items: readonly string[]): string {
  const named = items.slice(0, MAX_NAMED).map((i) => bounded(i, 200));
  return items.length > MAX_NAMED ? `${named.join(", ")} and ${items.length - MAX_NAMED} more` : named.join(", ");
}

/** The network sentence of `policy` under the proxy settings `network`. */
function networkSentence(policy: SandboxPolicy, network: Pick<NetworkPolicy, "enabled" | "allow" | "mode">): string {
  if (!hasFullNetwork(policy)) return "The network is off (a name lookup or connection fails).";
  if (policy.type === "danger-full-access" || !network.enabled) return "The network is on.";
  const hosts = network.allow.length === 0 ? "no host yet" : list(network.allow);
  return `The network goes through a proxy that allows only listed hosts (${hosts})${network.mode === "limited" ? ", plain-HTTP GET/HEAD/OPTIONS only" : ""}; others are refused.`;
}

/**
 * The sandbox part of the `shell` tool's description for a client named `clientName` (Codex, whose own sandbox state
 * comes with each call, or another client, which runs under the server's `policy` in `cwd` unless it sends a state).
 * `env`: the shells' environment (its TMPDIR is a writable root). Plain sentences, no line breaks.
 */
export function sandboxSummary(o: {
  codex: boolean;
  policy: SandboxPolicy;
  cwd: string;
  env: Record<string, string | undefined>;
  network: Pick<NetworkPolicy, "enabled" | "allow" | "mode">;
}): string {
  const parts: string[] = [];
  if (o.codex)
    parts.push(
      "Commands run under the sandbox settings Codex sends (its sandbox mode, writable roots and network), enforced by a kernel sandbox.",
    );
  else if (o.policy.type === "danger-full-access" || hasFullDiskWrite(o.policy))
    parts.push("Commands run without a filesystem sandbox on this server.");
  else if (o.policy.type === "workspace-write")
    parts.push(`Commands run in a kernel sandbox that writes only ${list(writableRootPaths(o.policy, o.cwd, o.env))}.`);
  else parts.push("Commands run in a read-only kernel sandbox: they can read but write no file.");
  if (!o.codex) parts.push(networkSentence(o.policy, o.network));
  parts.push(
    "Inside writable folders .git, .codex and .agents stay read-only: git commits, fetches and checkouts work only through a rule that allows git.",
    "Anything the sandbox, a rule, the network policy or a human refused is reported after the output as a line starting `shellmcp: blocked` that names what was refused and how a human can allow it: tell the user instead of working around it.",
  );
  return parts.join(" ");
}
