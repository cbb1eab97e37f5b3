/** src/safe-text.ts: what a person reads of untrusted text (issue 30, item 4). */
import { describe, expect, test } from "bun:test";
import { bounded, visible, visibleLines } from "../../src/safe-text.ts";

describe("visible", () => {
  test("C0, DEL and C1 controls: named or \\xNN", () => {
    expect(visible("a\tb\nc\rd\x1b[2Ke\x00\x7f\x85\x9b")).toBe("a\\tb\\nc\\rd\\x1b[2Ke\\x00\\x7f\\x85\\x9b");
  });
  test("bidi, zero-width, BOM, separators, tags and lone surrogates: \\uXXXX", () => {
    expect(visible("\u202a\u202e\u2066\u2069\u200b\u200f\u061c\ufeff\u00ad\u2028\u2029")).toBe(
      "\\u202a\\u202e\\u2066\\u2069\\u200b\\u200f\\u061c\\ufeff\\xad\\u2028\\u2029",
    );
    expect(visible("\u{e0041}x\ud800y\udc00")).toBe("\\u{e0041}x\\ud800y\\udc00");
  });
  test("printable text of any script is kept, backslashes included", () => {
    const s = "git commit -m 'héllo 世界 🙂' C:\\path «x»";
    expect(visible(s)).toBe(s);
  });
});

describe("visibleLines", () => {
  test("line feeds stay line breaks; CR, ESC and bidi characters are escaped", () => {
    expect(visibleLines("refused:\n/w/a\rb\x1b[2K\u202e")).toBe("refused:\n/w/a\\rb\\x1b[2K\\u202e");
  });
});

describe("bounded", () => {
  test("within the budget: the rendered text", () => {
    expect(bounded("ab\rc", 6)).toBe("ab\\rc");
  });
  test("over it: cut at a character boundary, with the rendered bytes left out", () => {
    expect(bounded("a".repeat(10), 4)).toBe("aaaa… 6 more bytes");
    // "é" is 2 bytes: "a" + "é" fill a budget of 3, the next "é" does not fit.
    expect(bounded("aéé", 3)).toBe("aé… 2 more bytes");
    expect(bounded("🙂🙂", 5)).toBe("🙂… 4 more bytes");
  });
});
