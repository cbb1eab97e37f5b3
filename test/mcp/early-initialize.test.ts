/**
 * `initialize` answered before the CLI parser and the MCP SDK load (src/mcp/early-initialize.ts): the answer is
 * the SDK's, byte for byte in content; it is sent exactly once; anything that is not a valid `initialize` is
 * left to the SDK; and the SDK still records the client's capabilities (elicitation works afterwards).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { LATEST_PROTOCOL_VERSION as SDK_LATEST, SUPPORTED_PROTOCOL_VERSIONS as SDK_SUPPORTED } from "@modelcontextprotocol/sdk/types.js";
import {
  earlyInitializeResponse,
  INSTRUCTIONS,
  LATEST_PROTOCOL_VERSION,
  SERVER_CAPABILITIES,
  SERVER_NAME,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "../../src/mcp/early-initialize.ts";
import { VERSION } from "../../src/version.ts";
import { ensureBinary, homeDir } from "../helpers/binary.ts";

const procs: { kill(): void }[] = [];
afterAll(() => {
  for (const p of procs) p.kill();
});

/** The SDK's own answer to `params`. */
async function sdkAnswer(params: Record<string, unknown>): Promise<unknown> {
  const server = new Server({ name: SERVER_NAME, version: VERSION }, { capabilities: SERVER_CAPABILITIES, instructions: INSTRUCTIONS });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const answer = new Promise<unknown>((res) => {
    b.onmessage = (m) => res(m);
  });
  await b.start();
  await b.send({ jsonrpc: "2.0", id: 7, method: "initialize", params } as never);
  const m = await answer;
  await server.close();
  return m;
}

describe("earlyInitializeResponse", () => {
  test("its protocol versions are the SDK's", () => {
    expect(LATEST_PROTOCOL_VERSION).toBe(SDK_LATEST);
    expect(SUPPORTED_PROTOCOL_VERSIONS).toEqual(SDK_SUPPORTED);
  });

  for (const version of ["2025-06-18", "2024-11-05", "1999-01-01"]) {
    test(`the same answer as the SDK (requested ${version})`, async () => {
      const params = {
        protocolVersion: version,
        capabilities: { elicitation: {} },
        clientInfo: { name: "codex-mcp-client", title: "Codex", version: "0.169.0" },
      };
      const early = earlyInitializeResponse(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "initialize", params }));
      expect(early).toEqual((await sdkAnswer(params)) as Record<string, unknown>);
    });
  }

  test("anything else is left to the SDK", () => {
    const ok = { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } };
    for (const line of [
      "not json",
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
      JSON.stringify({ jsonrpc: "2.0", method: "initialize", params: ok }),
      JSON.stringify({ jsonrpc: "1.0", id: 1, method: "initialize", params: ok }),
      JSON.stringify({ jsonrpc: "2.0", id: 1.5, method: "initialize", params: ok }),
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { ...ok, clientInfo: { name: "x" } } }),
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { ...ok, capabilities: [] } }),
    ]) {
      expect(earlyInitializeResponse(line)).toBeUndefined();
    }
  });
});

/** Start the binary, write `input` in one piece, collect answer lines until `count` arrived (or 5 s). */
async function exchange(input: string, count: number): Promise<Record<string, unknown>[]> {
  const home = homeDir("shellmcp-early-");
  const p = Bun.spawn([ensureBinary(), "serve", "--sandbox", "danger-full-access"], {
    env: { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  procs.push(p);
  await p.stdin.write(input);
  await p.stdin.flush();
  const lines: Record<string, unknown>[] = [];
  const reader = p.stdout.getReader();
  let buf = "";
  const deadline = Date.now() + 5000;
  while (lines.length < count && Date.now() < deadline) {
    const r = await Promise.race([reader.read(), Bun.sleep(deadline - Date.now()).then(() => ({ done: true, value: undefined }))]);
    if (r.done || r.value === undefined) break;
    buf += new TextDecoder().decode(r.value);
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      lines.push(JSON.parse(buf.slice(0, nl)));
      buf = buf.slice(nl + 1);
    }
  }
  await Bun.sleep(200); // a duplicate answer would arrive now
  await p.stdin.end();
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    buf += new TextDecoder().decode(r.value);
  }
  for (const l of buf.split("\n")) if (l.trim() !== "") lines.push(JSON.parse(l));
  await p.exited;
  return lines;
}

const INIT = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "0" } },
};

describe("serve", () => {
  test("initialize, initialized and tools/list in one write: each request answered exactly once, in order", async () => {
    const lines = await exchange(
      [INIT, { jsonrpc: "2.0", method: "notifications/initialized" }, { jsonrpc: "2.0", id: 2, method: "tools/list" }]
        .map((m) => JSON.stringify(m) + "\n")
        .join(""),
      2,
    );
    expect(lines.map((l) => l.id)).toEqual([1, 2]);
    expect((lines[0]!.result as { serverInfo: { name: string } }).serverInfo.name).toBe("shellmcp");
    expect((lines[1]!.result as { tools: { name: string }[] }).tools[0]!.name).toBe("shell");
  });

  test("an invalid initialize gets the SDK's error, once", async () => {
    const params = { protocolVersion: "2025-06-18" };
    const lines = await exchange(JSON.stringify({ ...INIT, params }) + "\n", 1);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.id).toBe(1);
    expect(lines[0]!.error).toEqual(((await sdkAnswer(params)) as { error: unknown }).error);
  });

  test("the SDK still sees the client's capabilities: elicitation is used after an early initialize", async () => {
    const home = homeDir("shellmcp-early-");
    const { mkdirSync, writeFileSync } = await import("node:fs");
    mkdirSync(`${home}/rules`);
    writeFileSync(`${home}/rules/r.rules`, 'prefix_rule(pattern = ["ls"], decision = "prompt")\n');
    const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
    const { ElicitRequestSchema } = await import("@modelcontextprotocol/sdk/types.js");
    const client = new Client({ name: "t", version: "0" }, { capabilities: { elicitation: {} } });
    let asked = 0;
    client.setRequestHandler(ElicitRequestSchema, async () => {
      asked++;
      return { action: "accept", content: {} };
    });
    await client.connect(
      new StdioClientTransport({
        command: ensureBinary(),
        args: ["serve", "--sandbox", "danger-full-access"],
        env: { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home },
      }),
    );
    const r = (await client.callTool({
      name: "shell",
      arguments: { command: "ls >/dev/null && echo ran", workdir: home, login: false },
    })) as { content: { text: string }[] };
    await client.close();
    expect(asked).toBe(1);
    expect(r.content[0]!.text).toContain("ran");
  });
});
