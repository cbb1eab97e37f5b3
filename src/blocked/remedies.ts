/**
 * How a human can allow what a layer refused (./report.ts), in the configuration's real words: the keys and flags of
 * docs/configuration.md, docs/network.md and docs/escalation.md, and Codex's `prefix_rule`/`network_rule`.
 */
import { basename } from "node:path";
import { bounded } from "../safe-text.ts";

/** A write outside every writable root. */
export function sandboxWriteRemedy(): string {
  return (
    "outside this call's writable folders. A human can add its folder to the writable roots (Codex: " +
    "`[sandbox_workspace_write] writable_roots`; clients without sandbox state: `shellmcp serve --add-dir DIR`), or for " +
    'one program a rule allows, `[shellmcp.room_writable] PROGRAM = ["DIR"]`'
  );
}

/** A write to a path kept read-only inside a writable root (`.git`, `.codex`, `.agents`, a protected config folder). */
export function protectedPathRemedy(path: string): string {
  const parts = path.split("/");
  if (parts.includes(".git") || /\.git$/.test(basename(path)))
    return (
      "git's control files are read-only inside the sandbox. A human lets git write them through a rule, e.g. " +
      '`prefix_rule(pattern=["git", "commit"], decision="allow")` in ~/.codex/rules/default.rules (the allowed git runs ' +
      "in an escalation room that may write the repository, never its config or hooks)"
    );
  return "agent configuration (.codex, .agents and the like) is read-only in every sandbox, as in Codex. A human edits it outside the agent";
}

/** A network access in a call whose sandbox has no network. */
export function networkOffRemedy(): string {
  return (
    "this call's sandbox has no network. A human can turn it on (Codex: `[sandbox_workspace_write] network_access = true` " +
    "or a permission profile's `network.enabled = true`), best with `[features] network_proxy = true` and the hosts in " +
    '`[permissions.<profile>.network.domains]`; for one program a rule allows, `[shellmcp.room_network] PROGRAM = ["HOST"]`'
  );
}

/** A destination the network proxy refused (`reason`: its block reason, src/network/policy.ts). */
export function proxyRefusalRemedy(host: string, reason: string): string {
  const h = bounded(host, 256);
  if (reason === "method_not_allowed" || reason === "mitm_required")
    return `the network proxy is in limited mode (${reason}). A human can set \`mode = "full"\` in \`[permissions.<profile>.network]\` of config.toml`;
  if (reason === "denied" || reason === "policy_denied")
    return `a deny entry of the network policy matches (${reason}). A human removes it from \`[permissions.<profile>.network.domains]\` or the rules' \`network_rule\`s`;
  if (reason === "not_allowed_local")
    return `local and private addresses are refused (${reason}). A human can add an exact entry \`"${h}" = "allow"\` to \`[permissions.<profile>.network.domains]\`, or set \`allow_local_binding = true\``;
  return `the host is not in the network allowlist (${reason}). A human can add \`"${h}" = "allow"\` to \`[permissions.<profile>.network.domains]\` in config.toml, or \`network_rule(host="${h}", protocol="https", decision="allow")\` to ~/.codex/rules/default.rules`;
}

/** A program a `forbidden` rule denied (`prefix`: the rule's matched prefix, when known). */
export function ruleRemedy(prefix: readonly string[] | undefined, rulesDir: string): string {
  const rule =
    prefix === undefined
      ? "a forbidden prefix_rule"
      : `\`prefix_rule(pattern=${bounded(JSON.stringify(prefix), 200)}, decision="forbidden")\``;
  return `${rule} in the rules (${rulesDir}) denies it. A human can change or remove that rule; the model should not try to get around it`;
}

/**
 * A program that needed approval and did not get it (`why`: the deny reason as the shell printed it). When the client
 * cannot ask, `why` already says what to change (../escalate/decision/decide.ts: the prompt rule, or an allow rule to add).
 */
export function approvalRemedy(cmd: readonly string[], rulesDir: string, why: string): string {
  if (why.startsWith("this command needs a human's approval")) return bounded(why, 1000);
  return (
    `${bounded(why, 300)}. A human can approve it when asked, or allow it for good with ` +
    `\`prefix_rule(pattern=${bounded(JSON.stringify(cmd.slice(0, 2)), 200)}, decision="allow")\` in ${rulesDir}/default.rules`
  );
}

/** An allowed program the escalation boundary ran inside the sandbox instead (`reason`: the boundary's). */
export function escalationRemedy(reason: string): string {
  return (
    `a rule allows it, but it ran inside the sandbox instead of escalating: ${bounded(reason, 300)}. ` +
    'What it could not do there failed as sandboxed (docs/escalation.md, "The escalation boundary")'
  );
}

/**
 * A change to git's control files (hooks, config, submodule links) that the git guard undid after the call
 * (docs/git-guard.md; Landlock cannot keep them read-only), or could not undo (`failed`).
 */
export function gitGuardRemedy(failed: boolean): string {
  return (
    (failed ? "this change to git's control files could NOT be put back: the user must check it before running git there. " : "") +
    "git's hooks and config are put back after every call (git would run them outside the sandbox). A human who wants the change makes it outside the agent"
  );
}
