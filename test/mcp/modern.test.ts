/**
 * Both MCP eras from one `shellmcp serve` (issue 32, docs/mcp-eras.md), through the compiled binary:
 * - modern (2026-07-28) with the v2 SDK's real client pinned to that revision: discover, list, a plain call, a
 *   `prompt` rule accepted (the same parked process resumes: judged on disk) and declined (nothing ran); raw lines
 *   for what the client never sends: a tampered, a replayed and a foreign `requestState` are refused and run
 *   nothing; a parked exec nobody answers ends after the configured time with nothing left behind;
 * - legacy (2025-era `initialize`) with the v1 SDK's client: the same calls, unchanged.
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServe, withoutBlocked, type Session } from "../helpers/mcp.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { MODERN, modernHome, startModern, startRawModern, type ModernSession, type RawModern } from "../helpers/mcp-modern.ts";
import { noProcessLeft } from "../helpers/events.ts";
import { waitFor } from "../helpers/attack.ts";
import { earlyDiscoverResponse } from "../../src/mcp/early-initialize.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { agentNetworkConfig } from "../helpers/network.ts";

const skip = skipWithout("modern-era suite", shellsMissing());
const PROMPT_TOUCH = 'prefix_rule(pattern = ["touch"], decision = "prompt", justification = "touch needs a human")\n';
const TOOLS = ["shell", "exec_command", "write_stdin", "list_sessions"];
// Each test's servers end with it (their command lines name the run's folders: --cd).
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c().catch(() => undefined);
});
async function modern(o: Parameters<typeof startModern>[0] = {}): Promise<ModernSession> {
  const s = await startModern(o);
  closers.push(() => s.close());
  return s;
}
function raw(o: Parameters<typeof startRawModern>[0] = {}): RawModern {
  const s = startRawModern(o);
  closers.push(() => s.close());
  return s;
}
async function legacy(o: Parameters<typeof startServe>[0] = {}): Promise<Session> {
  const s = await startServe(o);
  closers.push(() => s.close());
  return s;
}
/** A workspace outside /tmp, and a git repository (an escalated program's room writes the repository it runs in). */
function workspace(): string {
  const d = join(CONF_BASE, `ws-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  expect(Bun.spawnSync(["git", "init", "-q", d]).exitCode).toBe(0);
  return d;
}
/** The server's pinned workspace (no roots, no sandbox state from the client): `--cd ws`, writable. */
const pinned = (ws: string) => ["--sandbox", "workspace-write", "--cd", ws];
/**
 * No sandbox around the command (the approvals are the exec policy's, whatever the sandbox): outputs compared
 * byte for byte are then not joined by the git guard's report on other programs' repositories in /tmp, which
 * workspace-write makes writable (a shared test machine).
 */
const open = (ws: string) => ["--sandbox", "danger-full-access", "--cd", ws];
/** A command that logs its start and end around an approval: run twice, the log would say so. */
const approvedTouch = (file: string) => `echo start >> log; touch ${file}; echo "end $?" >> log; echo done`;
const text = (r: Record<string, unknown>) =>
  JSON.parse((r.result as { content: { text: string }[] }).content[0]!.text) as { output: string; timed_out: boolean; exit_code: number };

describe.skipIf(skip)("modern era: the v2 SDK client pinned to 2026-07-28", () => {
  test("discover at connect, tools/list, a plain call", async () => {
    const s = await modern();
    expect(s.client.getServerVersion()?.name).toBe("shellmcp");
    expect(s.client.getServerCapabilities()).toEqual({
      tools: {},
      experimental: { "codex/sandbox-state": { version: "1.0.0" } },
      extensions: { "io.modelcontextprotocol/tasks": {} },
    });
    expect(s.client.getInstructions()).toContain("shell commands");
    expect((await s.client.listTools()).tools.map((t) => t.name)).toEqual(TOOLS);
    const ws = workspace();
    const r = await s.shell({ command: "echo hi; pwd", workdir: ws, login: false });
    expect(r.isError).toBe(false);
    expect(r.out.exit_code).toBe(0);
    expect(r.out.output).toBe(`hi\n${ws}\n`);
  });

  test("a v2 client in auto mode (probe with server/discover, else initialize) chooses the modern era", async () => {
    const s = await modern({ negotiation: "auto" });
    expect(s.client.getServerCapabilities()?.extensions).toEqual({ "io.modelcontextprotocol/tasks": {} });
    expect((await s.shell({ command: "echo auto", workdir: workspace(), login: false })).out.output).toBe("auto\n");
  });

  test("unified exec: exec_command starts a session, write_stdin drives it, list_sessions sees it", async () => {
    const s = await modern();
    const ws = workspace();
    const text = async (name: string, args: Record<string, unknown>) =>
      ((await s.client.callTool({ name, arguments: args }, { timeout: 60000 })).content as { text: string }[])
        .map((c) => c.text)
        .join("\n");
    const started = await text("exec_command", { cmd: "read x; echo got-$x", workdir: ws, tty: true, yield_time_ms: 500 });
    const id = Number(/^Process running with session ID (\d+)$/m.exec(started)?.[1]);
    expect(id).toBeGreaterThan(0);
    expect(await text("list_sessions", {})).toContain(String(id));
    const answered = await text("write_stdin", { session_id: id, chars: "hello\n", yield_time_ms: 3000 });
    expect(answered).toContain("got-hello");
  });

  test("progress notifications on the request's token, as in the legacy era", async () => {
    const s = await modern();
    const ws = workspace();
    const seen: { message?: string }[] = [];
    const raw = await s.client.callTool(
      { name: "shell", arguments: { command: "echo first; sleep 6; echo done", workdir: ws, login: false, timeout_ms: 20000 } },
      { onprogress: (p) => seen.push(p as { message?: string }), timeout: 60000 },
    );
    expect(JSON.parse((raw.content as { text: string }[])[0]!.text).output).toBe("first\ndone\n");
    expect(seen.length).toBeGreaterThanOrEqual(1);
    expect(seen[0]!.message).toMatch(/^running for \d+ s, 6 bytes of output; last output: first\n$/);
  });

  test("a workspace without roots: the server's pinned folder (--cd) is writable, a sibling is not", async () => {
    const ws = workspace();
    const outside = workspace();
    const s = await modern({ args: pinned(ws) });
    const r = await s.shell({ command: `touch in.txt; touch ${outside}/out.txt; true`, workdir: ws, login: false });
    expect(r.out.output).toContain("Read-only file system");
    expect(existsSync(join(ws, "in.txt"))).toBe(true);
    expect(existsSync(join(outside, "out.txt"))).toBe(false);
  });

  test("a prompt rule, accepted: the approval form reaches the client's handler, the same process resumes at its execve", async () => {
    const ws = workspace();
    const s = await modern({ rules: PROMPT_TOUCH, onElicit: () => ({ action: "accept" }), args: open(ws) });
    const r = await s.shell({ command: approvedTouch("accepted.txt"), workdir: ws, login: false });
    expect(r.out.output).toBe("done\n");
    expect(existsSync(join(ws, "accepted.txt"))).toBe(true);
    // One run, parked and resumed: the shell logged its start once, and went on after the approved touch.
    expect(readFileSync(join(ws, "log"), "utf8")).toBe("start\nend 0\n");
    expect(s.elicitations).toEqual([
      `Allow agent to run \`/usr/bin/touch accepted.txt\` in \`${ws}\`?\nReason given by the rule: touch needs a human`,
    ]);
  });

  test("a prompt rule, declined: nothing ran, the command goes on with the denial", async () => {
    const ws = workspace();
    const s = await modern({ rules: PROMPT_TOUCH, onElicit: () => ({ action: "decline" }), args: open(ws) });
    const r = await s.shell({ command: approvedTouch("declined.txt"), workdir: ws, login: false });
    expect(withoutBlocked(r.out.output)).toBe("Execution denied: User declined execution\ndone\n");
    expect(r.out.output).toContain("\nshellmcp: blocked (approval) touch declined.txt: User declined execution.");
    expect(existsSync(join(ws, "declined.txt"))).toBe(false);
    expect(readFileSync(join(ws, "log"), "utf8")).toBe("start\nend 1\n");
  });
});

