/**
 * The `shell` tool: the same name, description and input schema as Codex's shell-tool MCP (docs/escalation.md,
 * "The `shell` tool", key order included), a result with the same text JSON (`exit_code`, `output`, `duration {secs, nanos}`,
 * `timed_out`), plus `structuredContent` with the same fields and a matching `outputSchema`.
 */
import { isAbsolute, resolve } from "node:path";
import { ShellmcpError } from "../errors.ts";
import type { RunCommandResult } from "../shell/run-command.ts";
import type { ToolDefinition, ToolResult } from "./server.ts";
import { blockedMeta, blockedText, type BlockedLog } from "../blocked/report.ts";

/** Default timeout of a call, ms (Codex's); `serve --default-timeout-ms` or `[shellmcp] default_timeout_ms` change it. */
export const DEFAULT_TIMEOUT_MS = 10_000;

/** Codex's own description of the tool, to which {@link shellTool} appends the timeout and the session hint. */
export const CODEX_SHELL_DESCRIPTION = "Runs a shell command and returns its output. You MUST provide the workdir as an absolute path.";

/**
 * The description as listed: Codex's sentence, then the default timeout (`defaultTimeoutMs`, ms) and that long
 * work belongs in a session (`exec_command`, issue 31), then `sandbox` when given (what is in effect for this server,
 * ./sandbox-summary.ts; issue 41). The input schema stays Codex's byte for byte.
 */
export function shellDescription(defaultTimeoutMs: number, sandbox?: string): string {
  return (
    `${CODEX_SHELL_DESCRIPTION} The command is stopped after ${defaultTimeoutMs} ms (${formatSeconds(defaultTimeoutMs)}) unless timeout_ms says otherwise; ` +
    "for long-running work (dev servers, watchers, long builds, installs, test suites) use exec_command, which keeps the process " +
    "running in a session and returns its session ID (write_stdin polls it or types into it)." +
    (sandbox === undefined || sandbox === "" ? "" : ` ${sandbox}`)
  );
}

function formatSeconds(ms: number): string {
  const s = ms / 1000;
  return s >= 120 && Number.isInteger(s / 60) ? `${s / 60} minutes` : `${Number(s.toFixed(3))} s`;
}

/**
 * The tool as Codex lists it (input schema byte for byte), with {@link shellDescription} (`sandbox`: the sandbox
 * summary, ./sandbox-summary.ts), plus our `outputSchema`.
 */
export function shellTool(defaultTimeoutMs: number = DEFAULT_TIMEOUT_MS, sandbox?: string): ToolDefinition {
  return { ...SHELL_TOOL, description: shellDescription(defaultTimeoutMs, sandbox) };
}

/**
 * Whether an MCP client is Codex, from the `clientInfo.name` it sent in `initialize` (Codex 0.97 and 0.169 both send
 * `codex-mcp-client`; Codex's exec-server and app-server clients also start with `codex`).
 */
export function isCodexClient(clientName: string | undefined): boolean {
  return clientName !== undefined && clientName.startsWith("codex");
}

/**
 * The `shell` tool as listed to the client named `clientName` (its `clientInfo.name`, undefined when unknown):
 * Codex, and a client that did not say who it is, get {@link shellTool} — Codex's input schema byte for byte.
 * Every other client gets the same schema without `format: "uint64"` on `timeout_ms`: that format is Rust's
 * (schemars) and no JSON Schema format, so validators that check formats warn about it (Gemini CLI 0.61 prints
 * `unknown format "uint64" ignored in schema at path "#/properties/timeout_ms"` each time it validates a call);
 * `type: "integer"` and `minimum: 0` still say the same. Codex itself drops `format` before the model sees the tool.
 * `sandbox`: the sandbox summary for that client (./sandbox-summary.ts), appended to the description only.
 */
