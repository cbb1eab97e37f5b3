/**
 * The real Codex 0.169 interactive TUI, in tmux, drives the compiled `shellmcp serve` with a stand-in model
 * (test/helpers/responses-mock.ts): the model calls `shell` with a command a `prompt` rule covers, and the test
 * reads the screen (`tmux capture-pane`) and presses keys like a person.
 *
 * Issue 31: every prompt used to come back at once as "User cancelled execution", with no dialog. Codex's app
 * server parses an elicitation's `requestedSchema` strictly (`$schema`, `type`, `properties`, `required` only)
 * and answers anything else with `cancel` without showing it; shellmcp's form carried a top-level `title`. The
 * capture is in test/fixtures/codex-tui/. These tests fail if the dialog is not shown, if Enter does not allow
 * or Esc does not deny, and they read the JSON-RPC between Codex and the server (a `tee` on each side).
 *
 * By default the TUI detaches a shared app server (`codex app-server --managed-daemon`, copied under
 * `$CODEX_HOME/packages/`, its socket in `/tmp/codex-daemon-<uid>/`) that outlives it; `--no-daemon` keeps it
 * in process (the same elicitation code runs there). Every process whose command line names the test's folder
 * is killed after each test all the same.
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { referenceCodex } from "../helpers/reference.ts";
import { finalMessage, functionCallOutput, mcpToolCall, offersMcpServer, ResponsesMock } from "../helpers/responses-mock.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { ELICITATION_SCHEMA, ELICITATION_SCHEMA_RULE } from "../../src/mcp/elicitation.ts";
import { NETWORK_ELICITATION_SCHEMA } from "../../src/mcp/network-approval.ts";

const codex = referenceCodex();
const missing =
  shellsMissing() ??
  (codex === undefined
    ? "@openai/codex (0.169, linux build) is not installed: npm ci"
    : Bun.which("tmux") === null
      ? "tmux not installed (apt-get install tmux)"
      : Bun.which("git") === null
        ? "git not installed"
        : undefined);
const skip = skipWithout("real Codex TUI", missing);

/** The members Codex 0.169's app server accepts at the top of a `requestedSchema` (`deny_unknown_fields`). */
const CODEX_SCHEMA_KEYS = ["$schema", "type", "properties", "required"];

interface Tui {
  base: string;
  proj: string;
  mock: ResponsesMock;
  /** tmux with the test's own socket. */
  tmux: (...args: string[]) => string;
  screen: () => string;
  /** JSON-RPC lines Codex sent the server, and the server sent Codex. */
  wire: () => { toServer: Record<string, unknown>[]; toCodex: Record<string, unknown>[] };
}

let current: Tui | undefined;

/** Kill every process whose command line names `marker` (the TUI's app-server daemon, the servers it started). */
function killAllWith(marker: string): void {
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)) process.kill(Number(pid), "SIGKILL");
    } catch {
      // gone, or not ours to read
    }
  }
}

afterEach(() => {
  const t = current;
  current = undefined;
  if (t === undefined) return;
  try {
    t.tmux("kill-server");
  } catch {
    // already gone
  }
  t.mock.stop();
  killAllWith(t.base);
  rmSync(t.base, { recursive: true, force: true });
});