test("earlyDiscoverResponse: a first-line server/discover with a valid 2026-07-28 envelope only", () => {
  const line = (params: unknown) => JSON.stringify({ jsonrpc: "2.0", id: 7, method: "server/discover", params });
  const meta = (m: Record<string, unknown>) => ({ _meta: m });
  const good = { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {} };
  expect(earlyDiscoverResponse(line(meta(good)), { name: "shellmcp", version: "9" })).toMatchObject({
    id: 7,
    result: {
      resultType: "complete",
      supportedVersions: [MODERN],
      _meta: { "io.modelcontextprotocol/serverInfo": { name: "shellmcp", version: "9" } },
    },
  });
  for (const bad of [
    line({}),
    line(meta({ ...good, "io.modelcontextprotocol/protocolVersion": "2025-11-25" })),
    line(meta({ "io.modelcontextprotocol/protocolVersion": MODERN })),
    JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: meta(good) }),
    JSON.stringify({ jsonrpc: "2.0", id: null, method: "server/discover", params: meta(good) }),
    "not json",
  ])
    expect(earlyDiscoverResponse(bad)).toBeUndefined();
});

describe.skipIf(skip)("modern era on the wire (raw JSON lines)", () => {
  test("server/discover (answered before the SDK loads), then discover again, list and call: resultType, cache fields, serverInfo", async () => {
    const s = raw();
    const first = await s.request("server/discover");
    const again = await s.request("server/discover", {}, {});
    for (const d of [first, again])
      expect(d.result).toMatchObject({
        resultType: "complete",
        supportedVersions: [MODERN],
        capabilities: { tools: {} },
        ttlMs: 0,
        cacheScope: "private",
        _meta: { "io.modelcontextprotocol/serverInfo": { name: "shellmcp" } },
      });
    const list = (await s.request("tools/list")).result as Record<string, unknown>;
    expect(list).toMatchObject({ resultType: "complete", ttlMs: 0, cacheScope: "private" });
    expect((list.tools as { name: string }[]).map((t) => t.name)).toEqual(TOOLS);
    const call = (await s.call({ command: "echo hi", workdir: workspace(), login: false })).result as Record<string, unknown>;
    expect(call).toMatchObject({
      resultType: "complete",
      isError: false,
      _meta: { "io.modelcontextprotocol/serverInfo": { name: "shellmcp" } },
    });
    // An unknown version is -32022 naming ours; a missing envelope is -32602.
    const old = await s.rpc.request("tools/list", { _meta: { "io.modelcontextprotocol/protocolVersion": "2099-01-01" } });
    expect(old.error).toEqual({
      code: -32022,
      message: "Unsupported protocol version: 2099-01-01",
      data: { supported: [MODERN], requested: "2099-01-01" },
    });
    expect(((await s.rpc.request("server/discover", {})).error as { code: number }).code).toBe(-32602);
  });

  test("both eras on one connection: an early-answered initialize and a modern request with the same id both get their answer", async () => {
    const home = modernHome();
    const p = Bun.spawn([ensureBinary(), "serve"], {
      env: { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "ignore",
    });
    closers.push(async () => {
      await p.stdin.end();
      await p.exited;
    });
    const meta = { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {} };
    await p.stdin.write(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "both", version: "0" } },
      }) +
        "\n" +
        JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: meta } }) +
        "\n",
    );
    await p.stdin.flush();
    const reader = p.stdout.getReader();
    let out = "";
    while (out.split("\n").length < 3) {
      const { value, done } = await reader.read();
      if (done) break;
      out += new TextDecoder().decode(value);
    }
    const answers = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: number; result: Record<string, unknown> });
    expect(answers.map((a) => a.id)).toEqual([1, 1]);
    expect(answers[0]!.result.protocolVersion).toBe("2025-06-18");
    expect(answers[1]!.result).toMatchObject({ resultType: "complete", ttlMs: 0 });
  });

  test("a tampered, a foreign and a replayed requestState are refused and run nothing; the genuine one runs the exec once", async () => {
    const ws = workspace();
    const s = raw({ rules: PROMPT_TOUCH, args: open(ws) });
    const args = { command: approvedTouch("once.txt"), workdir: ws, login: false };
    const first = (await s.call(args)).result as { resultType: string; inputRequests: Record<string, unknown>; requestState: string };
    expect(first.resultType).toBe("input_required");
    const [key] = Object.keys(first.inputRequests);
    expect(first.inputRequests[key!]).toMatchObject({
      method: "elicitation/create",
      params: { mode: "form", message: expect.stringContaining("/usr/bin/touch once.txt"), requestedSchema: { type: "object" } },
    });
    const accept = { [key!]: { action: "accept", content: {} } };
    const [v, body, mac] = first.requestState.split(".");
    const forged = JSON.parse(Buffer.from(body!, "base64url").toString()) as Record<string, unknown>;
    const tampered = [
      `${v}.${Buffer.from(JSON.stringify({ ...forged, e: (forged.e as number) + 1 })).toString("base64url")}.${mac}`,
      // The MAC's last two characters replaced (with "AA", or "BA" where they are "AA": 1 MAC in 1,024 ends so).
      `${v}.${body}.${mac!.slice(0, -2)}${mac!.endsWith("AA") ? "BA" : "AA"}`,
      "v1.e30.AAAA",
    ];
    const refused = { code: -32602, message: "Invalid or expired requestState", data: { reason: "invalid_request_state" } };
    for (const state of tampered) expect((await s.call(args, { inputResponses: accept, requestState: state })).error).toEqual(refused);
    // Another command with this state: refused (bound to the call that parked it).
    const other = { ...args, command: "touch other.txt" };
    expect((await s.call(other, { inputResponses: accept, requestState: first.requestState })).error).toEqual(refused);
    expect(existsSync(join(ws, "once.txt"))).toBe(false);
    expect(existsSync(join(ws, "other.txt"))).toBe(false);
    // The genuine state, still parked, resumes the same run.
    const done = await s.call(args, { inputResponses: accept, requestState: first.requestState });
    expect((done.result as { resultType: string }).resultType).toBe("complete");
    expect(text(done).output).toBe("done\n");
    expect(existsSync(join(ws, "once.txt"))).toBe(true);
    // Replayed: refused, and the command did not run again.
    expect((await s.call(args, { inputResponses: accept, requestState: first.requestState })).error).toEqual(refused);
    expect(readFileSync(join(ws, "log"), "utf8")).toBe("start\nend 0\n");
  });

  test("a retry without the answer is asked again; a client without elicitation gets a denial a model can act on", async () => {
    const ws = workspace();
    const s = raw({ rules: PROMPT_TOUCH, args: open(ws) });
    const args = { command: "touch asked.txt; echo after", workdir: ws, login: false };
    const first = (await s.call(args)).result as { inputRequests: Record<string, unknown>; requestState: string };
    const again = (await s.call(args, { inputResponses: {}, requestState: first.requestState })).result as typeof first & {
      resultType: string;
    };
    expect(again.resultType).toBe("input_required");
    expect(Object.keys(again.inputRequests)).toEqual(Object.keys(first.inputRequests));
    expect(again.requestState).not.toBe(first.requestState);
    const key = Object.keys(again.inputRequests)[0]!;
    const done = await s.call(args, { inputResponses: { [key]: { action: "cancel" } }, requestState: again.requestState });
    expect(withoutBlocked(text(done).output)).toBe("Execution denied: User cancelled execution\nafter\n");
    expect(text(done).output).toContain("\nshellmcp: blocked (approval) touch asked.txt: User cancelled execution.");
    expect(existsSync(join(ws, "asked.txt"))).toBe(false);
    const blind = await s.request(
      "tools/call",
      { name: "shell", arguments: { command: "touch blind.txt", workdir: ws, login: false } },
      {},
    );
    expect(text(blind).output).toContain("this MCP client cannot ask (no elicitation support)");
    expect(existsSync(join(ws, "blind.txt"))).toBe(false);
  });

  test("an answer keeps only the fields its form asked: always_allow added to a prompt rule's form changes no rule", async () => {
    const ws = workspace();
    const s = raw({ rules: PROMPT_TOUCH, args: open(ws) });
    const args = { command: "touch sneaky.txt", workdir: ws, login: false };
    const first = (await s.call(args)).result as {
      inputRequests: Record<string, { params: { requestedSchema: { properties: object } } }>;
      requestState: string;
    };
    const key = Object.keys(first.inputRequests)[0]!;
    expect(Object.keys(first.inputRequests[key]!.params.requestedSchema.properties)).toEqual(["reason"]);
    const answer = { action: "accept", content: { reason: "fine", always_allow: true } };
    await s.call(args, { inputResponses: { [key]: answer }, requestState: first.requestState });
    expect(existsSync(join(ws, "sneaky.txt"))).toBe(true);
    expect(readFileSync(join(s.codexHome, "rules", "default.rules"), "utf8")).toBe(PROMPT_TOUCH);
  });

  test("notifications/cancelled for a modern call in flight ends its command; the server serves on", async () => {
    const nap = `sleep 95.${process.pid}`;
    const ws = workspace();
    const s = raw({ args: open(ws) });
    s.rpc.send({
      jsonrpc: "2.0",
      id: "to-cancel",
      method: "tools/call",
      params: {
        name: "shell",
        arguments: { command: nap, workdir: ws, login: false, timeout_ms: 60000 },
        _meta: { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {} },
      },
    });
    // The server was just started (raw() does not wait): its start-up shell check comes before the command.
    expect(await waitFor(() => Bun.spawnSync(["pgrep", "-f", nap]).exitCode === 0, 20_000, 25)).toBe(true);
    s.rpc.notify("notifications/cancelled", { requestId: "to-cancel", reason: "test" });
    expect(await noProcessLeft(nap)).toEqual([]);
    expect(text(await s.call({ command: "echo still", workdir: ws, login: false })).output).toBe("still\n");
  });

  test("the call's timeout does not run while its exec waits for the human", async () => {
    const ws = workspace();
    const s = raw({ rules: PROMPT_TOUCH, args: open(ws) });
    // The timeout still covers the start and the escalation (3 s: ample on a loaded machine).
    const args = { command: "touch slow.txt; echo after", workdir: ws, login: false, timeout_ms: 3000 };
    const first = (await s.call(args)).result as { inputRequests: Record<string, unknown>; requestState: string };
    await Bun.sleep(4500); // the human takes longer than the call's timeout
    const key = Object.keys(first.inputRequests)[0]!;
    const done = await s.call(args, { inputResponses: { [key]: { action: "accept" } }, requestState: first.requestState });
    expect(text(done)).toMatchObject({ output: "after\n", timed_out: false, exit_code: 0 });
    expect(existsSync(join(ws, "slow.txt"))).toBe(true);
  });

  test("a parked exec nobody answers is denied after --input-required-timeout-ms: its command ends, nothing is left behind", async () => {
    const nap = `sleep 97.${process.pid}`;
    const ws = workspace();
    const s = raw({ rules: PROMPT_TOUCH, args: [...open(ws), "--input-required-timeout-ms", "1500"] });
    const args = { command: `${nap} & touch late.txt; wait`, workdir: ws, login: false, timeout_ms: 60000 };
    const t0 = Date.now();
    const first = (await s.call(args)).result as { resultType: string; inputRequests: Record<string, unknown>; requestState: string };
    expect(first.resultType).toBe("input_required");
    // The command runs while its touch waits (its background sleep is there), until the approval times out.
    let running = false;
    for (let i = 0; i < 40 && !running; i++) {
      running = Bun.spawnSync(["pgrep", "-f", nap]).exitCode === 0;
      if (!running) await Bun.sleep(25);
    }
    expect(running).toBe(true);
    expect(await noProcessLeft(nap)).toEqual([]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    const key = Object.keys(first.inputRequests)[0]!;
    const late = await s.call(args, { inputResponses: { [key]: { action: "accept" } }, requestState: first.requestState });
    expect((late.error as { code: number }).code).toBe(-32602);
    expect(existsSync(join(ws, "late.txt"))).toBe(false);
    expect(s.stderr()).toContain("approval not answered in time");
  });
});

