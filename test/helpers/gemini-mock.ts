/**
 * A stand-in model for driving the real Gemini CLI: a small HTTP server speaking the Gemini API
 * (`POST …/models/<model>:generateContent`, and `:streamGenerateContent?alt=sse` as server-sent events, one
 * `GenerateContentResponse` per event; `:countTokens`). Gemini CLI 0.61 sends its requests there when
 * `GOOGLE_GEMINI_BASE_URL` is set (its "gateway" auth type; any `GEMINI_API_KEY`).
 *
 * Each request is recorded and answered by a script. Gemini CLI sends side requests too (routing, next-speaker
 * and loop checks) that offer no tools or ask for JSON; a script decides from the request itself:
 * {@link declaresFunction} tells the main loop's requests apart, {@link functionResponses} reads what the model
 * got back from its calls.
 */
import type { Server } from "bun";

/** A `Part` of Gemini's `Content`. */
export type Part = Record<string, unknown>;

/** One recorded request body (`GenerateContentRequest`). */
export type GeminiRequest = Record<string, unknown> & {
  contents: { role?: string; parts: Part[] }[];
  tools?: { functionDeclarations?: (Record<string, unknown> & { name: string })[] }[];
  generationConfig?: Record<string, unknown>;
};

/** The script: given a request, its URL path and how many were recorded before it, the model's reply parts. */
export type GeminiScript = (request: GeminiRequest, path: string, index: number) => Part[];

/** A text part. */
export function textPart(text: string): Part {
  return { text };
}

/** A function call part calling `name` with `args`. */
export function functionCall(name: string, args: Record<string, unknown>, id?: string): Part {
  return { functionCall: { name, args, ...(id === undefined ? {} : { id }) } };
}

/** Every function declared to the model, by name. */
export function declaredFunctions(request: GeminiRequest): (Record<string, unknown> & { name: string })[] {
  return (request.tools ?? []).flatMap((t) => t.functionDeclarations ?? []);
}

/** Whether the request declares a function named `name`. */
export function declaresFunction(request: GeminiRequest, name: string): boolean {
  return declaredFunctions(request).some((f) => f.name === name);
}

/** Every `functionResponse` in the request, in order: the function's name and its `response` object. */
export function functionResponses(request: GeminiRequest): { name: string; response: Record<string, unknown> }[] {
  const out: { name: string; response: Record<string, unknown> }[] = [];
  for (const c of request.contents)
    for (const p of c.parts ?? []) {
      const r = p.functionResponse as { name: string; response: Record<string, unknown> } | undefined;
      if (r !== undefined) out.push({ name: r.name, response: r.response ?? {} });
    }
  return out;
}

/** One `GenerateContentResponse` holding `parts` as the model's whole answer. */
function response(parts: Part[]): Record<string, unknown> {
  return {
    candidates: [{ content: { role: "model", parts }, finishReason: "STOP", index: 0 }],
    usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2 },
    modelVersion: "mock",
  };
}

/** The mock server: `url` is the `GOOGLE_GEMINI_BASE_URL` for Gemini CLI. */
export class GeminiMock {
  /** Every generateContent / streamGenerateContent request received, in order. */
  readonly requests: GeminiRequest[] = [];
  private readonly server: Server<undefined>;

  /** Start listening on a free loopback port; `script` answers each content request. */
  constructor(script: GeminiScript) {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        const url = new URL(req.url);
        const json = (v: unknown, status = 200): Response =>
          new Response(JSON.stringify(v), { status, headers: { "content-type": "application/json" } });
        if (req.method !== "POST") return json({ error: { code: 404, message: url.pathname, status: "NOT_FOUND" } }, 404);
        if (url.pathname.endsWith(":countTokens")) return json({ totalTokens: 1 });
        const stream = url.pathname.endsWith(":streamGenerateContent");
        if (!stream && !url.pathname.endsWith(":generateContent"))
          return json({ error: { code: 404, message: url.pathname, status: "NOT_FOUND" } }, 404);
        const body = (await req.json()) as GeminiRequest;
        const index = this.requests.length;
        this.requests.push(body);
        const out = response(script(body, url.pathname, index));
        if (!stream) return json(out);
        return new Response(`data: ${JSON.stringify(out)}\r\n\r\n`, { headers: { "content-type": "text/event-stream" } });
      },
    });
  }

  /** Base URL for `GOOGLE_GEMINI_BASE_URL` (the client adds `/v1beta/models/…`). */
  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  /** Stop listening, dropping open connections. */
  stop(): void {
    void this.server.stop(true);
  }
}
