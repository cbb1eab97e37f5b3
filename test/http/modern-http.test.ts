/**
 * `serve --listen` in the modern era (MCP 2026-07-28, issue 43): stateless POSTs, served per authenticated subject
 * (src/mcp/http.ts `ModernHttp`), with the v2 SDK client's HTTP transport and raw requests; `requestState` is bound
 * to the subject that parked the exec.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { signHs256Jwt } from "../../src/auth/bearer.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { postHeaders, startHttpServe, type HttpServe } from "../helpers/http.ts";
import { MODERN } from "../helpers/mcp-modern.ts";
import { noProcessLeft } from "../helpers/events.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const skip = skipWithout("serve --listen modern suite", shellsMissing());
const servers: HttpServe[] = [];
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers) await c().catch(() => undefined);
  for (const s of servers) await s.stop().catch(() => undefined);
});

describe.skipIf(skip)("serve --listen: the modern era over HTTP", () => {
  test("the v2 SDK client pinned to 2026-07-28 lists the tools and runs shell with a token", async () => {
    const s = await startHttpServe();
    servers.push(s);
    const client = new Client({ name: "v2-http", version: "0" }, { versionNegotiation: { mode: { pin: MODERN } } });
    const transport = new StreamableHTTPClientTransport(s.url, { requestInit: { headers: { Authorization: `Bearer ${s.token}` } } });
    await client.connect(transport);
    closers.push(() => client.close());
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(["shell", "exec_command", "write_stdin", "list_sessions"]);
    const r = (await client.callTool({ name: "shell", arguments: { command: "echo modern-http", workdir: "/", login: false } })) as {
      content: { text: string }[];
    };
    expect(JSON.parse(r.content[0]!.text).output).toBe("modern-http\n");
  });

  test("two clients of one subject use the same JSON-RPC ids at once: each gets its own answer", async () => {
    const s = await startHttpServe();
    servers.push(s);
    const connect = async () => {
      const client = new Client({ name: "v2-http", version: "0" }, { versionNegotiation: { mode: { pin: MODERN } } });
      await client.connect(new StreamableHTTPClientTransport(s.url, { requestInit: { headers: { Authorization: `Bearer ${s.token}` } } }));
      closers.push(() => client.close());
      return client;
    };
    const [a, b] = [await connect(), await connect()];
    const run = (c: Client, command: string) =>
      c.callTool({ name: "shell", arguments: { command, workdir: "/", login: false } }) as Promise<{ content: { text: string }[] }>;
    const [ra, rb] = await Promise.all([run(a, "sleep 0.5; echo from-a"), run(b, "echo from-b")]);
    expect(JSON.parse(ra.content[0]!.text).output).toBe("from-a\n");
    expect(JSON.parse(rb.content[0]!.text).output).toBe("from-b\n");
  });

  test("a modern-era client that goes quiet: its exec sessions end after the idle timeout", async () => {
    const s = await startHttpServe({ args: ["--client-idle-timeout-ms", "300"] });
    servers.push(s);
    const client = new Client({ name: "v2-http", version: "0" }, { versionNegotiation: { mode: { pin: MODERN } } });
    await client.connect(new StreamableHTTPClientTransport(s.url, { requestInit: { headers: { Authorization: `Bearer ${s.token}` } } }));
    closers.push(() => client.close());
    const r = (await client.callTool({
      name: "exec_command",
      arguments: { cmd: `sleep 106.${process.pid}`, workdir: "/", yield_time_ms: 200 },
    })) as {
      content: { text: string }[];
    };
    expect(r.content[0]!.text).toContain("Process running with session ID");
    expect(await noProcessLeft(`sleep 106.${process.pid}`)).toEqual([]);
  });

  test("a requestState parked by one subject is refused to another, and redeemed by its own", async () => {
    const secret = "k".repeat(40);
    const d = mkdtempSync(join(CONF_BASE, "auth-"));
    writeFileSync(join(d, "secret"), secret, { mode: 0o600 });
    const ws = mkdtempSync(join(CONF_BASE, "ws-"));
    mkdirSync(ws, { recursive: true });
    const s = await startHttpServe({
      args: ["--auth", "signed-bearer-token", "--auth-shared-secret-file", join(d, "secret"), "--cd", ws],
      rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n',
    });
    servers.push(s);
    const exp = Math.floor(Date.now() / 1000) + 600;
    const alice = signHs256Jwt({ sub: "alice", exp }, secret);
    const bob = signHs256Jwt({ sub: "bob", exp }, secret);
    let id = 0;
    const call = async (token: string, extra: Record<string, unknown> = {}) => {
      const r = await fetch(s.url, {
        method: "POST",
        headers: postHeaders(token, { "mcp-protocol-version": MODERN }),
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: ++id,
          method: "tools/call",
          params: {
            name: "shell",
            arguments: { command: "touch parked.txt; echo after", workdir: ws, login: false },
            ...extra,
            _meta: {
              "io.modelcontextprotocol/protocolVersion": MODERN,
              "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {} } },
              "io.modelcontextprotocol/clientInfo": { name: "raw", version: "0" },
            },
          },
        }),
      });
      return (await r.json()) as { result?: Record<string, unknown>; error?: { message: string } };
    };
    const first = (await call(alice)).result as { resultType: string; inputRequests: Record<string, unknown>; requestState: string };
    expect(first.resultType).toBe("input_required");
    const accept = { [Object.keys(first.inputRequests)[0]!]: { action: "accept", content: {} } };
    const stolen = await call(bob, { inputResponses: accept, requestState: first.requestState });
    expect(stolen.error?.message).toBe("Invalid or expired requestState");
    const own = await call(alice, { inputResponses: accept, requestState: first.requestState });
    expect((own.result as { resultType: string }).resultType).toBe("complete");
  });
});