describe.skipIf(skip)("modern era: a session's late approval waits for the next request about the session", () => {
  /** A session whose touch meets its prompt rule a second after exec_command has answered. */
  const LATE = (file: string) => `sleep 1; touch ${file}; echo "touch $?"`;
  const sessionOf = (text: string) => Number(/^Process running with session ID (\d+)$/m.exec(text)?.[1]);
  const texts = (r: { content?: unknown }) => (r.content as { text: string }[]).map((c) => c.text).join("\n");

  for (const action of ["accept", "decline"] as const)
    test(`v2 client: write_stdin after the prompt gets input_required, ${action} → the touch ${action === "accept" ? "ran" : "did not run"}`, async () => {
      const ws = workspace();
      const s = await modern({ rules: PROMPT_TOUCH, onElicit: () => ({ action }), args: open(ws) });
      const call = async (name: string, args: Record<string, unknown>) =>
        texts(await s.client.callTool({ name, arguments: args }, { timeout: 60000 }));
      const id = sessionOf(await call("exec_command", { cmd: LATE("ask-me"), workdir: ws, yield_time_ms: 250 }));
      expect(id).toBeGreaterThan(0);
      expect(s.elicitations).toEqual([]);
      await Bun.sleep(1500); // the touch now waits at its execve, with no request in flight
      const out = await call("write_stdin", { session_id: id, yield_time_ms: 5000 });
      expect(s.elicitations).toEqual([
        `Allow agent to run \`/usr/bin/touch ask-me\` in \`${ws}\`?\nReason given by the rule: touch needs a human`,
      ]);
      expect(out).toContain(action === "accept" ? "touch 0" : "touch 1");
      expect(out).toContain("Process exited with code 0");
      expect(existsSync(join(ws, "ask-me"))).toBe(action === "accept");
    });

  test("raw: write_stdin answered input_required and never retried: denied after --input-required-timeout-ms, nothing left", async () => {
    const nap = `sleep 1.${process.pid}`;
    const ws = workspace();
    const s = raw({ rules: PROMPT_TOUCH, args: [...open(ws), "--input-required-timeout-ms", "1500"], env: { SHELLMCP_LOG: "debug" } });
    const tool = (name: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      s.request("tools/call", { name, arguments: args, ...extra });
    const started = (await tool("exec_command", { cmd: `${nap}; touch late-too; echo "touch $?"`, workdir: ws, yield_time_ms: 250 }))
      .result as {
      content: { text: string }[];
    };
    const id = sessionOf(texts(started));
    expect(id).toBeGreaterThan(0);
    const poll = { session_id: id, yield_time_ms: 250 };
    type Asked = { resultType?: string; inputRequests: Record<string, unknown>; requestState: string };
    // The exec parks when the nap ends; on a loaded machine that can be after any fixed sleep (a CI run polled once
    // before it and got plain output). Poll until the question comes, bounded.
    let asked = (await tool("write_stdin", poll)).result as Asked;
    for (let i = 0; i < 40 && asked.resultType !== "input_required"; i++) {
      await Bun.sleep(250);
      asked = (await tool("write_stdin", poll)).result as Asked;
    }
    expect(asked.resultType).toBe("input_required");
    const [key] = Object.keys(asked.inputRequests);
    expect(asked.inputRequests[key!]).toMatchObject({
      method: "elicitation/create",
      params: { mode: "form", message: expect.stringContaining("/usr/bin/touch late-too"), requestedSchema: { type: "object" } },
    });
    await Bun.sleep(2000); // no retry: the parked exec is denied
    let out = "";
    for (let i = 0; i < 20 && !out.includes("Process exited"); i++)
      out += texts((await tool("write_stdin", { session_id: id, yield_time_ms: 1000 })).result as { content: unknown });
    // Seen once in CI (not reproduced in six loaded runs): the session was already gone ("Unknown process id"), its
    // end collected by some other call. The server's log then tells which.
    if (!out.includes("touch 1")) console.warn(`serve's stderr:\n${s.stderr()}`);
    expect(out).toContain("touch 1");
    expect(out).toContain("Process exited with code 0");
    expect(existsSync(join(ws, "late-too"))).toBe(false);
    const late = await tool("write_stdin", poll, { inputResponses: { [key!]: { action: "accept" } }, requestState: asked.requestState });
    expect((late.error as { code: number }).code).toBe(-32602);
    expect(await noProcessLeft(nap)).toEqual([]);
    expect(s.stderr()).toContain("approval not answered in time");
  });

  test("raw: no request about the session at all: the late approval is denied after the timeout", async () => {
    const ws = workspace();
    const s = raw({ rules: PROMPT_TOUCH, args: [...open(ws), "--input-required-timeout-ms", "1000"] });
    const tool = (name: string, args: Record<string, unknown>) => s.request("tools/call", { name, arguments: args });
    const id = sessionOf(
      texts((await tool("exec_command", { cmd: LATE("never"), workdir: ws, yield_time_ms: 250 })).result as { content: unknown }),
    );
    await Bun.sleep(3000);
    const out = texts((await tool("write_stdin", { session_id: id, yield_time_ms: 2000 })).result as { content: unknown });
    expect(out).toContain("touch 1");
    expect(existsSync(join(ws, "never"))).toBe(false);
  });
});

describe.skipIf(skipWithout("modern-era network question", shellsMissing() ?? toolMissing("curl")))(
  "modern era: the network proxy's question about an unknown host",
  () => {
    test("asked by input_required (the v2 client's handler answers it): once lets the request through; a session's late one too", async () => {
      const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`hello ${req.headers.get("host")}\n`) });
      try {
        const ws = workspace();
        const home = modernHome();
        writeFileSync(join(home, "config.toml"), agentNetworkConfig({ allowLocalBinding: true, domains: { "allowed.test": "allow" } }));
        const s = await modern({
          onElicit: () => ({ action: "accept", content: { scope: "once" } }),
          args: pinned(ws),
          env: { HOME: home, CODEX_HOME: home },
        });
        const curl = `curl -sS --noproxy '' -x "$HTTP_PROXY" http://localhost:${upstream.port}/`;
        const question = `Allow network access to localhost:${upstream.port}? (the command's http request is not in the network allow list)`;
        const r = await s.shell({ command: curl, workdir: ws, login: false, timeout_ms: 30000 });
        expect(r.out.output).toBe(`hello localhost:${upstream.port}\n`);
        expect(s.elicitations).toEqual([question]);
        // A session's request after exec_command answered: asked on the next write_stdin.
        const call = async (name: string, args: Record<string, unknown>) =>
          ((await s.client.callTool({ name, arguments: args }, { timeout: 60000 })).content as { text: string }[])
            .map((c) => c.text)
            .join("\n");
        const started = await call("exec_command", { cmd: `sleep 1; ${curl}`, workdir: ws, yield_time_ms: 250 });
        const id = Number(/^Process running with session ID (\d+)$/m.exec(started)?.[1]);
        await Bun.sleep(1500);
        const out = await call("write_stdin", { session_id: id, yield_time_ms: 5000 });
        expect(out).toContain(`hello localhost:${upstream.port}`);
        expect(s.elicitations).toEqual([question, question]);
      } finally {
        await upstream.stop(true);
      }
    });
  },
);

