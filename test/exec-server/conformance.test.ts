/**
 * Every vector of the shared conformance file (test/fixtures/exec-server/exec-server-vectors.json, from the
 * project's shared spec) passes through the shared runner (exec-server-runner.mjs: Node + `ws`) against the compiled
 * `dist/shellmcp exec-server`, with plain paths (the April form) and again with `file://` URIs (Codex 0.169's form).
 * Each vector starts a fresh server; the spec-only TTL vector gets its TTL through
 * `EXEC_SERVER_DETACHED_SESSION_TTL_MS`, which shellmcp honours.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { withCodexHome } from "./codex-harness.ts";

const FIXTURES = join(ROOT, "test", "fixtures", "exec-server");
const node = Bun.which("node");
let ws = true;
try {
  require.resolve("ws", { paths: [FIXTURES] });
} catch {
  ws = false;
}
const missing = node === null ? "node is not installed" : !ws ? "the `ws` package is not installed (npm ci)" : undefined;
const maybe = skipWithout("exec-server conformance", missing) ? describe.skip : describe;

async function runVectors(pathStyle: "plain" | "uri"): Promise<{ code: number; out: string }> {
  const tmp = join(CONF_BASE, `exec-conf-${pathStyle}`);
  mkdirSync(tmp, { recursive: true });
  const proc = Bun.spawn(
    [
      node!,
      join(FIXTURES, "exec-server-runner.mjs"),
      "--vectors",
      join(FIXTURES, "exec-server-vectors.json"),
      "--jobs",
      "3",
      "--path-style",
      pathStyle,
      "--no-codex-home",
      "--tmp-root",
      tmp,
      "--",
      ensureBinary(),
      "exec-server",
      // The vectors' runner is Codex's harness, which presents no token (Codex 0.169 has no auth by default).
      "--ws-auth",
      "none",
    ],
    // The runner sets no CODEX_HOME (--no-codex-home): the servers get this one, not the run HOME's `~/.codex`.
    { cwd: FIXTURES, stdout: "pipe", stderr: "pipe", env: withCodexHome() },
  );
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out: out + err };
}

maybe("exec-server conformance vectors", () => {
  for (const style of ["plain", "uri"] as const) {
    test(`all 56 vectors pass (${style} paths)`, async () => {
      const { code, out } = await runVectors(style);
      const failures = out.split("\n").filter((l) => l.startsWith("FAIL"));
      expect(failures).toEqual([]);
      expect(out).toContain("56 passed, 0 failed");
      expect(code).toBe(0);
    }, 300_000);
  }
});
