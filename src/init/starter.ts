/**
 * The starter policy `shellmcp init` writes into CODEX_HOME, carried inside the executable (the release tarball
 * carries the same two files beside it, scripts/release.ts): `examples/rules/agent.rules` (git's writing
 * subcommands and package installs escalated into their rooms, remotes and publishing asked, destructive commands
 * forbidden) and `examples/config/starter.toml`, its companion settings (the registries and caches of npm, pnpm
 * and yarn for their rooms), as the TOML entries merged into `config.toml`.
 */
import { parse as parseToml } from "smol-toml";
import starterRules from "../../examples/rules/agent.rules" with { type: "text" };
import starterConfig from "../../examples/config/starter.toml" with { type: "text" };
import type { TomlEntry } from "./merge.ts";

/** The starter rules file's text, and the name it gets in `CODEX_HOME/rules/`. */
export const STARTER_RULES = { name: "agent.rules", text: starterRules };

/** The starter settings file's text (`examples/config/starter.toml`, comments included). */
export const STARTER_CONFIG_TEXT: string = starterConfig;

/**
 * The starter settings as entries to merge into `config.toml`: every key of every table of
 * `examples/config/starter.toml` (two levels: `[shellmcp.room_network]` → `npm = […]`), its value as TOML text.
 */
export function starterEntries(): TomlEntry[] {
  const doc = parseToml(STARTER_CONFIG_TEXT) as Record<string, Record<string, Record<string, unknown>>>;
  const out: TomlEntry[] = [];
  for (const [top, tables] of Object.entries(doc))
    for (const [table, keys] of Object.entries(tables))
      for (const [key, value] of Object.entries(keys)) out.push({ table: [top, table], key, value: JSON.stringify(value) });
  return out;
}

/** The folders the starter settings let rooms write (`~/` not expanded), by program: created by `init` when the program is installed. */
export function starterCacheFolders(): Record<string, string[]> {
  const doc = parseToml(STARTER_CONFIG_TEXT) as { shellmcp?: { room_writable?: Record<string, string[]> } };
  return doc.shellmcp?.room_writable ?? {};
}