describe.skipIf(skip)("tasks extension (raw JSON lines): long calls of a client that declares it", () => {
  const TASKS = { elicitation: { form: {} }, extensions: { "io.modelcontextprotocol/tasks": {} } };
  const AFTER = ["--task-after-ms", "300"];
  type TaskView = {
    resultType: string;
    taskId: string;
    status: string;
    inputRequests?: Record<string, unknown>;
    result?: Record<string, unknown>;
  };
  /** `tasks/get` until the task leaves `working`. */
  async function settled(s: RawModern, taskId: string): Promise<TaskView> {
    for (let i = 0; i < 200; i++) {
      const t = (await s.request("tasks/get", { taskId }, TASKS)).result as TaskView;
      if (t.status !== "working") return t;
      await Bun.sleep(50);
    }
    throw new Error("task still working after 10 s");
  }

  test("a call that outlives --task-after-ms becomes a task; tasks/get returns its result; without the extension it does not", async () => {
    const ws = workspace();
    const s = raw({ args: [...open(ws), ...AFTER] });
    const args = { command: "sleep 0.8; echo late", workdir: ws, login: false };
    const created = (await s.request("tools/call", { name: "shell", arguments: args }, TASKS)).result as TaskView & Record<string, unknown>;
    expect(created).toMatchObject({ resultType: "task", status: "working", ttlMs: expect.any(Number), pollIntervalMs: expect.any(Number) });
    expect(created.taskId).toMatch(/^[\w-]{24}$/);
    const working = (await s.request("tasks/get", { taskId: created.taskId }, TASKS)).result as TaskView;
    expect(working).toMatchObject({ resultType: "complete", status: "working" });
    const done = await settled(s, created.taskId);
    expect(done.status).toBe("completed");
    expect(done.result).toMatchObject({ resultType: "complete", isError: false });
    expect(JSON.parse((done.result!.content as { text: string }[])[0]!.text).output).toBe("late\n");
    const plain = (await s.request("tools/call", { name: "shell", arguments: args })).result as Record<string, unknown>;
    expect(plain.resultType).toBe("complete");
    expect(((await s.request("tasks/get", { taskId: "no-such-task" }, TASKS)).error as { code: number }).code).toBe(-32602);
  });

  test("an approval during a task: input_required in tasks/get, answered by tasks/update, the same run goes on", async () => {
    const ws = workspace();
    const s = raw({ rules: PROMPT_TOUCH, args: [...open(ws), ...AFTER] });
    const args = { command: `sleep 0.6; ${approvedTouch("task.txt")}`, workdir: ws, login: false };
    const created = (await s.request("tools/call", { name: "shell", arguments: args }, TASKS)).result as TaskView;
    expect(created.resultType).toBe("task");
    const asking = await settled(s, created.taskId);
    expect(asking.status).toBe("input_required");
    const key = Object.keys(asking.inputRequests!)[0]!;
    expect(asking.inputRequests![key]).toMatchObject({
      method: "elicitation/create",
      params: { message: expect.stringContaining("touch task.txt") },
    });
    expect(existsSync(join(ws, "task.txt"))).toBe(false);
    const ack = await s.request("tasks/update", { taskId: created.taskId, inputResponses: { [key]: { action: "accept" } } }, TASKS);
    expect(ack.result).toMatchObject({ resultType: "complete" });
    const done = await settled(s, created.taskId);
    expect(done.status).toBe("completed");
    expect(existsSync(join(ws, "task.txt"))).toBe(true);
    expect(readFileSync(join(ws, "log"), "utf8")).toBe("start\nend 0\n");
  });

  test("tasks/cancel ends the task's command: nothing left behind", async () => {
    const nap = `sleep 96.${process.pid}`;
    const ws = workspace();
    const s = raw({ args: [...open(ws), ...AFTER] });
    const args = { command: `${nap}; touch never.txt`, workdir: ws, login: false, timeout_ms: 60000 };
    const created = (await s.request("tools/call", { name: "shell", arguments: args }, TASKS)).result as TaskView;
    expect(created.resultType).toBe("task");
    // The task is made --task-after-ms after the request came, which may be before the command starts: the server
    // was just started (raw() does not wait), and a call waits for its start-up shell check.
    expect(await waitFor(() => Bun.spawnSync(["pgrep", "-f", nap]).exitCode === 0, 20_000, 25)).toBe(true);
    expect((await s.request("tasks/cancel", { taskId: created.taskId }, TASKS)).result).toMatchObject({ resultType: "complete" });
    expect(await noProcessLeft(nap)).toEqual([]);
    expect(((await s.request("tasks/get", { taskId: created.taskId }, TASKS)).result as TaskView).status).toBe("cancelled");
    expect(existsSync(join(ws, "never.txt"))).toBe(false);
  });
});