export function shellToolFor(
  clientName: string | undefined,
  defaultTimeoutMs: number = DEFAULT_TIMEOUT_MS,
  sandbox?: string,
): ToolDefinition {
  const tool = shellTool(defaultTimeoutMs, sandbox);
  if (clientName === undefined || isCodexClient(clientName)) return tool;
  const props = tool.inputSchema.properties as Record<string, Record<string, unknown>>;
  const { format: _uint64, ...timeout } = props.timeout_ms!;
  return { ...tool, inputSchema: { ...tool.inputSchema, properties: { ...props, timeout_ms: timeout } } };
}

/** The tool exactly as Codex lists it (its description unchanged), plus our `outputSchema`; {@link shellTool} is what serve lists. */
export const SHELL_TOOL: ToolDefinition = {
  name: "shell",
  description: CODEX_SHELL_DESCRIPTION,
  inputSchema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: "ExecParams",
    type: "object",
    properties: {
      command: { description: "The bash string to execute.", type: "string" },
      workdir: { description: "The working directory to execute the command in. Must be an absolute path.", type: "string" },
      timeout_ms: {
        description: "The timeout for the command in milliseconds.",
        type: "integer",
        format: "uint64",
        minimum: 0,
        nullable: true,
      },
      login: { description: "Launch Bash with -lc instead of -c: defaults to true.", type: "boolean", nullable: true },
    },
    required: ["command", "workdir"],
  },
  outputSchema: {
    type: "object",
    properties: {
      exit_code: { type: "integer", description: "Exit status of the shell; 128+N when signal N killed it." },
      output: { type: "string", description: "stdout and stderr interleaved in arrival order, capped (head and tail kept)." },
      duration: {
        type: "object",
        properties: { secs: { type: "integer", minimum: 0 }, nanos: { type: "integer", minimum: 0 } },
        required: ["secs", "nanos"],
      },
      timed_out: { type: "boolean" },
    },
    required: ["exit_code", "output", "duration", "timed_out"],
  },
};

/** Validated call arguments. */
export interface ShellArgs {
  command: string;
  workdir: string;
  timeoutMs: number;
  login: boolean;
}

function bad(detail: string): ShellmcpError {
  return new ShellmcpError("USAGE", `failed to deserialize parameters: ${detail}`);
}

function typeDesc(v: unknown): string {
  if (typeof v === "string") return `string ${JSON.stringify(v)}`;
  if (typeof v === "number") return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
  if (typeof v === "boolean") return `boolean \`${v}\``;
  if (v === null) return "null";
  return Array.isArray(v) ? "sequence" : "map";
}

/**
 * Validate arguments with serde-like messages; relative `workdir` resolves against the server's cwd (as Codex). An
 * absent or null `timeout_ms` is `defaultTimeoutMs` (the server's, ms). Throws `USAGE`.
 */
export function parseShellArgs(args: Record<string, unknown> | undefined, defaultTimeoutMs: number = DEFAULT_TIMEOUT_MS): ShellArgs {
  const a = args ?? {};
  for (const f of ["command", "workdir"]) if (a[f] === undefined) throw bad(`missing field \`${f}\``);
  if (typeof a.command !== "string") throw bad(`invalid type: ${typeDesc(a.command)}, expected a string`);
  if (typeof a.workdir !== "string") throw bad(`invalid type: ${typeDesc(a.workdir)}, expected a string`);
  let timeoutMs = defaultTimeoutMs;
  if (a.timeout_ms !== undefined && a.timeout_ms !== null) {
    const t = a.timeout_ms;
    if (typeof t !== "number" || !Number.isInteger(t)) throw bad(`invalid type: ${typeDesc(t)}, expected u64`);
    if (t < 0) throw bad(`invalid value: integer \`${t}\`, expected u64`);
    timeoutMs = t;
  }
  let login = true;
  if (a.login !== undefined && a.login !== null) {
    if (typeof a.login !== "boolean") throw bad(`invalid type: ${typeDesc(a.login)}, expected a boolean`);
    login = a.login;
  }
  return { command: a.command, workdir: isAbsolute(a.workdir) ? a.workdir : resolve(a.workdir), timeoutMs, login };
}

