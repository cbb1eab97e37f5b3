/**
 * A second real MCP client: the MCP Inspector's CLI mode (`@modelcontextprotocol/inspector`, dev dependency)
 * lists the tools of the compiled `shellmcp serve` and calls `shell`.
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, homeDir, ROOT, tempDir } from "../helpers/binary.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const inspector = join(ROOT, "node_modules", ".bin", "mcp-inspector");
const skip = skipWithout("inspector test", !existsSync(inspector) ? "MCP Inspector not installed (npm ci)" : shellsMissing());

function inspect(args: string[]): { code: number; json: Record<string, unknown> } {
  const home = homeDir("shellmcp-insp-");
  const r = Bun.spawnSync([inspector, "--cli", "-e", `CODEX_HOME=${home}`, ensureBinary(), "serve", ...args], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env },
  });
  return { code: r.exitCode ?? -1, json: JSON.parse(r.stdout.toString()) };
}

describe.skipIf(skip)("MCP Inspector CLI against shellmcp serve", () => {
  test("tools/list", () => {
    const r = inspect(["--method", "tools/list"]);
    expect(r.code).toBe(0);
    const tools = r.json.tools as { name: string; inputSchema: { required: string[] } }[];
    expect(tools.map((t) => t.name)).toEqual(["shell", "exec_command", "write_stdin", "list_sessions"]);
    expect(tools[0]!.inputSchema.required).toEqual(["command", "workdir"]);
  });

  test("tools/call shell", () => {
    const ws = tempDir("shellmcp-insp-ws-");
    const r = inspect([
      "--method",
      "tools/call",
      "--tool-name",
      "shell",
      "--tool-arg",
      "command=echo from-inspector",
      "--tool-arg",
      `workdir=${ws}`,
      "--tool-arg",
      "login=false",
    ]);
    expect(r.code).toBe(0);
    const text = (r.json.content as { text: string }[])[0]!.text;
    expect(JSON.parse(text)).toMatchObject({ exit_code: 0, output: "from-inspector\n", timed_out: false });
    expect(r.json.structuredContent).toMatchObject({ exit_code: 0, output: "from-inspector\n" });
  });
});
