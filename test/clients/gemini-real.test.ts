/**
 * The real Gemini CLI (headless, `gemini -p`, @google/gemini-cli 0.61) drives the compiled `shellmcp serve`
 * configured exactly as the README's Gemini CLI recipe says — `gemini mcp add --scope user --trust shell <shellmcp>
 * -- serve --sandbox workspace-write`, then `gemini -p --skip-trust` in the project — with a stand-in model on
 * loopback speaking the Gemini API (test/helpers/gemini-mock.ts; `GOOGLE_GEMINI_BASE_URL`, and the API-key auth
 * type in settings.json, which only the stand-in needs).
 *
 * Gemini CLI names MCP tools `mcp_<server>_<tool>`. The stand-in answers Gemini's side requests (its model router
 * asks for a JSON complexity score), makes its planned calls one by one, then ends the turn. Every scenario asserts
 * on what the model received as the function responses, on files and processes, and on Gemini's stderr.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import {
  declaresFunction,
  functionCall,
  functionResponses,
  GeminiMock,
  textPart,
  type GeminiRequest,
  type GeminiScript,
} from "../helpers/gemini-mock.ts";
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
  npmInstallScenario,
  npmScenarioMissing,
  expectDevServerSession,
  expectWriteProbe,
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

/** Gemini CLI's entry point (a bundled Node program). */
const GEMINI = join(ROOT, "node_modules", "@google", "gemini-cli", "bundle", "gemini.js");
const NODE = Bun.which("node");

const skip = skipWithout(
  "real Gemini CLI",
  shellsMissing() ??
    (existsSync(GEMINI) ? undefined : "@google/gemini-cli is not installed: npm ci") ??
    toolMissing("node", "git", "python3", "curl", "bwrap"),
);

/** The text of each shell-tool function response in `request`, in order. */
function shellResults(request: GeminiRequest | undefined): string[] {
  if (request === undefined) return [];
  return functionResponses(request)
    .filter((r) => r.name.startsWith("mcp_shell_"))
    .map((r) => (typeof r.response.output === "string" ? r.response.output : JSON.stringify(r.response)));
}

/** The stand-in model: answer the router's JSON question, follow `plan` in the main loop, then end the turn. */
function script(plan: Plan): GeminiScript {
  return (req) => {
    const schema = JSON.stringify(req.generationConfig?.responseJsonSchema ?? {});
    if (schema.includes("complexity_score")) return [textPart('{"complexity_reasoning":"a scripted test","complexity_score":1}')];
    if (schema.includes("next_speaker")) return [textPart('{"reasoning":"the turn is over","next_speaker":"user"}')];
    if (!declaresFunction(req, "mcp_shell_shell")) return [textPart("ok")];
    const next = plan(shellResults(req));
    return next === undefined ? [textPart("done")] : [functionCall(`mcp_shell_${next.tool}`, next.args)];
  };
}

const mocks: GeminiMock[] = [];
afterAll(() => {
  for (const m of mocks) m.stop();
});

type Outcome = ClientOutcome<GeminiMock>;

/** The environment Gemini CLI runs with: the place's HOME and, for the run, the stand-in model. */
function env(p: Place, mock?: GeminiMock): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: p.home,
    ...(mock === undefined ? {} : { GOOGLE_GEMINI_BASE_URL: mock.url, GEMINI_API_KEY: "dummy" }),
  };
}

/**
 * The README's recipe: `gemini mcp add --scope user [--trust] shell <shellmcp> -- serve --sandbox workspace-write`
 * (with `prefix` in front of the server: the network scenario's outer bubblewrap), then `gemini -p --skip-trust`
 * in the project, the model following `plan`.
 */
async function run(
  p: Place,
  plan: Plan,
  o: { prefix?: string[]; trust?: boolean; skipTrust?: boolean; viaInit?: boolean } = {},
): Promise<Outcome> {
  const server = [...(o.prefix ?? []), ensureBinary()];
  // Issue 41: or set up by `shellmcp init gemini --yes` (the user's settings.json, trusted).
  const add = o.viaInit
    ? { exitCode: 0, stdout: initClient(ensureBinary(), "gemini", p), stderr: "" }
    : await runClient(
        [
          NODE!,
          GEMINI,
          "mcp",
          "add",
          "--scope",
          "user",
          ...(o.trust === false ? [] : ["--trust"]),
          "shell",
          server[0]!,
          "--",
          ...server.slice(1),
          "serve",
          "--sandbox",
          "workspace-write",
        ],
        { cwd: p.proj, env: env(p), deadlineMs: 30_000 },
      );
  if (add.exitCode !== 0) throw new Error(`gemini mcp add: ${add.stdout}${add.stderr}`);
  // Only the stand-in model needs this: the API-key auth type, whose base URL GOOGLE_GEMINI_BASE_URL sets.
  const settingsPath = join(p.home, ".gemini", "settings.json");
  const settings = JSON.parse(readFileSync(settingsPath, "utf8")) as Record<string, unknown>;
  writeFileSync(settingsPath, JSON.stringify({ ...settings, security: { auth: { selectedType: "gemini-api-key" } } }, null, 2));
  const mock = new GeminiMock(script(plan));
  mocks.push(mock);
  const r = await runClient([NODE!, GEMINI, "-p", "run the planned commands", ...(o.skipTrust === false ? [] : ["--skip-trust"])], {
    cwd: p.proj,
    env: env(p, mock),
  });
  mock.stop();
  const results = shellResults(mock.requests.at(-1));
  if (results.length === 0 && o.trust !== false && o.skipTrust !== false)
    console.warn(`gemini -p (${r.exitCode}):\n${r.stdout}\n${r.stderr.slice(-3000)}`);
  return { ...r, results, mock };
}