/**
 * Largest JSON-encoded size of `output`, in characters. The byte cap alone does not bound the response: a control
 * character encodes as `\u0000` (6 characters, 7 once the text JSON is itself a JSON string), and the output
 * appears twice (text and structuredContent). Clients limit a line (the MCP SDK: 10 MiB), so output whose encoding
 * exceeds this is cut further, head and tail kept. 2 MiB keeps the whole response under ~6 MiB.
 */
export const MAX_ENCODED_OUTPUT_CHARS = 2 * 1024 * 1024;

/** Cut `output` (keeping head and tail) until its JSON encoding fits `max` characters. */
export function fitEncoded(output: string, max = MAX_ENCODED_OUTPUT_CHARS): string {
  if (JSON.stringify(output).length <= max) return output;
  let lo = 0;
  let hi = output.length;
  let best = "";
  while (lo <= hi) {
    const keep = Math.floor((lo + hi) / 2);
    const half = Math.floor(keep / 2);
    const cut = output.length - 2 * half;
    const candidate = `${output.slice(0, half)}\n[... shellmcp: ${cut} more characters omitted: the output is too large to send ...]\n${output.slice(output.length - half)}`;
    if (JSON.stringify(candidate).length <= max) {
      best = candidate;
      lo = keep + 1;
    } else hi = keep - 1;
  }
  return best;
}

/**
 * Whether a result is an error for the client (`isError`), the one rule of every `shell` and `exec_command` result
 * (docs/blocked-actions.md): the sandbox could not be built (nothing ran), the command timed out, died of a signal it
 * was not cancelled with, or something it
 * tried was refused by shellmcp or its sandbox (`blocked`, any layer but `escalation`, which runs the program inside
 * the sandbox instead of refusing it). A non-zero exit status by itself is not an error: the model reads `exit_code`.
 * (Codex set it from a word heuristic on the output, which also fired on a program's own "Permission denied".)
 */
export function resultIsError(
  r: Pick<RunCommandResult, "timedOut" | "signal" | "cancelled" | "sandboxFailed">,
  blocked?: BlockedLog,
): boolean {
  if (r.sandboxFailed === true || r.timedOut || (r.signal !== undefined && !r.cancelled)) return true;
  return blocked !== undefined && blocked.actions.some((a) => a.layer !== "escalation");
}

/**
 * The result: Codex's text JSON (key order `exit_code, output, duration, timed_out`), the same as
 * `structuredContent`. `notice`: shellmcp's own words for the model (the git guard's report, the weaker-protection
 * notice), appended to `output`; then `blocked`'s lines (../blocked/report.ts), also given as data in
 * `_meta["shellmcp/blocked"]`; both kept whole when the output is cut to fit. `isError`: {@link resultIsError}.
 */
export function formatResult(r: RunCommandResult, notice = "", blocked?: BlockedLog): ToolResult {
  const secs = Math.floor(r.durationMs / 1000);
  const nanos = Math.round((r.durationMs - secs * 1000) * 1e6);
  const tail = notice + (blocked === undefined ? "" : blockedText(blocked));
  const body = {
    exit_code: r.exitCode,
    output: tail === "" ? fitEncoded(r.output) : fitEncoded(r.output, MAX_ENCODED_OUTPUT_CHARS - JSON.stringify(tail).length) + tail,
    duration: { secs, nanos: Math.min(nanos, 999_999_999) },
    timed_out: r.timedOut,
  };
  const meta = blocked === undefined ? undefined : blockedMeta(blocked);
  return {
    content: [{ type: "text", text: JSON.stringify(body) }],
    structuredContent: body,
    isError: resultIsError(r, blocked),
    ...(meta === undefined ? {} : { _meta: meta }),
  };
}
