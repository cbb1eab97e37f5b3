/**
 * `shellmcp serve --listen` (issue 43): MCP over streamable HTTP through the compiled binary, driven by the v1
 * SDK client's `StreamableHTTPClientTransport` and by raw requests: the tools, exec sessions, elicitation over the
 * GET stream, clients isolated from each other, the HTTP layer's refusals, and the lifecycle (DELETE, idle end,
 * SIGTERM).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { connectHttp, INITIALIZE, postHeaders, refusedStart, startHttpServe, type HttpServe, type HttpSession } from "../helpers/http.ts";
import { fifoMessage, fifoSend, mkfifo, noProcessLeft } from "../helpers/events.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { approveWaiting } from "../helpers/approvals.ts";

const skip = skipWithout("serve --listen suite", shellsMissing());
const servers: HttpServe[] = [];
const clients: HttpSession[] = [];
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  for (const s of servers) await s.stop().catch(() => undefined);
});
async function serve(o: Parameters<typeof startHttpServe>[0] = {}): Promise<HttpServe> {
  const s = await startHttpServe(o);
  servers.push(s);
  return s;
}
async function connect(s: HttpServe, o: Parameters<typeof connectHttp>[2] = {}): Promise<HttpSession> {
  const c = await connectHttp(s.url, s.token, o);
  clients.push(c);
  return c;
}
/** A workspace outside /tmp, a git repository (an escalated program's room writes the repository it runs in). */
function workspace(): string {
  const d = join(CONF_BASE, `ws-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  expect(Bun.spawnSync(["git", "init", "-q", d]).exitCode).toBe(0);
  return d;
}
/** A command line unique to this test process, to look for survivors by. */
const nap = (n: number) => `sleep ${n}.${process.pid}`;
const sessionIdOf = (text: string) => Number(/^Process running with session ID (\d+)$/m.exec(text)?.[1]);

describe.skipIf(skip)("serve --listen: the tools over HTTP (SDK v1 client)", () => {
  test("shell runs with the generated token; exec_command + write_stdin drive one session", async () => {
    const s = await serve();
    expect(s.url.href).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const c = await connect(s);
    const { tools } = await c.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(["shell", "exec_command", "write_stdin", "list_sessions"]);
    const r = await c.call("shell", { command: "echo over-http", workdir: "/", login: false });
    expect(JSON.parse(r.text).output).toBe("over-http\n");
    const started = await c.call("exec_command", { cmd: "read x; echo got:$x", workdir: "/", tty: true, yield_time_ms: 300 });
    const id = sessionIdOf(started.text);
    expect(started.text).toContain("Process running with session ID");
    const answered = await c.call("write_stdin", { session_id: id, chars: "hello\n", yield_time_ms: 5000 });
    expect(answered.text).toContain("got:hello");
    expect(answered.text).toContain("Process exited with code 0");
  });

  test("[shellmcp] listen in config.toml serves HTTP without the flag", async () => {
    const s = await serve({ config: '[shellmcp]\nlisten = "http://127.0.0.1:0/cfg"\n' });
    expect(s.url.pathname).toBe("/cfg");
    const c = await connect(s);
    expect((await c.client.listTools()).tools.length).toBe(4);
  });

  test("a prompt rule asks the human through elicitation (SDK client)", async () => {
    const s = await serve({ rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n' });
    const c = await connect(s, { onElicit: (m) => ({ action: m.includes("yes.txt") ? "accept" : "decline" }) });
    const ws = workspace();
    const r = await c.call("shell", { command: "touch yes.txt; touch no.txt; ls", workdir: ws, login: false });
    // (then, since main, a "blocked" line about no.txt: not this test's concern)
    expect(JSON.parse(r.text).output).toStartWith("Execution denied: User declined execution\nyes.txt\n");
    expect(c.elicitations[0]).toBe(`Allow agent to run \`/usr/bin/touch yes.txt\` in \`${ws}\`?`);
  });

  test("a client that opens no GET stream still gets the elicitation, on its call's own SSE stream", async () => {
    const s = await serve({ rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n' });
    const ws = workspace();
    const init = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: { elicitation: {} }, clientInfo: { name: "raw", version: "0" } },
    });
    const opened = await fetch(s.url, { method: "POST", headers: postHeaders(s.token), body: init });
    const sid = opened.headers.get("mcp-session-id")!;
    await opened.text();
    const h = postHeaders(s.token, { "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25" });
    await fetch(s.url, { method: "POST", headers: h, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
    const call = await fetch(s.url, {
      method: "POST",
      headers: h,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "shell", arguments: { command: "touch raw.txt && echo made", workdir: ws, login: false } },
      }),
    });
    // Read the call's SSE stream: first the server's elicitation request, answered by a POST; then the result.
    const reader = call.body!.getReader();
    let buf = "";
    const nextEvent = async (): Promise<Record<string, unknown>> => {
      for (;;) {
        const m = /^data: (.*)$/m.exec(buf);
        if (m !== null) {
          buf = buf.slice(buf.indexOf(m[0]) + m[0].length);
          return JSON.parse(m[1]!) as Record<string, unknown>;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error("stream ended");
        buf += new TextDecoder().decode(value);
      }
    };
    const ask = await nextEvent();
    expect(ask.method).toBe("elicitation/create");
    const answered = await fetch(s.url, {
      method: "POST",
      headers: h,
      body: JSON.stringify({ jsonrpc: "2.0", id: ask.id, result: { action: "accept" } }),
    });
    expect(answered.status).toBe(202);
    const result = (await nextEvent()) as { id: number; result: { content: { text: string }[] } };
    expect(result.id).toBe(2);
    expect(JSON.parse(result.result.content[0]!.text).output).toBe("made\n");
  });
});