describe.skipIf(skip)("legacy era: the v1 SDK client, unchanged", () => {
  test("tools/list and a plain call: no resultType, as before", async () => {
    const s = await legacy();
    expect((await s.client.listTools()).tools.map((t) => t.name)).toEqual(TOOLS);
    const ws = workspace();
    const r = await s.shell({ command: "echo hi; pwd", workdir: ws, login: false });
    expect(r.out.output).toBe(`hi\n${ws}\n`);
    expect("resultType" in r.raw).toBe(false);
  });

  test("a prompt rule accepted (elicitation/create, the file on disk) and declined (nothing ran)", async () => {
    let answer: "accept" | "decline" = "accept";
    const ws = workspace();
    const s = await legacy({ rules: PROMPT_TOUCH, onElicit: () => ({ action: answer }), args: open(ws) });
    expect((await s.shell({ command: approvedTouch("accepted.txt"), workdir: ws, login: false })).out.output).toBe("done\n");
    expect(existsSync(join(ws, "accepted.txt"))).toBe(true);
    answer = "decline";
    const r = await s.shell({ command: "touch declined.txt; echo after", workdir: ws, login: false });
    expect(withoutBlocked(r.out.output)).toBe("Execution denied: User declined execution\nafter\n");
    expect(r.out.output).toContain("\nshellmcp: blocked (approval) touch declined.txt: User declined execution.");
    expect(existsSync(join(ws, "declined.txt"))).toBe(false);
    expect(readFileSync(join(ws, "log"), "utf8")).toBe("start\nend 0\n");
  });
});
