/**
 * The MCP streamable HTTP transport's SDK side (the SDK stays behind this adapter and ./server.ts): one legacy-era
 * MCP session (2025-06-18 / 2025-11-25) is one SDK `Server` (./server.ts `createLegacyServer`, the same handlers as
 * on stdio) connected to one `WebStandardStreamableHTTPServerTransport` of `@modelcontextprotocol/sdk` v1, which
 * speaks the wire: POST answered as an SSE stream (or JSON), `Mcp-Session-Id` minted at `initialize`, the GET stream
 * for server-to-client requests (elicitation, roots), DELETE ending the session. The modern era (2026-07-28) over
 * HTTP is stateless: {@link ModernHttp} answers each POST with the JSON-RPC response of ./modern.ts.
 *
 * What is in front of this (the listener, authentication, Origin/Host checks, body caps, limits, idle ends) is
 * ../http/server.ts; it hands over requests already authenticated, with their body parsed.
 */
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { log } from "../log.ts";
import { ModernEra } from "./modern.ts";
import { createLegacyServer, type McpServerOptions } from "./server.ts";

/** One legacy-era MCP session over HTTP. */
export interface HttpMcpSession {
  /** Answer one request of this session (`parsedBody`: the POST's JSON, already read and size-checked). */
  handle(req: Request, parsedBody?: unknown): Promise<Response>;
  /** End the session: its streams close, its in-flight calls are aborted (idempotent). */
  close(): Promise<void>;
}

/**
 * Start a legacy-era session for an `initialize` POST: `o` is this client's server behaviour (its own tools
 * callback, exec sessions and sandbox state); `register(id)` runs when the SDK mints the `Mcp-Session-Id` (before
 * the answer is sent); `ended(id)` once, when the session ends by DELETE, by {@link HttpMcpSession.close} or by the
 * transport closing. Returns the session and the response to the `initialize` POST.
 */
export async function startHttpSession(
  o: McpServerOptions,
  req: Request,
  parsedBody: unknown,
  register: (id: string, session: HttpMcpSession) => void,
  ended: (id: string) => void,
): Promise<Response> {
  const server = createLegacyServer(o);
  let sessionId: string | undefined;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    if (sessionId !== undefined) ended(sessionId);
  };
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => crypto.randomUUID(),
    onsessioninitialized: (id) => {
      sessionId = id;
      register(id, session);
    },
    onsessionclosed: () => finish(),
  });
  const session: HttpMcpSession = {
    handle: (r, body) => transport.handleRequest(r, { parsedBody: body }),
    close: async () => {
      await server.close().catch(() => undefined);
      finish();
    },
  };
  server.onclose = () => finish();
  server.onerror = (e) => log.debug("mcp http transport error", { error: e.message });
  await server.connect(transport);
  return transport.handleRequest(req, { parsedBody });
}

/**
 * The modern era (2026-07-28) over HTTP for one authenticated subject: stateless requests, each POST answered with
 * its JSON-RPC response as `application/json` (progress notifications are not streamed). One instance per subject
 * keeps that subject's parked execs and `requestState` key apart from every other subject's.
 */
export class ModernHttp {
  private readonly era: ModernEra;
  private readonly waiting = new Map<string | number, (m: Record<string, unknown>) => void>();
  private seq = 0;

  constructor(o: McpServerOptions) {
    this.era = new ModernEra({
      ...o,
      send: (m) => {
        const id = m.id as string | number | undefined;
        if (id === undefined || !("result" in m || "error" in m)) return; // notifications: no stream to carry them
        const w = this.waiting.get(id);
        if (w === undefined) return;
        this.waiting.delete(id);
        w(m);
      },
    });
  }

  /**
   * Answer one modern request (`msg`: a parsed request that ./modern.ts `isModernRequest` accepted). Requests of
   * different clients of one subject may share JSON-RPC ids: each is handed on under an id of its own.
   */
  async handle(msg: { id: string | number; method: string; params?: unknown }, signal: AbortSignal): Promise<Response> {
    const own = ++this.seq;
    const answer = new Promise<Record<string, unknown>>((res) => this.waiting.set(own, res));
    // The client dropped the request (as `notifications/cancelled` on stdio): the call is cancelled, its answer dropped.
    const abort = () => {
      this.waiting.get(own)?.({ jsonrpc: "2.0", id: own, error: { code: -32800, message: "Request cancelled" } });
      this.waiting.delete(own);
      this.era.cancel(own);
    };
    signal.addEventListener("abort", abort, { once: true });
    this.era.handle({ ...msg, id: own });
    const m = await answer;
    signal.removeEventListener("abort", abort);
    return Response.json({ ...m, id: msg.id });
  }

  /** End every parked exec and task of this subject. */
  close(): void {
    this.era.close();
  }
}
