import { describe, expect, test } from "bun:test";
import * as libc from "../../ffi/libc.ts";
import { ShellmcpError } from "../../src/errors.ts";
import {
  decodeRequest,
  decodeResponse,
  decodeResult,
  decodeSuperExec,
  encodeFrame,
  encodeRequest,
  encodeResponse,
  encodeResult,
  encodeSuperExec,
  FrameDecoder,
  frameLength,
} from "../../src/escalate/protocol/wire.ts";
import { recvFrame, sendFrame } from "../../src/escalate/protocol/socket.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

function protocolError(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ShellmcpError);
    expect((e as ShellmcpError).code).toBe("PROTOCOL");
    return (e as ShellmcpError).message;
  }
  throw new Error("expected a PROTOCOL error");
}

describe("messages, exactly as Codex serialises them", () => {
  test("responses", () => {
    expect(dec(encodeResponse({ kind: "Run" }))).toBe(`{"action":"Run"}`);
    expect(dec(encodeResponse({ kind: "Escalate" }))).toBe(`{"action":"Escalate"}`);
    expect(dec(encodeResponse({ kind: "Deny", reason: "Execution forbidden by policy" }))).toBe(
      `{"action":{"Deny":{"reason":"Execution forbidden by policy"}}}`,
    );
    expect(dec(encodeResponse({ kind: "Deny", reason: null }))).toBe(`{"action":{"Deny":{"reason":null}}}`);
    // The Deny frame observed on the wire is 0x3e = 62 bytes long.
    expect(encodeResponse({ kind: "Deny", reason: "Execution forbidden by policy" }).byteLength).toBe(0x3e);
    expect(decodeResponse(enc(`{"action":{"Deny":{"reason":null}}}`))).toEqual({ kind: "Deny", reason: null });
    expect(decodeResponse(enc(`{"action":{"Deny":{}}}`))).toEqual({ kind: "Deny", reason: null });
    expect(decodeResponse(enc(`{"action":"Escalate","extra":1}`))).toEqual({ kind: "Escalate" });
  });

  test("super-exec messages", () => {
    expect(dec(encodeSuperExec({ fds: [0, 1, 2] }))).toBe(`{"fds":[0,1,2]}`);
    expect(dec(encodeResult({ exit_code: 0 }))).toBe(`{"exit_code":0}`);
    expect(encodeSuperExec({ fds: [0, 1, 2] }).byteLength).toBe(0x0f);
    expect(decodeResult(enc(`{"exit_code":-1}`))).toEqual({ exit_code: -1 });
  });

  test("request round trip keeps field order file, argv, workdir, env", () => {
    const r = { file: "/usr/bin/env", argv: ["env", "-i", "A=1"], workdir: "/tmp", env: { K: "V", "WEIRD KEY": "é\n" } };
    expect(dec(encodeRequest(r))).toStartWith(`{"file":"/usr/bin/env","argv":["env","-i","A=1"],"workdir":"/tmp","env":{`);
    expect(decodeRequest(encodeRequest(r))).toEqual(r);
  });

  test("unknown fields are ignored, missing and mistyped ones rejected", () => {
    expect(decodeRequest(enc(`{"file":"/a","argv":["a"],"workdir":"/","env":{},"new":true}`)).file).toBe("/a");
    expect(protocolError(() => decodeRequest(enc(`{"argv":["a"],"workdir":"/","env":{}}`)))).toContain("`file`");
    expect(protocolError(() => decodeRequest(enc(`{"file":"/a","argv":"a","workdir":"/","env":{}}`)))).toContain("`argv`");
    expect(protocolError(() => decodeRequest(enc(`{"file":"/a","argv":[1],"workdir":"/","env":{}}`)))).toContain("`argv`");
    expect(protocolError(() => decodeRequest(enc(`{"file":"/a","argv":["a"],"workdir":7,"env":{}}`)))).toContain("`workdir`");
    expect(protocolError(() => decodeRequest(enc(`{"file":"/a","argv":["a"],"workdir":"/","env":{"K":1}}`)))).toContain("`env`");
    expect(protocolError(() => decodeRequest(enc(`{"file":"/a\\u0000b","argv":["a"],"workdir":"/","env":{}}`)))).toContain("NUL");
    expect(protocolError(() => decodeRequest(enc(`[1,2]`)))).toContain("JSON object");
    expect(protocolError(() => decodeRequest(enc(`{"file":`)))).toContain("invalid JSON");
    expect(protocolError(() => decodeRequest(new Uint8Array([0x7b, 0xff, 0x7d])))).toContain("UTF-8");
    expect(protocolError(() => decodeResponse(enc(`{"action":"Maybe"}`)))).toContain("unknown action");
    expect(protocolError(() => decodeSuperExec(enc(`{"fds":[0,0]}`)))).toContain("duplicate");
    expect(protocolError(() => decodeSuperExec(enc(`{"fds":[-1]}`)))).toContain("integers");
    expect(protocolError(() => decodeResult(enc(`{"exit_code":1.5}`)))).toContain("exit_code");
    expect(protocolError(() => decodeResult(enc(`{"exit_code":4294967296}`)))).toContain("i32");
  });
});

