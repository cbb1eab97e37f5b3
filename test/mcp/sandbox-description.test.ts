/**
 * The sandbox described to the model (issue 41, docs/blocked-actions.md "The sandbox described to the model"): the
 * `initialize` instructions say how the sandbox behaves and what a `shellmcp: blocked` line means; the `shell` tool's
 * description says what is in effect for this server (its writable roots, the network), while the input schema stays
 * Codex's.
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { sandboxSummary } from "../../src/mcp/sandbox-summary.ts";
import { shellTool, shellToolFor } from "../../src/mcp/shell-tool.ts";

const skip = skipWithout("sandbox description suite", shellsMissing());
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
});

function folder(prefix: string): string {
  const d = join(CONF_BASE, `${prefix}-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  return realpathSync(d);
}

describe.skipIf(skip)("the sandbox described to the model (compiled binary)", () => {
  test("instructions: the sandbox in general and the blocked lines; the shell tool: this server's writable roots and network", async () => {
    const ws = folder("ws");
    const extra = folder("extra");
    const s = await startServe({ args: ["--sandbox", "workspace-write", "--cd", ws, "--add-dir", extra] });
    sessions.push(s);
    const instructions = s.client.getInstructions()!;
    expect(instructions).toStartWith("This server provides a tool to execute shell commands and return their output. ");
    expect(instructions).toContain("never .git, .codex or .agents");
    expect(instructions).toContain("`shellmcp: blocked`");
    const shell = (await s.client.listTools()).tools.find((t) => t.name === "shell")!;
    expect(shell.description).toContain(`writes only ${extra}, ${ws}, /tmp`);
    expect(shell.description).toContain("The network is off");
    expect(shell.description).toContain(".git, .codex and .agents stay read-only");
    expect(shell.description).toContain("`shellmcp: blocked`");
  });
});

test("Codex gets the per-call wording and Codex's input schema; the summary only extends the description", () => {
  const codex = sandboxSummary({
    codex: true,
    policy: { type: "read-only", access: { type: "full-access" }, network_access: false },
    cwd: "/",
    env: {},
    network: { enabled: false, allow: [], mode: "full" },
  });
  expect(codex).toStartWith("Commands run under the sandbox settings Codex sends");
  const listed = shellToolFor("codex-mcp-client", 10_000, codex);
  expect(listed.inputSchema).toEqual(shellTool().inputSchema);
  expect(listed.description).toBe(`${shellTool(10_000).description} ${codex}`);
  const proxied = sandboxSummary({
    codex: false,
    policy: {
      type: "workspace-write",
      writable_roots: [],
      read_only_access: { type: "full-access" },
      network_access: true,
      exclude_slash_tmp: true,
      exclude_tmpdir_env_var: true,
    },
    cwd: "/",
    env: {},
    network: { enabled: true, allow: ["registry.npmjs.org"], mode: "full" },
  });
  expect(proxied).toContain("through a proxy that allows only listed hosts (registry.npmjs.org)");
});
