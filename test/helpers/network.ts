/**
 * The Codex 0.169 config the network suites give `serve` and Codex (docs/network.md): the `agent` permission
 * profile on top of `:workspace`, the network proxy feature on, the network enabled with `allow_local_binding` as
 * given, `extra` lines in the network table (e.g. `mode = "limited"`), and `domains` in order.
 */
export function agentNetworkConfig(o: { allowLocalBinding: boolean; extra?: string; domains: Record<string, "allow" | "deny"> }): string {
  return `default_permissions = "agent"
[features]
network_proxy = true
[permissions.agent]
extends = ":workspace"
[permissions.agent.network]
enabled = true
allow_local_binding = ${o.allowLocalBinding}
${o.extra ?? ""}
[permissions.agent.network.domains]
${Object.entries(o.domains)
  .map(([d, v]) => `"${d}" = "${v}"`)
  .join("\n")}
`;
}
