/**
 * `shellmcp init [claude|gemini|codex|vscode|cursor]` (issue 41): a working set-up in one command. It writes
 *
 * - the starter policy into CODEX_HOME (`$CODEX_HOME`, else `~/.codex`): `rules/agent.rules` and the companion
 *   settings merged into `config.toml` (./starter.ts), and creates the package caches those settings name for the
 *   package managers installed here (a room writes only folders that exist);
 * - the client's own MCP configuration, merged (./merge.ts): Claude Code's project `.mcp.json`, Gemini CLI's user
 *   `~/.gemini/settings.json` (trusted: headless Gemini offers an untrusted server's tools to no model), Codex's
 *   `config.toml` (`features.shell_tool = false` above the first table, `[mcp_servers.shell]`), VS Code's project
 *   `.vscode/mcp.json`, Cursor's project `.cursor/mcp.json`.
 *
 * The server command written is this executable's own path (`<path> serve`; clients other than Codex add
 * `--sandbox workspace-write`), since the npm packages are not published yet; run from an npx cache
 * (`…/_npx/…`, a path npm may remove), `npx -y shellmcp serve`.
 *
 * Nothing is overwritten: a key or server already there is kept (a server of the same name with another command is
 * reported, and `--name` adds this one beside it). A changed file is first copied to `<file>.before-shellmcp-init`.
 * It asks before writing on a terminal; elsewhere it writes only with `--yes`; `--dry-run` prints the plan only.
 * It ends by printing what it did and the exact commands that undo it.
 */
