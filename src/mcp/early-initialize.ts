/**
 * Answer MCP `initialize` before anything heavy is loaded. Codex 0.169 starts a turn without the tools of an MCP
 * server that has not finished its handshake (unless the server is marked `required`), so the answer must not
 * wait for the CLI parser, the MCP SDK, the rules or the sandbox preflight: `main.ts` calls
 * {@link startEarlyInitialize} first thing for `serve`, which reads stdin's first line and, when it is a valid
 * `initialize` request, writes the same answer the SDK would give (protocol version negotiated as the SDK does,
 * our capabilities, server info, instructions). Everything read — that first line included — is then handed to
 * the MCP transport ({@link takeEarlyInput}), so the SDK still sees the `initialize` request (it records the
 * client's capabilities, e.g. elicitation); its own answer to that one id is dropped. A first-line modern-era
 * `server/discover` (2026-07-28, ./modern.ts) is answered the same way, and that line is then skipped.
 *
 * This module imports nothing but `node:fs`'s `writeSync` (it runs on the start-up path): the answer is written
 * with it, because the first touch of `process.stdout` builds Node's stream machinery, ~7 ms of a ~11 ms answer
 * (docs/benchmarks.md, "Start-up"). test/mcp/early-initialize.test.ts checks the constants below against the SDK's.
 */
import { writeSync } from "node:fs";
import { isJsonObject as isObject } from "../jsonrpc.ts";
import { VERSION } from "../version.ts";

/**
 * The `instructions` of the `initialize` and `server/discover` answers: the original's purpose, in our words, and how
 * the sandbox behaves in general (issue 41). Written before the configuration is read (this module answers first),
 * so what is in effect for this server — its writable folders, its network — is in the `shell` tool's description
 * (./sandbox-summary.ts), which `tools/list` answers after start-up.
 */
export const INSTRUCTIONS =
  "This server provides a tool to execute shell commands and return their output. " +
  "Commands run in a kernel sandbox (bubblewrap or Landlock + seccomp on Linux, Seatbelt on macOS): they write only the " +
  "writable folders (the workspace and temporary folders), never .git, .codex or .agents inside them, and reach the network " +
  "only when the sandbox allows it; the shell tool's description says what is in effect here. Programs are checked against " +
  "the user's .rules: an allowed one may run outside the sandbox, a forbidden one is denied, some need a human's approval. " +
  "Whatever was refused is reported after the output on a line starting `shellmcp: blocked` (and in the result's " +
  '_meta["shellmcp/blocked"]) with how a human can allow it: pass that on to the user rather than working around it. ' +
  "Long-running work (servers, watchers, long builds) belongs in exec_command sessions.";
/** Server name in `serverInfo`. */
export const SERVER_NAME = "shellmcp";
/** Name of Codex's sandbox-state capability (and of the custom method's prefix). */
export const SANDBOX_STATE_CAPABILITY = "codex/sandbox-state";
/** Capabilities we declare. */
export const SERVER_CAPABILITIES = { tools: {}, experimental: { [SANDBOX_STATE_CAPABILITY]: { version: "1.0.0" } } };
/** The MCP SDK's newest protocol version (what it answers to an unknown requested version). */
export const LATEST_PROTOCOL_VERSION = "2025-11-25";
/** Protocol versions the MCP SDK accepts as requested. */
export const SUPPORTED_PROTOCOL_VERSIONS = [LATEST_PROTOCOL_VERSION, "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"];
/** The modern protocol revision served (./modern.ts): stateless, no `initialize`, `server/discover`. */
export const MODERN_PROTOCOL_VERSION = "2026-07-28";
/** `_meta` key of the server's identity on every modern-era result. */
export const SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo";
/** Longest first line looked at, bytes (a bigger one is left to the transport). */
const MAX_FIRST_LINE_BYTES = 1024 * 1024;

/** stdin as read so far and still to come, and the id of the `initialize` or `server/discover` already answered (if any). */
export interface EarlyInput {
  source: AsyncIterable<Uint8Array>;
  answeredId(): string | number | undefined;
}

/**
 * Where the early input waits for the transport: on the global object, not in a module variable, because the
 * compiled executable bundles each role apart (build.ts): main.ts's copy of this module starts the reading, the
 * CLI bundle's copy (mcp/server.ts) takes it.
 */
const EARLY_KEY = Symbol.for("shellmcp.earlyInput");
const holder = globalThis as unknown as { [EARLY_KEY]?: EarlyInput };

/**
 * `line` as a JSON-RPC 2.0 request for `method` with a string or integer id and an object `params`, else
 * `undefined`.
 */
function request(line: string, method: string): { id: string | number; params: Record<string, unknown> } | undefined {
  let m: unknown;
  try {
    m = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!isObject(m) || m.jsonrpc !== "2.0" || m.method !== method || !isObject(m.params)) return undefined;
  if (typeof m.id !== "string" && (typeof m.id !== "number" || !Number.isInteger(m.id))) return undefined;
  return { id: m.id, params: m.params };
}

