/**
 * A stand-in model for driving the real Claude Code CLI: a small HTTP server speaking the Anthropic Messages API
 * (`POST /v1/messages`, streamed as server-sent events when the request asks for `stream: true`, one JSON message
 * otherwise). Claude Code reads its base URL from `ANTHROPIC_BASE_URL` and needs some `ANTHROPIC_API_KEY`.
 *
 * Each request is recorded and answered by a script. Claude Code sends side requests too (a title, a quota
 * probe, `count_tokens`) that carry no tools; a script therefore decides from the request itself, not from its
 * index: {@link offersTool} tells the main loop's requests apart, {@link toolResults} reads what the model got
 * back from its tool calls.
 */
import type { Server } from "bun";

/** A content block of a Messages API message. */
export type ContentBlock = Record<string, unknown> & { type: string };

/** One recorded `/v1/messages` request body. */
export type MessagesRequest = Record<string, unknown> & {
  model?: string;
  stream?: boolean;
  messages: { role: string; content: string | ContentBlock[] }[];
  tools?: (Record<string, unknown> & { name: string })[];
};

/** What the model answers: the assistant message's content blocks (`text` or `tool_use`). */
export type Reply = ContentBlock[];

/** The script: given a request (and how many were recorded before it), the assistant's reply. */
export type Script = (request: MessagesRequest, index: number) => Reply;

/** A `text` block. */
export function text(t: string): ContentBlock {
  return { type: "text", text: t };
}

/** A `tool_use` block calling `name` with `input`. */
export function toolUse(id: string, name: string, input: Record<string, unknown>): ContentBlock {
  return { type: "tool_use", id, name, input };
}

/** Whether the request offers a tool named `name` (Claude Code names MCP tools `mcp__<server>__<tool>`). */
export function offersTool(request: MessagesRequest, name: string): boolean {
  return (request.tools ?? []).some((t) => t.name === name);
}

/** Every `tool_result` in the request, by `tool_use_id`, as text (the result's text blocks joined by newlines). */
export function toolResults(request: MessagesRequest): Map<string, { text: string; isError: boolean }> {
  const out = new Map<string, { text: string; isError: boolean }>();
  for (const m of request.messages) {
    if (typeof m.content === "string") continue;
    for (const b of m.content) {
      if (b.type !== "tool_result") continue;
      const c = b.content;
      const t =
        typeof c === "string"
          ? c
          : Array.isArray(c)
            ? (c as ContentBlock[]).map((p) => (typeof p.text === "string" ? p.text : JSON.stringify(p))).join("\n")
            : "";
      out.set(String(b.tool_use_id), { text: t, isError: b.is_error === true });
    }
  }
  return out;
}

/** The SSE events of one streamed reply (`message_start` … `message_stop`), as Claude Code parses them. */
function events(id: string, model: string, reply: Reply): Record<string, unknown>[] {
  const usage = { input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const out: Record<string, unknown>[] = [
    {
      type: "message_start",
      message: { id, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null, usage },
    },
  ];
  reply.forEach((b, index) => {
    if (b.type === "tool_use") {
      out.push({ type: "content_block_start", index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } });
      out.push({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(b.input) } });
    } else {
      out.push({ type: "content_block_start", index, content_block: { type: "text", text: "" } });
      out.push({ type: "content_block_delta", index, delta: { type: "text_delta", text: b.text } });
    }
    out.push({ type: "content_block_stop", index });
  });
  const stop = reply.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn";
  out.push({ type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 1 } });
  out.push({ type: "message_stop" });
  return out;
}

/** The mock server: `url` is the `ANTHROPIC_BASE_URL` for Claude Code. */
export class MessagesMock {
  /** Every `/v1/messages` request received, in order. */
  readonly requests: MessagesRequest[] = [];
  private readonly server: Server<undefined>;

  /** Start listening on a free loopback port; `script` answers each `/v1/messages` request. */
  constructor(script: Script) {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        const path = new URL(req.url).pathname;
        const json = (v: unknown, status = 200): Response =>
          new Response(JSON.stringify(v), { status, headers: { "content-type": "application/json" } });
        if (req.method !== "POST") return json({});
        if (path.endsWith("/messages/count_tokens")) return json({ input_tokens: 1 });
        if (!path.endsWith("/messages")) return json({ type: "error", error: { type: "not_found_error", message: path } }, 404);
        const body = (await req.json()) as MessagesRequest;
        const index = this.requests.length;
        this.requests.push(body);
        const id = `msg_${index}`;
        const model = body.model ?? "mock";
        const reply = script(body, index);
        if (body.stream !== true) {
          const stop = reply.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn";
          return json({
            id,
            type: "message",
            role: "assistant",
            model,
            content: reply,
            stop_reason: stop,
            stop_sequence: null,
            usage: { input_tokens: 1, output_tokens: 1 },
          });
        }
        const sse = events(id, model, reply)
          .map((e) => `event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`)
          .join("");
        return new Response(sse, { headers: { "content-type": "text/event-stream" } });
      },
    });
  }

  /** Base URL for `ANTHROPIC_BASE_URL` (no `/v1`: Claude Code adds it). */
  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  /** Stop listening, dropping open connections. */
  stop(): void {
    void this.server.stop(true);
  }
}
