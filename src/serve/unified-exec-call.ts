/**
 * `exec_command` and `write_stdin` calls of `serve` (Codex's unified exec, ../mcp/unified-exec.ts): a session's
 * command is started exactly as a `shell` call's ({@link launchCommand}: the same sandbox state, launcher, rules,
 * escalation rooms, network policy and git guard), detached, and kept in the server's {@link SessionManager}.
 */
import { blockedText } from "../blocked/report.ts";
import * as libc from "../../ffi/libc.ts";
import { log } from "../log.ts";
import type { ModernToolContext } from "../mcp/modern.ts";
import { sandboxStateFromMeta, type SandboxState } from "../mcp/sandbox-state.ts";
import type { ToolContext, ToolResult } from "../mcp/server.ts";
import {
  formatUnifiedResult,
  parseExecCommandArgs,
  parseListSessionsArgs,
  parseWriteStdinArgs,
  unifiedError,
} from "../mcp/unified-exec.ts";
import { SessionError, type SessionManager } from "../shell/session-manager.ts";
import { launchCommand, type ServeRuntime } from "./call.ts";

/** A session's command has no timeout of its own: it ends by itself, by `"\u0003"`, at the idle limit or with the server. */
const SESSION_TIMEOUT_MS = Number.MAX_SAFE_INTEGER;

/**
 * One `exec_command` call: start `cmd` in a new session and wait `yield_time_ms` (clamped 250–30000) or until it
 * ends. Codex's result text; "Process running with session ID N" while it runs. Refusals (the session bound, a
 * sandbox that cannot be built, a bad workdir) are `isError` results "exec_command failed: …". Throws `USAGE`
 * for malformed arguments.
 */
export async function handleExecCommand(
  rt: ServeRuntime & { unified: SessionManager },
  state: SandboxState,
  args: Record<string, unknown> | undefined,
  ctx: ToolContext,
): Promise<ToolResult> {
  const t0 = performance.now();
  let turn = state;
  try {
    turn = sandboxStateFromMeta(ctx.meta) ?? state;
  } catch {
    // launchCommand reports a malformed per-call state
  }
  const a = parseExecCommandArgs(args, turn.sandboxCwd ?? process.cwd());
  const sessions = rt.unified;
  let id: number;
  try {
    id = sessions.open(a.cmd, a.tty);
  } catch (e) {
    if (e instanceof SessionError) return unifiedError("exec_command", e.message);
    throw e;
  }
  let pty: libc.PtyPair | undefined;
  if (a.tty) {
    try {
      // Left blocking: the terminal's reader needs it so; input is written in small pieces only when there is room
      // (../shell/session-manager.ts `writeAll`), so a program that does not read cannot block the server.
      pty = libc.openPty();
    } catch (e) {
      if (pty !== undefined) [pty.master, pty.slave].forEach(libc.closeQuiet);
      sessions.abandon(id);
      return unifiedError("exec_command", `cannot open a pseudo-terminal: ${(e as Error).message}`);
    }
  }
  const kill = new AbortController();
  let interrupt: () => void = () => undefined;
  let launched: Awaited<ReturnType<typeof launchCommand>>;
  try {
    launched = await launchCommand(rt, state, { command: a.cmd, workdir: a.workdir, login: a.login, timeoutMs: SESSION_TIMEOUT_MS }, ctx, {
      signal: kill.signal,
      terminal: pty,
      onOutput: (chunk) => sessions.output(id, chunk),
      onStarted: (c) => (interrupt = c.interrupt),
    });
  } catch (e) {
    sessions.abandon(id);
    if (pty !== undefined) [pty.master, pty.slave].forEach(libc.closeQuiet);
    return unifiedError("exec_command", (e as Error).message);
  }
  if ("content" in launched) {
    sessions.abandon(id);
    if (pty !== undefined) [pty.master, pty.slave].forEach(libc.closeQuiet);
    return unifiedError("exec_command", launched.content.map((c) => c.text).join("\n"));
  }
  sessions.attach(id, {
    kill: () => kill.abort(),
    interrupt: () => interrupt(),
    terminalFd: pty?.master,
    ended: launched.done.then(({ r, notice, stale, refused, blocked }) => ({
      exitCode: r.exitCode,
      trailer:
        (r.spawnError !== undefined ? `${r.spawnError}\n` : "") +
        refused +
        (stale !== undefined ? `${stale}\n` : "") +
        notice +
        blockedText(blocked),
      blocked,
    })),
  });
  // Modern era: approvals the command meets after this call is answered are asked on the next request about it.
  (ctx as ToolContext & Pick<ModernToolContext, "session">).session?.(id);
  log.info("session started", { id, tty: a.tty, workdir: a.workdir });
  return collect(sessions, id, a.yieldMs, "", a.maxOutputTokens, t0, "exec_command");
}

/**
 * One `write_stdin` call: write `chars` to session `session_id` (a terminal session; `"\u0003"` interrupts any) or
 * poll it, and return the output since the previous call. Codex's errors as `isError` results ("write_stdin
 * failed: Unknown process id N", "… stdin is closed for this session; …"). Throws `USAGE` for malformed arguments.
 */
export async function handleWriteStdin(
  rt: ServeRuntime & { unified: SessionManager },
  args: Record<string, unknown> | undefined,
  ctx?: ToolContext,
): Promise<ToolResult> {
  const t0 = performance.now();
  const a = parseWriteStdinArgs(args);
  // Modern era: a call parked for a human's approval drains nothing unless it is retried (ModernToolContext.carried).
  const carried = (ctx as (ToolContext & Partial<Pick<ModernToolContext, "carried">>) | undefined)?.carried;
  return collect(rt.unified, a.sessionId, a.yieldMs, a.chars, a.maxOutputTokens, t0, "write_stdin", carried);
}

async function collect(
  sessions: SessionManager,
  id: number,
  yieldMs: number,
  chars: string,
  maxOutputTokens: number,
  t0: number,
  tool: "exec_command" | "write_stdin",
  carried?: () => Promise<boolean>,
): Promise<ToolResult> {
  try {
    const c = await sessions.collect(id, yieldMs, chars, carried);
    return formatUnifiedResult({
      wallMs: performance.now() - t0,
      output: c.output,
      bytes: c.bytes,
      exitCode: c.exitCode,
      sessionId: c.exitCode === undefined ? id : undefined,
      maxOutputTokens,
      blocked: c.blocked,
    });
  } catch (e) {
    if (e instanceof SessionError) return unifiedError(tool, e.message);
    throw e;
  }
}

/**
 * One `list_sessions` call: end the sessions named in `kill` (unknown ids are reported, not an error), then list the
 * open ones, one line each. Throws `USAGE` for malformed arguments.
 */
export function handleListSessions(rt: { unified: SessionManager }, args: Record<string, unknown> | undefined): ToolResult {
  const a = parseListSessionsArgs(args);
  const lines: string[] = [];
  for (const id of a.kill) lines.push(rt.unified.kill(id) ? `Session ${id} ended.` : `No open session ${id}.`);
  const open = rt.unified.list();
  lines.push(open.length === 0 ? "No session is open." : `Open sessions (${open.length} of at most ${rt.unified.limits.maxSessions}):`);
  for (const s of open)
    lines.push(
      `- session ID ${s.id}: ${s.running ? "running" : "exited (its end is reported by the next write_stdin)"}, ${s.tty ? "tty" : "pipes"}, ` +
        `last call ${s.idleSeconds} s ago, ${s.bufferedBytes} bytes of output waiting; command: ${s.command}`,
    );
  return { content: [{ type: "text", text: lines.join("\n") }], isError: false };
}
