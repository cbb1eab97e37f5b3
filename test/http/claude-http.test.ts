/**
 * The real Claude Code CLI (`claude -p`) against `shellmcp serve --listen` (issue 43), configured as
 * docs/clients.md's HTTP recipe says: a project `.mcp.json` entry of `"type": "http"` with the URL and an
 * `Authorization` header taking the token from the environment; a stand-in model on loopback
 * (test/helpers/messages-mock.ts) loads the shell tools through ToolSearch and makes one call.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../helpers/binary.ts";
import { startHttpServe, type HttpServe } from "../helpers/http.ts";
import { MessagesMock, offersTool, text, toolResults, toolUse, type Script } from "../helpers/messages-mock.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { place, runClient, writeProbe, expectWriteProbe, type Plan } from "../clients/common.ts";

const CLAUDE = join(ROOT, "node_modules", "@anthropic-ai", `claude-code-linux-${process.arch === "arm64" ? "arm64" : "x64"}`, "claude");
const skip = skipWithout(
  "real Claude Code over HTTP",
  shellsMissing() ?? (existsSync(CLAUDE) ? undefined : "@anthropic-ai/claude-code is not installed: npm ci") ?? toolMissing("git"),
);
const SHELL_TOOLS = ["shell", "exec_command", "write_stdin", "list_sessions"].map((t) => `mcp__shell__${t}`);
const SEARCH_ID = "toolu_search";

/** The stand-in model: load the deferred shell tools through ToolSearch, then follow `plan`, then end the turn. */
function script(plan: Plan): Script {
  return (req) => {
    if (!offersTool(req, "ToolSearch") && !offersTool(req, "mcp__shell__shell")) return [text("ok")];
    const got = toolResults(req);
    if (!offersTool(req, "mcp__shell__shell") && !got.has(SEARCH_ID))
      return [toolUse(SEARCH_ID, "ToolSearch", { query: `select:${SHELL_TOOLS.join(",")}` })];
    const results = [...got].filter(([id]) => id !== SEARCH_ID).map(([, r]) => r.text);
    const next = plan(results);
    return next === undefined ? [text("done")] : [toolUse(`toolu_${results.length}`, `mcp__shell__${next.tool}`, next.args)];
  };
}

const servers: HttpServe[] = [];
const mocks: MessagesMock[] = [];
afterAll(async () => {
  for (const m of mocks) m.stop();
  for (const s of servers) await s.stop().catch(() => undefined);
});

describe.skipIf(skip)("real Claude Code (claude -p) over HTTP", () => {
  test("the docs/clients.md recipe: .mcp.json type http with an Authorization header from the environment", async () => {
    const p = place("claude-http");
    const s = await startHttpServe({
      args: ["--sandbox", "workspace-write", "--cd", p.proj],
      home: p.home,
      env: { CODEX_HOME: p.codexHome },
    });
    servers.push(s);
    writeFileSync(
      join(p.proj, ".mcp.json"),
      JSON.stringify({
        mcpServers: { shell: { type: "http", url: s.url.href, headers: { Authorization: "Bearer ${SHELLMCP_TOKEN}" } } },
      }),
    );
    const mock = new MessagesMock(script(writeProbe(p)));
    mocks.push(mock);
    const tmp = mkdtempSync(join(tmpdir(), "claude-tmp-"));
    const r = await runClient([CLAUDE, "-p", "run the planned commands", "--allowedTools", "mcp__shell"], {
      cwd: p.proj,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: p.home,
        TMPDIR: tmp,
        CLAUDE_CODE_TMPDIR: tmp,
        ANTHROPIC_API_KEY: "dummy",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        ANTHROPIC_BASE_URL: mock.url,
        SHELLMCP_TOKEN: s.token!,
      },
    });
    mock.stop();
    const results = [...toolResults(mock.requests.at(-1)!)].filter(([id]) => id !== SEARCH_ID).map(([, v]) => v.text);
    expect(r.exitCode, r.stderr).toBe(0);
    expectWriteProbe(p, results[0]);
  }, 120_000);
});
