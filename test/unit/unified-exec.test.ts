/**
 * Pure logic of sessions (issue 31): Codex's argument defaults and clamps, the result text, the model-facing
 * truncation, and the session manager's buffer, bounds and errors with a stand-in process.
 */
import { describe, expect, test } from "bun:test";
import {
  formatUnifiedResult,
  parseExecCommandArgs,
  parseListSessionsArgs,
  parseWriteStdinArgs,
  truncateForModel,
} from "../../src/mcp/unified-exec.ts";
import { SessionError, SessionManager, type SessionProcess } from "../../src/shell/session-manager.ts";

const LIMITS = { maxSessions: 2, maxBufferedBytes: 16, idleTimeoutMs: 60_000 };

/** A stand-in process: `end(code)` ends it; `killed` counts kills. */
function fakeProcess(): SessionProcess & { end: (code: number) => void; killed: number; interrupted: number } {
  let end!: (code: number) => void;
  const p = {
    killed: 0,
    interrupted: 0,
    kill: () => {
      p.killed++;
      end(137);
    },
    interrupt: () => void p.interrupted++,
    ended: new Promise<{ exitCode: number; trailer: string }>((r) => (end = (exitCode) => r({ exitCode, trailer: "" }))),
    end: (code: number) => end(code),
  };
  return p;
}

describe("arguments (Codex's defaults and clamps)", () => {
  test("exec_command: defaults, workdir relative to the turn's cwd, yield clamped to 250–30000", () => {
    expect(parseExecCommandArgs({ cmd: "ls" }, "/w")).toEqual({
      cmd: "ls",
      workdir: "/w",
      tty: false,
      login: true,
      yieldMs: 10_000,
      maxOutputTokens: 10_000,
    });
    expect(parseExecCommandArgs({ cmd: "ls", workdir: "sub", yield_time_ms: 1 }, "/w")).toMatchObject({ workdir: "/w/sub", yieldMs: 250 });
    expect(parseExecCommandArgs({ cmd: "ls", workdir: "", yield_time_ms: 10 ** 9, tty: true }, "/w")).toMatchObject({
      workdir: "/w",
      yieldMs: 30_000,
      tty: true,
    });
    expect(() => parseExecCommandArgs({}, "/w")).toThrow("missing field `cmd`");
    expect(() => parseExecCommandArgs({ cmd: "x", tty: "yes" }, "/w")).toThrow("`tty` must be a boolean");
  });

  test("write_stdin: a write defaults to 250 ms (250–30000), a poll waits 5000–300000", () => {
    expect(parseWriteStdinArgs({ session_id: 1234, chars: "x" })).toEqual({
      sessionId: 1234,
      chars: "x",
      yieldMs: 250,
      maxOutputTokens: 10_000,
    });
    expect(parseWriteStdinArgs({ session_id: 1234 }).yieldMs).toBe(5000);
    expect(parseWriteStdinArgs({ session_id: 1234, yield_time_ms: 10 ** 9 }).yieldMs).toBe(300_000);
    expect(parseWriteStdinArgs({ session_id: 1234, chars: "x", yield_time_ms: 10 ** 9 }).yieldMs).toBe(30_000);
    expect(() => parseWriteStdinArgs({})).toThrow("missing field `session_id`");
    expect(() => parseWriteStdinArgs({ session_id: 1.5 })).toThrow("integer");
    expect(parseListSessionsArgs({ kill: [1, 2] })).toEqual({ kill: [1, 2] });
    expect(() => parseListSessionsArgs({ kill: ["1"] })).toThrow("session IDs");
  });
});

