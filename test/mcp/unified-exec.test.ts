/**
 * Issue 31: sessions as Codex's unified exec names them (`exec_command`, `write_stdin`; spec in
 * the shared spec notes on unified exec, unified-exec.md), through the compiled binary and the MCP SDK client: Codex's fields and result
 * text, a dev server started by `exec_command` reached by a later `shell` call, an interactive program driven over a
 * terminal, the sandbox and the rules inside a session, the bounds and their errors, nothing left when the client
 * goes away.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { startServe, type Session, type StartOptions } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { noProcessLeft } from "../helpers/events.ts";

const skip = skipWithout("unified exec suite", shellsMissing() ?? toolMissing("python3", "curl"));
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
});
/** Commands unique to this test process, so that looking for survivors never sees another checkout's. */
const NAP = (n: number) => `sleep ${n}.${process.pid}`;

async function serve(o: StartOptions = {}): Promise<Session> {
  const s = await startServe(o);
  sessions.push(s);
  return s;
}

function workspace(): string {
  const d = join(CONF_BASE, `ue-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  return d;
}

/** A server whose client sent workspace-write on `ws` (network as given). */
async function serveIn(ws: string, network: boolean, o: StartOptions = {}): Promise<Session> {
  const s = await serve(o);
  await s.sandboxState({ type: "workspace-write", network_access: network, writable_roots: [ws] }, ws);
  return s;
}

interface Answer {
  text: string;
  isError: boolean;
  structured: Record<string, unknown> | undefined;
  /** "Process running with session ID N", when present. */
  sessionId?: number;
  exitCode?: number;
  /** What follows "Output:\n". */
  output: string;
}

async function call(s: Session, name: "exec_command" | "write_stdin", args: Record<string, unknown>): Promise<Answer> {
  const raw = (await s.client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as Record<string, unknown>;
  const text = (raw.content as { text: string }[]).map((c) => c.text).join("\n");
  const sid = /^Process running with session ID (\d+)$/m.exec(text);
  const code = /^Process exited with code (-?\d+)$/m.exec(text);
  const at = text.indexOf("\nOutput:\n");
  return {
    text,
    isError: raw.isError === true,
    structured: raw.structuredContent as Record<string, unknown> | undefined,
    sessionId: sid === null ? undefined : Number(sid[1]),
    exitCode: code === null ? undefined : Number(code[1]),
    output: at < 0 ? "" : text.slice(at + "\nOutput:\n".length),
  };
}

/**
 * Poll session `id` until the output (`already` and what the polls collect) contains `want` or the process ends;
 * returns everything (`already` included).
 */
async function pollFor(s: Session, id: number, want: string, already = "", rounds = 12): Promise<{ output: string; exitCode?: number }> {
  let output = already;
  for (let i = 0; i < rounds && !output.includes(want); i++) {
    const r = await call(s, "write_stdin", { session_id: id, yield_time_ms: 5000 });
    output += r.output;
    if (r.exitCode !== undefined || output.includes(want)) return { output, exitCode: r.exitCode };
  }
  return { output };
}

/** A TCP port nothing listens on right now. */
function freePort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = l.port;
  l.stop(true);
  return p;
}

describe.skipIf(skip)("exec_command and write_stdin (compiled binary, SDK client)", () => {
  test("listed with Codex's names, fields and output schema", async () => {
    const s = await serve();
    const { tools } = await s.client.listTools();
    const exec = tools.find((t) => t.name === "exec_command")!;
    const write = tools.find((t) => t.name === "write_stdin")!;
    expect(exec.description).toBe("Runs a command in a PTY, returning output or a session ID for ongoing interaction.");
    expect(write.description).toBe("Writes characters to an existing unified exec session and returns recent output.");
    expect(exec.inputSchema.required).toEqual(["cmd"]);
    expect(Object.keys(exec.inputSchema.properties!)).toEqual(
      expect.arrayContaining(["cmd", "workdir", "tty", "yield_time_ms", "max_output_tokens"]),
    );
    expect(write.inputSchema.required).toEqual(["session_id"]);
    expect(Object.keys(write.inputSchema.properties!)).toEqual(["session_id", "chars", "yield_time_ms", "max_output_tokens"]);
    expect(exec.outputSchema?.required).toEqual(["wall_time_seconds", "output"]);
  });

  test("a command that ends within its yield time: Codex's result text, the exit code, no session", async () => {
    const ws = workspace();
    const s = await serveIn(ws, false);
    const r = await call(s, "exec_command", { cmd: "echo out; echo err >&2; pwd; exit 3", workdir: ws });
    expect(r.isError).toBe(false);
    expect(r.text).toMatch(
      /^Chunk ID: [0-9a-f]{6}\nWall time: \d+\.\d{4} seconds\nProcess exited with code 3\nOriginal token count: \d+\nOutput:\n/,
    );
    expect(r.output).toBe(`out\nerr\n${ws}\n`);
    expect(r.sessionId).toBeUndefined();
    expect(r.structured).toMatchObject({ exit_code: 3, output: `out\nerr\n${ws}\n` });
    expect(r.structured!.session_id).toBeUndefined();
    // Codex's session environment: no colours, a dumb terminal, pagers that do not wait.
    const env = await call(s, "exec_command", { cmd: 'echo "$TERM|$PAGER|$GIT_PAGER|$NO_COLOR|$LC_ALL"', workdir: ws, login: false });
    expect(env.output).toBe("dumb|cat|cat|1|C.UTF-8\n");
  });

  // Both Linux backends: bubblewrap, and Landlock + seccomp (the helper of this binary).
  for (const [backend, nap] of [
    ["bwrap", 0],
    ["landlock", 10],
  ] as const) {
    const BACKEND: StartOptions = { args: ["--sandbox-backend", backend] };
    test(`${backend}: a dev server started by exec_command answers a later shell call (network on); polls collect its log; Ctrl-C ends it`, async () => {
      const ws = workspace();
      writeFileSync(join(ws, "marker.txt"), "served from the session\n");
      const s = await serveIn(ws, true, BACKEND);
      const port = freePort();
      const r = await call(s, "exec_command", {
        cmd: `python3 -u -m http.server ${port} --bind 127.0.0.1`,
        workdir: ws,
        yield_time_ms: 1000,
      });
      expect(r.isError).toBe(false);
      expect(r.sessionId).toBeGreaterThanOrEqual(1000);
      expect(r.exitCode).toBeUndefined();
      expect(r.structured!.session_id).toBe(r.sessionId);
      const got = await s.shell({
        command: `for i in $(seq 100); do curl -sf http://127.0.0.1:${port}/marker.txt && exit 0; sleep 0.1; done; exit 1`,
        workdir: ws,
        login: false,
        timeout_ms: 60_000,
      });
      expect(got.out.output).toBe("served from the session\n");
      // The server's request log (stderr, merged) reaches the next poll.
      expect((await pollFor(s, r.sessionId!, "GET /marker.txt")).output).toContain("GET /marker.txt");
      // A pipe session's stdin is closed (Codex's words); Ctrl-C is accepted and ends it.
      const w = await call(s, "write_stdin", { session_id: r.sessionId, chars: "hello\n" });
      expect(w.isError).toBe(true);
      expect(w.text).toBe("write_stdin failed: stdin is closed for this session; rerun exec_command with tty=true to keep stdin open");
      const c = await call(s, "write_stdin", { session_id: r.sessionId, chars: "\u0003", yield_time_ms: 3000 });
      const ended = c.exitCode !== undefined ? c : { exitCode: (await pollFor(s, r.sessionId!, "\u0000")).exitCode };
      expect(ended.exitCode).toBeDefined(); // (python's server exits 0 on SIGINT; under bubblewrap the SIGINT ends bwrap first: 130)
      const gone = await call(s, "write_stdin", { session_id: r.sessionId });
      expect(gone.isError).toBe(true);
      expect(gone.text).toBe(`write_stdin failed: Unknown process id ${r.sessionId}`);
    });

    // bubblewrap: every call of the server shares its private loopback network (test/network/loopback-net.test.ts);
    // Landlock: no socket but AF_UNIX can be made with the network off.
    const reach = backend === "bwrap" ? "reachable from a later call (the server's loopback network)" : "not reachable from a later call";
    test(`${backend}: with the network off, a session's server is ${reach}`, async () => {
      const ws = workspace();
      const s = await serveIn(ws, false, BACKEND);
      const port = freePort();
      const r = await call(s, "exec_command", {
        cmd: `python3 -u -m http.server ${port} --bind 127.0.0.1 || echo "no listener: $?"`,
        workdir: ws,
        yield_time_ms: 1000,
      });
      const tries = backend === "bwrap" ? 100 : 1;
      const got = await s.shell({
        command: `for i in $(seq ${tries}); do curl -sf -m 2 -o /dev/null http://127.0.0.1:${port}/; c=$?; [ $c = 0 ] && break; sleep 0.1; done; echo "curl=$c"`,
        workdir: ws,
        login: false,
      });
      expect(got.out.output).toMatch(backend === "bwrap" ? /curl=0/ : /curl=[1-9]/);
      if (r.sessionId !== undefined) await call(s, "write_stdin", { session_id: r.sessionId, chars: "\u0003" });
    });

    test(`${backend}: tty: write_stdin drives an interactive python; EOF ends it with code 0`, async () => {
      const ws = workspace();
      const s = await serveIn(ws, false, BACKEND);
      const r = await call(s, "exec_command", {
        cmd: "test -t 0 && test -t 1 && echo on-a-tty; exec python3 -i -q",
        workdir: ws,
        tty: true,
        yield_time_ms: 1000,
      });
      expect(r.isError).toBe(false);
      expect(r.sessionId).toBeDefined();
      const seen = (await pollFor(s, r.sessionId!, ">>> ", r.output)).output;
      expect(seen).toContain("on-a-tty");
      expect(seen).toContain(">>> ");
      const typed = await call(s, "write_stdin", { session_id: r.sessionId, chars: "print(6*7)\n", yield_time_ms: 2000 });
      expect((await pollFor(s, r.sessionId!, "42", typed.output)).output).toContain("print(6*7)\r\n42\r\n");
      const bye = await call(s, "write_stdin", { session_id: r.sessionId, chars: "\u0004", yield_time_ms: 3000 });
      const exitCode = bye.exitCode ?? (await pollFor(s, r.sessionId!, "\u0000")).exitCode;
      expect(exitCode).toBe(0);
    });

    test(`${backend}: a session's processes stay in the sandbox and obey the rules, also for commands typed later`, async () => {
      const ws = workspace();
      const outside = workspace();
      const s = await serveIn(ws, false, { ...BACKEND, rules: 'prefix_rule(pattern = ["touch"], decision = "forbidden")\n' });
      const r = await call(s, "exec_command", {
        cmd: `echo x > ${outside}/escaped; echo "write=$?"; while read -r line; do eval "$line"; done`,
        workdir: ws,
        tty: true,
        yield_time_ms: 1000,
      });
      expect(r.sessionId).toBeDefined();
      const out = (await pollFor(s, r.sessionId!, "write=", r.output)).output;
      expect(out).toMatch(/write=[1-9]/);
      expect(existsSync(join(outside, "escaped"))).toBe(false);
      const w = await call(s, "write_stdin", {
        session_id: r.sessionId,
        chars: `touch ${ws}/typed; echo "touch=$?"\n`,
        yield_time_ms: 2000,
      });
      const typed = await pollFor(s, r.sessionId!, "touch=", w.output);
      expect(typed.output).toContain("Execution denied: Execution forbidden by policy");
      expect(typed.output).toMatch(/touch=1/);
      expect(existsSync(join(ws, "typed"))).toBe(false);
      // Writes inside the workspace work from the session.
      const w2 = await call(s, "write_stdin", {
        session_id: r.sessionId,
        chars: `echo ok > ${ws}/inside; echo "inside=$?"\n`,
        yield_time_ms: 2000,
      });
      expect((await pollFor(s, r.sessionId!, "inside=", w2.output)).output).toContain("inside=0");
      await call(s, "write_stdin", { session_id: r.sessionId, chars: "\u0004" });
    });

    test(`${backend}: on a terminal, an escalated program's output arrives through a pipe, not the terminal (rooms pass no terminal)`, async () => {
      const ws = workspace();
      expect(Bun.spawnSync(["git", "init", "-q", ws]).exitCode).toBe(0);
      const s = await serveIn(ws, false, { ...BACKEND, rules: 'prefix_rule(pattern = ["stat"], decision = "allow")\n' });
      const r = await call(s, "exec_command", {
        cmd: 'test -t 1 && echo "shell: terminal"; stat -L -c "escalated: %F" /proc/self/fd/1 /proc/self/fd/0',
        workdir: ws,
        tty: true,
        yield_time_ms: 5000,
      });
      const out = (await pollFor(s, r.sessionId ?? 0, "\u0000", r.output, r.exitCode !== undefined ? 0 : 12)).output;
      expect(out).toContain("shell: terminal");
      expect(out).toContain("escalated: fifo");
      expect(out).toContain("escalated: character special file"); // stdin: /dev/null
      expect(out).not.toContain("escalated: character special file\r\nescalated: character special file");
    });

    test(`${backend}: closing the client ends every session's processes (pipe and tty)`, async () => {
      const ws = workspace();
      const s = await serveIn(ws, false, BACKEND);
      const a = await call(s, "exec_command", { cmd: `${NAP(106 + nap)}`, workdir: ws, yield_time_ms: 250 });
      const b = await call(s, "exec_command", {
        cmd: `(setsid ${NAP(107 + nap)} &); ${NAP(108 + nap)}`,
        workdir: ws,
        tty: true,
        yield_time_ms: 250,
      });
      expect(a.sessionId).toBeDefined();
      expect(b.sessionId).toBeDefined();
      await s.close();
      for (const n of [106, 107, 108]) expect(await noProcessLeft(NAP(n + nap))).toEqual([]);
    });
  }

  test("a prompt rule inside a session asks the human after exec_command has returned; accepted, the program runs", async () => {
    const ws = workspace();
    expect(Bun.spawnSync(["git", "init", "-q", ws]).exitCode).toBe(0); // an escalated program's room writes its repository
    const s = await serve({
      rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n',
      onElicit: (message) => ({ action: message.includes("late.txt") ? "accept" : "decline" }),
    });
    const r = await call(s, "exec_command", {
      cmd: 'while read -r line; do eval "$line"; done',
      workdir: ws,
      tty: true,
      yield_time_ms: 250,
    });
    expect(r.sessionId).toBeDefined();
    expect(s.elicitations).toEqual([]);
    const w = await call(s, "write_stdin", {
      session_id: r.sessionId,
      chars: 'touch late.txt; echo "late=$?"; touch other.txt; echo "other=$?"\n',
      yield_time_ms: 2000,
    });
    const out = (await pollFor(s, r.sessionId!, "other=", w.output)).output;
    expect(out).toContain("late=0");
    expect(out).toContain("Execution denied: User declined execution");
    expect(s.elicitations[0]).toBe(`Allow agent to run \`/usr/bin/touch late.txt\` in \`${ws}\`?`);
    expect(existsSync(join(ws, "late.txt"))).toBe(true);
    expect(existsSync(join(ws, "other.txt"))).toBe(false);
    await call(s, "write_stdin", { session_id: r.sessionId, chars: "\u0004" });
  });

  test("list_sessions lists the open sessions and ends those named in kill", async () => {
    const ws = workspace();
    const s = await serveIn(ws, false);
    const a = await call(s, "exec_command", { cmd: NAP(111), workdir: ws, yield_time_ms: 250 });
    const b = await call(s, "exec_command", { cmd: `echo waiting; ${NAP(112)}`, workdir: ws, tty: true, yield_time_ms: 250 });
    const text = async (args: Record<string, unknown>) =>
      ((await s.client.callTool({ name: "list_sessions", arguments: args })).content as { text: string }[])[0]!.text;
    const listed = await text({});
    expect(listed).toContain("Open sessions (2 of at most 16):");
    expect(listed).toContain(`- session ID ${a.sessionId}: running, pipes, last call`);
    expect(listed).toContain(`command: ${NAP(111)}`);
    expect(listed).toContain(`- session ID ${b.sessionId}: running, tty, last call`);
    const after = await text({ kill: [a.sessionId, 7] });
    expect(after).toContain(`Session ${a.sessionId} ended.`);
    expect(after).toContain("No open session 7.");
    expect(after).not.toContain(`session ID ${a.sessionId}:`);
    expect(await noProcessLeft(NAP(111))).toEqual([]);
    const gone = await call(s, "write_stdin", { session_id: a.sessionId });
    expect(gone.text).toBe(
      `write_stdin failed: Unknown process id ${a.sessionId}: the session was ended by list_sessions (kill) (open sessions: ${b.sessionId} (tty): echo waiting; ${NAP(112)})`,
    );
    await text({ kill: [b.sessionId] });
    expect(await noProcessLeft(NAP(112))).toEqual([]);
    expect(await text({})).toBe("No session is open.");
  });

  test("bounds: the session count, the idle limit and the output buffer, each with a clear message", async () => {
    const ws = workspace();
    const s = await serveIn(ws, false, { args: ["--max-sessions", "1", "--session-idle-timeout-ms", "1500"] });
    const first = await call(s, "exec_command", { cmd: NAP(109), workdir: ws, yield_time_ms: 250 });
    expect(first.sessionId).toBeDefined();
    const second = await call(s, "exec_command", { cmd: "echo never", workdir: ws, yield_time_ms: 250 });
    expect(second.isError).toBe(true);
    expect(second.text).toContain("exec_command failed: shellmcp keeps at most 1 sessions at once and 1 are open");
    expect(second.text).toContain(`${first.sessionId}: ${NAP(109)}`);
    expect(second.text).toContain("--max-sessions");
    // Idle: no call for longer than the limit ends the session, and the next call is told why.
    await Bun.sleep(3000);
    const late = await call(s, "write_stdin", { session_id: first.sessionId });
    expect(late.isError).toBe(true);
    expect(late.text).toContain(
      `write_stdin failed: Unknown process id ${first.sessionId}: shellmcp ended this session after 1.5 s without`,
    );
    expect(await noProcessLeft(NAP(109))).toEqual([]);
    // Output beyond the 1 MiB kept between calls: head and tail, Codex's marker in between.
    const big = await call(s, "exec_command", {
      cmd: `head -c 3000000 /dev/zero | tr '\\0' a; echo; echo END; ${NAP(110)}`,
      workdir: ws,
      yield_time_ms: 5000,
      max_output_tokens: 10_000_000,
    });
    expect(big.sessionId).toBeDefined();
    const all = await pollFor(s, big.sessionId!, "END", big.output);
    expect(all.output).toMatch(/\.\.\. \d+ bytes omitted \.\.\./);
    expect(all.output).toContain("\nEND\n");
    // The model-facing budget: a small max_output_tokens cuts the middle with Codex's warning.
    await call(s, "write_stdin", { session_id: big.sessionId, chars: "\u0003" });
    const cut = await call(s, "exec_command", { cmd: "seq 1 5000", workdir: ws, max_output_tokens: 100 });
    expect(cut.output).toMatch(/^Warning: truncated output \(original token count: \d+\)\nTotal output lines: \d+\n/);
    expect(cut.output).toMatch(/…\d+ tokens truncated…/);
    expect(cut.output.endsWith("5000\n")).toBe(true);
  });
});