describe.skipIf(skip)("serve --listen: clients are isolated", () => {
  test("another client's exec session id is unknown to it: write_stdin, list_sessions and kill answer as for no session", async () => {
    const s = await serve();
    const a = await connect(s);
    const b = await connect(s);
    const started = await a.call("exec_command", { cmd: nap(100), workdir: "/", yield_time_ms: 200 });
    const id = sessionIdOf(started.text);
    expect(id).toBeGreaterThan(0);
    const foreign = await b.call("write_stdin", { session_id: id, chars: "x\n", yield_time_ms: 100 });
    const unknown = await b.call("write_stdin", { session_id: 987654, chars: "x\n", yield_time_ms: 100 });
    expect(foreign.isError).toBe(unknown.isError);
    expect(foreign.text.replace(String(id), "N")).toBe(unknown.text.replace("987654", "N"));
    expect((await b.call("list_sessions", {})).text).toContain("No session is open.");
    expect((await b.call("list_sessions", { kill: [id] })).text).toContain(`No open session ${id}.`);
    // a's session is untouched, and still a's.
    expect((await a.call("list_sessions", {})).text).toContain(nap(100));
    await a.call("list_sessions", { kill: [id] });
    expect(await noProcessLeft(nap(100))).toEqual([]);
  });

  test("one client's sandbox state is not another's", async () => {
    const s = await serve();
    const a = await connect(s);
    const b = await connect(s);
    const ws = workspace();
    await a.sandboxState({ type: "workspace-write", network_access: false, writable_roots: [ws] }, ws);
    const wrote = await a.call("shell", { command: "echo a > a.txt && echo ok", workdir: ws, login: false });
    expect(JSON.parse(wrote.text).output).toBe("ok\n");
    const refused = await b.call("shell", { command: "echo b > b.txt && echo ok", workdir: ws, login: false });
    expect(JSON.parse(refused.text).output).not.toContain("ok");
  });
});

