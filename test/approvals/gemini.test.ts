/**
 * The local approver with a real client without elicitation: Gemini CLI (`gemini -p`, the dev dependency
 * `@google/gemini-cli`, whose MCP client declares `roots` only), driven by a stand-in Gemini API that asks for one
 * `shell` call of the compiled `serve --approver`. Approved at `shellmcp approvals`, the program runs (judged on
 * disk); without an answer in time, the model reads why and nothing ran.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { confDir } from "../helpers/attack.ts";
import { clientOutput, touchPromptsHome } from "../helpers/approvals.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const gemini = join(ROOT, "node_modules", ".bin", "gemini");

/**
 * A stand-in Gemini API: a turn that offers the MCP tool `mcp_shellmcp_shell` calls it with `args`; the next one
 * (carrying its result) answers `RESULT <the result>`; any other request (Gemini CLI's model router) a JSON choice.
 */
function standInModel(args: Record<string, unknown>) {
  return Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      const body = (await req.json().catch(() => ({}))) as {
        tools?: { functionDeclarations?: { name: string }[] }[];
        contents?: unknown[];
      };
      const fns = (body.tools ?? []).flatMap((t) => (t.functionDeclarations ?? []).map((f) => f.name));
      const last = JSON.stringify((body.contents ?? []).at(-1) ?? {});
      const call = fns.includes("mcp_shellmcp_shell") && !last.includes("functionResponse");
      const part = call
        ? { functionCall: { name: "mcp_shellmcp_shell", args } }
        : { text: fns.length > 0 ? `RESULT ${last}` : '{"reasoning":"x","model_choice":"flash","complexity_score":1}' };
      const resp = {
        candidates: [{ content: { role: "model", parts: [part] }, finishReason: "STOP", index: 0 }],
        usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2 },
      };
      if (url.pathname.includes("streamGenerateContent"))
        return new Response(`data: ${JSON.stringify(resp)}\r\n\r\n`, { headers: { "content-type": "text/event-stream" } });
      return Response.json(resp);
    },
  });
}

const servers: { stop: (force?: boolean) => unknown }[] = [];
afterAll(() => servers.forEach((s) => s.stop(true)));

describe.skipIf(skipWithout("approver with Gemini CLI", existsSync(gemini) ? shellsMissing() : "Gemini CLI not installed (npm ci)"))(
  "issue 32: Gemini CLI (a client without elicitation)",
  () => {
    for (const answer of ["approve", "nobody"] as const)
      test(
        answer === "approve" ? "approved at `shellmcp approvals`: the program ran" : "nobody answers: a clear Deny, nothing ran",
        async () => {
          const codexHome = touchPromptsHome("appr-gm-codex");
          const home = confDir("appr-gm-home");
          const ws = confDir("appr-gm-ws");
          const model = standInModel({ command: `touch ${ws}/by-gemini; echo rc=$?`, workdir: ws, timeout_ms: 60_000 });
          servers.push(model);
          const timeout = answer === "approve" ? "40000" : "3000";
          mkdirSync(join(home, ".gemini"));
          writeFileSync(
            join(home, ".gemini", "settings.json"),
            JSON.stringify({
              security: { folderTrust: { enabled: false }, auth: { selectedType: "gemini-api-key" } },
              mcpServers: {
                shellmcp: {
                  command: ensureBinary(),
                  args: ["serve", "--approver", "--approver-timeout-ms", timeout, "--sandbox", "workspace-write", "--cd", ws],
                  env: { CODEX_HOME: codexHome },
                  trust: true,
                },
              },
            }),
          );
          const p = Bun.spawn([gemini, "-p", "run it"], {
            cwd: ws,
            stdout: "pipe",
            stderr: "pipe",
            env: {
              PATH: process.env.PATH ?? "/usr/bin:/bin",
              HOME: home,
              TMPDIR: mkdtempSync(join(tmpdir(), "appr-gm-tmp-")),
              GEMINI_API_KEY: "test",
              GOOGLE_GEMINI_BASE_URL: `http://127.0.0.1:${model.port}`,
            },
          });
          const out = await clientOutput(p, codexHome, answer === "approve");
          if (answer === "approve") {
            expect(out).toContain("rc=0");
            expect(existsSync(join(ws, "by-gemini"))).toBe(true);
          } else {
            expect(out).toContain("nobody answered within 3 s");
            expect(out).toContain("shellmcp approvals");
            expect(existsSync(join(ws, "by-gemini"))).toBe(false);
          }
        },
        90_000,
      );
  },
);
