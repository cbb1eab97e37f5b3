/**
 * Codex's unified exec tools as MCP tools (the shared spec notes on unified exec, unified-exec.md §1–§3; docs/sessions.md): `exec_command` runs a
 * command and returns its output, or a session id when it is still running at the end of its yield time;
 * `write_stdin` types into a session (or polls it) and returns the output since the previous call. Names, fields,
 * defaults, clamps and the result text are Codex's, so that models trained on Codex use them unprompted; the
 * session machinery is ../shell/session-manager.ts, the launch (sandbox, rules, network) ../serve/call.ts.
 */
import { blockedMeta, type BlockedLog } from "../blocked/report.ts";
import { resultIsError } from "./shell-tool.ts";
import { isAbsolute, join } from "node:path";
import { ShellmcpError } from "../errors.ts";
import type { ToolDefinition, ToolResult } from "./server.ts";

/** `exec_command`'s default yield time, ms (Codex: 10000). */
export const EXEC_YIELD_DEFAULT_MS = 10_000;
/** Shortest yield time of `exec_command` and of a non-empty `write_stdin`, ms (Codex: 250). */
export const YIELD_MIN_MS = 250;
/** Longest yield time of `exec_command` and of a non-empty `write_stdin`, ms (Codex: 30000). */
export const YIELD_MAX_MS = 30_000;
/** `write_stdin`'s default yield time for a non-empty write, ms (Codex: 250). */
export const WRITE_YIELD_DEFAULT_MS = 250;
/** An empty poll waits at least this long, ms (Codex: 5000). */
export const POLL_MIN_MS = 5_000;
/** An empty poll waits at most this long, ms (Codex's `background_terminal_max_timeout` default, 300000). */
export const POLL_MAX_MS = 300_000;
/** Default `max_output_tokens` (Codex: 10000), at about 4 bytes per token. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 10_000;
const BYTES_PER_TOKEN = 4;

/** Codex's output schema of both tools (§3.2). */
const OUTPUT_SCHEMA = {
  type: "object",
  properties: {
    chunk_id: { type: "string", description: "Chunk identifier included when the response reports one." },
    wall_time_seconds: { type: "number", description: "Elapsed wall time spent waiting for output in seconds." },
    exit_code: { type: "number", description: "Process exit code when the command finished during this call." },
    session_id: { type: "number", description: "Session identifier to pass to write_stdin when the process is still running." },
    original_token_count: { type: "number", description: "Approximate token count before output truncation." },
    output: { type: "string", description: "Command output text, possibly truncated." },
  },
  required: ["wall_time_seconds", "output"],
  additionalProperties: false,
};

/** `exec_command` as Codex lists it (its PTY-era description; `tty` defaults to pipes), without `shell`: the patched shell is fixed. */
export const EXEC_COMMAND_TOOL: ToolDefinition = {
  name: "exec_command",
  description: "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
  inputSchema: {
    type: "object",
    properties: {
      cmd: { type: "string", description: "Shell command to execute." },
      workdir: {
        type: "string",
        description: "Optional working directory to run the command in; defaults to the turn cwd.",
      },
      tty: {
        type: "boolean",
        description:
          "Whether to allocate a TTY for the command. Defaults to false (plain pipes); set to true to open a PTY and access TTY process.",
      },
      yield_time_ms: { type: "number", description: "How long to wait (in milliseconds) for output before yielding." },
      max_output_tokens: { type: "number", description: "Maximum number of tokens to return. Excess output will be truncated." },
      login: { type: "boolean", description: "Whether to run the shell with -l/-i semantics. Defaults to true." },
    },
    required: ["cmd"],
    additionalProperties: false,
  },
  outputSchema: OUTPUT_SCHEMA,
};

/** `write_stdin` as Codex lists it. */
export const WRITE_STDIN_TOOL: ToolDefinition = {
  name: "write_stdin",
  description: "Writes characters to an existing unified exec session and returns recent output.",
  inputSchema: {
    type: "object",
    properties: {
      session_id: { type: "number", description: "Identifier of the running unified exec session." },
      chars: { type: "string", description: "Bytes to write to stdin (may be empty to poll)." },
      yield_time_ms: {
        type: "number",
        description:
          "How long to wait (in milliseconds) for output before yielding. Non-empty writes default to 250 ms and cap at 30000 ms; empty polls wait 5000-300000 ms by default.",
      },
      max_output_tokens: { type: "number", description: "Maximum number of tokens to return. Excess output will be truncated." },
    },
    required: ["session_id"],
    additionalProperties: false,
  },
  outputSchema: OUTPUT_SCHEMA,
};

