/**
 * Every answer of the modern era checked against the v2 SDK (issue 42), dev-only: the SDK is a devDependency and
 * src/ imports only its types. Two checks, in-process over a fake runner and clock (test/helpers/modern-fake.ts):
 *
 * - raw: each JSON-RPC message the era sends, for every kind of answer (discover, tools/list with the real tool
 *   definitions, complete, input_required with each real approval form, every error, progress, tasks), is parsed
 *   with the SDK's spec schemas (`specTypeSchemas` of `@modelcontextprotocol/server`, which are
 *   `@modelcontextprotocol/core`'s);
 * - the SDK's own `Client`, pinned to 2026-07-28 over an in-memory transport, which decodes every result with its
 *   2026-07-28 wire schemas (resultType, ttlMs/cacheScope, input_required) and fails on a wrong one.
 *
 * The SDK's task schemas are 2025-11-25's (`ttl`, `pollInterval`, `task` wrapper); the era's task answers follow
 * 2026-07-28's tasks extension (`ttlMs`, `pollIntervalMs`, flat), so only their status and envelope are checked
 * against the SDK.
 */
import { Client } from "@modelcontextprotocol/client";
import { isInputRequiredResult, specTypeSchemas } from "@modelcontextprotocol/server";
import { describe, expect, test } from "bun:test";
import { ELICITATION_SCHEMA, ELICITATION_SCHEMA_RULE } from "../../src/mcp/elicitation.ts";
import { NETWORK_ELICITATION_SCHEMA } from "../../src/mcp/network-approval.ts";
import { SHELL_TOOL } from "../../src/mcp/shell-tool.ts";
import { EXEC_COMMAND_TOOL, LIST_SESSIONS_TOOL, WRITE_STDIN_TOOL } from "../../src/mcp/unified-exec.ts";
import { caps, fakeEra, type Sent, turn } from "../helpers/modern-fake.ts";

const TOOLS = [SHELL_TOOL, EXEC_COMMAND_TOOL, WRITE_STDIN_TOOL, LIST_SESSIONS_TOOL];
const FORMS = [ELICITATION_SCHEMA, ELICITATION_SCHEMA_RULE, NETWORK_ELICITATION_SCHEMA] as unknown as Record<string, unknown>[];

/** The issues of `value` against the SDK's spec type `name` (empty when it conforms). */
function issues(name: string, value: unknown): string[] {
  const schema = (specTypeSchemas as Record<string, { "~standard": { validate(v: unknown): unknown } }>)[name];
  if (schema === undefined) throw new Error(`no SDK schema ${name}`);
  const r = schema["~standard"].validate(value) as { issues?: { message: string; path?: unknown[] }[] };
  return (r.issues ?? []).map((i) => `${name}: ${JSON.stringify(i.path)} ${i.message}`);
}

/** Check one message the era sent: the JSON-RPC frame, the result's `_meta`, and the result against `kind`. */
function check(m: Sent, kind?: string): string[] {
  if (m.error !== undefined) return issues("JSONRPCErrorResponse", m);
  if (m.id === undefined) return [...issues("JSONRPCNotification", m), ...issues("ProgressNotification", m)];
  const out = issues("JSONRPCResultResponse", m);
  const r = m.result!;
  out.push(...issues("Result", r));
  const meta = r._meta as Record<string, unknown> | undefined;
  if (meta !== undefined) out.push(...issues("Implementation", meta["io.modelcontextprotocol/serverInfo"]));
  if (typeof r.resultType !== "string") out.push("resultType missing");
  if (kind !== undefined) out.push(...issues(kind, r));
  if (kind === "ListToolsResult" || kind === "DiscoverResult")
    if (!Number.isInteger(r.ttlMs) || (r.ttlMs as number) < 0 || !["public", "private"].includes(r.cacheScope as string))
      out.push(`${kind}: ttlMs/cacheScope`);
  return out;
}

/** Check an `input_required` result: the discriminator, the state, and each embedded elicitation request. */
function checkInputRequired(r: Record<string, unknown>): string[] {
  const out = isInputRequiredResult(r) ? [] : ["not an InputRequiredResult"];
  if (typeof r.requestState !== "string") out.push("requestState missing");
  for (const req of Object.values(r.inputRequests as Record<string, { params: unknown }>))
    out.push(...issues("ElicitRequest", req), ...issues("ElicitRequestFormParams", req.params));
  return out;
}

