/**
 * Issue 34, item 1: the decision inspector (src/escalate/decision/inspector.ts) reads what a sandbox wrote without blocking,
 * and its client (inspector-client.ts) fails a decision closed when the inspection does not finish by its deadline,
 * then carries on with a fresh worker.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { EscalationBoundary } from "../../src/escalate/decision/boundary.ts";
import { Inspector } from "../../src/escalate/decision/inspector-client.ts";
import { inspect } from "../../src/escalate/decision/inspector.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function repo(): string {
  const d = mkdtempSync(join(tmpdir(), "inspector-"));
  dirs.push(d);
  execFileSync("git", ["init", "-q", d]);
  return d;
}

/** A boundary whose sandbox writes nothing (so git may escalate) and which builds no room. */
const READ_ONLY: EscalationBoundary = { baseEnv: { PATH: "/usr/bin:/bin" }, writable: { full: false, roots: [], readOnly: [] } };

describe("decision inspector", () => {
  test("a FIFO at .gitmodules: the inspection answers at once, and git is not escalated", () => {
    const ws = repo();
    execFileSync("mkfifo", [join(ws, ".gitmodules")]);
    const r = inspect({ id: 1, boundary: READ_ONLY, request: { file: "/usr/bin/git", argv: ["git", "status"], workdir: ws }, env: {} });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.check.ok).toBe(false);
    if (r.check.ok) return;
    expect(r.check.reason).toContain("is not a regular file (a FIFO)");
  });

  test("a commondir naming a folder outside git's layout: git is not escalated", () => {
    const ws = repo();
    const elsewhere = mkdtempSync(join(tmpdir(), "inspector-elsewhere-"));
    dirs.push(elsewhere);
    writeFileSync(join(ws, ".git", "commondir"), elsewhere + "\n");
    const r = inspect({ id: 2, boundary: READ_ONLY, request: { file: "/usr/bin/git", argv: ["git", "status"], workdir: ws }, env: {} });
    expect(r.ok && !r.check.ok && r.check.reason).toContain("cannot be trusted");
  });

  test("a clean repository: git is escalated", () => {
    const ws = repo();
    const r = inspect({ id: 3, boundary: READ_ONLY, request: { file: "/usr/bin/git", argv: ["git", "status"], workdir: ws }, env: {} });
    expect(r.ok && r.check.ok).toBe(true);
  });

  test("another call's inspection queued behind a wedged one is sent again to the new worker, not failed", async () => {
    const inspector = new Inspector(400, new URL("./fixtures/hanging-inspector.ts", import.meta.url).href);
    try {
      const hung = inspector.inspect({ boundary: READ_ONLY, request: { file: "/hang", argv: ["x"], workdir: "/" }, env: {} });
      await Bun.sleep(200);
      const queued = inspector.inspect({ boundary: READ_ONLY, request: { file: "/usr/bin/true", argv: ["true"], workdir: "/" }, env: {} });
      expect((await hung).ok).toBe(false);
      const q = await queued;
      expect(q.ok && q.check.ok).toBe(true);
    } finally {
      inspector.stop();
    }
  });

  test("an inspection past its deadline fails closed, and the next one runs in a new worker", async () => {
    const inspector = new Inspector(300, new URL("./fixtures/hanging-inspector.ts", import.meta.url).href);
    try {
      const hung = await inspector.inspect({ boundary: READ_ONLY, request: { file: "/hang", argv: ["x"], workdir: "/" }, env: {} });
      expect(hung.ok).toBe(false);
      expect(!hung.ok && hung.error).toContain("longer than 300 ms");
      const next = await inspector.inspect({
        boundary: READ_ONLY,
        request: { file: "/usr/bin/true", argv: ["true"], workdir: "/" },
        env: {},
      });
      expect(next.ok && next.check.ok).toBe(true);
    } finally {
      inspector.stop();
    }
  });
});
