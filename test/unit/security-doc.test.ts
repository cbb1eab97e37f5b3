/**
 * docs/security.md's containment table is generated, not typed: the block between its markers must be exactly what
 * the recorded results (test/security/containment/results.json) render, and every scenario must have a result.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SCENARIOS } from "../security/containment/scenarios.ts";
import { BEGIN, END, renderTable, type Results } from "../security/containment/table.ts";

const ROOT = join(import.meta.dir, "..", "..");

/** Table rows with their cells trimmed (Prettier pads Markdown tables; the content is what must match). */
function normalise(md: string): string {
  return md
    .trim()
    .split("\n")
    .map((l) =>
      l.startsWith("|")
        ? l
            .split(/(?<!\\)\|/)
            .map((c) => c.trim().replace(/^:?-+:?$/, "---"))
            .join("|")
        : l.trim(),
    )
    .join("\n");
}

describe("docs/security.md containment table", () => {
  test("is what the recorded results render", () => {
    const results = JSON.parse(readFileSync(join(ROOT, "test", "security", "containment", "results.json"), "utf8")) as Results;
    const doc = readFileSync(join(ROOT, "docs", "security.md"), "utf8");
    const a = doc.indexOf(BEGIN);
    const b = doc.indexOf(END);
    expect(a).toBeGreaterThan(-1);
    expect(b).toBeGreaterThan(a);
    expect(normalise(doc.slice(a + BEGIN.length, b))).toBe(normalise(renderTable(SCENARIOS, results)));
  });

  test("every scenario has a recorded result, and scenario ids are unique", () => {
    const results = JSON.parse(readFileSync(join(ROOT, "test", "security", "containment", "results.json"), "utf8")) as Results;
    expect(SCENARIOS.filter((s) => results.scenarios[s.id] === undefined).map((s) => s.id)).toEqual([]);
    expect(new Set(SCENARIOS.map((s) => s.id)).size).toBe(SCENARIOS.length);
  });
});
