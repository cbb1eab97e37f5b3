/**
 * Drive `shellmcp serve --listen` (MCP over streamable HTTP): start the compiled binary on a free loopback port,
 * read the URL it prints on stdout and the generated token it says on stderr, and connect the MCP SDK v1 client's
 * `StreamableHTTPClientTransport` to it.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, EmptyResultSchema, type ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "./binary.ts";
import { CONF_BASE } from "./test-dirs.ts";
import { WAIT_DEADLINE_MS } from "./events.ts";

/** A running HTTP server. */
export interface HttpServe {
  /** The endpoint (`http://127.0.0.1:PORT/mcp`). */
  url: URL;
  /** The generated token (undefined with `--auth`). */
  token?: string;
  codexHome: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  stderr: () => string;
  /** SIGTERM, then wait for the exit; returns the exit code. */
  stop(): Promise<number>;
}

/** Start `shellmcp serve --listen http://127.0.0.1:0/mcp ...args`; resolves once the URL (and token) are said. */
export async function startHttpServe(
  o: { args?: string[]; rules?: string; env?: Record<string, string>; home?: string; config?: string } = {},
): Promise<HttpServe> {
  const codexHome = o.home ?? mkdtempSync(join(CONF_BASE, "home-"));
  if (o.rules !== undefined) {
    mkdirSync(join(codexHome, "rules"), { recursive: true });
    writeFileSync(join(codexHome, "rules", "default.rules"), o.rules);
  }
  if (o.config !== undefined) writeFileSync(join(codexHome, "config.toml"), o.config);
  const args = o.args ?? [];
  // `config` may name the endpoint itself (`[shellmcp] listen`).
  const listen = args.includes("--listen") || o.config?.includes("listen") ? [] : ["--listen", "http://127.0.0.1:0/mcp"];
  const proc = Bun.spawn([ensureBinary(), "serve", ...listen, ...args], {
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: codexHome, CODEX_HOME: codexHome, LC_ALL: "C", ...o.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  let err = "";
  const wantToken = !args.includes("--auth");
  const ready = new Promise<void>((res, rej) => {
    const check = () => {
      if (out.includes("\n") && (!wantToken || /Bearer [^"]+"/.test(err))) res();
    };
    void (async () => {
      for await (const c of proc.stdout) ((out += new TextDecoder().decode(c)), check());
    })();
    void (async () => {
      for await (const c of proc.stderr) ((err += new TextDecoder().decode(c)), check());
    })();
    void proc.exited.then((code) => rej(new Error(`serve exited ${code} before listening: ${err}`)));
    setTimeout(() => rej(new Error(`serve did not say its URL: ${err}`)), WAIT_DEADLINE_MS).unref();
  });
  await ready;
  return {
    url: new URL(out.split("\n")[0]!),
    token: wantToken ? /Bearer ([^"]+)"/.exec(err)![1] : undefined,
    codexHome,
    proc,
    stderr: () => err,
    async stop() {
      proc.kill("SIGTERM");
      return proc.exited;
    },
  };
}

/** Start `serve` expecting it to refuse to start: resolves with its exit code and stderr. */
export async function refusedStart(args: string[]): Promise<{ code: number; stderr: string }> {
  const codexHome = mkdtempSync(join(CONF_BASE, "home-"));
  const proc = Bun.spawn([ensureBinary(), "serve", ...args], {
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: codexHome, CODEX_HOME: codexHome, LC_ALL: "C" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  return { code, stderr };
}

/** An SDK client connected over HTTP with `token` (none when undefined). */
export interface HttpSession {
  client: Client;
  transport: StreamableHTTPClientTransport;
  elicitations: string[];
  /** Call a tool; returns its text content joined and isError. */
  call(name: string, args: Record<string, unknown>): Promise<{ text: string; isError: boolean; raw: Record<string, unknown> }>;
  sandboxState(policy: unknown, sandboxCwd: string): Promise<unknown>;
  close(): Promise<void>;
}

/** Connect the v1 SDK client (`StreamableHTTPClientTransport`) to `url` with `Authorization: Bearer token`. */
export async function connectHttp(
  url: URL,
  token: string | undefined,
  o: { onElicit?: (message: string) => ElicitResult | Promise<ElicitResult> } = {},
): Promise<HttpSession> {
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: token === undefined ? {} : { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "shellmcp-http-test", version: "0" }, { capabilities: o.onElicit ? { elicitation: {} } : {} });
  const elicitations: string[] = [];
  if (o.onElicit)
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      const p = req.params as { message: string };
      elicitations.push(p.message);
      return o.onElicit!(p.message);
    });
  await client.connect(transport);
  return {
    client,
    transport,
    elicitations,
    async call(name, args) {
      const raw = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as Record<string, unknown>;
      return { text: (raw.content as { text: string }[]).map((c) => c.text).join("\n"), isError: raw.isError === true, raw };
    },
    sandboxState(policy, sandboxCwd) {
      return client.request(
        { method: "codex/sandbox-state/update", params: { sandboxPolicy: policy, sandboxCwd } } as never,
        EmptyResultSchema,
      );
    },
    close: () => client.close(),
  };
}

/** The headers of a raw MCP POST (JSON body, the Accept the transport requires) plus `extra`. */
export function postHeaders(token: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  return {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    ...extra,
  };
}

/** A raw `initialize` request body. */
export const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
});