import { copyFileSync, existsSync, mkdirSync, realpathSync, renameSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { ShellmcpError } from "../errors.ts";
import { IS_COMPILED, userHome } from "../self.ts";
import { readUntrustedTextOrAbsent } from "../untrusted-fs.ts";
import { writeStderr } from "../stderr.ts";
import { deepEqual, mergeJsonServer, mergeToml, type EntryOutcome, type MergeResult, type TomlEntry } from "./merge.ts";
import { STARTER_RULES, starterCacheFolders, starterEntries } from "./starter.ts";

/** The clients `init` knows. */
export const CLIENTS = ["claude", "gemini", "codex", "vscode", "cursor"] as const;
/** One of {@link CLIENTS}. */
export type Client = (typeof CLIENTS)[number];

/** `shellmcp init`'s options as commander gives them. */
export interface InitOptions {
  /** Write without asking. */
  yes?: boolean;
  /** Print the plan, write nothing. */
  dryRun?: boolean;
  /** The server's name in the client (default `shell`: tools `mcp__shell__…` in Claude Code). */
  name?: string;
  /** The project folder for project-scoped clients (Claude Code, VS Code, Cursor); default: the current folder. */
  project?: string;
  /** Skip the starter policy (the client's configuration only). */
  starter?: boolean;
}

/** One file `init` would write: its path, its text before (undefined: new) and after, and the entries' outcomes. */
export interface FileChange {
  path: string;
  before: string | undefined;
  after: string;
  entries: EntryOutcome[];
  /** What this file is, for the plan (`Claude Code's project MCP servers`). */
  what: string;
}

/** Everything `init` would do: files, folders to create, what cannot be done, and lines to print after. */
export interface InitPlan {
  changes: FileChange[];
  folders: string[];
  problems: string[];
  next: string[];
}

/** The environment `init` plans with (tests pass their own). */
export interface InitEnv {
  home: string;
  codexHome: string;
  project: string;
  /** The server command (program and the arguments before `serve`). */
  command: string[];
  /** Whether CODEX_HOME came from the environment (not the default `~/.codex`). */
  codexHomeFromEnv?: boolean;
  /** Whether a program is installed (to create its cache folder). */
  which: (program: string) => boolean;
}

/**
 * The command that starts this shellmcp: the running executable's real path; `npx -y shellmcp` when it runs from
 * npm's npx cache; from source (`bun src/main.ts`), Bun and the entry script.
 */
export function selfServerCommand(): string[] {
  if (!IS_COMPILED) return [process.execPath, Bun.main];
  const exe = realpathSync(process.execPath);
  return exe.includes("/_npx/") ? ["npx", "-y", "shellmcp"] : [exe];
}

/** CODEX_HOME as `serve` finds it: `$CODEX_HOME` (made absolute), else `~/.codex`. */
export function initCodexHome(env: Record<string, string | undefined> = process.env): string {
  const v = env.CODEX_HOME;
  return v !== undefined && v !== "" ? resolve(v) : join(userHome(), ".codex");
}

/** A word for the shell: quoted unless it is plain. */
export function shellWord(w: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;
}

/** The text of `path`, undefined when it does not exist; a FIFO, a link or a huge file is refused (a project is untrusted). */
function readText(path: string): string | undefined {
  try {
    return readUntrustedTextOrAbsent(path, { maxBytes: 4 << 20 });
  } catch (e) {
    throw new ShellmcpError("CONFIG", `${path}: ${(e as Error).message}`);
  }
}

/** The table at `path` of the TOML file `file`, or undefined (no file, no such table, or a file that does not parse). */
function existingTomlTable(file: string, path: readonly string[]): Record<string, unknown> | undefined {
  const text = readText(file);
  if (text === undefined) return undefined;
  try {
    let v: unknown = parseToml(text);
    for (const k of path) v = typeof v === "object" && v !== null ? (v as Record<string, unknown>)[k] : undefined;
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A change to `path` from a merge, or a problem when the merge refused. */
function merged(plan: InitPlan, path: string, what: string, merge: (before: string | undefined) => MergeResult): void {
  const before = readText(path);
  try {
    const r = merge(before);
    plan.changes.push({ path, before, after: r.text, entries: r.entries, what });
  } catch (e) {
    if (!(e instanceof ShellmcpError)) throw e;
    plan.problems.push(`${path}: ${e.message}`);
  }
}

/** Plan `init` for `client` (undefined: the starter policy only) in `env`. Reads files, writes nothing. */
export function planInit(client: Client | undefined, o: InitOptions, env: InitEnv): InitPlan {
  const plan: InitPlan = { changes: [], folders: [], problems: [], next: [] };
  const name = o.name ?? "shell";
  const codexToml = join(env.codexHome, "config.toml");
  const tomlEntries: TomlEntry[] = [];
  if (o.starter !== false) tomlEntries.push(...planStarter(plan, env));
  planClient(plan, client, name, env, codexToml, tomlEntries);
  if (tomlEntries.length > 0)
    merged(plan, codexToml, client === "codex" ? "Codex's config (and shellmcp's settings)" : "shellmcp's settings (CODEX_HOME)", (t) =>
      mergeToml(t, tomlEntries, (table) =>
        table[0] === "mcp_servers"
          ? 'added by shellmcp init: shellmcp as Codex\'s shell (README, "Clients")'
          : "added by shellmcp init: the starter policy's companion settings (examples/config/starter.toml)",
      ),
    );
  reportServerConflicts(plan, name);
  return plan;
}

/**
 * The starter policy's part of `plan` (./starter.ts): the starter rules file in `env.codexHome`'s `rules/` (added when
 * missing; kept, and said so, when the file there is another text), and the missing cache folders its settings name
 * for the programs installed here (`env.which`; `~/` is `env.home`). Returns the companion settings, to merge into
 * CODEX_HOME's `config.toml`. Reads files, writes nothing; throws `CONFIG` for a rules file it may not read.
 */
function planStarter(plan: InitPlan, env: InitEnv): TomlEntry[] {
  const rulesPath = join(env.codexHome, "rules", STARTER_RULES.name);
  const have = readText(rulesPath);
  if (have === undefined)
    plan.changes.push({
      path: rulesPath,
      before: undefined,
      after: STARTER_RULES.text,
      entries: [{ entry: "the starter rules", outcome: "added" }],
      what: "the starter rules",
    });
  else if (have !== STARTER_RULES.text)
    plan.changes.push({
      path: rulesPath,
      before: have,
      after: have,
      entries: [{ entry: "the starter rules", outcome: "kept", found: "your own version of this file" }],
      what: "the starter rules",
    });
  const entries = starterEntries();
  for (const [program, folders] of Object.entries(starterCacheFolders())) {
    if (!env.which(program)) continue;
    for (const f of folders) {
      const abs = f.startsWith("~/") ? join(env.home, f.slice(2)) : f;
      if (!existsSync(abs)) plan.folders.push(abs);
    }
  }
  return entries;
}

/**
 * The arguments of the server command `cmd` (program first) after its program: the rest of `cmd`, `serve`, and with
 * `sandbox` `--sandbox workspace-write`.
 */
function serveArgs(cmd: readonly string[], sandbox: boolean): string[] {
  return [...cmd.slice(1), "serve", ...(sandbox ? ["--sandbox", "workspace-write"] : [])];
}

/**
 * The client's part of `plan`: its MCP configuration merged with the server `name` (a change, or a problem when the
 * merge refuses) and the lines to print after; for Codex, the entries to merge into `codexToml` put first in
 * `tomlEntries` instead ({@link codexServerEntries}). Nothing for `undefined`. Reads files, writes nothing.
 */
function planClient(
  plan: InitPlan,
  client: Client | undefined,
  name: string,
  env: InitEnv,
  codexToml: string,
  tomlEntries: TomlEntry[],
): void {
  const cmd = env.command;
  const line = (words: string[]) => words.map(shellWord).join(" ");
  switch (client) {
    case "claude":
      merged(plan, join(env.project, ".mcp.json"), "Claude Code's project MCP servers", (t) =>
        mergeJsonServer(t, "mcpServers", name, { command: cmd[0]!, args: serveArgs(cmd, true) }),
      );
      plan.next.push(
        `claude -p "…" --allowedTools mcp__${name}      # print mode needs the tools allowed (or allow them in ~/.claude/settings.json)`,
        `# for every project instead of this one: ${line(["claude", "mcp", "add", "--scope", "user", name, "--", cmd[0]!, ...serveArgs(cmd, true)])}`,
      );
      break;
    case "gemini":
      merged(plan, join(env.home, ".gemini", "settings.json"), "Gemini CLI's user settings", (t) =>
        mergeJsonServer(t, "mcpServers", name, { command: cmd[0]!, args: serveArgs(cmd, true), trust: true }),
      );
      plan.next.push(`gemini -p "…" --skip-trust      # in a folder Gemini does not trust yet, headless mode needs --skip-trust`);
      break;
    case "codex":
      tomlEntries.unshift(...codexServerEntries(plan, name, env, codexToml));
      break;
    case "vscode":
      merged(plan, join(env.project, ".vscode", "mcp.json"), "VS Code's workspace MCP servers", (t) =>
        mergeJsonServer(t, "servers", name, { type: "stdio", command: cmd[0]!, args: serveArgs(cmd, true) }),
      );
      break;
    case "cursor":
      merged(plan, join(env.project, ".cursor", "mcp.json"), "Cursor's project MCP servers", (t) =>
        mergeJsonServer(t, "mcpServers", name, { command: cmd[0]!, args: serveArgs(cmd, true) }),
      );
      break;
    case undefined:
      break;
  }
}

/**
 * Codex's entries for `codexToml` (its `config.toml`): `features.shell_tool = false`, then the server `name`'s table
 * (`command`, `args`, `required`, `default_tools_approval_mode`, and `env` with CODEX_HOME when it came from the
 * environment: Codex starts MCP servers with a few variables only). A server of that name already there is
 * someone's: none of its keys is added, and a problem is added to `plan` when it differs from this one.
 */
function codexServerEntries(plan: InitPlan, name: string, env: InitEnv, codexToml: string): TomlEntry[] {
  const cmd = env.command;
  const server: TomlEntry[] = [
    { table: ["mcp_servers", name], key: "command", value: JSON.stringify(cmd[0]!) },
    { table: ["mcp_servers", name], key: "args", value: JSON.stringify(serveArgs(cmd, false)) },
    { table: ["mcp_servers", name], key: "required", value: "true" },
    { table: ["mcp_servers", name], key: "default_tools_approval_mode", value: '"approve"' },
    ...(env.codexHomeFromEnv
      ? [{ table: ["mcp_servers", name], key: "env", value: `{ CODEX_HOME = ${JSON.stringify(env.codexHome)} }` }]
      : []),
  ];
  const existing = existingTomlTable(codexToml, ["mcp_servers", name]);
  if (existing !== undefined) {
    const same = server.every((e) => deepEqual(existing[e.key], parseToml(`v = ${e.value}`).v));
    if (!same)
      plan.problems.push(
        `${codexToml}: a server named "${name}" is already there with another configuration (${JSON.stringify(existing)}): left as it is; remove it, or add this one beside it with --name NAME`,
      );
  }
  return [{ table: ["features"], key: "shell_tool", value: "false" }, ...(existing === undefined ? server : [])];
}

/**
 * A problem in `plan` for each planned change whose server entry `name` was kept (already there with another value:
 * the whole server is someone else's).
 */
function reportServerConflicts(plan: InitPlan, name: string): void {
  for (const c of plan.changes) {
    const conflict = c.entries.find((e) => e.outcome === "kept" && /^(mcpServers|servers|mcp_servers)\./.test(e.entry));
    if (conflict !== undefined)
      plan.problems.push(
        `${c.path}: a server named "${name}" is already there with another configuration (${conflict.found}): left as it is; remove it, or add this one beside it with --name NAME`,
      );
  }
}

/** The plan as the lines `init` prints before it asks. */
export function describePlan(plan: InitPlan): string[] {
  const out: string[] = [];
  for (const c of plan.changes) {
    const added = c.entries.filter((e) => e.outcome === "added");
    if (added.length === 0) continue;
    out.push(`${c.before === undefined ? "create" : "update"} ${c.path} (${c.what}):`);
    for (const e of added) out.push(`    + ${e.entry}`);
  }
  for (const f of plan.folders) out.push(`create the folder ${f} (a cache the starter settings let its package manager's room write)`);
  for (const c of plan.changes)
    for (const e of c.entries) {
      if (e.outcome === "present") out.push(`already there: ${e.entry} in ${c.path}`);
      if (e.outcome === "kept" && !/^(mcpServers|servers|mcp_servers)\./.test(e.entry))
        out.push(`kept yours: ${e.entry} in ${c.path} (${e.found}; the starter's value is not written)`);
    }
  return out;
}

/** A free backup path beside `path`. */
function backupPath(path: string): string {
  let b = `${path}.before-shellmcp-init`;
  for (let i = 2; existsSync(b); i++) b = `${path}.before-shellmcp-init.${i}`;
  return b;
}

/** Write `plan`; returns the undo commands, last-done first. */
export function applyPlan(plan: InitPlan): string[] {
  const undo: string[] = [];
  const made = (dir: string) => {
    const missing: string[] = [];
    for (let d = dir; !existsSync(d); d = dirname(d)) missing.push(d);
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    undo.unshift(...missing.map((d) => `rmdir ${shellWord(d)}`));
  };
  for (const f of plan.folders) made(f);
  for (const c of plan.changes) {
    if (c.after === (c.before ?? undefined)) continue;
    made(dirname(c.path));
    if (c.before !== undefined) {
      const b = backupPath(c.path);
      copyFileSync(c.path, b);
      undo.unshift(`mv -f ${shellWord(b)} ${shellWord(c.path)}`);
    } else undo.unshift(`rm ${shellWord(c.path)}`);
    const tmp = `${c.path}.shellmcp-init.${process.pid}`;
    const mode = c.before !== undefined ? statSync(c.path).mode & 0o7777 : 0o644;
    writeFileSync(tmp, c.after, { mode });
    renameSync(tmp, c.path);
  }
  return undo;
}

/** Ask `question` on the terminal; true for y/yes. */
async function confirm(question: string): Promise<boolean> {
  writeStderr(question);
  const answer = await new Promise<string>((res) => {
    process.stdin.setEncoding("utf8");
    process.stdin.once("data", (d) => res(String(d)));
    process.stdin.once("end", () => res(""));
  });
  process.stdin.pause();
  return /^\s*y(es)?\s*$/i.test(answer);
}

/** `shellmcp init [CLIENT]`: plan, show, confirm, write, say how to undo. Returns the exit status. */
export async function initMain(client: string | undefined, o: InitOptions): Promise<number> {
  if (client !== undefined && !(CLIENTS as readonly string[]).includes(client)) {
    writeStderr(
      `shellmcp init: unknown client ${JSON.stringify(client)} (one of ${CLIENTS.join(", ")}, or none for the starter policy only)\n`,
    );
    return 2;
  }
  const project = resolve(o.project ?? process.cwd());
  const env: InitEnv = {
    home: userHome(),
    codexHome: initCodexHome(),
    codexHomeFromEnv: (process.env.CODEX_HOME ?? "") !== "",
    project,
    command: selfServerCommand(),
    which: (p) => Bun.which(p) !== null,
  };
  let plan: InitPlan;
  try {
    plan = planInit(client as Client | undefined, o, env);
  } catch (e) {
    if (!(e instanceof ShellmcpError)) throw e;
    writeStderr(`shellmcp init: ${e.message}\n`);
    return 1;
  }
  const lines = describePlan(plan);
  const say = (s: string) => process.stdout.write(s + "\n");
  say(
    `shellmcp init${client === undefined ? "" : ` ${client}`}: the server command is ${[...env.command, "serve"].map(shellWord).join(" ")}`,
  );
  for (const l of lines) say(l);
  for (const p of plan.problems) say(`not done: ${p}`);
  const todo = plan.folders.length > 0 || plan.changes.some((c) => c.after !== c.before);
  if (!todo) {
    say("nothing to write: everything is in place.");
    for (const n of plan.next) say(`then: ${n}`);
    return plan.problems.length > 0 ? 1 : 0;
  }
  if (o.dryRun) {
    say("dry run: nothing written.");
    return 0;
  }
  if (!o.yes) {
    if (!process.stdin.isTTY) {
      say("nothing written: run it on a terminal to be asked, or pass --yes (--dry-run shows the plan only).");
      return 1;
    }
    if (!(await confirm("Write these? [y/N] "))) {
      say("nothing written.");
      return 1;
    }
  }
  const undo = applyPlan(plan);
  say("done. To undo it:");
  for (const u of undo) say(`    ${u}`);
  for (const n of plan.next) say(`then: ${n}`);
  return plan.problems.length > 0 ? 1 : 0;
}
