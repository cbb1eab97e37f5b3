/**
 * The local approver with a real client that has nobody to ask: Claude Code's print mode (`claude -p`, the dev
 * dependency `@anthropic-ai/claude-code`), driven by a stand-in Anthropic Messages API that asks for one `shell`
 * call of the compiled `serve`. Claude Code declares elicitation but, in print mode, answers every request
 * `cancel` at once, unasked: with `--approver` (fallback) and nobody at `shellmcp approvals` the prompt is denied as
 * "User cancelled execution"; with `--approver always`, or with `--approver` while a person runs the interactive
 * `shellmcp approvals` (issue 41: the cancel in under 50 ms is recognised as no person's), the person decides, and
 * an approved program runs (judged on disk).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { confDir } from "../helpers/attack.ts";
import { clientOutput, touchPromptsHome } from "../helpers/approvals.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const claude = join(ROOT, "node_modules", ".bin", "claude");

/** A stand-in Messages API: the first turn calls `mcp__shellmcp__shell` with `input`, the next one ends with its result. */
function standInModel(input: Record<string, unknown>) {
  const sse = (events: [string, unknown][]) => events.map(([t, d]) => `event: ${t}\ndata: ${JSON.stringify(d)}\n\n`).join("");
  return Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      if (!new URL(req.url).pathname.endsWith("/messages")) return Response.json({});
      const body = (await req.json()) as { model: string; tools?: { name: string }[]; messages: unknown[] };
      const last = JSON.stringify(body.messages.at(-1) ?? {});
      const call = (body.tools ?? []).some((t) => t.name === "mcp__shellmcp__shell") && !last.includes("tool_result");
      const block = call ? { type: "tool_use", id: "toolu_01", name: "mcp__shellmcp__shell", input: {} } : { type: "text", text: "" };
      const delta = call
        ? { type: "input_json_delta", partial_json: JSON.stringify(input) }
        : { type: "text_delta", text: `RESULT ${last}` };
      const message = {
        id: "msg_1",
        type: "message",
        role: "assistant",
        model: body.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 1, output_tokens: 1 },
      };
      return new Response(
        sse([
          ["message_start", { type: "message_start", message }],
          ["content_block_start", { type: "content_block_start", index: 0, content_block: block }],
          ["content_block_delta", { type: "content_block_delta", index: 0, delta }],
          ["content_block_stop", { type: "content_block_stop", index: 0 }],
          [
            "message_delta",
            {
              type: "message_delta",
              delta: { stop_reason: call ? "tool_use" : "end_turn", stop_sequence: null },
              usage: { output_tokens: 1 },
            },
          ],
          ["message_stop", { type: "message_stop" }],
        ]),
        { headers: { "content-type": "text/event-stream" } },
      );
    },
  });
}

const servers: { stop: (force?: boolean) => unknown }[] = [];
afterAll(() => servers.forEach((s) => s.stop(true)));

describe.skipIf(skipWithout("approver with Claude Code", existsSync(claude) ? shellsMissing() : "Claude Code not installed (npm ci)"))(
  "issue 32: Claude Code's print mode (a client that declares elicitation but cannot ask anyone)",
  () => {
    for (const when of ["fallback", "always", "watched"] as const)
      test(`--approver ${when}`, async () => {
        const codexHome = touchPromptsHome("appr-cc-codex");
        const home = confDir("appr-cc-home");
        const ws = confDir("appr-cc-ws");
        const model = standInModel({ command: `touch ${ws}/by-claude; echo rc=$?`, workdir: ws, timeout_ms: 60_000 });
        servers.push(model);
        const tmp = mkdtempSync(join(tmpdir(), "appr-cc-tmp-"));
        const mcp = join(home, "mcp.json");
        const mode = when === "watched" ? "fallback" : when;
        const args = ["serve", "--approver", mode, "--approver-timeout-ms", "30000", "--sandbox", "workspace-write", "--cd", ws];
        // "watched" (issue 41): plain --approver, with a person running the interactive `shellmcp approvals` (in a
        // terminal: `script`) before Claude Code starts; print mode's cancel, at once, is recognised as no person's.
        const watcher =
          when === "watched"
            ? Bun.spawn(["script", "-q", "-e", "-c", `${ensureBinary()} approvals`, "/dev/null"], {
                env: { PATH: "/usr/bin:/bin", HOME: codexHome, CODEX_HOME: codexHome, TERM: "dumb" },
                stdin: "pipe",
                stdout: "pipe",
              })
            : undefined;
        writeFileSync(mcp, JSON.stringify({ mcpServers: { shellmcp: { command: ensureBinary(), args, env: { CODEX_HOME: codexHome } } } }));
        const p = Bun.spawn(
          [
            claude,
            "-p",
            "run it",
            "--mcp-config",
            mcp,
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__shellmcp__shell",
            "--output-format",
            "text",
          ],
          {
            cwd: ws,
            stdout: "pipe",
            stderr: "pipe",
            env: {
              PATH: process.env.PATH ?? "/usr/bin:/bin",
              HOME: home,
              ANTHROPIC_API_KEY: "sk-test",
              ANTHROPIC_BASE_URL: `http://127.0.0.1:${model.port}`,
              ENABLE_TOOL_SEARCH: "false",
              CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
              DISABLE_AUTOUPDATER: "1",
              // Its scratch files (else /tmp/claude-<uid>/) in this run's temporary folder, removed after the run.
              TMPDIR: tmp,
              CLAUDE_CODE_TMPDIR: tmp,
            },
          },
        );
        // With `always`, the person beside the client approves the one waiting request; watched, they press `o`.
        let out: string;
        if (watcher !== undefined) {
          try {
            let seen = "";
            const reader = watcher.stdout.getReader();
            const deadline = Date.now() + 40_000;
            while (!seen.includes("[q]uit? ") && Date.now() < deadline) {
              const { value, done } = await Promise.race([
                reader.read(),
                Bun.sleep(Math.max(0, deadline - Date.now())).then(() => ({ value: undefined, done: true })),
              ]);
              if (done) break;
              seen += new TextDecoder().decode(value);
            }
            expect(seen).toContain(`touch ${ws}/by-claude`);
            await watcher.stdin.write("o");
            await watcher.stdin.flush();
            out = await clientOutput(p, codexHome, false);
          } finally {
            watcher.kill("SIGTERM");
            await watcher.exited;
          }
        } else out = await clientOutput(p, codexHome, when === "always");
        if (when !== "fallback") {
          expect(out).toContain("rc=0");
          expect(existsSync(join(ws, "by-claude"))).toBe(true);
        } else {
          expect(out).toContain("Execution denied: User cancelled execution");
          expect(existsSync(join(ws, "by-claude"))).toBe(false);
        }
      }, 90_000);
  },
);