describe.skipIf(skip)("real Gemini CLI (gemini -p) against shellmcp serve", () => {
  test("without --trust, headless Gemini does not offer the shell tools to the model: nothing runs", async () => {
    const p = place("gemini");
    const o = await run(p, shellCall(p, "touch made && echo MADE"), {
      trust: false,
    });
    expect(o.exitCode).toBe(0);
    // The main loop ran (its own tools were declared), but without the MCP server's: they would need a confirmation
    // that headless mode cannot ask for.
    const main = o.mock.requests.filter((r) => declaresFunction(r, "read_file"));
    expect(main.length).toBeGreaterThan(0);
    for (const r of o.mock.requests) expect(declaresFunction(r, "mcp_shell_shell")).toBe(false);
    expect(o.results).toEqual([]);
    expect(existsSync(join(p.proj, "made"))).toBe(false);
  }, 120_000);

  test("headless Gemini in a folder it does not trust stops before the model is asked", async () => {
    const p = place("gemini");
    const o = await run(p, shellCall(p, "touch made"), {
      skipTrust: false,
    });
    expect(o.exitCode).toBe(55);
    expect(o.stderr).toContain("Gemini CLI is not running in a trusted directory");
    expect(o.mock.requests).toEqual([]);
    expect(existsSync(join(p.proj, "made"))).toBe(false);
  }, 120_000);

  test("a shell call: workspace-write writes the project, not outside it nor .git", async () => {
    const p = place("gemini");
    const o = await run(p, writeProbe(p));
    expect(o.exitCode).toBe(0);
    for (const t of ["shell", "exec_command", "write_stdin", "list_sessions"])
      expect(declaresFunction(o.mock.requests.at(-1)!, `mcp_shell_${t}`)).toBe(true);
    // The tools listed to Gemini carry no `format: "uint64"` (src/mcp/shell-tool.ts shellToolFor): its validator
    // printed `unknown format "uint64" ignored …` several times a session before.
    expect(o.stderr).not.toContain("unknown format");
    expectWriteProbe(p, o.results[0]);
  }, 120_000);

  // Issue 41: under bubblewrap every call of one server shares its private loopback network (docs/sessions.md).
  test.skipIf(!probeBwrap(true).ok)(
    "a session with the network off (the default): a later shell call reaches its dev server (the server's loopback network)",
    async () => {
      const p = place("gemini");
      const port = freePort();
      const o = await run(p, devServerPlan(p, port));
      await expectDevServerSession(o.results, port);
    },
    120_000,
  );

  test("a session: exec_command starts a dev server, a later shell call reaches it (network on), it ends with the client", async () => {
    const p = place("gemini", { config: NETWORK_ON_CONFIG });
    const port = freePort();
    const o = await run(p, devServerPlan(p, port));
    // Gemini CLI hands the model the result's text content (Codex's text), inside <untrusted_context>.
    expect(o.results[0]).toMatch(
      /^<untrusted_context>\nChunk ID: [0-9a-f]+\nWall time: [\d.]+ seconds\nProcess running with session ID \d+\n/,
    );
    await expectDevServerSession(o.results, port);
  }, 120_000);

  test("a prompt rule: Gemini CLI has no elicitation, so the program is denied with the clear reason and nothing runs", async () => {
    const p = place("gemini", { rules: RULES });
    const o = await run(p, shellCall(p, "touch ask-me; echo rc=$?"));
    // A refusal is a tool error (docs/blocked-actions.md, "isError"): Gemini CLI passes the result on escaped once
    // more, so the reason is matched without its quotes.
    const text = o.results[0]!.replaceAll("\\", "");
    expect(text).toContain("Execution denied: this command needs a human's approval: a prompt rule matching");
    expect(text).toContain(
      `and this MCP client cannot ask (no elicitation support). To run it without asking, change that rule's decision to "allow" in your rules files (${p.codexHome}/rules/)`,
    );
    expect(text).toContain("shellmcp: blocked (approval) touch ask-me");
    expect(o.results[0]).toContain("rc=1");
    expect(existsSync(join(p.proj, "ask-me"))).toBe(false);
  }, 120_000);

  test("a forbidden rule: denied, the program never runs", () => forbiddenRuleScenario("gemini", run), 120_000);

  test("set up by `shellmcp init gemini --yes` (issue 41): a shell call works, and the starter rules let it commit", async () => {
    const p = place("gemini");
    hostGit(p.proj, "config", "user.name", "Agent");
    hostGit(p.proj, "config", "user.email", "agent@example.com");
    const o = await run(p, shellCall(p, COMMIT_COMMAND), { viaInit: true });
    expect(o.exitCode, o.stderr).toBe(0);
    expectCommitted(p, o.results[0]);
  }, 120_000);

  test.skipIf(npmScenarioMissing() !== undefined)(
    "npm install through its room with the starter policy (issue 41): the registry through the room's proxy, the cache in ~/.npm",
    () => npmInstallScenario("gemini", run, ensureBinary()),
    150_000,
  );

  test(
    "network by domain: the allowed name is answered through the proxy, another is refused",
    () => domainNetworkScenario("gemini", run),
    120_000,
  );
});