/**
 * The answer to `line` when it is an `initialize` request the SDK would accept (JSON-RPC 2.0, string or number
 * id, `protocolVersion` string, `capabilities` object, `clientInfo` with string `name` and `version`), else
 * `undefined` (the SDK then answers, whatever it is).
 */
export function earlyInitializeResponse(
  line: string,
  info: { name: string; version: string } = { name: SERVER_NAME, version: VERSION },
): Record<string, unknown> | undefined {
  const m = request(line, "initialize");
  if (m === undefined) return undefined;
  const p = m.params;
  if (typeof p.protocolVersion !== "string" || !isObject(p.capabilities) || !isObject(p.clientInfo)) return undefined;
  if (typeof p.clientInfo.name !== "string" || typeof p.clientInfo.version !== "string") return undefined;
  const protocolVersion = SUPPORTED_PROTOCOL_VERSIONS.includes(p.protocolVersion) ? p.protocolVersion : LATEST_PROTOCOL_VERSION;
  return {
    jsonrpc: "2.0",
    id: m.id,
    result: { protocolVersion, capabilities: SERVER_CAPABILITIES, serverInfo: info, instructions: INSTRUCTIONS },
  };
}

/**
 * The `server/discover` result (modern era): the modern versions only (legacy ones are negotiated by `initialize`,
 * as the v2 SDK does), our capabilities with the tasks extension (./modern.ts), the cache fields (not cacheable:
 * private, 0 ms) and our identity.
 */
export function discoverResult(info: { name: string; version: string } = { name: SERVER_NAME, version: VERSION }): Record<string, unknown> {
  return {
    resultType: "complete",
    supportedVersions: [MODERN_PROTOCOL_VERSION],
    capabilities: { ...SERVER_CAPABILITIES, extensions: { "io.modelcontextprotocol/tasks": {} } },
    instructions: INSTRUCTIONS,
    ttlMs: 0,
    cacheScope: "private",
    _meta: { [SERVER_INFO_META_KEY]: info },
  };
}

/**
 * The answer to `line` when it is a `server/discover` request with a valid modern envelope for
 * {@link MODERN_PROTOCOL_VERSION} (the version, and client capabilities as an object), else `undefined` (the
 * modern era's handler, ./modern.ts, answers it, errors included).
 */
export function earlyDiscoverResponse(
  line: string,
  info: { name: string; version: string } = { name: SERVER_NAME, version: VERSION },
): Record<string, unknown> | undefined {
  const m = request(line, "server/discover");
  if (m === undefined) return undefined;
  const meta = m.params._meta;
  if (!isObject(meta) || meta["io.modelcontextprotocol/protocolVersion"] !== MODERN_PROTOCOL_VERSION) return undefined;
  if (!isObject(meta["io.modelcontextprotocol/clientCapabilities"])) return undefined;
  return { jsonrpc: "2.0", id: m.id, result: discoverResult(info) };
}

/**
 * Start reading stdin now and answer a first-line `initialize` (or modern `server/discover`) at once. Call once, before the MCP transport
 * starts. Resolves when the first line has been handled (answered or left to the SDK) or stdin ended: the caller
 * should wait for it — briefly, see main.ts — because loading the rest of the program is one long synchronous
 * stretch during which stdin is not read.
 */
export function startEarlyInitialize(): Promise<void> {
  const reader = Bun.stdin.stream().getReader();
  const pending: Uint8Array[] = [];
  let ended = false;
  let answered: string | number | undefined;
  const first = (async () => {
    let size = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        ended = true;
        break;
      }
      pending.push(value);
      size += value.byteLength;
      if (value.indexOf(10) >= 0 || size > MAX_FIRST_LINE_BYTES) break;
    }
    const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    const nl = all.indexOf(10);
    if (nl < 0) return;
    const line = new TextDecoder().decode(all.subarray(0, nl));
    const response = earlyInitializeResponse(line) ?? earlyDiscoverResponse(line);
    if (response === undefined) return;
    answered = response.id as string | number;
    writeAll(JSON.stringify(response) + "\n");
  })();
  async function* source(): AsyncGenerator<Uint8Array> {
    await first;
    yield* pending;
    if (ended) return;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield value;
    }
  }
  holder[EARLY_KEY] = { source: source(), answeredId: () => answered };
  return first;
}

/**
 * Write `text` to stdout (fd 1) synchronously; what a full non-blocking pipe refuses (EAGAIN) goes through
 * `process.stdout`, which queues it. Nothing else has written to stdout yet, so the order holds.
 */
function writeAll(text: string): void {
  const bytes = new TextEncoder().encode(text);
  let done = 0;
  try {
    while (done < bytes.byteLength) done += writeSync(1, bytes, done);
  } catch {
    process.stdout.write(bytes.subarray(done));
  }
}

/** The early input, once (the transport takes it); `undefined` when {@link startEarlyInitialize} did not run. */
export function takeEarlyInput(): EarlyInput | undefined {
  const e = holder[EARLY_KEY];
  delete holder[EARLY_KEY];
  return e;
}
