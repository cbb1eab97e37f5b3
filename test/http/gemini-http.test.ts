/**
 * The real Gemini CLI (`gemini -p`) against `shellmcp serve --listen` (issue 43), configured as docs/clients.md's
 * HTTP recipe says: `httpUrl` and an `Authorization` header taking the token from the environment, `trust: true`;
 * a stand-in model on loopback (test/helpers/gemini-mock.ts) makes one `shell` call.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/binary.ts";
import { startHttpServe, type HttpServe } from "../helpers/http.ts";
import { declaresFunction, functionCall, functionResponses, GeminiMock, textPart, type GeminiScript } from "../helpers/gemini-mock.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { expectWriteProbe, place, runClient, writeProbe, type Plan } from "../clients/common.ts";

const GEMINI = join(ROOT, "node_modules", "@google", "gemini-cli", "bundle", "gemini.js");
const NODE = Bun.which("node");
const skip = skipWithout(
  "real Gemini CLI over HTTP",
  shellsMissing() ?? (existsSync(GEMINI) ? undefined : "@google/gemini-cli is not installed: npm ci") ?? toolMissing("node", "git"),
);

function script(plan: Plan): GeminiScript {
  return (req) => {
    const schema = JSON.stringify(req.generationConfig?.responseJsonSchema ?? {});
    if (schema.includes("complexity_score")) return [textPart('{"complexity_reasoning":"a scripted test","complexity_score":1}')];
    if (schema.includes("next_speaker")) return [textPart('{"reasoning":"the turn is over","next_speaker":"user"}')];
    if (!declaresFunction(req, "mcp_shell_shell")) return [textPart("ok")];
    const results = functionResponses(req)
      .filter((r) => r.name.startsWith("mcp_shell_"))
      .map((r) => (typeof r.response.output === "string" ? r.response.output : JSON.stringify(r.response)));
    const next = plan(results);
    return next === undefined ? [textPart("done")] : [functionCall(`mcp_shell_${next.tool}`, next.args)];
  };
}

const servers: HttpServe[] = [];
const mocks: GeminiMock[] = [];
afterAll(async () => {
  for (const m of mocks) m.stop();
  for (const s of servers) await s.stop().catch(() => undefined);
});

describe.skipIf(skip)("real Gemini CLI (gemini -p) over HTTP", () => {
  test("the docs/clients.md recipe: httpUrl with an Authorization header from the environment", async () => {
    const p = place("gemini-http");
    const s = await startHttpServe({
      args: ["--sandbox", "workspace-write", "--cd", p.proj],
      home: p.home,
      env: { CODEX_HOME: p.codexHome },
    });
    servers.push(s);
    mkdirSync(join(p.home, ".gemini"), { recursive: true });
    writeFileSync(
      join(p.home, ".gemini", "settings.json"),
      JSON.stringify({
        mcpServers: { shell: { httpUrl: s.url.href, headers: { Authorization: "Bearer $SHELLMCP_TOKEN" }, trust: true } },
        // Only the stand-in model needs this: the API-key auth type, whose base URL GOOGLE_GEMINI_BASE_URL sets.
        security: { auth: { selectedType: "gemini-api-key" } },
      }),
    );
    const mock = new GeminiMock(script(writeProbe(p)));
    mocks.push(mock);
    const r = await runClient([NODE!, GEMINI, "-p", "run the planned commands", "--skip-trust"], {
      cwd: p.proj,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: p.home,
        GOOGLE_GEMINI_BASE_URL: mock.url,
        GEMINI_API_KEY: "dummy",
        SHELLMCP_TOKEN: s.token!,
      },
    });
    mock.stop();
    const results = functionResponses(mock.requests.at(-1)!)
      .filter((x) => x.name.startsWith("mcp_shell_"))
      .map((x) => (typeof x.response.output === "string" ? x.response.output : JSON.stringify(x.response)));
    expect(r.exitCode, r.stderr.slice(-2000)).toBe(0);
    expectWriteProbe(p, results[0]);
  }, 120_000);
});
