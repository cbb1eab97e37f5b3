/**
 * A stand-in model for driving the real Codex CLI: a small HTTP server speaking the OpenAI Responses API with
 * server-sent events, the way Codex's own tests mock it (`response.created`, `response.output_item.done` with a
 * `function_call` or an assistant `message`, `response.completed`). Each POST to `/v1/responses` is recorded and
 * answered by a script: one turn per request.
 *
 * Codex 0.169 offers an MCP server's tools as a `namespace` tool (`mcp__<server>`) holding the functions; Codex
 * 0.97 as flat functions named `mcp__<server>__<tool>`. {@link mcpToolCall} answers in whichever form the
 * request offered.
 */
import type { Server } from "bun";

/** One recorded `/v1/responses` request body. */
export type ResponsesRequest = Record<string, unknown> & { input: Record<string, unknown>[]; tools?: Record<string, unknown>[] };

/** What one turn answers: a list of SSE events (see the `ev*` helpers). */
export type Turn = (request: ResponsesRequest, index: number) => Record<string, unknown>[];

const USAGE = { input_tokens: 0, input_tokens_details: null, output_tokens: 0, output_tokens_details: null, total_tokens: 0 };

/** `response.created`. */
export function evCreated(id: string): Record<string, unknown> {
  return { type: "response.created", response: { id } };
}

/** `response.completed` with zero usage. */
export function evCompleted(id: string): Record<string, unknown> {
  return { type: "response.completed", response: { id, usage: USAGE } };
}

/** An assistant message output item. */
export function evMessage(id: string, text: string): Record<string, unknown> {
  return { type: "response.output_item.done", item: { type: "message", role: "assistant", id, content: [{ type: "output_text", text }] } };
}

/** A function call output item (`namespace` for Codex 0.169's namespaced MCP tools). */
export function evFunctionCall(callId: string, name: string, args: unknown, namespace?: string): Record<string, unknown> {
  return {
    type: "response.output_item.done",
    item: { type: "function_call", call_id: callId, ...(namespace ? { namespace } : {}), name, arguments: JSON.stringify(args) },
  };
}

/** A complete turn calling MCP tool `tool` of server `server` with `args`, in the form `request` offers it. */
export function mcpToolCall(
  request: ResponsesRequest,
  server: string,
  tool: string,
  args: unknown,
  callId = "call_0",
): Record<string, unknown>[] {
  const tools = request.tools ?? [];
  const ns = `mcp__${server}`;
  const call = tools.some((t) => t.type === "namespace" && t.name === ns)
    ? evFunctionCall(callId, tool, args, ns)
    : evFunctionCall(callId, `${ns}__${tool}`, args);
  return [evCreated("resp-call"), call, evCompleted("resp-call")];
}

/** A complete turn answering with a final message. */
export function finalMessage(text = "done"): Record<string, unknown>[] {
  return [evCreated("resp-final"), evMessage("msg-final", text), evCompleted("resp-final")];
}

/** Whether `request` offers an MCP server's tools (either form). */
export function offersMcpServer(request: ResponsesRequest, server: string): boolean {
  return (request.tools ?? []).some(
    (t) => t.name === `mcp__${server}` || (typeof t.name === "string" && t.name.startsWith(`mcp__${server}__`)),
  );
}

/** The text the model received as the output of call `callId` (Codex's `function_call_output`), or undefined. */
export function functionCallOutput(request: ResponsesRequest, callId = "call_0"): string | undefined {
  const item = request.input.find((i) => i.type === "function_call_output" && i.call_id === callId);
  if (item === undefined) return undefined;
  const out = item.output;
  if (typeof out === "string") return out;
  if (Array.isArray(out)) return out.map((p: { text?: string }) => p.text ?? "").join("\n");
  if (typeof out === "object" && out !== null && typeof (out as { content?: unknown }).content === "string")
    return (out as { content: string }).content;
  return JSON.stringify(out);
}

/** The mock server: `url` is the `base_url` for Codex's `model_providers` (ends in `/v1`). */
export class ResponsesMock {
  readonly requests: ResponsesRequest[] = [];
  private readonly server: Server<undefined>;

  constructor(private readonly turns: Turn[]) {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        const path = new URL(req.url).pathname;
        if (req.method !== "POST" || !path.endsWith("/responses"))
          return new Response("{}", { status: 404, headers: { "content-type": "application/json" } });
        const body = (await req.json()) as ResponsesRequest;
        const index = this.requests.length;
        this.requests.push(body);
        const turn = this.turns[Math.min(index, this.turns.length - 1)]!;
        const events = turn(body, index);
        const text = events.map((e) => `event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`).join("");
        return new Response(text, { headers: { "content-type": "text/event-stream" } });
      },
    });
  }

  /** Base URL for Codex's provider config. */
  get url(): string {
    return `http://127.0.0.1:${this.server.port}/v1`;
  }

  stop(): void {
    void this.server.stop(true);
  }
}
