/**
 * Drive the compiled `shellmcp serve` with the MCP SDK's real `Client` over stdio, as Codex would.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema, EmptyResultSchema, type ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "./binary.ts";
import { CONF_BASE } from "./test-dirs.ts";

/** A fresh folder under the run's CONF_BASE (outside every default writable root, see test-dirs.ts). */
function homeOutsideTmp(): string {
  return mkdtempSync(join(CONF_BASE, "home-"));
}

/** Parsed text result of the shell tool. */
export interface ShellOutput {
  exit_code: number;
  output: string;
  duration: { secs: number; nanos: number };
  timed_out: boolean;
}

/** A `shell` tool result as {@link Session.shell} returns it: its first text content parsed, isError, and the raw result. */
export function shellResult(raw: Record<string, unknown>): { out: ShellOutput; isError: boolean; raw: Record<string, unknown> } {
  const content = raw.content as { type: string; text: string }[];
  return { out: JSON.parse(content[0]!.text) as ShellOutput, isError: raw.isError === true, raw };
}

/**
 * A result's output without shellmcp's blocked-action report after it (the `shellmcp: blocked` lines,
 * docs/blocked-actions.md): what the command itself printed, for tests that pin it exactly.
 */
export function withoutBlocked(output: string): string {
  const at = output.indexOf("\nshellmcp: blocked (");
  return at < 0 ? output : output.slice(0, at);
}

/** A connected client plus helpers. */
export interface Session {
  client: Client;
  codexHome: string;
  elicitations: string[];
  /** Call `shell`; returns the parsed text, the raw result and isError. */
  shell(
    args: Record<string, unknown>,
    opts?: { onprogress?: (p: unknown) => void; signal?: AbortSignal },
  ): Promise<{ out: ShellOutput; isError: boolean; raw: Record<string, unknown> }>;
  sandboxState(policy: unknown, sandboxCwd: string, extra?: Record<string, unknown>): Promise<unknown>;
  close(): Promise<void>;
  stderr: () => string;
}

/** Options for {@link startServe}. */
export interface StartOptions {
  rules?: string;
  args?: string[];
  /** Answer elicitations (declares the capability); omit for a client without elicitation. */
  onElicit?: (message: string, schema: unknown) => Promise<ElicitResult> | ElicitResult;
  env?: Record<string, string>;
  codexHome?: string;
  /** argv that starts the server instead of `dist/shellmcp` (`serve` and `args` are appended). */
  command?: string[];
  /** The server's working folder (default: this process's). */
  cwd?: string;
}

/** Start `shellmcp serve` and connect the SDK client to it. */
export async function startServe(o: StartOptions = {}): Promise<Session> {
  // Outside /tmp: /tmp is a writable root of workspace-write sandboxes, and a HOME the sandbox can write makes
  // the escalation boundary (rightly) refuse to escalate git (~/.gitconfig could be the sandbox's).
  const codexHome = o.codexHome ?? homeOutsideTmp();
  if (o.rules !== undefined) {
    mkdirSync(join(codexHome, "rules"), { recursive: true });
    writeFileSync(join(codexHome, "rules", "default.rules"), o.rules);
  }
  const [command, ...prefix] = o.command ?? [ensureBinary()];
  const transport = new StdioClientTransport({
    command: command!,
    args: [...prefix, "serve", ...(o.args ?? [])],
    cwd: o.cwd,
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: codexHome, CODEX_HOME: codexHome, LC_ALL: "C", ...o.env },
    stderr: "pipe",
  });
  let err = "";
  transport.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const client = new Client({ name: "shellmcp-test", version: "0" }, { capabilities: o.onElicit ? { elicitation: {} } : {} });
  const elicitations: string[] = [];
  if (o.onElicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      const p = req.params as { message: string; requestedSchema: unknown };
      elicitations.push(p.message);
      return o.onElicit!(p.message, p.requestedSchema);
    });
  }
  await client.connect(transport);
  return {
    client,
    codexHome,
    elicitations,
    stderr: () => err,
    async shell(args, opts = {}) {
      const raw = (await client.callTool({ name: "shell", arguments: args }, undefined, {
        onprogress: opts.onprogress as never,
        signal: opts.signal,
        timeout: 120_000,
      })) as Record<string, unknown>;
      return shellResult(raw);
    },
    sandboxState(policy, sandboxCwd, extra = {}) {
      return client.request(
        { method: "codex/sandbox-state/update", params: { sandboxPolicy: policy, sandboxCwd, ...extra } } as never,
        EmptyResultSchema,
      );
    },
    async close() {
      await client.close();
    },
  };
}

/**
 * The `_meta` of a `tools/call` carrying a Codex 0.169 permission profile, as Codex sends it: a restricted file
 * system that reads everything, plus `entries` (`access`: "read", "write" or "deny" for each absolute `path`), the
 * network restricted, the sandbox's cwd `cwd`.
 */
export function codexProfileMeta(cwd: string, entries: { path: string; access: "read" | "write" | "deny" }[]): Record<string, unknown> {
  const profile = {
    type: "managed",
    file_system: {
      type: "restricted",
      entries: [
        { path: { type: "special", value: { kind: "root" } }, access: "read" },
        ...entries.map((e) => ({ path: { type: "path", path: e.path }, access: e.access })),
      ],
    },
    network: "restricted",
  };
  const state = { permissionProfile: profile, sandboxCwd: `file://${cwd}`, useLegacyLandlock: false, useMxc: false };
  return { "codex/sandbox-state": state, "codex/sandbox-state-meta": state };
}
