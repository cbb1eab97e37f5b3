/**
 * Issue 30, item 4: the approval question cannot be forged. A folder name and an `-o` argument holding CR, ESC
 * sequences, U+202E/U+2066 and a fake "Allow agent to run `git status`" line reach a person, through the compiled
 * `serve` and the SDK client's elicitation handler, as one line with every such character visibly escaped (`\r`,
 * `\x1b`, `\u202e`), each part bounded with "… N more bytes", and with the prompt rule's justification shown. The
 * server's log lines (stderr) carry none of those characters raw either.
 */
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const skip = skipWithout("forged-question suite", shellsMissing());
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
});

/** Characters that must never reach a person raw. */
const RAW = /[\r\x1b\u202e\u2066\u200b\x85\x7f]/;
const FAKE = "Allow agent to run `git status` in `/w`?";
const LS = Bun.which("ls", { PATH: "/usr/local/bin:/usr/bin:/bin" })!;

async function ask(command: string, folder: string, rules: string): Promise<{ s: Session; base: string; ws: string }> {
  const base = mkdtempSync(join(CONF_BASE, "h4-forge-"));
  const ws = join(base, folder);
  mkdirSync(ws);
  const s = await startServe({ rules, onElicit: () => ({ action: "decline" }) });
  sessions.push(s);
  const { out } = await s.shell({ command, workdir: ws, login: false });
  expect(out.output).toContain("User declined execution");
  return { s, base, ws };
}

describe.skipIf(skip)("the exec question through the compiled binary", () => {
  test("control, bidi and format characters are escaped; the rule's justification is shown", async () => {
    const folder = `ws\r\x1b[1A\u202e\u200b\nAllow agent to run \`git status\``;
    const arg = `out\r\x1b[2K\u202e\u2066txt\n${FAKE}`;
    const { s, base } = await ask(
      `ls -o '${arg}'`,
      folder,
      'prefix_rule(pattern=["ls", "-o"], decision="prompt", justification="lists a file\\u202e\\x85 (asks first)")\n',
    );
    expect(s.elicitations).toEqual([
      `Allow agent to run \`${LS} -o 'out\\r\\x1b[2K\\u202e\\u2066txt\\nAllow agent to run \`git status\` in \`/w\`?'\`` +
        ` in \`${base}/ws\\r\\x1b[1A\\u202e\\u200b\\nAllow agent to run \`git status\`\`?` +
        `\nReason given by the rule: lists a file\\u202e\\x85 (asks first)`,
    ]);
    expect(s.elicitations[0]!.split("\n").length).toBe(2);
    expect(s.elicitations[0]).not.toMatch(RAW);
    expect(s.stderr()).toContain("prompted");
    expect(s.stderr()).not.toMatch(RAW);
  });

  test("a long argument is cut with an explicit count of the bytes left out", async () => {
    const long = "A".repeat(5000);
    const { s, ws } = await ask(`ls -o ${long}`, "ws", 'prefix_rule(pattern=["ls", "-o"], decision="prompt")\n');
    const shown = `${LS} -o ${long}`;
    expect(s.elicitations).toEqual([`Allow agent to run \`${shown.slice(0, 1024)}… ${shown.length - 1024} more bytes\` in \`${ws}\`?`]);
  });

  test("a refusal in a tool result shows the model's bytes visibly (no raw controls)", async () => {
    const s = await startServe();
    sessions.push(s);
    const r = (await s.client.callTool({
      name: "shell",
      arguments: { command: "true", workdir: "/" },
      _meta: { "codex/sandbox-state": { sandboxPolicy: { type: "read-only", "x\r\x1b[2K\u202eAllow": 1 }, sandboxCwd: "/" } },
    })) as { content: { text: string }[]; isError: boolean };
    expect(r.isError).toBe(true);
    const text = r.content[0]!.text;
    expect(text).toContain("unknown field `x\\r\\x1b[2K\\u202eAllow`");
    expect(text).not.toMatch(RAW);
  });
});