/**
 * `list_sessions`: not one of Codex's tools (Codex lists and ends background terminals in its UI, `/stop`); here the
 * model (or the user through it) can see the open sessions and end some.
 */
export const LIST_SESSIONS_TOOL: ToolDefinition = {
  name: "list_sessions",
  description:
    "Lists the exec_command sessions that are still open (session ID, command, tty or pipes, running or exited, seconds since the last call, output waiting) and ends those whose session IDs are given in `kill` (every process of the session).",
  inputSchema: {
    type: "object",
    properties: {
      kill: { type: "array", items: { type: "number" }, description: "Session IDs to end before listing." },
    },
    additionalProperties: false,
  },
};

/** Parse `list_sessions` arguments: `kill`, an optional list of integer session ids. Throws `USAGE`. */
export function parseListSessionsArgs(args: Record<string, unknown> | undefined): { kill: number[] } {
  const k = (args ?? {}).kill;
  if (k === undefined || k === null) return { kill: [] };
  if (!Array.isArray(k) || !k.every((x) => typeof x === "number" && Number.isInteger(x)))
    throw bad("`kill` must be a list of session IDs (integers)");
  return { kill: k as number[] };
}

/** Validated `exec_command` arguments (`yieldMs` clamped; `workdir` absolute). */
export interface ExecCommandArgs {
  cmd: string;
  workdir: string;
  tty: boolean;
  login: boolean;
  yieldMs: number;
  maxOutputTokens: number;
}

/** Validated `write_stdin` arguments (`yieldMs` clamped per Codex's rules for writes and polls). */
export interface WriteStdinArgs {
  sessionId: number;
  chars: string;
  yieldMs: number;
  maxOutputTokens: number;
}

function bad(detail: string): ShellmcpError {
  return new ShellmcpError("USAGE", `failed to parse function arguments: ${detail}`);
}

function num(a: Record<string, unknown>, k: string): number | undefined {
  const v = a[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v)) throw bad(`\`${k}\` must be a number`);
  return v;
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}

/**
 * Parse `exec_command` arguments: `cmd` required; `workdir` relative to `cwd` (the turn's cwd: the sandbox state's,
 * else the server's), empty meaning `cwd`; `yield_time_ms` clamped to 250–30000 (default 10000). Throws `USAGE`.
 */
export function parseExecCommandArgs(args: Record<string, unknown> | undefined, cwd: string): ExecCommandArgs {
  const a = args ?? {};
  if (typeof a.cmd !== "string") throw bad(a.cmd === undefined ? "missing field `cmd`" : "`cmd` must be a string");
  if (a.workdir !== undefined && a.workdir !== null && typeof a.workdir !== "string") throw bad("`workdir` must be a string");
  for (const k of ["tty", "login"])
    if (a[k] !== undefined && a[k] !== null && typeof a[k] !== "boolean") throw bad(`\`${k}\` must be a boolean`);
  const w = typeof a.workdir === "string" && a.workdir !== "" ? a.workdir : cwd;
  return {
    cmd: a.cmd,
    workdir: isAbsolute(w) ? w : join(cwd, w),
    tty: a.tty === true,
    login: a.login !== false,
    yieldMs: clamp(num(a, "yield_time_ms") ?? EXEC_YIELD_DEFAULT_MS, YIELD_MIN_MS, YIELD_MAX_MS),
    maxOutputTokens: Math.max(0, Math.floor(num(a, "max_output_tokens") ?? DEFAULT_MAX_OUTPUT_TOKENS)),
  };
}

/**
 * Parse `write_stdin` arguments: `session_id` required (an integer); `chars` default empty; `yield_time_ms`
 * default 250 and clamped to 250–30000 for a write, clamped to 5000–300000 for an empty poll. Throws `USAGE`.
 */
