/**
 * A Landlock call whose plan is larger than a pipe's default 64 KiB: HOME holds a credential store (`~/.ssh`, hidden
 * from every sandbox) beside thousands of entries, each of which the plan lists as a read rule of its own (Landlock
 * cannot carve the store out of HOME). The server wrote the plan for sandbox-exec into a pipe before starting the
 * reader, and the write blocked its main thread forever: the call never answered and the server hung (the
 * containment suite's Landlock secrets scenarios timed out). Through the compiled binary and a real MCP client,
 * judged by the answer: the call runs, and the store stays hidden.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../helpers/mcp.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { withDeadline } from "../helpers/attack.ts";

const skip = skipWithout("large plan suite", shellsMissing());
const base = mkdtempSync(join(CONF_BASE, "large-plan-"));
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => {});
  rmSync(base, { recursive: true, force: true });
});

describe.skipIf(skip)("a Landlock plan over 64 KiB", () => {
  test("the call runs (the server does not hang writing it) and the store stays hidden", async () => {
    const home = join(base, "home");
    mkdirSync(join(home, ".ssh"), { recursive: true });
    writeFileSync(join(home, ".ssh", "id_ed25519"), "large-plan-secret\n");
    // ~3,000 entries of ~60 bytes each: a plan of well over 64 KiB.
    for (let i = 0; i < 3000; i++) writeFileSync(join(home, `entry-with-a-rather-long-name-${String(i).padStart(5, "0")}.txt`), "");
    const ws = join(base, "ws");
    mkdirSync(ws);
    const s = await startServe({ codexHome: home, args: ["--sandbox-backend", "landlock"] });
    sessions.push(s);
    const r = await withDeadline(
      s.shell({ command: `echo ran; cat ${join(home, ".ssh", "id_ed25519")} 2>&1; ls ${home} | wc -l`, workdir: ws, login: false }),
      30_000,
      "the call's answer",
    );
    expect(r.out.output).toContain("ran");
    expect(r.out.output).not.toContain("large-plan-secret");
    expect(r.out.output).toMatch(/300\d/); // HOME itself stays listable
  }, 60_000);
});
