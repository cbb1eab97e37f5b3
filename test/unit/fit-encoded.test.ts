/**
 * fitEncoded (src/mcp/shell-tool.ts): output whose JSON encoding would exceed a limit is cut further, head and
 * tail kept, so one response stays under what MCP clients accept on a line.
 */
import { describe, expect, test } from "bun:test";
import { fitEncoded, MAX_ENCODED_OUTPUT_CHARS } from "../../src/mcp/shell-tool.ts";

const encoded = (s: string) => JSON.stringify(s).length;

describe("fitEncoded", () => {
  test("the default limit is 2 Mi characters", () => expect(MAX_ENCODED_OUTPUT_CHARS).toBe(2 * 1024 * 1024));

  test("output that fits is returned unchanged (also exactly at the limit)", () => {
    expect(fitEncoded("hello", 100)).toBe("hello");
    const s = "x".repeat(98);
    expect(encoded(s)).toBe(100);
    expect(fitEncoded(s, 100)).toBe(s);
  });

  test("too long: head and tail kept, a notice between, the encoding within the limit and nearly filling it", () => {
    const s = "H".repeat(5000) + "M".repeat(5000) + "T".repeat(5000);
    const out = fitEncoded(s, 1000);
    expect(encoded(out)).toBeLessThanOrEqual(1000);
    expect(encoded(out)).toBeGreaterThan(990);
    expect(out).toMatch(/^H+\n\[\.\.\. shellmcp: \d+ more characters omitted: the output is too large to send \.\.\.\]\nT+$/);
    const head = out.indexOf("\n");
    const tail = out.length - out.lastIndexOf("\n") - 1;
    expect(head).toBe(tail);
    const omitted = Number(/shellmcp: (\d+) more/.exec(out)![1]);
    expect(omitted + head + tail).toBe(s.length);
  });

  test("the limit counts the encoding, not the characters: control characters take 6 each", () => {
    const s = "\u0000".repeat(1000); // 1000 characters, 6002 encoded
    expect(encoded(s)).toBe(6002);
    const out = fitEncoded(s, 3000);
    expect(encoded(out)).toBeLessThanOrEqual(3000);
    expect(out.length).toBeLessThan(600);
    expect(out).toContain("more characters omitted");
  });

  test("a limit smaller than the notice gives the empty string", () => {
    expect(fitEncoded("y".repeat(1000), 40)).toBe("");
  });
});