describe("every modern answer parses with the v2 SDK's schemas", () => {
  test("discover, tools/list, sandbox state, complete, input_required (each form), progress, and every error", async () => {
    const f = fakeEra({ tools: TOOLS });
    const bad: string[] = [];
    bad.push(...check(await f.request("server/discover"), "DiscoverResult"));
    bad.push(...check(await f.request("tools/list"), "ListToolsResult"));
    bad.push(...check(await f.request("codex/sandbox-state/update", { sandboxPolicy: {} })));
    for (const form of FORMS) {
      const id = f.send("tools/call", { name: "shell", arguments: { command: "touch a" }, _meta: { progressToken: "p" } });
      const run = await f.run(f.runs.length);
      run.ctx.progress!(1, "started");
      const answer = run.ctx.elicit!("Allow `touch a`?", form);
      const parked = await f.answerTo(id);
      bad.push(...check(parked), ...checkInputRequired(parked.result!));
      const retry = f.send("tools/call", {
        name: "shell",
        arguments: { command: "touch a" },
        requestState: parked.result!.requestState,
        inputResponses: { "approval-1": { action: "accept", content: {} } },
      });
      await answer;
      run.finish("done");
      bad.push(...check(await f.answerTo(retry), "CallToolResult"));
    }
    const progress = f.sent.filter((m) => m.method === "notifications/progress");
    expect(progress.length).toBeGreaterThan(0);
    for (const m of progress) bad.push(...check(m));
    const errors = [
      await f.request("tools/list", { _meta: { "io.modelcontextprotocol/protocolVersion": "2099-01-01" } }),
      await f.request("tools/list", { _meta: { "io.modelcontextprotocol/clientCapabilities": "no" } }),
      await f.request("nope/method"),
      await f.request("tools/call", { name: "missing" }),
      await f.request("tools/call", { name: "shell", arguments: {}, requestState: "v1.x.y" }),
      await f.request("tasks/get", { taskId: "unknown" }),
    ];
    for (const e of errors) {
      expect(e.error).toBeDefined();
      bad.push(...check(e));
    }
    expect(bad).toEqual([]);
  });

  test("tasks: created, input_required, completed, failed and cancelled answers (status and envelope)", async () => {
    const f = fakeEra({ tools: TOOLS });
    const tasks = caps({ tasks: true });
    const bad: string[] = [];
    const start = async () => {
      const id = f.send("tools/call", { name: "shell", arguments: { command: "make" } }, tasks);
      const run = await f.run(f.runs.length);
      f.clock.advance(5_000);
      const created = await f.answerTo(id);
      bad.push(...check(created), ...issues("TaskStatus", created.result!.status));
      expect(created.result!.resultType).toBe("task");
      return { run, taskId: created.result!.taskId as string };
    };
    const get = async (taskId: string) => {
      const m = await f.request("tasks/get", { taskId }, tasks);
      bad.push(...check(m), ...issues("TaskStatus", m.result!.status));
      return m.result!;
    };
    const a = await start();
    const answer = a.run.ask();
    let view: Record<string, unknown> = {};
    for (let i = 0; i < 5 && view.status !== "input_required"; i++) {
      await turn();
      view = await get(a.taskId);
    }
    bad.push(
      ...checkInputRequired({ resultType: "input_required", requestState: "", ...view }).filter((x) => x !== "not an InputRequiredResult"),
    );
    bad.push(
      ...check(await f.request("tasks/update", { taskId: a.taskId, inputResponses: { "approval-1": { action: "accept" } } }, tasks)),
    );
    await answer;
    a.run.finish("built");
    await turn();
    const done = await get(a.taskId);
    expect(done.status).toBe("completed");
    bad.push(...issues("CallToolResult", done.result));
    const b = await start();
    b.run.fail(new Error("spawn failed"));
    await turn();
    const failed = await get(b.taskId);
    expect(failed.status).toBe("failed");
    bad.push(...issues("JSONRPCErrorResponse", { jsonrpc: "2.0", id: 0, error: failed.error }));
    const c = await start();
    bad.push(...check(await f.request("tasks/cancel", { taskId: c.taskId }, tasks)));
    expect((await get(c.taskId)).status).toBe("cancelled");
    expect(bad).toEqual([]);
  });

  test("the v2 SDK's Client, pinned to 2026-07-28, decodes discover, tools/list and a call through input_required", async () => {
    const f = fakeEra({ tools: TOOLS, send: (m) => transport.onmessage?.(m as never) });
    const transport = {
      onmessage: undefined as ((m: unknown) => void) | undefined,
      onclose: undefined as (() => void) | undefined,
      onerror: undefined as ((e: Error) => void) | undefined,
      start: async () => {},
      close: async () => transport.onclose?.(),
      send: async (m: Record<string, unknown>) => {
        if (m.method === "notifications/cancelled") f.era.cancel((m.params as { requestId?: unknown }).requestId);
        else if (m.id !== undefined && typeof m.method === "string") f.era.handle(m as { id: number; method: string; params?: unknown });
      },
    };
    const client = new Client(
      { name: "sdk-schema-check", version: "0" },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    const asked: unknown[] = [];
    client.setRequestHandler("elicitation/create", async (req) => {
      asked.push(req.params);
      return { action: "accept", content: { reason: "fine" } };
    });
    await client.connect(transport as never);
    const listed = await client.listTools();
    expect(listed.tools.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name));
    const call = client.callTool({ name: "shell", arguments: { command: "touch b" } });
    const run = await f.run(0);
    expect(await run.ctx.elicit!("Allow `touch b`?", FORMS[0]!)).toEqual({ action: "accept", content: { reason: "fine" } });
    // The shell tool declares an output schema: the client checks structuredContent against it too.
    run.finish("ok", { exit_code: 0, output: "ok", duration: { secs: 0, nanos: 1000 }, timed_out: false });
    expect(await call).toMatchObject({ content: [{ type: "text", text: "ok" }], structuredContent: { exit_code: 0 } });
    expect(asked).toHaveLength(1);
    await client.close();
  });
});
