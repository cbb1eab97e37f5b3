/**
 * The real Claude Code CLI (print mode, `claude -p`, @anthropic-ai/claude-code's native linux build) drives the
 * compiled `shellmcp serve` configured exactly as the README's Claude Code recipe says — `claude mcp add --scope user
 * shell -- shellmcp serve --sandbox workspace-write`, then `claude -p --allowedTools mcp__shell` — with a stand-in
 * model on loopback speaking the Anthropic Messages API (test/helpers/messages-mock.ts).
 *
 * Claude Code defers MCP tools behind its `ToolSearch` tool: like a real model, the stand-in first loads the shell
 * tools with `select:…`, then makes its planned calls one by one, then ends the turn. Every scenario asserts on what
 * the model received as the tool results, and on the files and processes on the machine.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { MessagesMock, offersTool, text, toolResults, toolUse, type Script } from "../helpers/messages-mock.ts";
import { probeBwrap } from "../../src/sandbox/linux/bwrap.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { hostGit } from "../helpers/attack.ts";
import {
  COMMIT_COMMAND,
  devServerPlan,
  expectCommitted,
  initClient,
  domainNetworkScenario,
  expectDevServerSession,
  expectWriteProbe,
  npmInstallScenario,
  npmScenarioMissing,
  forbiddenRuleScenario,
  freePort,
  NETWORK_ON_CONFIG,
  place,
  RULES,
  runClient,
  shellCall,
  writeProbe,
  type ClientOutcome,
  type Place,
  type Plan,
} from "./common.ts";

/** Claude Code's native binary, from its platform package (what the wrapper's postinstall copies to bin/). */
const CLAUDE = join(ROOT, "node_modules", "@anthropic-ai", `claude-code-linux-${process.arch === "arm64" ? "arm64" : "x64"}`, "claude");

const skip = skipWithout(
  "real Claude Code",
  shellsMissing() ??
    (existsSync(CLAUDE) ? undefined : "@anthropic-ai/claude-code (its linux platform package) is not installed: npm ci") ??
    toolMissing("git", "python3", "curl", "bwrap"),
);

const SHELL_TOOLS = ["shell", "exec_command", "write_stdin", "list_sessions"].map((t) => `mcp__shell__${t}`);
const SEARCH_ID = "toolu_search";

/** The stand-in model: load the deferred shell tools through ToolSearch, then follow `plan`, then end the turn. */
function script(plan: Plan): Script {
  return (req) => {
    const mainLoop = offersTool(req, "ToolSearch") || offersTool(req, "mcp__shell__shell");
    if (!mainLoop) return [text("ok")];
    const got = toolResults(req);
    if (!offersTool(req, "mcp__shell__shell") && !got.has(SEARCH_ID))
      return [toolUse(SEARCH_ID, "ToolSearch", { query: `select:${SHELL_TOOLS.join(",")}` })];
    const results = [...got].filter(([id]) => id !== SEARCH_ID).map(([, r]) => r.text);
    const next = plan(results);
    return next === undefined ? [text("done")] : [toolUse(`toolu_${results.length}`, `mcp__shell__${next.tool}`, next.args)];
  };
}

const mocks: MessagesMock[] = [];
afterAll(() => {
  for (const m of mocks) m.stop();
});

type Outcome = ClientOutcome<MessagesMock>;

/** The environment Claude Code runs with: the place's HOME, the stand-in model, no traffic beyond it. */
function env(p: Place, mock?: MessagesMock): Record<string, string> {
  // Claude Code's scratch files (else /tmp/claude-<uid>/, which outlives the run) in this run's temporary folder.
  const tmp = mkdtempSync(join(tmpdir(), "claude-tmp-"));
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: p.home,
    TMPDIR: tmp,
    CLAUDE_CODE_TMPDIR: tmp,
    ANTHROPIC_API_KEY: "dummy",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    ...(mock === undefined ? {} : { ANTHROPIC_BASE_URL: mock.url }),
  };
}

/**
 * The README's recipe: `claude mcp add --scope user shell -- <shellmcp> serve --sandbox workspace-write` (with
 * `prefix` before the server command: the network scenario's outer bubblewrap), then `claude -p` in the project
 * with `--allowedTools mcp__shell` (or `allowed`), the model following `plan`.
 */
async function run(p: Place, plan: Plan, o: { prefix?: string[]; allowed?: string[] } = {}): Promise<Outcome> {
  const add = await runClient(
    [CLAUDE, "mcp", "add", "--scope", "user", "shell", "--", ...(o.prefix ?? []), ensureBinary(), "serve", "--sandbox", "workspace-write"],
    { cwd: p.proj, env: env(p), deadlineMs: 30_000 },
  );
  if (add.exitCode !== 0) throw new Error(`claude mcp add: ${add.stdout}${add.stderr}`);
  const mock = new MessagesMock(script(plan));
  mocks.push(mock);
  const r = await runClient([CLAUDE, "-p", "run the planned commands", ...(o.allowed ?? ["--allowedTools", "mcp__shell"])], {
    cwd: p.proj,
    env: env(p, mock),
  });
  mock.stop();
  const last = mock.requests.at(-1);
  const results = last === undefined ? [] : [...toolResults(last)].filter(([id]) => id !== SEARCH_ID).map(([, v]) => v.text);
  if (results.length === 0) console.warn(`claude -p (${r.exitCode}):\n${r.stdout}\n${r.stderr.slice(-3000)}`);
  return { ...r, results, mock };
}