function lines(path: string): Record<string, unknown>[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/**
 * Start Codex's TUI in tmux; the stand-in model calls `shell` with `command`. By default the project's rules say
 * `touch ask-me` needs a human's approval (`rules: ""`: no rules, so only the danger heuristic asks).
 */
function startTui(o: { command?: string; rules?: string } = {}): Tui {
  const base = join(CONF_BASE, `codex-tui-${Math.random().toString(36).slice(2)}`);
  const proj = join(base, "proj");
  const home = join(base, "codex-home");
  const tmp = join(base, "tmp");
  for (const d of [proj, join(home, "rules"), tmp]) mkdirSync(d, { recursive: true });
  Bun.spawnSync(["git", "init", "-q", "-b", "main", proj]);
  const rules = o.rules ?? `prefix_rule(pattern = ["touch", "ask-me"], decision = "prompt")\n`;
  if (rules !== "") writeFileSync(join(home, "rules", "t.rules"), rules);
  // One script for every request: the TUI also asks the model for a task title, in a request of its own.
  const mock = new ResponsesMock([
    (req) =>
      functionCallOutput(req) !== undefined
        ? finalMessage("done")
        : offersMcpServer(req, "shell")
          ? mcpToolCall(req, "shell", "shell", { command: o.command ?? "touch ask-me; echo rc=$?", workdir: proj, login: false })
          : finalMessage("Run the command"),
  ]);
  // A tee on each side of the server: what Codex sent it, and what it answered.
  const wrap = join(base, "serve.sh");
  writeFileSync(wrap, `#!/bin/sh\ntee -a '${base}/to-server.jsonl' | '${ensureBinary()}' serve | tee -a '${base}/to-codex.jsonl'\n`, {
    mode: 0o755,
  });
  writeFileSync(
    join(home, "config.toml"),
    `model = "mock-model"
model_provider = "mock"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
features.shell_tool = false

[projects."${proj}"]
trust_level = "trusted"

[model_providers.mock]
name = "mock"
base_url = "${mock.url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.shell]
command = "${wrap}"
env = { CODEX_HOME = "${home}" }
required = true
startup_timeout_sec = 20
default_tools_approval_mode = "approve"
`,
  );
  const env = { TMUX_TMPDIR: tmp, PATH: process.env.PATH ?? "/usr/bin:/bin" };
  const tmux = (...args: string[]): string => {
    const r = Bun.spawnSync(["tmux", "-L", "codex-tui", ...args], { env });
    if (r.exitCode !== 0) throw new Error(`tmux ${args[0]}: ${r.stderr.toString()}`);
    return r.stdout.toString();
  };
  const inner = [
    "env",
    "-i",
    `PATH=${process.env.PATH ?? "/usr/bin:/bin"}`,
    "TERM=xterm-256color",
    `HOME=${base}`,
    `CODEX_HOME=${home}`,
    `TMPDIR=${tmp}`,
    codex!,
    "--no-daemon",
    "run the command",
  ];
  tmux("new-session", "-d", "-s", "tui", "-x", "160", "-y", "45", "-c", proj, ...inner);
  const t: Tui = {
    base,
    proj,
    mock,
    tmux,
    screen: () => tmux("capture-pane", "-p", "-t", "tui"),
    wire: () => ({ toServer: lines(join(base, "to-server.jsonl")), toCodex: lines(join(base, "to-codex.jsonl")) }),
  };
  current = t;
  return t;
}

/** Wait until the screen matches `re` (or throw with the last screen). */
async function waitScreen(t: Tui, re: RegExp, ms = 40_000): Promise<string> {
  const end = Date.now() + ms;
  let s = "";
  while (Date.now() < end) {
    s = t.screen();
    if (re.test(s)) return s;
    await Bun.sleep(250);
  }
  throw new Error(`the TUI never showed ${re}; last screen:\n${s}`);
}

/**
 * Press `key` until the screen matches `re`: the TUI drops a key sent while it is still drawing the form (seen on a
 * loaded machine: the first Enter on a fresh dialog did nothing). At most 4 presses, 5 s apart.
 */
async function pressUntil(t: Tui, key: string, re: RegExp): Promise<string> {
  for (let i = 0; ; i++) {
    t.tmux("send-keys", "-t", "tui", key);
    try {
      return await waitScreen(t, re, 5_000);
    } catch (e) {
      if (i === 3) throw e;
    }
  }
}

/**
 * Wait until the screen has not changed for a second (at most 10 s): the TUI drops keys sent while it is still
 * drawing a new dialog (seen on a loaded machine: an Enter or an Esc sent at once did nothing).
 */
async function settle(t: Tui): Promise<void> {
  let prev = t.screen();
  let still = 0;
  for (const end = Date.now() + 10_000; Date.now() < end && still < 4;) {
    await Bun.sleep(250);
    const cur = t.screen();
    still = cur === prev ? still + 1 : 0;
    prev = cur;
  }
}

/** Type `text` into the focused field and wait until the field shows it (its placeholder gone). */
async function typeAnswer(t: Tui, text: string): Promise<void> {
  await settle(t);
  t.tmux("send-keys", "-t", "tui", "-l", text);
  for (const end = Date.now() + 10_000; Date.now() < end && t.screen().includes("Type your answer");) await Bun.sleep(100);
  await settle(t);
}

/** What the model received as the tool's output (waits for the request that carries it). */
async function modelReadOutput(t: Tui): Promise<string> {
  for (let i = 0; i < 200; i++) {
    for (const r of t.mock.requests) {
      const out = functionCallOutput(r);
      if (out !== undefined) return out;
    }
    await Bun.sleep(100);
  }
  return "";
}

/** The elicitation/create the server sent, and Codex's answer to it. */
function elicitation(t: Tui): { request?: Record<string, unknown>; answer?: Record<string, unknown> } {
  const { toServer, toCodex } = t.wire();
  const request = toCodex.find((m) => m.method === "elicitation/create");
  const answer = request === undefined ? undefined : toServer.find((m) => m.id === request.id && "result" in m);
  return { request, answer };
}

test("every elicitation form shellmcp sends has only the top-level members Codex 0.169 accepts", () => {
  for (const schema of [ELICITATION_SCHEMA, ELICITATION_SCHEMA_RULE, NETWORK_ELICITATION_SCHEMA])
    for (const key of Object.keys(schema)) expect(CODEX_SCHEMA_KEYS).toContain(key);
});

describe.skipIf(skip)("real Codex 0.169 TUI: a prompt rule's approval dialog", () => {
  test("the dialog is shown; typing a reason and Enter allows, and the command runs", async () => {
    const t = startTui();
    const dialog = await waitScreen(t, /Allow agent to run/);
    expect(dialog).toContain("Allow agent to run `/usr/bin/touch ask-me`");
    expect(dialog).toContain("Optional reason for allowing or denying execution");
    expect(dialog).toMatch(/enter to submit \| esc to cancel/);
    const { request } = elicitation(t);
    const schema = (request?.params as { requestedSchema?: Record<string, unknown> } | undefined)?.requestedSchema;
    expect(schema).toBeDefined();
    for (const key of Object.keys(schema!)) expect(CODEX_SCHEMA_KEYS).toContain(key);
    // Codex's form does not submit an empty answer (captured: Enter alone left the dialog up), so type one.
    await typeAnswer(t, "ok");
    t.tmux("send-keys", "-t", "tui", "C-m");
    await waitScreen(t, /Called shell\.shell/);
    expect(elicitation(t).answer?.result).toEqual({ action: "accept", content: { reason: "ok" } });
    expect(existsSync(join(t.proj, "ask-me"))).toBe(true);
    const out = await modelReadOutput(t);
    expect(out).toContain("rc=0");
    expect(out).not.toContain("Execution denied");
  }, 90_000);

  test("Esc cancels: the model reads 'User cancelled execution' and nothing runs", async () => {
    const t = startTui();
    await waitScreen(t, /Allow agent to run/);
    await settle(t);
    t.tmux("send-keys", "-t", "tui", "Escape");
    // A cancelled approval is a refusal: a tool error (docs/blocked-actions.md, "isError"), which Codex shows as failed.
    await waitScreen(t, /Failed shell\.shell/);
    expect(elicitation(t).answer?.result).toEqual({ action: "cancel" });
    expect(t.screen()).toContain("Execution denied: User cancelled execution");
    expect(await modelReadOutput(t)).toContain("Execution denied: User cancelled execution");
    expect(existsSync(join(t.proj, "ask-me"))).toBe(false);
  }, 90_000);

  test("a heuristic prompt (no rule): 'Always allow' comes first with False selected; Enter keeps it false", async () => {
    const t = startTui({ rules: "", command: "mkdir -p d && rm -rf d; echo rc=$?" });
    const first = await waitScreen(t, /Field 1\/2/);
    expect(first).toContain("Allow agent to run `/usr/bin/rm -rf d`");
    expect(first).toContain("Always allow");
    expect(first).toMatch(/› 2\. False/); // the form's default: false puts the cursor there
    await settle(t);
    await pressUntil(t, "C-m", /Field 2\/2/);
    await typeAnswer(t, "ok");
    t.tmux("send-keys", "-t", "tui", "C-m");
    await waitScreen(t, /Called shell\.shell/);
    expect(elicitation(t).answer?.result).toEqual({ action: "accept", content: { always_allow: false, reason: "ok" } });
    expect(await modelReadOutput(t)).toContain("rc=0");
    expect(existsSync(join(t.base, "codex-home", "rules", "default.rules"))).toBe(false); // nothing allowed for good
  }, 90_000);
});
