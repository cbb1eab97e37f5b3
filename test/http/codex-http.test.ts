/**
 * The real Codex CLI 0.169 (`codex exec`) against `shellmcp serve --listen` (issue 43), configured as
 * docs/clients.md's HTTP recipe says: `[mcp_servers.shell]` with `url` and `bearer_token_env_var`; a stand-in model
 * (test/helpers/responses-mock.ts) calls `shell` once. Codex sends its sandbox with the call (`_meta`), which the
 * HTTP server applies as the stdio one does.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { hostGit } from "../helpers/attack.ts";
import { startHttpServe, type HttpServe } from "../helpers/http.ts";
import { referenceCodex } from "../helpers/reference.ts";
import { finalMessage, functionCallOutput, mcpToolCall, offersMcpServer, ResponsesMock } from "../helpers/responses-mock.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const codex = referenceCodex();
const skip = skipWithout(
  "real Codex over HTTP",
  shellsMissing() ?? (codex === undefined ? "@openai/codex (0.169, linux build) is not installed: npm ci" : undefined),
);
const servers: HttpServe[] = [];
const mocks: ResponsesMock[] = [];
afterAll(async () => {
  for (const m of mocks) m.stop();
  for (const s of servers) await s.stop().catch(() => undefined);
});

describe.skipIf(skip)("real Codex 0.169 (codex exec) over HTTP", () => {
  test("the docs/clients.md recipe: url + bearer_token_env_var; Codex's workspace-write applies to the call", async () => {
    const base = join(CONF_BASE, `codex-http-${Math.random().toString(36).slice(2)}`);
    const proj = join(base, "proj");
    const outside = join(base, "outside");
    const home = join(base, "codex-home");
    for (const d of [proj, outside, home]) mkdirSync(d, { recursive: true });
    writeFileSync(join(proj, "README"), "hello\n");
    hostGit(proj, "init", "-q", "-b", "main");
    const s = await startHttpServe();
    servers.push(s);
    const args = {
      command: `touch inside && echo INSIDE_OK; touch ${outside}/x || echo OUTSIDE_REFUSED; echo END`,
      workdir: proj,
      login: false,
    };
    const mock = new ResponsesMock([
      (req) => (offersMcpServer(req, "shell") ? mcpToolCall(req, "shell", "shell", args) : finalMessage("the shell tool was not offered")),
      () => finalMessage("done"),
    ]);
    mocks.push(mock);
    writeFileSync(
      join(home, "config.toml"),
      `model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "workspace-write"
features.shell_tool = false

[model_providers.mock]
name = "mock"
base_url = "${mock.url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.shell]
url = "${s.url.href}"
bearer_token_env_var = "SHELLMCP_TOKEN"
required = true
default_tools_approval_mode = "approve"
`,
    );
    const proc = Bun.spawn([codex!, "exec", "--skip-git-repo-check", "-C", proj, "run the command"], {
      cwd: proj,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: base, CODEX_HOME: home, RUST_LOG: "error", SHELLMCP_TOKEN: s.token! },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const timer = setTimeout(() => proc.kill(9), 90_000);
    const [stderr, exitCode] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    mock.stop();
    const output = mock.requests[1] === undefined ? "" : (functionCallOutput(mock.requests[1]) ?? "");
    expect(exitCode, stderr.slice(-3000)).toBe(0);
    expect(output).toContain("INSIDE_OK");
    expect(output).toContain("OUTSIDE_REFUSED");
    expect(existsSync(join(proj, "inside"))).toBe(true);
    expect(existsSync(join(outside, "x"))).toBe(false);
  }, 120_000);
});