describe.skipIf(skip)("real Claude Code (claude -p) against shellmcp serve", () => {
  test("without --allowedTools, print mode refuses the call itself: nothing runs", async () => {
    const p = place("claude");
    const o = await run(p, shellCall(p, "touch made && echo MADE"), {
      allowed: [],
    });
    expect(o.results[0]).toContain("Claude requested permissions to use mcp__shell__shell, but you haven't granted it yet.");
    expect(o.results[0]).not.toContain("MADE");
    expect(existsSync(join(p.proj, "made"))).toBe(false);
  }, 120_000);

  test("a permissions.allow entry in ~/.claude/settings.json allows the tools as --allowedTools does", async () => {
    const p = place("claude");
    mkdirSync(join(p.home, ".claude"), { recursive: true });
    writeFileSync(join(p.home, ".claude", "settings.json"), JSON.stringify({ permissions: { allow: ["mcp__shell"] } }));
    const o = await run(p, shellCall(p, "touch made && echo MADE"), {
      allowed: [],
    });
    expect(o.results[0]).toContain("MADE");
    expect(existsSync(join(p.proj, "made"))).toBe(true);
  }, 120_000);

  test("a project .mcp.json is used by print mode as well (not left pending approval), with --allowedTools", async () => {
    const p = place("claude");
    writeFileSync(
      join(p.proj, ".mcp.json"),
      JSON.stringify({ mcpServers: { shell: { command: ensureBinary(), args: ["serve", "--sandbox", "workspace-write"] } } }),
    );
    const mock = new MessagesMock(script(shellCall(p, "touch made && echo MADE")));
    mocks.push(mock);
    const r = await runClient([CLAUDE, "-p", "run the planned commands", "--allowedTools", "mcp__shell"], {
      cwd: p.proj,
      env: env(p, mock),
    });
    mock.stop();
    expect(r.exitCode).toBe(0);
    const last = [...toolResults(mock.requests.at(-1)!)].filter(([id]) => id !== SEARCH_ID);
    expect(last.length).toBe(1);
    expect(last[0]![1].text).toContain("MADE");
    expect(existsSync(join(p.proj, "made"))).toBe(true);
  }, 120_000);

  test("a shell call: workspace-write writes the project, not outside it nor .git", async () => {
    const p = place("claude");
    const o = await run(p, writeProbe(p));
    expect(o.exitCode).toBe(0);
    // The shell tools were deferred, then loaded: the model saw all four.
    for (const t of SHELL_TOOLS) expect(o.mock.requests.some((r) => offersTool(r, t))).toBe(true);
    expectWriteProbe(p, o.results[0]);
  }, 120_000);

  // Issue 41: under bubblewrap every call of one server shares its private loopback network (docs/sessions.md).
  test.skipIf(!probeBwrap(true).ok)(
    "a session with the network off (the default): a later shell call reaches its dev server (the server's loopback network)",
    async () => {
      const p = place("claude");
      const port = freePort();
      const o = await run(p, devServerPlan(p, port));
      await expectDevServerSession(o.results, port);
    },
    120_000,
  );

  test("a session: exec_command starts a dev server, a later shell call reaches it (network on), it ends with the client", async () => {
    const p = place("claude", { config: NETWORK_ON_CONFIG });
    const port = freePort();
    const o = await run(p, devServerPlan(p, port));
    // Claude Code hands the model the result's structuredContent (Codex's output schema) as JSON, not its text.
    expect(o.results[0]).toMatch(/^\{"chunk_id":"[0-9a-f]+","wall_time_seconds":[\d.]+,"session_id":\d+,/);
    await expectDevServerSession(o.results, port);
  }, 120_000);

  test("a prompt rule: print mode offers elicitation but answers cancel at once, so nothing runs", async () => {
    const p = place("claude", { rules: RULES });
    const o = await run(p, shellCall(p, "touch ask-me; echo rc=$?"));
    // Not shellmcp's "cannot ask (no elicitation support)": Claude Code declares elicitation and cancels it.
    expect(o.results[0]).toContain("Execution denied: User cancelled execution");
    expect(o.results[0]).toContain("rc=1");
    expect(existsSync(join(p.proj, "ask-me"))).toBe(false);
  }, 120_000);

  test("a forbidden rule: denied, the program never runs", () => forbiddenRuleScenario("claude", run), 120_000);

  test("set up by `shellmcp init claude --yes` (issue 41): a shell call works, and the starter rules let it commit", async () => {
    const p = place("claude");
    hostGit(p.proj, "config", "user.name", "Agent");
    hostGit(p.proj, "config", "user.email", "agent@example.com");
    const printed = initClient(ensureBinary(), "claude", p);
    expect(printed).toContain(`rm ${join(p.proj, ".mcp.json")}`);
    const mock = new MessagesMock(script(shellCall(p, COMMIT_COMMAND)));
    mocks.push(mock);
    const r = await runClient([CLAUDE, "-p", "run the planned commands", "--allowedTools", "mcp__shell"], {
      cwd: p.proj,
      env: env(p, mock),
    });
    mock.stop();
    const results = [...toolResults(mock.requests.at(-1)!)].filter(([id]) => id !== SEARCH_ID).map(([, v]) => v.text);
    expect(r.exitCode, r.stderr).toBe(0);
    expectCommitted(p, results[0]);
  }, 120_000);

  test.skipIf(npmScenarioMissing() !== undefined)(
    "npm install through its room with the starter policy (issue 41): the registry through the room's proxy, the cache in ~/.npm",
    () => npmInstallScenario("claude", run, ensureBinary()),
    150_000,
  );

  test(
    "network by domain: the allowed name is answered through the proxy, another is refused",
    () => domainNetworkScenario("claude", run),
    120_000,
  );
});
