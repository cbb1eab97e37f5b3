/**
 * The merge logic of `shellmcp init` (issue 41): add an MCP server entry to a client's JSON configuration, and keys
 * and tables to a TOML file (Codex's `config.toml`, the starter settings), without losing or changing anything
 * already there. Pure: text in, text out; nothing here reads or writes a file.
 *
 * What is never done: overwriting a value that is already set (an existing server of the same name with another
 * command is a conflict, reported and left as it is; a starter key you already set keeps your value), rewriting a
 * TOML file's formatting or comments (lines are inserted, never rewritten). Every TOML result is parsed again and
 * compared with the original: every value of the original must be unchanged, or the merge throws.
 */
import { parse as parseToml } from "smol-toml";
import { ShellmcpError } from "../errors.ts";

/** What a merge did to one entry. */
export interface EntryOutcome {
  /** The entry, as a person reads it (`mcpServers.shell`, `shellmcp.room_writable.npm`). */
  entry: string;
  /** added: written now; present: already there with this value; kept: already there with another value (yours kept). */
  outcome: "added" | "present" | "kept";
  /** For `kept`: the value found, as JSON. */
  found?: string;
}

/** The result of a merge: the new text (equal to the old one when nothing was added) and what happened per entry. */
export interface MergeResult {
  text: string;
  entries: EntryOutcome[];
}

/** Whether two parsed JSON/TOML values are equal (objects by keys, in any order). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** Whether every value of `old` is in `now` unchanged (tables may have gained keys). */
function contains(now: unknown, old: unknown): boolean {
  if (typeof old !== "object" || old === null || Array.isArray(old) || old instanceof Date) return deepEqual(now, old);
  if (typeof now !== "object" || now === null || Array.isArray(now)) return false;
  return Object.entries(old).every(([k, v]) => contains((now as Record<string, unknown>)[k], v));
}

/** The value at `path` in a parsed document, or undefined. */
function at(doc: unknown, path: readonly string[]): unknown {
  let v = doc;
  for (const k of path) {
    if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

/** The indentation of a JSON text's first indented line (two spaces when there is none). */
function jsonIndent(text: string): string | number {
  const m = /\n([ \t]+)\S/.exec(text);
  return m === null ? 2 : m[1]!;
}

/**
 * Add server `name` = `entry` under `key` (`mcpServers` for Claude Code, Gemini CLI, Cursor; `servers` for VS Code)
 * of a JSON configuration `text` (undefined: no file yet). An existing server of that name is kept: `present` when
 * equal to `entry`, else `kept` (a conflict: the caller says so, and that `--name` adds this one beside it).
 * @throws ShellmcpError CONFIG when `text` is not a JSON object (JSON with comments included: add it by hand)
 */
export function mergeJsonServer(text: string | undefined, key: string, name: string, entry: Record<string, unknown>): MergeResult {
  const label = `${key}.${name}`;
  let doc: Record<string, unknown> = {};
  if (text !== undefined && text.trim() !== "") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new ShellmcpError(
        "CONFIG",
        `not plain JSON (${(e as Error).message}; comments are not kept by a rewrite): add ${label} by hand`,
      );
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new ShellmcpError("CONFIG", "not a JSON object");
    doc = parsed as Record<string, unknown>;
  }
  const servers = doc[key];
  if (servers !== undefined && (typeof servers !== "object" || servers === null || Array.isArray(servers)))
    throw new ShellmcpError("CONFIG", `${key} is not an object`);
  const existing = (servers as Record<string, unknown> | undefined)?.[name];
  if (existing !== undefined)
    return {
      text: text!,
      entries: [
        deepEqual(existing, entry)
          ? { entry: label, outcome: "present" }
          : { entry: label, outcome: "kept", found: JSON.stringify(existing) },
      ],
    };
  const out = { ...doc, [key]: { ...((servers as Record<string, unknown>) ?? {}), [name]: entry } };
  const indent = text === undefined ? 2 : jsonIndent(text);
  return { text: JSON.stringify(out, null, indent) + "\n", entries: [{ entry: label, outcome: "added" }] };
}

/** One key to set in a TOML file: `table` (dotted path; [] = the top level), `key`, and its value as TOML text. */
export interface TomlEntry {
  table: readonly string[];
  key: string;
  /** The value as TOML source (`false`, `["~/.npm"]`, `"approve"`). */
  value: string;
}

/** A TOML key as written in a header or dotted key: bare when it can be, else quoted. */
function tomlKey(k: string): string {
  return /^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k);
}

/**
 * The table a line's header names (its key parts joined by NUL), or undefined when the line is not a table header
 * (`[a.b]`, `[a."x/y"]`, `[[a]]`): a line of a multi-line array (`[1, 2],`) is none, since its parts are no keys.
 */