describe("framing", () => {
  test("4-byte little-endian length header", () => {
    const f = encodeFrame(enc(`{"action":"Run"}`));
    expect(Array.from(f.subarray(0, 4))).toEqual([0x10, 0, 0, 0]);
    expect(frameLength(f)).toBe(16);
  });

  test("oversized and short headers are rejected", () => {
    expect(protocolError(() => frameLength(new Uint8Array([0xff, 0xff, 0xff, 0xff])))).toContain("frame too large");
    expect(protocolError(() => frameLength(new Uint8Array([1, 0])))).toContain("short frame header");
    expect(protocolError(() => frameLength(new Uint8Array([0, 0, 1, 0]), 1000))).toContain("frame too large: 65536");
  });

  test("incremental decoder: byte-by-byte, several frames in one chunk", () => {
    const d = new FrameDecoder();
    const a = encodeFrame(enc("first"));
    const b = encodeFrame(enc("second"));
    for (const byte of a.subarray(0, a.length - 1)) {
      d.push(new Uint8Array([byte]));
      expect(d.next()).toBeUndefined();
    }
    const joined = new Uint8Array([a[a.length - 1]!, ...b]);
    d.push(joined);
    expect(dec(d.next()!)).toBe("first");
    expect(dec(d.next()!)).toBe("second");
    expect(d.next()).toBeUndefined();
    expect(d.pending).toBe(0);
  });

  test("a 2 MiB request crosses a stream socketpair in chunks, fds on the first chunk", async () => {
    const { AF_UNIX, SOCK_STREAM, SOCK_CLOEXEC } = libc.SOCK;
    const [a, b] = libc.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    const [x, y] = libc.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    const env: Record<string, string> = {};
    for (let i = 0; i < 2048; i++) env[`VAR_${i}`] = "x".repeat(1024);
    const request = { file: "/bin/true", argv: ["true"], workdir: "/", env };
    const payload = encodeRequest(request);
    expect(payload.byteLength).toBeGreaterThan(2 * 1024 * 1024);
    // The receiver must run concurrently: a 2 MiB frame does not fit in the socket buffer.
    const receiver = new Worker(new URL("../escalate/fixtures/recv-frame-worker.ts", import.meta.url).href);
    const got = new Promise<{ json: string; fds: number }>((res) => (receiver.onmessage = (ev) => res(ev.data)));
    receiver.postMessage({ fd: b });
    sendFrame(a, payload, [x]);
    const r = await got;
    receiver.terminate();
    expect(r.fds).toBe(1);
    expect(decodeRequest(enc(r.json))).toEqual(request);
    [a, b, x, y].forEach(libc.closeQuiet);
  });

  test("EOF before and inside a frame: Codex's messages", () => {
    const { AF_UNIX, SOCK_STREAM, SOCK_CLOEXEC } = libc.SOCK;
    const [a, b] = libc.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    libc.close(a);
    expect(protocolError(() => recvFrame(b))).toBe("socket closed while receiving frame header");
    libc.close(b);
    const [c, d] = libc.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    libc.sendmsg(c, encodeFrame(enc("complete payload")).subarray(0, 8));
    libc.close(c);
    expect(protocolError(() => recvFrame(d))).toBe("socket closed while receiving frame payload");
    libc.close(d);
  });
});
