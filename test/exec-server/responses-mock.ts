/**
 * A stand-in model for driving the real Codex CLI through `shellmcp exec-server`: a small HTTP server speaking the
 * OpenAI Responses API with server-sent events (`response.created`, `response.output_item.done`,
 * `response.completed`). Each POST to `/v1/responses` is recorded and answered by the next scripted step, which may
 * look at what Codex sent (e.g. the session id a previous `exec_command` reported).
 */
import type { Server } from "bun";

/** One recorded `/v1/responses` request body. */
export type ResponsesRequest = Record<string, unknown> & { input: Record<string, unknown>[]; tools?: Record<string, unknown>[] };

/** A scripted model turn: what the model "does" for this request. */
export type ModelStep =
  | { tool: "exec_command" | "write_stdin" | "view_image"; args: Record<string, unknown> | ((prev: string) => Record<string, unknown>) }
  | { tool: "apply_patch"; input: string };

const USAGE = { input_tokens: 0, input_tokens_details: null, output_tokens: 0, output_tokens_details: null, total_tokens: 0 };

function sse(events: Record<string, unknown>[]): string {
  return events.map((e) => `event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`).join("");
}

/** The output Codex gave back for `callId` in `request` (text; images as their JSON). */
export function callOutput(request: ResponsesRequest | undefined, callId: string): string | undefined {
  const item = request?.input.find(
    (i) => (i.type === "function_call_output" || i.type === "custom_tool_call_output") && i.call_id === callId,
  );
  if (item === undefined) return undefined;
  const out = item.output;
  if (typeof out === "string") return out;
  if (Array.isArray(out)) return out.map((p: { text?: string }) => (p.text !== undefined ? p.text : JSON.stringify(p))).join("\n");
  if (typeof out === "object" && out !== null && typeof (out as { content?: unknown }).content === "string")
    return (out as { content: string }).content;
  return JSON.stringify(out);
}

/** The mock: steps are played one per request; after the last, the model ends the turn with "done". */
export class ResponsesMock {
  readonly requests: ResponsesRequest[] = [];
  private readonly server: Server<undefined>;

  constructor(private readonly steps: ModelStep[]) {
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
        const id = `resp-${index}`;
        const step = this.steps[index];
        let item: Record<string, unknown>;
        if (step === undefined)
          item = { type: "message", role: "assistant", id: `msg-${index}`, content: [{ type: "output_text", text: "done" }] };
        else if (step.tool === "apply_patch")
          item = { type: "custom_tool_call", id: `ctc_${index}`, call_id: `call_${index}`, name: "apply_patch", input: step.input };
        else {
          const prev = index === 0 ? "" : (callOutput(body, `call_${index - 1}`) ?? "");
          const args = typeof step.args === "function" ? step.args(prev) : step.args;
          item = { type: "function_call", id: `fc_${index}`, call_id: `call_${index}`, name: step.tool, arguments: JSON.stringify(args) };
        }
        const events = [
          { type: "response.created", response: { id } },
          { type: "response.output_item.done", item },
          { type: "response.completed", response: { id, usage: USAGE } },
        ];
        return new Response(sse(events), { headers: { "content-type": "text/event-stream" } });
      },
    });
  }

  /** Base URL for Codex's provider config (ends in `/v1`). */
  get url(): string {
    return `http://127.0.0.1:${this.server.port}/v1`;
  }

  /** Output of call `i` as the model received it (in the request after it). */
  output(i: number): string | undefined {
    return callOutput(this.requests[i + 1], `call_${i}`);
  }

  /** Names of the tools the first request offered. */
  offeredTools(): string[] {
    return (this.requests[0]?.tools ?? []).map((t) => String(t.name));
  }

  stop(): void {
    void this.server.stop(true);
  }
}