describe.skipIf(skip)("serve --listen: the HTTP layer's refusals", () => {
  test("probes answer without a token; no token, a wrong token and a malformed header get 401 with WWW-Authenticate", async () => {
    const s = await serve();
    const base = s.url.origin;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    for (const token of [undefined, "wrong-token", `${s.token}x`]) {
      const r = await fetch(s.url, { method: "POST", headers: postHeaders(token), body: INITIALIZE });
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toStartWith("Bearer");
    }
    const r = await fetch(s.url, {
      method: "POST",
      headers: { ...postHeaders(undefined), authorization: `Basic ${s.token}` },
      body: INITIALIZE,
    });
    expect(r.status).toBe(401);
    expect(s.stderr().split(s.token!).length).toBe(2); // said once at start, never logged again
  });

  test("a foreign Origin gets 403, a foreign Host 421, a body over the cap 413, a wrong content type 415, bad JSON 400", async () => {
    const s = await serve({ args: ["--max-body-bytes", "4096"] });
    const post = (headers: Record<string, string>, body: string) => fetch(s.url, { method: "POST", headers, body });
    expect((await post(postHeaders(s.token, { origin: "http://evil.example" }), INITIALIZE)).status).toBe(403);
    expect((await post(postHeaders(s.token, { origin: s.url.origin }), INITIALIZE)).status).toBe(200);
    expect((await post(postHeaders(s.token, { host: "evil.example" }), INITIALIZE)).status).toBe(421);
    const big = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { pad: "x".repeat(5000) } });
    const tooBig = await post(postHeaders(s.token), big);
    expect(tooBig.status).toBe(413);
    expect(((await tooBig.json()) as { error: { message: string } }).error.message).toContain("4096 bytes");
    expect((await post(postHeaders(s.token, { "content-type": "text/plain" }), INITIALIZE)).status).toBe(415);
    const bad = await post(postHeaders(s.token), "{not json");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: number } }).error.code).toBe(-32700);
    const notRpc = await post(postHeaders(s.token, { "mcp-session-id": "nope" }), '{"hello":1}');
    expect(notRpc.status).toBe(404);
    expect((await fetch(s.url, { method: "PUT", headers: postHeaders(s.token), body: INITIALIZE })).status).toBe(405);
  });

  test("in a session: a message that is not JSON-RPC gets 400; a batch is answered per message; an initialize batch is refused", async () => {
    const s = await serve();
    const c = await connect(s);
    const h = postHeaders(s.token, { "mcp-session-id": c.transport.sessionId!, "mcp-protocol-version": "2025-11-25" });
    const notRpc = await fetch(s.url, { method: "POST", headers: h, body: '{"hello":1}' });
    expect(notRpc.status).toBe(400);
    const batch = await fetch(s.url, {
      method: "POST",
      headers: h,
      body: JSON.stringify([
        { jsonrpc: "2.0", id: 11, method: "tools/list" },
        { jsonrpc: "2.0", id: 12, method: "no/such" },
      ]),
    });
    const text = await batch.text();
    expect(text).toContain('"id":11');
    expect(text).toContain('"id":12');
    expect(text).toContain("Method not found");
    const initBatch = await fetch(s.url, { method: "POST", headers: postHeaders(s.token), body: `[${INITIALIZE},${INITIALIZE}]` });
    expect(initBatch.status).toBe(400);
  });

  test("a flood of sessions past --max-clients is refused with 503", async () => {
    const s = await serve({ args: ["--max-clients", "2"] });
    await connect(s);
    await connect(s);
    const r = await fetch(s.url, { method: "POST", headers: postHeaders(s.token), body: INITIALIZE });
    expect(r.status).toBe(503);
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain("2 MCP sessions are open");
  });

  test("a request past --max-calls-per-client in one session gets 429; the session goes on", async () => {
    const s = await serve({ args: ["--max-calls-per-client", "1"] });
    const c = await connect(s);
    const ws = workspace();
    await c.sandboxState({ type: "workspace-write", network_access: false, writable_roots: [ws] }, ws);
    mkfifo(join(ws, "up"));
    mkfifo(join(ws, "go"));
    const up = fifoMessage(join(ws, "up"));
    const first = c.call("shell", { command: "echo up > up; read x < go; echo first", workdir: ws, login: false });
    expect(await up).toBe("up\n");
    const r = await fetch(s.url, {
      method: "POST",
      headers: postHeaders(s.token, { "mcp-session-id": c.transport.sessionId!, "mcp-protocol-version": "2025-11-25" }),
      body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
    });
    expect(r.status).toBe(429);
    await fifoSend(join(ws, "go"));
    expect(JSON.parse((await first).text).output).toBe("first\n");
    expect((await c.client.listTools()).tools.length).toBe(4);
  });

  test("--auth none on loopback: no token needed, and each client's first result says so", async () => {
    const s = await serve({ args: ["--auth", "none"] });
    expect(s.stderr()).toContain("--auth none");
    const c = await connect(s);
    const first = await c.call("shell", { command: "echo one", workdir: "/", login: false });
    const content = first.raw.content as { text: string }[];
    expect(JSON.parse(content[0]!.text).output).toBe("one\n");
    expect(content[1]!.text).toContain(`without authentication (--auth none): any local user or process that reaches ${s.url.host}`);
    const second = await c.call("shell", { command: "echo two", workdir: "/", login: false });
    expect((second.raw.content as unknown[]).length).toBe(1);
  });

  test("without TLS or auth chosen, a non-loopback address is refused at start; --auth none only on loopback", async () => {
    const open = await refusedStart(["--listen", "http://0.0.0.0:0/mcp"]);
    expect(open.code).toBe(2);
    expect(open.stderr).toContain("without authentication you chose");
    const none = await refusedStart(["--listen", "http://0.0.0.0:0/mcp", "--auth", "none"]);
    expect(none.stderr).toContain("without authentication you chose");
    // A broken start-up (here a bad flag value) exits instead of serving errors on stdio as the stdio server does.
    const broken = await refusedStart(["--listen", "http://127.0.0.1:0/mcp", "--default-timeout-ms", "nope"]);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toContain("--default-timeout-ms");
  });
});

