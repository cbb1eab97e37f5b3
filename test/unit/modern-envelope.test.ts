/**
 * The modern era's envelope (src/mcp/modern/envelope.ts) and request-state codec (src/mcp/modern/request-state.ts),
 * pure: which requests are modern, the errors a bad envelope gets, and the codec's verdicts.
 */
import { describe, expect, test } from "bun:test";
import { checkEnvelope, isModernRequest, ModernRpcError } from "../../src/mcp/modern/envelope.ts";
import { callDigest, RequestStateCodec } from "../../src/mcp/modern/request-state.ts";

const V = "io.modelcontextprotocol/protocolVersion";
const C = "io.modelcontextprotocol/clientCapabilities";

/** The JSON-RPC error `f` throws. */
function thrown(f: () => unknown): { code: number; message: string; data?: unknown } {
  try {
    f();
  } catch (e) {
    if (e instanceof ModernRpcError) return { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) };
    throw e;
  }
  throw new Error("did not throw");
}

describe("envelope", () => {
  test("modern: a request naming a protocol version in _meta, or any server/discover; never initialize or a notification", () => {
    expect(isModernRequest({ id: 1, method: "tools/list", params: { _meta: { [V]: "2099-01-01" } } })).toBe(true);
    expect(isModernRequest({ id: "a", method: "server/discover" })).toBe(true);
    expect(isModernRequest({ id: 1, method: "initialize", params: { _meta: { [V]: "2026-07-28" } } })).toBe(false);
    expect(isModernRequest({ method: "tools/list", params: { _meta: { [V]: "2026-07-28" } } })).toBe(false);
    expect(isModernRequest({ id: 1, method: "tools/list", params: {} })).toBe(false);
  });

  test("another version is -32022 naming it; a missing version or capabilities is -32602", () => {
    expect(thrown(() => checkEnvelope({ _meta: { [V]: "2025-11-25", [C]: {} } }))).toEqual({
      code: -32022,
      message: "Unsupported protocol version: 2025-11-25",
      data: { supported: ["2026-07-28"], requested: "2025-11-25" },
    });
    expect(thrown(() => checkEnvelope(undefined)).code).toBe(-32602);
    expect(thrown(() => checkEnvelope({ _meta: { [V]: "2026-07-28" } })).message).toContain(C);
    expect(checkEnvelope({ _meta: { [V]: "2026-07-28", [C]: { elicitation: {} } } }).caps).toEqual({ elicitation: {} });
  });
});

describe("request-state codec", () => {
  test("verdicts: the payload until its expiry instant; malformed, mac, expired otherwise; another process's key fails", () => {
    const codec = new RequestStateCodec();
    const p = { h: "handle", d: callDigest("shell", { command: "x" }), e: 1000 };
    const s = codec.mint(p);
    expect(codec.verify(s, 999)).toEqual({ ok: true, payload: p });
    expect(codec.verify(s, 1000)).toEqual({ ok: false, reason: "expired" });
    expect(new RequestStateCodec().verify(s, 0)).toEqual({ ok: false, reason: "mac" });
    for (const bad of [undefined, 7, "v1.a", "v2.a.b", "x".repeat(4097)])
      expect(codec.verify(bad, 0)).toEqual({ ok: false, reason: "malformed" });
  });

  test("the digest binds the tool and arguments, not the client's key order", () => {
    expect(callDigest("shell", { a: 1, b: [{ y: 2, x: 1 }] })).toBe(callDigest("shell", { b: [{ x: 1, y: 2 }], a: 1 }));
    expect(callDigest("shell", undefined)).toBe(callDigest("shell", {}));
    expect(callDigest("shell", { a: 1 })).not.toBe(callDigest("write_stdin", { a: 1 }));
  });
});