function headerOf(line: string): string | undefined {
  const m = /^\s*\[\[?(.*?)\]\]?\s*(#.*)?$/.exec(line);
  if (m === null) return undefined;
  const parts: string[] = [];
  const part = /\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*(\.|$)/y;
  let rest = m[1]!;
  while (rest !== "") {
    part.lastIndex = 0;
    const p = part.exec(rest);
    if (p === null) return undefined;
    parts.push(p[1] ?? (p[2] !== undefined ? (JSON.parse(`"${p[2]}"`) as string) : p[3]!));
    rest = rest.slice(p[0].length);
    if (p[4] === "." && rest === "") return undefined;
  }
  return parts.length === 0 ? undefined : parts.join("\u0000");
}

/**
 * Add `entries` to the TOML `text` (undefined: no file yet). A key already set keeps its value (`present` or
 * `kept`); the others are inserted as lines: right after their table's `[header]` when the file has one, else as a
 * new table at the end; top-level keys (`table` []) above the first table header (a key after a header would
 * belong to that table: README "Clients"), as dotted keys (`features.shell_tool = false`) unless the file has that
 * `[features]` table already, where the key goes under its header. `comment(table)`, when given, goes above each new table.
 * @throws ShellmcpError CONFIG when `text` does not parse, when a table is set in a way lines cannot be added to (an
 *   inline table, dotted keys), or when the result would lose or change a value (checked by parsing it again)
 */
export function mergeToml(
  text: string | undefined,
  entries: readonly TomlEntry[],
  comment?: (table: readonly string[]) => string,
): MergeResult {
  const source = text ?? "";
  let doc: unknown;
  try {
    doc = parseToml(source);
  } catch (e) {
    throw new ShellmcpError("CONFIG", `does not parse as TOML: ${(e as Error).message.split("\n")[0]}`);
  }
  const lines = source === "" ? [] : source.replace(/\n$/, "").split("\n");
  const outcomes: EntryOutcome[] = [];
  /** Lines to insert after line index (−1: at the top), and new tables to append. */
  const insertAfter = new Map<number, string[]>();
  const appended = new Map<string, { table: readonly string[]; lines: string[] }>();
  const firstHeader = lines.findIndex((l) => headerOf(l) !== undefined);
  const headerIndex = (table: readonly string[]) => lines.findIndex((l) => headerOf(l) === table.join("\u0000"));
  for (const e of entries) {
    const label = [...e.table, e.key].join(".");
    const want = (parseToml(`v = ${e.value}`) as { v: unknown }).v;
    const found = at(doc, [...e.table, e.key]);
    if (found !== undefined) {
      outcomes.push(
        deepEqual(found, want) ? { entry: label, outcome: "present" } : { entry: label, outcome: "kept", found: JSON.stringify(found) },
      );
      continue;
    }
    outcomes.push({ entry: label, outcome: "added" });
    const line = `${tomlKey(e.key)} = ${e.value}`;
    const add = (i: number, l: string) => insertAfter.set(i, [...(insertAfter.get(i) ?? []), l]);
    if (e.table.length === 0) {
      add(firstHeader === -1 ? lines.length - 1 : firstHeader - 1, line);
      continue;
    }
    const h = headerIndex(e.table);
    if (h !== -1) {
      add(h, line);
      continue;
    }
    if (e.table.length === 1) {
      // A one-part table (`features`) without its [header]: a dotted top-level key, above the first header.
      add(firstHeader === -1 ? lines.length - 1 : firstHeader - 1, `${tomlKey(e.table[0]!)}.${line}`);
      continue;
    }
    if (at(doc, e.table) !== undefined)
      throw new ShellmcpError(
        "CONFIG",
        `[${e.table.join(".")}] is set without its own [header] (an inline table or dotted keys): add ${label} = ${e.value} by hand`,
      );
    const k = e.table.join(".");
    const t = appended.get(k) ?? { table: e.table, lines: [] };
    t.lines.push(line);
    appended.set(k, t);
  }
  if (outcomes.every((o) => o.outcome !== "added")) return { text: source, entries: outcomes };
  const out: string[] = [...(insertAfter.get(-1) ?? [])];
  lines.forEach((l, i) => out.push(l, ...(insertAfter.get(i) ?? [])));
  for (const t of appended.values()) {
    if (out.length > 0 && out.at(-1) !== "") out.push("");
    if (comment !== undefined)
      out.push(
        ...comment(t.table)
          .split("\n")
          .map((c) => `# ${c}`.trimEnd()),
      );
    out.push(`[${t.table.map(tomlKey).join(".")}]`, ...t.lines);
  }
  const result = out.join("\n") + "\n";
  let now: unknown;
  try {
    now = parseToml(result);
  } catch (e) {
    throw new ShellmcpError("CONFIG", `the merged file would not parse (${(e as Error).message.split("\n")[0]}): add the entries by hand`);
  }
  if (!contains(now, doc)) throw new ShellmcpError("CONFIG", "the merge would change a value already there: add the entries by hand");
  for (const e of entries) {
    const want = (parseToml(`v = ${e.value}`) as { v: unknown }).v;
    const found = at(doc, [...e.table, e.key]);
    if (!deepEqual(at(now, [...e.table, e.key]), found ?? want))
      throw new ShellmcpError("CONFIG", `the merged file does not set ${[...e.table, e.key].join(".")} as intended: add it by hand`);
  }
  return { text: result, entries: outcomes };
}