describe("results", () => {
  test("Codex's text lines in order, and the same fields structured", () => {
    const r = formatUnifiedResult({ wallMs: 1234.56789, output: "hi\n", bytes: 3, sessionId: 4321, maxOutputTokens: 100 });
    expect(r.content[0]!.text).toMatch(
      /^Chunk ID: [0-9a-f]{6}\nWall time: 1\.2346 seconds\nProcess running with session ID 4321\nOriginal token count: 1\nOutput:\nhi\n$/,
    );
    expect(r.structuredContent).toMatchObject({ session_id: 4321, original_token_count: 1, output: "hi\n" });
    expect(r.structuredContent!.wall_time_seconds).toBeCloseTo(1.23456789, 6);
    expect(r.isError).toBe(false);
    const done = formatUnifiedResult({ wallMs: 5, output: "", bytes: 0, exitCode: 2, maxOutputTokens: 100 });
    expect(done.content[0]!.text).toContain("\nProcess exited with code 2\nOriginal token count: 0\nOutput:\n");
    expect(done.structuredContent!.session_id).toBeUndefined();
  });

  test("over max_output_tokens: the middle is cut with Codex's markers, head and tail kept", () => {
    const out = Array.from({ length: 100 }, (_, i) => `line ${i}`).join("\n");
    const t = truncateForModel(out, 10);
    expect(
      t.startsWith(`Warning: truncated output (original token count: ${Math.ceil(out.length / 4)})\nTotal output lines: 100\n\nline 0`),
    ).toBe(true);
    expect(t).toMatch(/…\d+ tokens truncated…/);
    expect(t.endsWith("line 99")).toBe(true);
    expect(truncateForModel("short", 10)).toBe("short");
  });
});

describe("SessionManager", () => {
  test("output between calls is drained; past the buffer, head and tail with Codex's omitted marker", async () => {
    const m = new SessionManager(LIMITS);
    const id = m.open("cmd", false);
    expect(id).toBeGreaterThanOrEqual(1000);
    expect(id).toBeLessThan(100_000);
    const p = fakeProcess();
    m.attach(id, p);
    m.output(id, new TextEncoder().encode("0123456789abcdefghijklmnopqrstuvwxyz"));
    const c = await m.collect(id, 1);
    expect(c).toEqual({ output: "01234567\n... 20 bytes omitted ...\nstuvwxyz", bytes: 36 });
    expect((await m.collect(id, 1)).output).toBe("");
    p.end(3);
    expect(await m.collect(id, 60_000)).toEqual({ output: "", bytes: 0, exitCode: 3 });
    expect(() => m.collect(id, 1)).toThrow(`Unknown process id ${id}`);
  });

  test("the count bound names the open sessions; a pipe session refuses input but takes Ctrl-C", async () => {
    const m = new SessionManager(LIMITS);
    const a = m.open("sleep 1", false);
    const pa = fakeProcess();
    m.attach(a, pa);
    m.open("sleep 2", true);
    expect(() => m.open("sleep 3", false)).toThrow(SessionError);
    expect(() => m.open("sleep 3", false)).toThrow(`shellmcp keeps at most 2 sessions at once and 2 are open (${a}: sleep 1;`);
    await expect(m.collect(a, 1, "y\n")).rejects.toThrow(
      "stdin is closed for this session; rerun exec_command with tty=true to keep stdin open",
    );
    await m.collect(a, 1, "\u0003");
    expect(pa.interrupted).toBe(1);
    expect(m.kill(a)).toBe(true);
    expect(pa.killed).toBe(1);
    await expect(m.collect(a, 1)).rejects.toThrow(`Unknown process id ${a}: the session was ended by list_sessions (kill)`);
  });

  test("the idle limit kills a session and says so; closeAll kills the rest and refuses new ones", async () => {
    const m = new SessionManager({ ...LIMITS, idleTimeoutMs: 20 });
    const id = m.open("idle", false);
    const p = fakeProcess();
    m.attach(id, p);
    await p.ended; // the idle timer kills it
    expect(p.killed).toBe(1);
    await expect(m.collect(id, 1)).rejects.toThrow(
      `Unknown process id ${id}: shellmcp ended this session after 0 s without an exec_command or write_stdin call`,
    );
    const n = new SessionManager(LIMITS);
    const q = fakeProcess();
    n.attach(n.open("x", false), q);
    await n.closeAll();
    expect(q.killed).toBe(1);
    expect(() => n.open("y", false)).toThrow("the server is shutting down");
  });
});