describe.skipIf(skip)("serve --listen: lifecycle", () => {
  test("DELETE ends the session's processes at once, and its id then answers 404", async () => {
    const s = await serve();
    const c = await connect(s);
    await c.call("exec_command", { cmd: nap(101), workdir: "/", yield_time_ms: 200 });
    const sid = c.transport.sessionId!;
    await c.transport.terminateSession();
    expect(await noProcessLeft(nap(101))).toEqual([]);
    const r = await fetch(s.url, {
      method: "POST",
      headers: postHeaders(s.token, { "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25" }),
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
    });
    expect(r.status).toBe(404);
  });

  test("a client that vanishes: its processes end after the idle timeout", async () => {
    // Long enough that a loaded machine does not end the session between connect and the call (the test waits anyway).
    const s = await serve({ args: ["--client-idle-timeout-ms", "1500"] });
    const c = await connect(s);
    await c.call("exec_command", { cmd: nap(102), workdir: "/", yield_time_ms: 200 });
    // No DELETE, no further request: the client is gone as far as the server can tell.
    expect(await noProcessLeft(nap(102))).toEqual([]);
  });

  test("SIGKILL: nothing the server started outlives it (the lifeline guard, as on stdio)", async () => {
    const s = await serve();
    const c = await connect(s);
    await c.call("exec_command", { cmd: nap(104), workdir: "/", yield_time_ms: 200 });
    s.proc.kill("SIGKILL");
    await s.proc.exited;
    expect(await noProcessLeft(nap(104))).toEqual([]);
  });

  test("SIGTERM drains: the sessions' processes end and the server exits", async () => {
    const s = await serve();
    const c = await connect(s);
    await c.call("exec_command", { cmd: nap(103), workdir: "/", yield_time_ms: 200 });
    expect(await s.stop()).toBe(143);
    expect(await noProcessLeft(nap(103))).toEqual([]);
  });
});