export function parseWriteStdinArgs(args: Record<string, unknown> | undefined): WriteStdinArgs {
  const a = args ?? {};
  const id = num(a, "session_id");
  if (id === undefined) throw bad("missing field `session_id`");
  if (!Number.isInteger(id)) throw bad("`session_id` must be an integer");
  if (a.chars !== undefined && a.chars !== null && typeof a.chars !== "string") throw bad("`chars` must be a string");
  const chars = typeof a.chars === "string" ? a.chars : "";
  const y = num(a, "yield_time_ms") ?? WRITE_YIELD_DEFAULT_MS;
  return {
    sessionId: id,
    chars,
    yieldMs: chars === "" ? clamp(y, POLL_MIN_MS, POLL_MAX_MS) : clamp(y, YIELD_MIN_MS, YIELD_MAX_MS),
    maxOutputTokens: Math.max(0, Math.floor(num(a, "max_output_tokens") ?? DEFAULT_MAX_OUTPUT_TOKENS)),
  };
}

/** What one call reports (§3.1/§3.2). */
export interface UnifiedResult {
  wallMs: number;
  output: string;
  /** Bytes collected in this call's window (dropped ones included). */
  bytes: number;
  exitCode?: number;
  sessionId?: number;
  maxOutputTokens: number;
  /** With `exitCode`: what the session's command had refused (../blocked/report.ts; its lines are in `output`). */
  blocked?: BlockedLog;
}

/**
 * Cut `output` to `maxTokens` (about 4 bytes a token) as Codex does: the middle replaced by `…N tokens truncated…`,
 * prefixed with "Warning: truncated output (original token count: N)" and "Total output lines: N".
 */
export function truncateForModel(output: string, maxTokens: number): string {
  const budget = maxTokens * BYTES_PER_TOKEN;
  const size = Buffer.byteLength(output);
  if (size <= budget) return output;
  const half = Math.floor(budget / 2);
  const head = Buffer.from(output)
    .subarray(0, half)
    .toString("utf8")
    .replace(/\uFFFD$/, "");
  const tail = Buffer.from(output)
    .subarray(size - half)
    .toString("utf8")
    .replace(/^\uFFFD/, "");
  const cutTokens = Math.ceil((size - Buffer.byteLength(head) - Buffer.byteLength(tail)) / BYTES_PER_TOKEN);
  const lines = output.split("\n").length;
  return `Warning: truncated output (original token count: ${Math.ceil(size / BYTES_PER_TOKEN)})\nTotal output lines: ${lines}\n\n${head}…${cutTokens} tokens truncated…${tail}`;
}

/**
 * The tool result: Codex's text (§3.1) and the same fields as `structuredContent` (§3.2). `isError` false, as Codex,
 * except for the result that reports a session's end after something it tried was refused (`blocked`, the rule of
 * ./shell-tool.ts `resultIsError`), which also carries `_meta["shellmcp/blocked"]`.
 */
export function formatUnifiedResult(r: UnifiedResult): ToolResult {
  const chunkId = Math.floor(Math.random() * 0x1000000)
    .toString(16)
    .padStart(6, "0");
  const wall = r.wallMs / 1000;
  const tokens = Math.ceil(r.bytes / BYTES_PER_TOKEN);
  const output = truncateForModel(r.output, r.maxOutputTokens);
  const lines = [`Chunk ID: ${chunkId}`, `Wall time: ${wall.toFixed(4)} seconds`];
  if (r.exitCode !== undefined) lines.push(`Process exited with code ${r.exitCode}`);
  if (r.sessionId !== undefined) lines.push(`Process running with session ID ${r.sessionId}`);
  lines.push(`Original token count: ${tokens}`, "Output:", output);
  const structured: Record<string, unknown> = { chunk_id: chunkId, wall_time_seconds: wall };
  if (r.exitCode !== undefined) structured.exit_code = r.exitCode;
  if (r.sessionId !== undefined) structured.session_id = r.sessionId;
  structured.original_token_count = tokens;
  structured.output = output;
  const meta = r.blocked === undefined ? undefined : blockedMeta(r.blocked);
  return {
    content: [{ type: "text", text: lines.join("\n") }],
    structuredContent: structured,
    isError: r.blocked !== undefined && resultIsError({ timedOut: false, cancelled: false }, r.blocked),
    ...(meta === undefined ? {} : { _meta: meta }),
  };
}

/** A failure in Codex's words: `<tool> failed: <message>` as an error result (§3.4). */
export function unifiedError(tool: "exec_command" | "write_stdin", message: string): ToolResult {
  return { content: [{ type: "text", text: `${tool} failed: ${message}` }], isError: true };
}
