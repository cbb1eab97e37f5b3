/**
 * The real Codex CLI (`codex exec`, @openai/codex 0.169's linux build — and 0.97's when installed, see
 * {@link codex097}) drives the compiled `shellmcp serve` configured exactly as the README's "From Codex" says,
 * with a stand-in model (test/helpers/responses-mock.ts): the model's first turn calls the `shell` tool, its
 * second ends the turn. Every scenario asserts on what the model received as the tool's output in its next
 * request, and on the files on disk.
 *
 * Workspaces live under the run's CONF_BASE (outside /tmp, which workspace-write sandboxes may make writable).
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hostGit } from "../helpers/attack.ts";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { processesWith } from "../helpers/marked.ts";
import { referenceCodex } from "../helpers/reference.ts";
import {
  finalMessage,
  functionCallOutput,
  mcpToolCall,
  offersMcpServer,
  ResponsesMock,
  type ResponsesRequest,
} from "../helpers/responses-mock.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { freePort, npmInstallCommand, npmRegistry, npmScenarioMissing, sessionId } from "../clients/common.ts";
import { probeBwrap } from "../../src/sandbox/linux/bwrap.ts";

const TRIPLE = process.arch === "arm64" ? "aarch64-unknown-linux-musl" : "x86_64-unknown-linux-musl";
/** Codex 0.97's linux build: the npm package bundles every platform (`npm:@openai/codex@0.97.0` under this alias). */
const codex097 = join(ROOT, "node_modules", "@openai", "codex-0.97", "vendor", TRIPLE, "codex", "codex");

const codex169 = referenceCodex();
const missing =
  shellsMissing() ??
  (codex169 === undefined
    ? "@openai/codex (0.169, linux build) is not installed: npm ci"
    : Bun.which("git") === null
      ? "git not installed"
      : undefined);
const skip = skipWithout("real Codex", missing);

const mocks: ResponsesMock[] = [];
afterAll(() => {
  for (const m of mocks) m.stop();
});

interface Scenario {
  codex: string;
  sandbox: "read-only" | "workspace-write" | "danger-full-access";
  /** `shell` tool arguments, given the project and outside folders. */
  args: (p: { proj: string; outside: string; npmPackage?: string }) => Record<string, unknown>;
  rules?: string;
  /** Codex config lines added at the top level. */
  extraConfig?: string;
  /**
   * Issue 41: the `shell` server and the starter policy come from `shellmcp init codex --yes` (HOME the scenario's
   * base, CODEX_HOME its default `~/.codex`), run over a config that holds only the model's settings and tables.
   */
  viaInit?: boolean;
  /**
   * Issue 41's npm scenario: the starter policy from `shellmcp init --yes` (no client: the `shell` server is this
   * scenario's own block), and `serve` behind test/clients/common.ts `npmRegistry`'s prefix (a stand-in registry).
   */
  npm?: boolean;
  /** More MCP tool calls of the stand-in model after the first (`shell` with {@link args}), one per turn. */
  more?: (p: { proj: string }) => { tool: string; args: Record<string, unknown> }[];
}

interface Outcome {
  proj: string;
  outside: string;
  /** What the model received as the tool's output in its next request. */
  output: string;
  requests: ResponsesRequest[];
  exitCode: number;
  stdout: string;
  stderr: string;
  /** What the model received for each of {@link Scenario.more}'s calls. */
  outputs: string[];
  /** The npm scenario's package name and its registry's request log. */
  npmPackage?: string;
  registryLog?: string;
}

/**
 * The README's "From Codex" block, pointed at this build and a private CODEX_HOME. shellmcp reads the same file
 * (CODEX_HOME is passed on), so its dotted key `features.shell_tool` must load too.
 */
export function codexConfig(o: { home: string; modelUrl: string; sandbox: string; extra?: string; prefix?: string[] }): string {
  const argv = [...(o.prefix ?? []), ensureBinary(), "serve"];
  return `model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "${o.sandbox}"
features.shell_tool = false
${o.extra ?? ""}

[model_providers.mock]
name = "mock"
base_url = "${o.modelUrl}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.shell]
command = ${JSON.stringify(argv[0])}
args = ${JSON.stringify(argv.slice(1))}
env = { CODEX_HOME = "${o.home}" }
required = true
startup_timeout_sec = 20
default_tools_approval_mode = "approve"
`;
}

