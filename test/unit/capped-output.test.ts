/**
 * CappedOutput (src/shell/output.ts): a command's output capped in bytes, the first and the last half kept,
 * the middle counted; lossy UTF-8 decoding.
 */
import { describe, expect, test } from "bun:test";
import { CappedOutput, DEFAULT_MAX_OUTPUT_BYTES } from "../../src/shell/output.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

/** Feed `data` to a fresh CappedOutput(cap) cut into chunks of the given sizes (cycled). */
function feed(cap: number, data: Uint8Array, sizes: number[]): CappedOutput {
  const o = new CappedOutput(cap);
  let at = 0;
  for (let i = 0; at < data.length; i++) {
    const n = sizes[i % sizes.length]!;
    o.push(data.subarray(at, at + n));
    at += n;
  }
  return o;
}

describe("CappedOutput", () => {
  test("default cap is 1 MiB", () => expect(DEFAULT_MAX_OUTPUT_BYTES).toBe(1024 * 1024));

  test("under the cap: everything, nothing dropped", () => {
    const o = new CappedOutput(10);
    o.push(bytes("abcd"));
    o.push(bytes("efghij"));
    expect(o.text()).toBe("abcdefghij");
    expect(o.total).toBe(10);
    expect(o.dropped).toBe(0);
  });

  test("over the cap: head half, a notice with the counts, tail half", () => {
    const o = feed(10, bytes("0123456789abcdefghijklmno"), [25]);
    expect(o.total).toBe(25);
    expect(o.dropped).toBe(15);
    expect(o.text()).toBe(
      "01234\n[... shellmcp: 15 bytes omitted from the middle of 25 bytes of output; shown: the first 5 and the last 5 bytes ...]\nklmno",
    );
  });

  test("an odd cap gives the head the extra byte", () => {
    const o = feed(5, bytes("abcdefghij"), [1]);
    expect(o.text()).toBe(
      "abc\n[... shellmcp: 5 bytes omitted from the middle of 10 bytes of output; shown: the first 3 and the last 2 bytes ...]\nij",
    );
  });

  test("the result does not depend on how the output was chunked", () => {
    const data = bytes(Array.from({ length: 500 }, (_, i) => String.fromCharCode(97 + (i % 26))).join(""));
    const whole = feed(64, data, [data.length]).text();
    for (const sizes of [[1], [3, 7], [63], [64], [65], [100, 1, 2], [0, 5]]) {
      const o = feed(
        64,
        data,
        sizes.map((s) => Math.max(1, s)),
      );
      expect(o.text()).toBe(whole);
      expect(o.dropped).toBe(500 - 64);
    }
  });

  test("empty chunks change nothing", () => {
    const o = new CappedOutput(4);
    o.push(new Uint8Array(0));
    o.push(bytes("ab"));
    o.push(new Uint8Array(0));
    expect(o.text()).toBe("ab");
    expect(o.total).toBe(2);
  });

  test("invalid UTF-8, and characters cut at the seams, become U+FFFD", () => {
    const o = new CappedOutput(100);
    o.push(new Uint8Array([0x61, 0xff, 0x62]));
    expect(o.text()).toBe("a\uFFFDb");
    // "é" is two bytes (c3 a9): with a cap of 4 the head keeps "a" + c3, the tail keeps a9 + "b".
    const cut = feed(4, bytes("aé-----éb"), [1]);
    expect(cut.text().startsWith("a\uFFFD\n[... shellmcp:")).toBe(true);
    expect(cut.text().endsWith("\n\uFFFDb")).toBe(true);
  });

  test("the pushed chunk may be reused by the caller afterwards", () => {
    const o = new CappedOutput(4);
    const buf = bytes("abcdef");
    o.push(buf);
    buf.fill(0x7a);
    expect(o.text()).toBe(
      "ab\n[... shellmcp: 2 bytes omitted from the middle of 6 bytes of output; shown: the first 2 and the last 2 bytes ...]\nef",
    );
  });
});