describe.skipIf(skip)("serve --listen: containment", () => {
  test("a sandboxed command with the network on reaches the endpoint but gets 401, and finds no token to send", async () => {
    const s = await serve();
    const c = await connect(s);
    const ws = workspace();
    await c.sandboxState({ type: "workspace-write", network_access: true, writable_roots: [ws] }, ws);
    const body = INITIALIZE.replaceAll('"', '\\"');
    const curl = `curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' --data "${body}" ${s.url.href}`;
    const r = await c.call("shell", {
      command: `${curl}; echo; ${curl.replace("curl -s", `curl -s -H 'authorization: Bearer x'`)}`,
      workdir: ws,
      login: false,
    });
    expect(JSON.parse(r.text).output).toBe("401\n401");
    // Where a token could be: the server's command line, environment and open files, this user's home, the
    // command's own environment.
    const pid = s.proc.pid;
    const look = `cat /proc/${pid}/cmdline /proc/${pid}/environ /proc/${pid}/fd/2 2>/dev/null; env; grep -rs . "$HOME" 2>/dev/null | head -c 100000`;
    const seen = await c.call("shell", { command: look, workdir: ws, login: false });
    expect(seen.text).not.toContain(s.token!);
  });

  test("a token file given with --auth-token-file is hidden from sandboxed commands", async () => {
    // Outside CODEX_HOME (which no sandbox reads anyway): only the server's hiding keeps it from a command.
    const dir = mkdtempSync(join(CONF_BASE, "tok-"));
    const file = join(dir, "serve.token");
    writeFileSync(file, "file-token-0123456789abcdef\n", { mode: 0o600 });
    const s = await serve({ args: ["--auth", "capability-token", "--auth-token-file", file] });
    const c = await connectHttp(s.url, "file-token-0123456789abcdef");
    clients.push(c);
    const r = await c.call("shell", { command: `cat ${file}; grep -rs file-token ${dir}; echo end`, workdir: "/", login: false });
    expect(r.text).not.toContain("file-token-0123456789abcdef");
    expect(JSON.parse(r.text).output).toContain("end\n");
  });
});

describe.skipIf(skip)("serve --listen: slow clients", () => {
  test("clients that trickle their headers or their body hold up no other client, and are answered when they finish", async () => {
    const s = await serve();
    const port = Number(s.url.port);
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
    // One stalls inside its headers, one inside its body (Content-Length promised, half sent).
    const opened: import("bun").Socket[] = [];
    const replies: string[] = ["", ""];
    for (const [i, first] of [
      [0, `POST ${s.url.pathname} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${s.token}\r\n`],
      [
        1,
        `POST ${s.url.pathname} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${s.token}\r\n` +
          `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\n\r\n` +
          body.slice(0, 10),
      ],
    ] as const)
      opened.push(
        await Bun.connect({
          hostname: "127.0.0.1",
          port,
          socket: { data: (_s, d) => void (replies[i] += d.toString()), open: (sock) => void sock.write(first) },
        }),
      );
    // Meanwhile a normal client connects and runs a call.
    const c = await connect(s);
    const r = await c.call("shell", { command: "echo not-held-up", workdir: "/", login: false });
    expect(JSON.parse(r.text).output).toBe("not-held-up\n");
    expect(replies).toEqual(["", ""]); // the slow ones have no answer yet
    // The body's client finishes: it is answered (an initialize is missing: a clear 400, not a hang).
    opened[1]!.write(body.slice(10));
    const end = Date.now() + 10_000;
    while (!replies[1]!.startsWith("HTTP/1.1 ") && Date.now() < end) await Bun.sleep(20);
    expect(replies[1]).toMatch(/^HTTP\/1\.1 4\d\d /);
    for (const o of opened) o.end();
  });
});

describe.skipIf(skip)("serve --listen: the local approver", () => {
  test("a prompt from an HTTP client without elicitation waits for the person at `shellmcp approvals`, and runs once approved", async () => {
    const s = await serve({ rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n', args: ["--approver"] });
    const c = await connect(s); // no elicitation capability
    const ws = workspace();
    const call = c.call("shell", { command: "touch approved.txt; ls", workdir: ws, login: false });
    await approveWaiting(s.codexHome);
    const r = await call;
    expect(JSON.parse(r.text).output).toContain("approved.txt");
    expect(existsSync(join(ws, "approved.txt"))).toBe(true);
  });
});