async function run(s: Scenario): Promise<Outcome> {
  const base = join(CONF_BASE, `codex-real-${Math.random().toString(36).slice(2)}`);
  const proj = join(base, "proj");
  const outside = join(base, "outside");
  const home = s.viaInit ? join(base, ".codex") : join(base, "codex-home");
  for (const d of [proj, outside, join(home, "rules")]) mkdirSync(d, { recursive: true });
  writeFileSync(join(proj, "README"), "hello\n");
  hostGit(proj, "init", "-q", "-b", "main");
  hostGit(proj, "add", "-A");
  hostGit(proj, "commit", "-qm", "initial");
  if (s.rules !== undefined) writeFileSync(join(home, "rules", "test.rules"), s.rules);
  const reg = s.npm === true ? npmRegistry({ base, proj, home: base, codexHome: home, outside }) : undefined;
  const args = s.args({ proj, outside, npmPackage: reg?.name });
  const more = s.more?.({ proj }) ?? [];
  const mock = new ResponsesMock([
    (req) => (offersMcpServer(req, "shell") ? mcpToolCall(req, "shell", "shell", args) : finalMessage("the shell tool was not offered")),
    ...more.map((c, i) => (req: ResponsesRequest) => mcpToolCall(req, "shell", c.tool, c.args, `call_${i + 1}`)),
    () => finalMessage("done"),
  ]);
  mocks.push(mock);
  if (s.viaInit) {
    // The user's config before init: tables only after the top-level keys, where a key appended would be lost.
    writeFileSync(
      join(home, "config.toml"),
      codexConfig({ home, modelUrl: mock.url, sandbox: s.sandbox })
        .split("\n[mcp_servers.shell]")[0]!
        .replace("features.shell_tool = false\n", ""),
    );
    const init = Bun.spawnSync([ensureBinary(), "init", "codex", "--yes"], {
      cwd: proj,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: base },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(init.exitCode, init.stdout.toString() + init.stderr.toString()).toBe(0);
  } else
    writeFileSync(
      join(home, "config.toml"),
      codexConfig({ home, modelUrl: mock.url, sandbox: s.sandbox, extra: s.extraConfig, prefix: reg?.prefix }),
    );
  if (reg !== undefined) {
    const init = Bun.spawnSync([ensureBinary(), "init", "--yes"], {
      cwd: proj,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: base, CODEX_HOME: home },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(init.exitCode, init.stdout.toString() + init.stderr.toString()).toBe(0);
  }
  const proc = Bun.spawn([s.codex, "exec", "--skip-git-repo-check", "-C", proj, "run the command"], {
    cwd: proj,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: base, ...(s.viaInit ? {} : { CODEX_HOME: home }), RUST_LOG: "error" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill(9), 90_000);
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  mock.stop();
  const next = mock.requests[1];
  const output = next === undefined ? "" : (functionCallOutput(next) ?? "");
  const outputs = more.map((_, i) => {
    const req = mock.requests[i + 2];
    return req === undefined ? "" : (functionCallOutput(req, `call_${i + 1}`) ?? "");
  });
  if (output === "") console.warn(`codex exec (${exitCode}) stderr:\n${stderr.slice(-3000)}`);
  return {
    proj,
    outside,
    output,
    outputs,
    requests: mock.requests,
    exitCode,
    stdout,
    stderr,
    npmPackage: reg?.name,
    registryLog: reg?.log(),
  };
}

const RULES = `
prefix_rule(pattern = ["touch", "escalate-me"], decision = "allow")
prefix_rule(pattern = ["rm"], decision = "forbidden", justification = "no deleting in this test")
prefix_rule(pattern = ["touch", "ask-me"], decision = "prompt")
`;

/** The scenarios, for one Codex line. 0.97 sends its sandbox with `codex/sandbox-state/update` (a legacy policy,
 * which protects .git and .codex), 0.169 with every call (a permission profile, which also protects .aws). */
function scenarios(line: "0.169" | "0.97", codexPath: () => string): void {
  const codex = (): string => codexPath();

  test("the tool is offered, and workspace-write applies: the project is writable, outside and .git are not", async () => {
    const o = await run({
      codex: codex(),
      sandbox: "workspace-write",
      args: ({ proj, outside }) => ({
        command: `touch inside && echo INSIDE_OK; touch ${outside}/x || echo OUTSIDE_REFUSED; touch .git/x || echo GIT_RO; mkdir -p .codex/y || echo CODEX_RO; mkdir .aws || echo AWS_RO; echo END`,
        workdir: proj,
        login: false,
      }),
    });
    expect(o.exitCode).toBe(0);
    expect(offersMcpServer(o.requests[0]!, "shell")).toBe(true);
    // features.shell_tool = false: the model gets no built-in shell besides ours.
    const names = (o.requests[0]!.tools ?? []).map((t) => t.name);
    for (const builtin of ["shell", "exec_command", "shell_command"]) expect(names).not.toContain(builtin);
    expect(o.output).toContain("INSIDE_OK");
    expect(o.output).toContain("OUTSIDE_REFUSED");
    expect(o.output).toContain("GIT_RO");
    expect(o.output).toContain("CODEX_RO");
    if (line === "0.169") {
      expect(o.output).toContain("AWS_RO");
      expect(existsSync(join(o.proj, ".aws"))).toBe(false);
    }
    expect(o.output).toMatch(/Read-only file system/);
    // Issue 41: the model is told why, with the layer and the path (docs/blocked-actions.md).
    expect(o.output).toContain(`shellmcp: blocked (sandbox-write) ${join(o.outside, "x")}: `);
    expect(o.output).toContain(`shellmcp: blocked (protected-path) ${join(o.proj, ".git", "x")}: `);
    expect(existsSync(join(o.proj, "inside"))).toBe(true);
    expect(existsSync(join(o.outside, "x"))).toBe(false);
    expect(existsSync(join(o.proj, ".git", "x"))).toBe(false);
    expect(existsSync(join(o.proj, ".codex", "y"))).toBe(false);
  }, 120_000);

  test("danger-full-access: no sandbox", async () => {
    const o = await run({
      codex: codex(),
      sandbox: "danger-full-access",
      args: ({ proj, outside }) => ({ command: `touch ${outside}/x && echo OUTSIDE_OK`, workdir: proj, login: false }),
    });
    expect(o.output).toContain("OUTSIDE_OK");
    expect(existsSync(join(o.outside, "x"))).toBe(true);
  }, 120_000);

  test("read-only: nothing is written", async () => {
    const o = await run({
      codex: codex(),
      sandbox: "read-only",
      args: ({ proj }) => ({ command: "touch newfile || echo RO_REFUSED", workdir: proj, login: false }),
    });
    expect(o.output).toContain("RO_REFUSED");
    expect(o.output).toMatch(/Read-only file system/);
    expect(existsSync(join(o.proj, "newfile"))).toBe(false);
  }, 120_000);

  test("an allow rule escalates: the program runs outside the read-only sandbox", async () => {
    const o = await run({
      codex: codex(),
      sandbox: "read-only",
      rules: RULES,
      // The allowed program runs in its escalation room (issue 21), which writes the repository it works in: the
      // project. (Until issue 21 this ran in a folder outside any project: Codex's "on the host" meaning.)
      args: ({ proj }) => ({
        command: "touch escalate-me && echo ESCALATED_OK; touch other || echo OTHER_REFUSED",
        workdir: proj,
        login: false,
      }),
    });
    expect(o.output).toContain("ESCALATED_OK");
    expect(o.output).toContain("OTHER_REFUSED");
    expect(existsSync(join(o.proj, "escalate-me"))).toBe(true);
    expect(existsSync(join(o.proj, "other"))).toBe(false);
  }, 120_000);

  test("a forbidden rule denies: the program never runs", async () => {
    const o = await run({
      codex: codex(),
      sandbox: "workspace-write",
      rules: RULES,
      args: ({ proj }) => ({ command: "rm README; echo rc=$?", workdir: proj, login: false }),
    });
    expect(o.output).toContain("Execution denied: Execution forbidden by policy");
    expect(o.output).toContain("rc=1");
    expect(existsSync(join(o.proj, "README"))).toBe(true);
  }, 120_000);

  test("a prompt rule asks; codex exec declines at once, and nothing runs", async () => {
    const o = await run({
      codex: codex(),
      sandbox: "workspace-write",
      rules: RULES,
      args: ({ proj }) => ({ command: "touch ask-me; echo rc=$?", workdir: proj, login: false }),
    });
    expect(o.output).toMatch(/Execution denied: User (declined|cancelled)/);
    expect(o.output).toContain("rc=1");
    expect(existsSync(join(o.proj, "ask-me"))).toBe(false);
  }, 120_000);

  test("set up by `shellmcp init codex --yes` (issue 41): the tool replaces Codex's shell, and the starter rules let it commit", async () => {
    const o = await run({
      codex: codex(),
      sandbox: "workspace-write",
      viaInit: true,
      args: ({ proj }) => {
        hostGit(proj, "config", "user.name", "Agent");
        hostGit(proj, "config", "user.email", "agent@example.com");
        return {
          command: "echo hi > hello.txt && git add hello.txt && git commit -qm 'from the agent' && echo COMMITTED; echo END",
          workdir: proj,
          login: false,
        };
      },
    });
    expect(o.exitCode).toBe(0);
    const names = (o.requests[0]!.tools ?? []).map((t) => t.name);
    for (const builtin of ["shell", "exec_command", "shell_command"]) expect(names).not.toContain(builtin);
    expect(o.output).toContain("COMMITTED");
    expect(hostGit(o.proj, "log", "--format=%s", "-1")).toBe("from the agent");
  }, 120_000);

  test.skipIf(npmScenarioMissing() !== undefined)(
    "npm install through its room with the starter policy (issue 41): the registry through the room's proxy, the cache in ~/.npm",
    async () => {
      const o = await run({
        codex: codex(),
        sandbox: "workspace-write",
        npm: true,
        args: ({ proj, npmPackage }) => ({ command: npmInstallCommand(npmPackage!), workdir: proj, login: false, timeout_ms: 90_000 }),
      });
      expect(o.output).toContain(`PACKAGE ${o.npmPackage} LOADED`);
      expect(existsSync(join(o.proj, "node_modules", o.npmPackage!, "index.js"))).toBe(true);
      expect(o.registryLog).toContain(`GET /${o.npmPackage}/-/${o.npmPackage}-1.0.0.tgz`);
      expect(existsSync(join(o.proj, "..", ".npm", "_cacache"))).toBe(true);
    },
    150_000,
  );

  test.skipIf(!probeBwrap(true).ok)(
    "a dev server started by exec_command answers the next shell call with the network off (one loopback network per server, issue 41), and ends with the client",
    async () => {
      const port = freePort();
      const o = await run({
        codex: codex(),
        sandbox: "workspace-write",
        args: ({ proj }) => ({ command: "echo first", workdir: proj, login: false }),
        more: ({ proj }) => [
          {
            tool: "exec_command",
            args: { cmd: `python3 -m http.server ${port} --bind 127.0.0.1`, workdir: proj, login: false, yield_time_ms: 1500 },
          },
          {
            tool: "shell",
            args: {
              command: `for i in 1 2 3 4 5; do curl -sS http://127.0.0.1:${port}/README && break; sleep 0.5; done`,
              workdir: proj,
              login: false,
            },
          },
        ],
      });
      expect(o.output).toContain("first");
      expect(sessionId(o.outputs[0])).toBeNumber();
      expect(o.outputs[1]).toContain("hello");
      await Bun.sleep(500);
      expect(processesWith(`http.server ${port}`)).toEqual([]);
    },
    120_000,
  );

  test("a timeout kills the whole command, background jobs included: nothing is left running", async () => {
    const marker = `${4000 + Math.floor(Math.random() * 999)}.25`;
    const o = await run({
      codex: codex(),
      sandbox: "workspace-write",
      args: ({ proj }) => ({ command: `sleep ${marker} & sleep ${marker}; echo NEVER`, workdir: proj, login: false, timeout_ms: 1500 }),
    });
    expect(o.output).not.toContain("NEVER");
    expect(o.output).toMatch(/"timed_out":\s*true|timed out/);
    await Bun.sleep(300);
    expect(processesWith(`sleep ${marker}`)).toEqual([]);
  }, 120_000);
}

describe.skipIf(skip)("real Codex 0.169 (codex exec) against shellmcp serve", () => {
  scenarios("0.169", () => codex169!);
});

// Codex 0.97's linux build comes in the main npm package (all platforms): installed as the dev dependency alias
// `"@openai/codex-0.97": "npm:@openai/codex@0.97.0"`.
describe.skipIf(
  skip ||
    skipWithout(
      "real Codex 0.97",
      existsSync(codex097) ? undefined : "@openai/codex-0.97 (npm:@openai/codex@0.97.0) not installed: npm ci",
    ),
)("real Codex 0.97 (codex exec) against shellmcp serve", () => {
  scenarios("0.97", () => codex097);
});
