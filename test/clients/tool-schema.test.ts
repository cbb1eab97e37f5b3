/**
 * The `shell` tool's input schema per client (src/mcp/shell-tool.ts `shellToolFor`): Codex keeps Codex's schema byte
 * for byte; other clients get it without `format: "uint64"`, which Gemini CLI's validator warns about. The validator
 * here is built as Gemini CLI 0.61 builds its own (packages/core/src/utils/schemaValidator.ts: Ajv's 2020-12 class,
 * `strictSchema: false`, ajv-formats), with a logger that records what it would print.
 */
import { describe, expect, test } from "bun:test";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { isCodexClient, shellTool, shellToolFor } from "../../src/mcp/shell-tool.ts";

/** Codex 0.97's input schema, byte for byte (as test/mcp/serve.test.ts checks against the listed tool). */
const CODEX_INPUT_SCHEMA =
  '{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"ExecParams","type":"object","properties":{"command":{"description":"The bash string to execute.","type":"string"},"workdir":{"description":"The working directory to execute the command in. Must be an absolute path.","type":"string"},"timeout_ms":{"description":"The timeout for the command in milliseconds.","type":"integer","format":"uint64","minimum":0,"nullable":true},"login":{"description":"Launch Bash with -lc instead of -c: defaults to true.","type":"boolean","nullable":true}},"required":["command","workdir"]}';

/** Compile `schema` with Gemini CLI's validator settings; returns the warnings it logged and the validator. */
function geminiCompile(schema: Record<string, unknown>): { warnings: string[]; validate: (v: unknown) => boolean } {
  const warnings: string[] = [];
  const logger = { log: () => undefined, warn: (...a: unknown[]) => warnings.push(a.join(" ")), error: () => undefined };
  const ajv = new Ajv2020({ strictSchema: false, logger });
  addFormats(ajv);
  const v = ajv.compile(schema);
  return { warnings, validate: (x) => v(x) };
}

describe("the shell tool's schema per client", () => {
  test("Codex (0.97 and 0.169 send clientInfo.name codex-mcp-client) and an unnamed client get Codex's schema byte for byte", () => {
    expect(isCodexClient("codex-mcp-client")).toBe(true);
    expect(JSON.stringify(shellToolFor("codex-mcp-client").inputSchema)).toBe(CODEX_INPUT_SCHEMA);
    expect(JSON.stringify(shellToolFor(undefined).inputSchema)).toBe(CODEX_INPUT_SCHEMA);
    expect(shellToolFor("codex-mcp-client", 30_000)).toEqual(shellTool(30_000));
  });

  test("Gemini CLI (gemini-cli-mcp-client) gets the schema without format uint64, and its validator warns no more", () => {
    const codex = geminiCompile(shellToolFor("codex-mcp-client").inputSchema);
    // Gemini CLI's own message (it repeats for every compile: about 29 times in a session).
    expect(codex.warnings.length).toBeGreaterThan(0);
    expect([...new Set(codex.warnings)]).toEqual(['unknown format "uint64" ignored in schema at path "#/properties/timeout_ms"']);
    const gemini = shellToolFor("gemini-cli-mcp-client");
    expect(isCodexClient("gemini-cli-mcp-client")).toBe(false);
    const g = geminiCompile(gemini.inputSchema);
    expect(g.warnings).toEqual([]);
    // Only the format went: everything else, the description and the output schema included, is unchanged.
    const expected = JSON.parse(CODEX_INPUT_SCHEMA) as { properties: { timeout_ms: Record<string, unknown> } };
    delete expected.properties.timeout_ms.format;
    expect(JSON.stringify(gemini.inputSchema)).toBe(JSON.stringify(expected));
    expect({ ...gemini, inputSchema: undefined }).toEqual({ ...shellTool(), inputSchema: undefined });
    // The same calls validate: a non-negative integer timeout, and no other.
    const ok = { command: "true", workdir: "/", timeout_ms: 5 };
    expect(g.validate(ok)).toBe(true);
    expect(g.validate({ ...ok, timeout_ms: -1 })).toBe(false);
    expect(g.validate({ ...ok, timeout_ms: 1.5 })).toBe(false);
    expect(codex.validate(ok)).toBe(true);
  });
});
