/**
 * The escalation worker parks while `serve` is idle and starts again with the next call (issue 40, idle memory;
 * src/escalate/worker/port.ts), through the compiled binary and the SDK client: the rules still decide every exec
 * after each restart (a forbidden `touch` is denied and never runs, the other programs run), on workspace-write.
 * `SHELLMCP_WORKER_PARK_MS` shortens the park's delay after a call; the server's debug log says when it parks and
 * starts again. A human's answer that comes after its call ended and the worker parked answers nothing of the next.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../helpers/mcp.ts";
import { homeDir } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const skip = skipWithout("worker parking (binary)", shellsMissing());
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close();
});

/** Until `ok()` holds (every 20 ms, up to `ms`); throws with `what` when it never does. */
async function until(ok: () => boolean, what: string, ms = 20_000): Promise<void> {
  for (const end = performance.now() + ms; !ok(); await Bun.sleep(20)) if (performance.now() > end) throw new Error(`timed out: ${what}`);
}

const count = (text: string, needle: string) => text.split(needle).length - 1;
const PARKED = "escalation worker parked";
const STARTED = "escalation worker started again";
const NOT_PARKED = "escalation worker not parked";

describe.skipIf(skip)("serve parks its escalation worker when idle", () => {
  test("after start-up and after each call it parks; the next call's execs are decided by the rules as before", async () => {
    const home = homeDir();
    const ws = homeDir("shellmcp-ws-");
    const s = await startServe({
      codexHome: home,
      rules: 'prefix_rule(pattern=["touch"], decision="forbidden")\n',
      env: { SHELLMCP_WORKER_PARK_MS: "300", SHELLMCP_LOG: "debug" },
    });
    sessions.push(s);
    await s.sandboxState({ type: "workspace-write", network_access: false }, ws);
    await until(() => s.stderr().includes(PARKED), "the park after start-up");
    for (let i = 1; i <= 3; i++) {
      const r = await s.shell({ command: `touch t${i}; echo rc=$?; /bin/echo ran-${i} > out${i}; cat out${i}`, workdir: ws, login: false });
      expect(r.out.output).toContain("Execution denied: Execution forbidden by policy");
      expect(r.out.output).toContain("rc=1");
      expect(r.out.output).toContain(`ran-${i}`);
      expect(existsSync(join(ws, `t${i}`))).toBe(false);
      expect(count(s.stderr(), STARTED)).toBe(i);
      await until(() => count(s.stderr(), PARKED) === i + 1, `park ${i + 1}`);
    }
  }, 120_000);

  // Call A's background `touch` asks a human (a `prompt` rule); A ends while the question is open; the worker parks;
  // call B's `touch` asks too. The human accepts A's question, then declines B's. Session ids started again at 1 in
  // each worker: A's answer (the escalation of `touch late-a`) answered B's exec, which exited 0 though declined.
  for (const backend of ["bwrap", "landlock"] as const)
    test(`${backend}: an exec_command session running beside keeps the worker from parking, and its forbidden exec is still denied`, async () => {
      const home = homeDir();
      const ws = homeDir("shellmcp-ws-");
      const s = await startServe({
        codexHome: home,
        args: ["--sandbox-backend", backend],
        rules: 'prefix_rule(pattern=["touch"], decision="forbidden")\n',
        env: { SHELLMCP_WORKER_PARK_MS: "300", SHELLMCP_LOG: "debug" },
      });
      sessions.push(s);
      await s.sandboxState({ type: "workspace-write", network_access: false }, ws);
      await until(() => s.stderr().includes(PARKED), "the park after start-up");
      // The session's shell outlives its exec_command call: the park 300 ms after that call finds its listener open.
      const go = join(ws, "go");
      const started = (await s.client.callTool(
        {
          name: "exec_command",
          arguments: { cmd: `while [ ! -e ${go} ]; do sleep 0.05; done; touch forbidden; echo rc=$?`, workdir: ws, yield_time_ms: 200 },
        },
        undefined,
        { timeout: 60_000 },
      )) as { content: { text: string }[] };
      const id = /session ID (\d+)/.exec(started.content.map((c) => c.text).join("\n"))?.[1];
      expect(id).toBeDefined();
      await until(() => s.stderr().includes(NOT_PARKED), "the refused park");
      expect(count(s.stderr(), PARKED)).toBe(1); // only start-up's
      writeFileSync(go, "");
      const out = (await s.client.callTool(
        { name: "write_stdin", arguments: { session_id: Number(id), chars: "", yield_time_ms: 10_000 } },
        undefined,
        {
          timeout: 60_000,
        },
      )) as { content: { text: string }[] };
      const text = out.content.map((c) => c.text).join("\n");
      expect(text).toContain("Execution denied: Execution forbidden by policy");
      expect(text).toContain("rc=1");
      expect(existsSync(join(ws, "forbidden"))).toBe(false);
      await until(() => count(s.stderr(), PARKED) === 2, "the park once the session has ended");
    }, 120_000);

  test("the human's accept of an ended call's question never runs the next call's declined exec", async () => {
    const home = homeDir();
    const ws = homeDir("shellmcp-ws-");
    const answers = new Map<string, (a: { action: "accept" | "decline" }) => void>();
    const s = await startServe({
      codexHome: home,
      rules: 'prefix_rule(pattern=["touch"], decision="prompt")\n',
      env: { SHELLMCP_WORKER_PARK_MS: "300", SHELLMCP_LOG: "debug" },
      onElicit: (message) => new Promise((res) => answers.set(message.includes("late-a") ? "a" : "b", res)),
    });
    sessions.push(s);
    await s.sandboxState({ type: "workspace-write", network_access: false }, ws);
    await until(() => s.stderr().includes(PARKED), "the park after start-up");
    // A: the question is asked by a background job; the shell ends once it is asked, without waiting for the answer.
    const a = s.shell({
      command: `(touch late-a >/dev/null 2>&1 &); while [ ! -e asked ]; do sleep 0.02; done; echo a-done`,
      workdir: ws,
      login: false,
    });
    await until(() => answers.has("a"), "A's question");
    writeFileSync(join(ws, "asked"), "");
    expect((await a).out.output).toContain("a-done");
    await until(() => count(s.stderr(), PARKED) === 2, "the park after A");
    const b = s.shell({ command: `touch late-b; echo rc=$?`, workdir: ws, login: false });
    await until(() => answers.has("b"), "B's question");
    answers.get("a")!({ action: "accept" });
    // A's answer is placed (a room, or inside the sandbox) and sent to the worker, or dropped, before the human
    // answers B.
    await until(() => /escalated[^\n]*late-a|decided after its run ended/.test(s.stderr()), "A's answer placed or dropped");
    answers.get("b")!({ action: "decline" });
    const rb = await b;
    expect(rb.out.output).not.toContain("rc=0");
    expect(existsSync(join(ws, "late-b"))).toBe(false);
    expect(existsSync(join(ws, "late-a"))).toBe(false); // A's call ended before its answer came
  }, 120_000);
});
