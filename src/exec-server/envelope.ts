/**
 * The exec-server's JSON-RPC-lite envelope (exec-server spec §2, Codex 0.169 as observed): one inbound message is
 * parsed and sorted — a request goes to the method table (./methods.ts), the `initialized` notification marks the
 * connection initialized, a response or any other notification closes the connection, anything malformed is
 * answered −32600 with id −1 in Codex's words. Replies are `{id, result}` or `{error: {code, message}, id}`;
 * `"jsonrpc"` is never sent.
 */
import { isJsonObject, isRequestId } from "../jsonrpc.ts";
import { log } from "../log.ts";
import { isKnownMethod, prepare, type MethodContext } from "./methods.ts";
import { RPC, rpcError, toRpcError } from "./rpc.ts";
import type { Conn, SessionRegistry } from "./session.ts";

/** What the envelope needs: the method context, and a hook run before each `process/start` is handled. */
export interface EnvelopeContext {
  methods: MethodContext;
  sessions: SessionRegistry;
  /** Called before a `process/start` request is decoded (the server starts its guardian then). */
  beforeProcessStart(): void;
}

/** Send `msg` as one message on `c` (nothing once it closed). */
function send(c: Conn, msg: unknown): void {
  if (!c.closed) c.ws.send(JSON.stringify(msg));
}

/** Close `c` (if still open) and detach its session. */
export function closeConn(sessions: SessionRegistry, c: Conn): void {
  if (!c.closed) c.ws.close();
  sessions.detach(c);
}

/**
 * The handler of one inbound message (a websocket frame or a stdio line) on its connection. Resolves once the
 * message is answered (for a request: after its method ran); never rejects for a client's mistake.
 */
export function messageHandler(ctx: EnvelopeContext): (c: Conn, raw: string | Buffer) => Promise<void> {
  return async (c, raw) => {
    const msg = parse(c, raw);
    if (msg === undefined) return;
    if ("id" in msg) {
      if (typeof msg.method === "string") {
        const id = msg.id;
        if (!isRequestId(id, { integer: true })) return malformed(c, "data did not match any variant of untagged enum RequestId");
        return handleRequest(ctx, c, id, msg.method, msg.params);
      }
      if ("result" in msg || "error" in msg) {
        log.info("exec-server: client sent a response; closing", { peer: c.peer });
        return closeConn(ctx.sessions, c);
      }
      return malformed(c, "missing field `error`");
    }
    if (typeof msg.method === "string") {
      if (msg.method === "initialized" && c.session !== undefined && c.session.attachment === c) {
        c.initialized = true;
        return;
      }
      log.info("exec-server: unexpected notification; closing", { peer: c.peer, method: msg.method });
      return closeConn(ctx.sessions, c);
    }
    return malformed(c, "missing field `method`");
  };
}

/** The message as a JSON object, or undefined after answering it as malformed (bad UTF-8, bad JSON, not an object). */
function parse(c: Conn, raw: string | Buffer): Record<string, unknown> | undefined {
  let msg: unknown;
  try {
    const text = typeof raw === "string" ? raw : new TextDecoder("utf-8", { fatal: true }).decode(raw);
    msg = JSON.parse(text);
  } catch (e) {
    malformed(c, (e as Error).message);
    return undefined;
  }
  if (!isJsonObject(msg)) {
    malformed(c, "expected a JSON-RPC object");
    return undefined;
  }
  return msg;
}

/** Answer a message that is no JSON-RPC message: −32600, id −1, with the transport named as Codex names it. */
function malformed(c: Conn, why: string): void {
  send(c, {
    error: {
      code: RPC.INVALID_REQUEST,
      message:
        c.peer === "stdio"
          ? `failed to parse JSON-RPC message from exec-server stdio: ${why}`
          : `failed to parse websocket JSON-RPC message from exec-server websocket ${c.peer}: ${why}`,
    },
    id: -1,
  });
}

async function handleRequest(ctx: EnvelopeContext, c: Conn, id: string | number, method: string, params: unknown): Promise<void> {
  if (!isKnownMethod(method))
    return send(c, { error: toRpcError(rpcError(RPC.METHOD_NOT_FOUND, `exec-server stub does not implement \`${method}\` yet`)), id });
  const stale = c.session !== undefined && c.session.attachment !== c;
  if (method === "process/start") ctx.beforeProcessStart();
  try {
    const run = prepare(ctx.methods, c, method, params ?? null);
    const result = await run();
    send(c, { id, result });
  } catch (e) {
    const { code, message } = toRpcError(e);
    send(c, { error: { code, message }, id });
  }
  if (stale) closeConn(ctx.sessions, c);
}
