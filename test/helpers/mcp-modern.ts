/**
 * Drive the compiled `shellmcp serve` in the modern MCP era (2026-07-28): with the v2 SDK's real `Client`
 * (`@modelcontextprotocol/client`, pinned to 2026-07-28: `server/discover` at connect, the `_meta` envelope on every
 * request, `input_required` fulfilled by its elicitation handler and retried), and raw, one JSON line at a time, for
 * what a well-behaved client never sends (tampered, replayed, foreign `requestState`).
 */
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { ensureBinary } from "./binary.ts";
import { shellResult, type ShellOutput } from "./mcp.ts";
import { LineRpc } from "./reference.ts";
import { CONF_BASE } from "./test-dirs.ts";

/** The modern protocol revision. */
export const MODERN = "2026-07-28";

/** An elicitation answer (`ElicitResult`). */
export interface Answer {
  action: "accept" | "decline" | "cancel";
  content?: Record<string, unknown>;
}

/** Options of {@link startModern} and {@link startRawModern}. */
export interface ModernStartOptions {
  rules?: string;
  args?: string[];
  env?: Record<string, string>;
  /** Answer approvals (declares `elicitation: {form: {}}`); omit for a client without elicitation. */
  onElicit?: (message: string, schema: unknown) => Answer | Promise<Answer>;
  /** The v2 client's negotiation: pinned to 2026-07-28 (default), or `auto` (probe with discover, else initialize). */
  negotiation?: "pin" | "auto";
}

/** A v2-SDK client connected in the modern era. */
export interface ModernSession {
  client: Client;
  codexHome: string;
  /** Messages of the approvals asked, in order. */
  elicitations: string[];
  /** Call `shell`: the parsed text, isError, and the result as the client returned it. */
  shell(args: Record<string, unknown>): Promise<{ out: ShellOutput; isError: boolean; raw: Record<string, unknown> }>;
  stderr(): string;
  close(): Promise<void>;
}

/** A CODEX_HOME (and HOME) outside every default writable root, with `rules` as its default.rules. */
export function modernHome(rules?: string): string {
  const home = mkdtempSync(join(CONF_BASE, "home-"));
  if (rules !== undefined) {
    mkdirSync(join(home, "rules"), { recursive: true });
    writeFileSync(join(home, "rules", "default.rules"), rules);
  }
  return home;
}

function serveEnv(home: string, env: Record<string, string> = {}): Record<string, string> {
  return { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: home, CODEX_HOME: home, LC_ALL: "C", ...env };
}

/** Start `shellmcp serve` and connect the v2 SDK client to it, pinned to the modern era. */
export async function startModern(o: ModernStartOptions = {}): Promise<ModernSession> {
  const codexHome = modernHome(o.rules);
  const transport = new StdioClientTransport({
    command: ensureBinary(),
    args: ["serve", ...(o.args ?? [])],
    env: serveEnv(codexHome, o.env),
    stderr: "pipe",
  });
  let err = "";
  transport.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const client = new Client(
    { name: "shellmcp-modern-test", version: "0" },
    {
      capabilities: o.onElicit ? { elicitation: { form: {} } } : {},
      versionNegotiation: { mode: o.negotiation === "auto" ? "auto" : { pin: MODERN } },
    },
  );
  const elicitations: string[] = [];
  if (o.onElicit)
    client.setRequestHandler("elicitation/create", async (req) => {
      const p = req.params as { message: string; requestedSchema: unknown };
      elicitations.push(p.message);
      return (await o.onElicit!(p.message, p.requestedSchema)) as never;
    });
  await client.connect(transport);
  return {
    client,
    codexHome,
    elicitations,
    stderr: () => err,
    async shell(args) {
      const raw = (await client.callTool({ name: "shell", arguments: args }, { timeout: 120_000 })) as Record<string, unknown>;
      return shellResult(raw);
    },
    async close() {
      await client.close();
    },
  };
}

/** A raw modern-era peer: every request gets the envelope; answers are returned whole (result or error). */
export interface RawModern {
  rpc: LineRpc;
  codexHome: string;
  pid: number;
  /** Send `method` with `params` and the envelope (`caps` as the client capabilities). */
  request(method: string, params?: Record<string, unknown>, caps?: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** `tools/call` of `shell` with `args`, plus `extra` params (a retry's `inputResponses` and `requestState`). */
  call(args: Record<string, unknown>, extra?: Record<string, unknown>): Promise<Record<string, unknown>>;
  stderr(): string;
  close(): Promise<void>;
}

/** Start `shellmcp serve` with no handshake at all, as a modern client may. */
export function startRawModern(o: ModernStartOptions = {}): RawModern {
  const codexHome = modernHome(o.rules);
  const proc = Bun.spawn([ensureBinary(), "serve", ...(o.args ?? [])], {
    env: serveEnv(codexHome, o.env),
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  }) as Subprocess<"pipe", "pipe", "pipe">;
  const rpc = new LineRpc(proc);
  let err = "";
  void (async () => {
    for await (const c of proc.stderr) err += new TextDecoder().decode(c);
  })();
  const envelope = (caps: Record<string, unknown>) => ({
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": caps,
    "io.modelcontextprotocol/clientInfo": { name: "raw-modern", version: "0" },
  });
  const request = (method: string, params: Record<string, unknown> = {}, caps: Record<string, unknown> = { elicitation: { form: {} } }) =>
    rpc.request(method, { ...params, _meta: { ...envelope(caps), ...((params._meta as object | undefined) ?? {}) } });
  return {
    rpc,
    codexHome,
    pid: proc.pid,
    request,
    call: (args, extra = {}) => request("tools/call", { name: "shell", arguments: args, ...extra }),
    stderr: () => err,
    async close() {
      await proc.stdin.end();
      await proc.exited;
    },
  };
}
