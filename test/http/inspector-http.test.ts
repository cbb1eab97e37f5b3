/**
 * The MCP Inspector CLI against `serve --listen` (issue 43), as docs/clients.md says:
 * `mcp-inspector --cli URL --transport http --header "Authorization: Bearer …" --method …`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/binary.ts";
import { startHttpServe, type HttpServe } from "../helpers/http.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const inspector = join(ROOT, "node_modules", ".bin", "mcp-inspector");
const skip = skipWithout("inspector over HTTP", !existsSync(inspector) ? "MCP Inspector not installed (npm ci)" : shellsMissing());
const servers: HttpServe[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop().catch(() => undefined);
});

async function inspect(s: HttpServe, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn([inspector, "--cli", s.url.href, "--transport", "http", "--header", `Authorization: Bearer ${s.token}`, ...args], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env },
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

describe.skipIf(skip)("MCP Inspector CLI over HTTP", () => {
  test("tools/list and tools/call shell with the token header", async () => {
    const s = await startHttpServe();
    servers.push(s);
    const list = await inspect(s, ["--method", "tools/list"]);
    expect(list.code, list.err).toBe(0);
    expect((JSON.parse(list.out).tools as { name: string }[]).map((t) => t.name)).toEqual([
      "shell",
      "exec_command",
      "write_stdin",
      "list_sessions",
    ]);
    const call = await inspect(s, [
      "--method",
      "tools/call",
      "--tool-name",
      "shell",
      "--tool-arg",
      "command=echo from-inspector",
      "--tool-arg",
      "workdir=/",
    ]);
    expect(call.code, call.err).toBe(0);
    expect(JSON.parse(JSON.parse(call.out).content[0].text).output).toBe("from-inspector\n");
  }, 60_000);
});
