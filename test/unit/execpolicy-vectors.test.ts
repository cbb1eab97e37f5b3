/**
 * The 74 execpolicy conformance vectors (test/fixtures/execpolicy/vectors.json, vendored from the project's
 * shared spec; see test/fixtures/README.md), read directly from the file and
 * checked against `oracle` (what `codex execpolicy check` 0.169 printed), which wins where it differs from
 * `expect`. Success cases must be byte-equal to the oracle's JSON; error cases must fail to load with the
 * oracle's key error line (and `expect.error`).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RulesError, policyFromSources } from "../../src/execpolicy/load.ts";
import { renderCheckJson } from "../../src/execpolicy/check.ts";
import { ROOT } from "../helpers/binary.ts";

const VECTORS = join(ROOT, "test", "fixtures", "execpolicy", "vectors.json");

interface Vector {
  name: string;
  rules: string | string[];
  argv: string[];
  options?: { resolveHostExecutables?: boolean };
  expect: { error?: string; decision?: string | null; matchedRules?: unknown[] };
  oracle: { error?: string; matchedRules?: unknown[]; decision?: string };
}

const vectors: Vector[] = JSON.parse(readFileSync(VECTORS, "utf8"));

/** The line of the oracle's stderr that carries the error itself (the rest is the diagnostic frame). */
function keyLine(err: string): string {
  const lines = err.split("\n").map((l) => l.trim());
  const e = lines.find((l) => l.startsWith("error: ") && !l.startsWith("error: failed to parse"));
  if (e !== undefined) return e.slice("error: ".length).replace(/^Parse error: /, "Parse error: ");
  const starlark = lines.find((l) => l.startsWith("starlark error: error: "));
  if (starlark !== undefined) return starlark.slice("starlark error: error: ".length);
  return lines.find((l) => l.startsWith("expected ")) ?? lines.filter((l) => l !== "").pop()!;
}

describe("execpolicy conformance vectors (oracle = codex execpolicy check 0.169)", () => {
  test("there are 74", () => expect(vectors.length).toBe(74));

  for (const v of vectors) {
    test(v.name, () => {
      const dir = "/rules-dir";
      const sources = (Array.isArray(v.rules) ? v.rules : [v.rules]).map((text, i) => ({ path: join(dir, `r${i}.rules`), text }));
      if (v.argv.length === 0) {
        // The CLI refuses an empty command before loading anything (clap); the library matches nothing.
        expect(v.oracle.error).toContain("<COMMAND>");
        const p = policyFromSources(sources);
        expect(p.check([])).toEqual({ matchedRules: [] });
        return;
      }
      if (v.oracle.error !== undefined) {
        let err: unknown;
        try {
          policyFromSources(sources);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(RulesError);
        const msg = (err as RulesError).message;
        if (v.expect.error !== undefined) expect(msg).toContain(v.expect.error);
        expect(msg).toContain(keyLine(v.oracle.error.replaceAll("<rules-dir>", dir)));
        return;
      }
      const policy = policyFromSources(sources);
      const cwd = "/work-cwd";
      const got = renderCheckJson(policy.check(v.argv, { resolveHostExecutables: v.options?.resolveHostExecutables ?? false, cwd }));
      expect(got).toBe(JSON.stringify(v.oracle).replaceAll("<cwd>", cwd));
    });
  }
});
