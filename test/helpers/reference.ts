/**
 * The reference programs from the npm dev dependencies (`@openai/codex-shell-tool-mcp@0.97.0`,
 * `@openai/codex`), and a minimal newline-delimited JSON-RPC driver for the reference MCP server.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { ROOT } from "./binary.ts";

const TRIPLE = process.arch === "arm64" ? "aarch64-unknown-linux-musl" : "x86_64-unknown-linux-musl";

/** Directory of the 0.97.0 shell-tool MCP binaries, or undefined. */
export function referenceShellToolDir(): string | undefined {
  const dir = join(ROOT, "node_modules", "@openai", "codex-shell-tool-mcp", "vendor", TRIPLE);
  return existsSync(join(dir, "codex-exec-mcp-server")) ? dir : undefined;
}

/** A JSON-RPC peer over a child's stdio, one JSON object per line. */
export class LineRpc {
  private buf = "";
  private nextId = 1;
  private readonly waiting = new Map<number, (msg: Record<string, unknown>) => void>();
  /** Server→client requests (e.g. elicitation) are answered by this. */
  onRequest?: (msg: Record<string, unknown>) => unknown;

  constructor(readonly proc: Subprocess<"pipe", "pipe", "pipe">) {
    void this.pump();
  }

  private async pump(): Promise<void> {
    const dec = new TextDecoder();
    for await (const chunk of this.proc.stdout) {
      this.buf += dec.decode(chunk, { stream: true });
      for (let nl = this.buf.indexOf("\n"); nl >= 0; nl = this.buf.indexOf("\n")) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        if (line.trim() === "") continue;
        const msg = JSON.parse(line) as Record<string, unknown>;
        if ("method" in msg && "id" in msg) {
          const result = this.onRequest?.(msg) ?? {};
          this.send({ jsonrpc: "2.0", id: msg.id, result });
        } else if ("id" in msg) {
          this.waiting.get(msg.id as number)?.(msg);
        }
      }
    }
  }

  send(msg: unknown): void {
    this.proc.stdin.write(JSON.stringify(msg) + "\n");
    this.proc.stdin.flush();
  }

  request(method: string, params: unknown): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const p = new Promise<Record<string, unknown>>((res) => this.waiting.set(id, res));
    this.send({ jsonrpc: "2.0", id, method, params });
    return p;
  }

  notify(method: string, params?: unknown): void {
    this.send({ jsonrpc: "2.0", method, ...(params === undefined ? {} : { params }) });
  }

  async close(): Promise<void> {
    this.proc.stdin.end();
    await this.proc.exited;
  }
}

/** Start and initialise an MCP server over stdio with the given argv and env. */
export async function startLineRpc(argv: string[], env: Record<string, string>): Promise<LineRpc> {
  const proc = Bun.spawn(argv, { env, stdin: "pipe", stdout: "pipe", stderr: "pipe" }) as Subprocess<"pipe", "pipe", "pipe">;
  const rpc = new LineRpc(proc);
  await rpc.request("initialize", {
    protocolVersion: "2025-06-18",
    capabilities: { elicitation: {} },
    clientInfo: { name: "shellmcp-test", version: "0" },
  });
  rpc.notify("notifications/initialized");
  return rpc;
}

/** The `codex` CLI from `@openai/codex` (linux-x64 or linux-arm64 build), or undefined. */
export function referenceCodex(): string | undefined {
  const pkg = process.arch === "arm64" ? "codex-linux-arm64" : "codex-linux-x64";
  const p = join(ROOT, "node_modules", "@openai", pkg, "vendor", TRIPLE, "bin", "codex");
  return existsSync(p) ? p : undefined;
}
