/**
 * Codex's `config.toml` (from `$CODEX_HOME`) with `-c key.path=value` overrides, where `value` is TOML (a bare
 * word that is not valid TOML is taken as a string, as Codex does), and the `shell_environment_policy` table.
 *
 * TOML 1.0 through `smol-toml` (the design named the `toml` package, which only reads TOML 0.4: dotted keys such
 * as `features.shell_tool = false` and mixed arrays, common in Codex configs, were refused). Keys shellmcp does
 * not use are ignored, as Codex ignores keys it does not know. The file is parsed once per server; rules
 * discovery (trusted projects) reads the same parsed tree, `-c` overrides included.
 */
import { join } from "node:path";
import { parse as parseToml, TomlError } from "smol-toml";
import { ShellmcpError } from "../errors.ts";
import { readUntrustedText } from "../untrusted-fs.ts";
import { filterEnvironment } from "./env-policy.ts";

/** A parsed config tree. */
export type Config = Record<string, unknown>;

/** The first line of a TOML parser message (smol-toml appends a code excerpt). */
function tomlMessage(e: unknown): string {
  return ((e as Error).message ?? String(e)).split("\n")[0]!.replace(/^Invalid TOML document: /, "");
}

/**
 * The key path of `key` read as a TOML key (bare, quoted or dotted: `a.b`, `projects."/p/a.b".trust_level`).
 * Throws `CONFIG` when it is not one.
 */
export function parseKeyPath(key: string): string[] {
  let doc: unknown;
  try {
    doc = parseToml(`${key} = 0`);
  } catch (e) {
    throw new ShellmcpError("CONFIG", `invalid -c override key ${JSON.stringify(key)}: ${tomlMessage(e)}`);
  }
  const path: string[] = [];
  for (let t = doc; t !== 0;) {
    const keys = Object.keys(t as Config);
    if (keys.length !== 1) throw new ShellmcpError("CONFIG", `invalid -c override key ${JSON.stringify(key)}`);
    path.push(keys[0]!);
    t = (t as Config)[keys[0]!];
  }
  return path;
}

/** Parse `key.path=value` into a path and a TOML value. Throws `CONFIG` for a missing `=` or a bad key. */
export function parseOverride(spec: string): { path: string[]; value: unknown } {
  const eq = spec.indexOf("=");
  if (eq <= 0) throw new ShellmcpError("CONFIG", `invalid -c override ${JSON.stringify(spec)}: expected key=value`);
  const key = spec.slice(0, eq).trim();
  const raw = spec.slice(eq + 1).trim();
  if (key === "") throw new ShellmcpError("CONFIG", `invalid -c override ${JSON.stringify(spec)}: empty key`);
  const path = parseKeyPath(key);
  let value: unknown;
  try {
    value = (parseToml(`v = ${raw}`) as { v: unknown }).v;
  } catch {
    value = raw; // not TOML: a plain string, as Codex
  }
  return { path, value };
}

/** Set `value` at `path` in `cfg`, creating tables. */
export function setPath(cfg: Config, path: string[], value: unknown): void {
  let t = cfg;
  for (const k of path.slice(0, -1)) {
    const next = t[k];
    if (typeof next !== "object" || next === null || Array.isArray(next)) t[k] = {};
    t = t[k] as Config;
  }
  t[path[path.length - 1]!] = value;
}

/**
 * Parse TOML `text` read from `file`. Throws `CONFIG` naming the file, line and column (1-based) for invalid TOML:
 * `cannot parse /home/u/.codex/config.toml:3:7: <what is wrong>`.
 */
export function parseConfigText(text: string, file: string): Config {
  try {
    return parseToml(text) as Config;
  } catch (e) {
    const where = e instanceof TomlError ? `:${e.line}:${e.column}` : "";
    throw new ShellmcpError("CONFIG", `cannot parse ${file}${where}: ${tomlMessage(e)}`, {
      path: file,
      ...(e instanceof TomlError ? { line: e.line, column: e.column } : {}),
    });
  }
}

/**
 * Load `<codexHome>/config.toml` (empty if missing) and apply `overrides`. Throws `CONFIG` for bad TOML, and for a
 * file that is not a small regular file (a FIFO, a device, over 1 MiB: read through ../untrusted-fs.ts, so
 * it never blocks; a symlink is followed, as a dotfiles setup links it).
 */
export function loadConfig(codexHome: string, overrides: readonly string[] = []): Config {
  const file = join(codexHome, "config.toml");
  const r = readUntrustedText(file, { follow: true });
  if (!r.ok && r.why !== "missing") throw new ShellmcpError("CONFIG", `cannot read ${file}: ${r.reason}`, { path: file });
  const cfg: Config = r.ok ? parseConfigText(r.text, file) : {};
  for (const o of overrides) {
    const { path, value } = parseOverride(o);
    setPath(cfg, path, value);
  }
  return cfg;
}

/** Codex's `shell_environment_policy`. */
export interface ShellEnvironmentPolicy {
  inherit: "all" | "core" | "none";
  ignoreDefaultExcludes: boolean;
  exclude: string[];
  set: Record<string, string>;
  includeOnly: string[];
}

/** Variables `inherit = "core"` keeps. */
export const CORE_VARS = [
  "HOME",
  "LOGNAME",
  "PATH",
  "SHELL",
  "USER",
  "USERNAME",
  "TMPDIR",
  "TEMP",
  "TMP",
  "LANG",
  "LC_ALL",
  "LC_CTYPE",
  "TERM",
];

/**
 * Read `shell_environment_policy` from a config. Defaults: `inherit = "all"`, and — safer than current Codex,
 * whose default is to ignore them — the default excludes apply (`ignore_default_excludes = false`).
 */
export function shellEnvironmentPolicy(cfg: Config): ShellEnvironmentPolicy {
  const t = (cfg.shell_environment_policy ?? {}) as Record<string, unknown>;
  const strings = (v: unknown, name: string): string[] => {
    if (v === undefined) return [];
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string"))
      throw new ShellmcpError("CONFIG", `shell_environment_policy.${name} must be a list of strings`);
    return v;
  };
  const inherit = t.inherit ?? "all";
  if (inherit !== "all" && inherit !== "core" && inherit !== "none")
    throw new ShellmcpError("CONFIG", `shell_environment_policy.inherit must be "all", "core" or "none" (got ${JSON.stringify(inherit)})`);
  const set = (t.set ?? {}) as Record<string, unknown>;
  if (typeof set !== "object" || Array.isArray(set)) throw new ShellmcpError("CONFIG", "shell_environment_policy.set must be a table");
  for (const [k, v] of Object.entries(set))
    if (typeof v !== "string") throw new ShellmcpError("CONFIG", `shell_environment_policy.set.${k} must be a string`);
  const ign = t.ignore_default_excludes ?? false;
  if (typeof ign !== "boolean") throw new ShellmcpError("CONFIG", "shell_environment_policy.ignore_default_excludes must be a boolean");
  return {
    inherit,
    ignoreDefaultExcludes: ign,
    exclude: strings(t.exclude, "exclude"),
    set: set as Record<string, string>,
    includeOnly: strings(t.include_only, "include_only"),
  };
}

/**
 * Apply the policy to `env` (docs/sandbox.md, "Environment"): start set (all / {@link CORE_VARS} / none), drop the
 * default excludes (names and URLs with user-info, ./env-policy.ts), drop `exclude` patterns, add `set`, keep only
 * `include_only` patterns if any. Patterns are case-insensitive globs (`*`, `?`).
 */
export function applyEnvironmentPolicy(p: ShellEnvironmentPolicy, env: Record<string, string | undefined>): Record<string, string> {
  return filterEnvironment({ ...p, coreNames: CORE_VARS }, env);
}

/** shellmcp's own settings for escalated programs (`[shellmcp]` in config.toml; Codex ignores the table). */
export interface EscalationConfig {
  /** `escalation`: `room` (default: a bounded escalation sandbox) or `host` (Codex's meaning: unconfined). */
  mode: "room" | "host";
  /** `[shellmcp.room_writable]`: program base name → extra paths its room may write (`~/` expanded, absolute). */
  extraWritable: Record<string, string[]>;
  /**
   * `[shellmcp.room_network]`: program base name → the network its room gets instead of the call's: a list of
   * domains (a proxy of its own allowing exactly those, src/escalate/rooms/grants.ts), `"host"` (the host's network
   * namespace: loopback services and Unix sockets included) or `"call"` (the default).
   */
  roomNetwork: Record<string, "host" | "call" | string[]>;
  /**
   * `[shellmcp.room_readable]`: program base name → credential stores its room may read after all (`~/` expanded,
   * absolute; src/sandbox/secrets.ts `CREDENTIAL_STORES` lists what is hidden by default).
   */
  roomReadable: Record<string, string[]>;
  /**
   * `[shellmcp] sandbox_readable`: credential stores every sandbox (the call's and its rooms) may read after all
   * (`~/` expanded, absolute; src/sandbox/secrets.ts `CREDENTIAL_STORES` lists what is hidden by default). Secrets
   * cannot be opened.
   */
  sandboxReadable: string[];
  /** `[shellmcp] secret_paths`: more paths no sandbox or room reads, whatever else says (`~/` expanded, absolute). */
  secretPaths: string[];
}

/**
 * Read `[shellmcp]`: `escalation = "room" | "host"`, `[shellmcp.room_writable]` (`npm = ["~/.npm"]`),
 * `room_network`, `room_readable`, `sandbox_readable` and `secret_paths`. `home`
 * expands a leading `~/`. Throws `CONFIG` naming the key for a wrong type or value, or a relative path.
 */
export function escalationConfig(cfg: Config, home: string): EscalationConfig {
  const t = (cfg.shellmcp ?? {}) as Record<string, unknown>;
  if (typeof t !== "object" || t === null || Array.isArray(t)) throw new ShellmcpError("CONFIG", "shellmcp must be a table");
  const mode = t.escalation ?? "room";
  if (mode !== "room" && mode !== "host")
    throw new ShellmcpError("CONFIG", `shellmcp.escalation must be "room" or "host" (got ${JSON.stringify(mode)})`);
  const table = (key: string): Record<string, unknown> => {
    const v = (t[key] ?? {}) as Record<string, unknown>;
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ShellmcpError("CONFIG", `shellmcp.${key} must be a table`);
    return v;
  };
  const pathList = (key: string, paths: unknown): string[] => {
    if (!Array.isArray(paths) || !paths.every((p) => typeof p === "string"))
      throw new ShellmcpError("CONFIG", `shellmcp.${key} must be a list of paths`);
    return paths.map((p) => {
      const abs = p === "~" ? home : p.startsWith("~/") ? `${home}/${p.slice(2)}` : p;
      if (!abs.startsWith("/")) throw new ShellmcpError("CONFIG", `shellmcp.${key}: ${p} is not an absolute path`);
      return abs;
    });
  };
  const pathLists = (key: string): Record<string, string[]> => {
    const out: Record<string, string[]> = {};
    for (const [program, paths] of Object.entries(table(key))) out[program] = pathList(`${key}.${program}`, paths);
    return out;
  };
  const roomNetwork: Record<string, "host" | "call" | string[]> = {};
  for (const [program, v] of Object.entries(table("room_network"))) {
    if (Array.isArray(v) && v.length > 0 && v.every((d) => typeof d === "string")) {
      // Each domain's syntax is checked by serve's set-up (../sandbox/room-grants.ts `checkRoomNetworkGrants`).
      roomNetwork[program] = v as string[];
    } else if (v === "host" || v === "call") roomNetwork[program] = v;
    else
      throw new ShellmcpError(
        "CONFIG",
        `shellmcp.room_network.${program} must be a list of domains (reached through a proxy of its own, e.g. ["registry.npmjs.org"]), "host" (the host's network, loopback services and Unix sockets included) or "call" (the call's own network, the default); got ${JSON.stringify(v)}`,
      );
  }
  return {
    mode,
    extraWritable: pathLists("room_writable"),
    roomNetwork,
    roomReadable: pathLists("room_readable"),
    sandboxReadable: pathList("sandbox_readable", t.sandbox_readable ?? []),
    secretPaths: pathList("secret_paths", t.secret_paths ?? []),
  };
}

/** Largest `default_timeout_ms` accepted, ms (24 hours): longer work belongs in a session. */
export const MAX_DEFAULT_TIMEOUT_MS = 24 * 3600 * 1000;

/**
 * Parse a default timeout for `shell` calls: a whole number of milliseconds from 1 to {@link MAX_DEFAULT_TIMEOUT_MS}
 * (`value` from `--default-timeout-ms` as a string, or from `[shellmcp] default_timeout_ms` as a TOML integer).
 * `where` names the flag or key in the error. Throws `CONFIG` (key) or `USAGE` (flag).
 */
export function parseDefaultTimeoutMs(value: unknown, where: string): number {
  const n = typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : typeof value === "bigint" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > MAX_DEFAULT_TIMEOUT_MS)
    throw new ShellmcpError(
      where.startsWith("--") ? "USAGE" : "CONFIG",
      `${where} must be a whole number of milliseconds from 1 to ${MAX_DEFAULT_TIMEOUT_MS} (got ${JSON.stringify(typeof value === "bigint" ? String(value) : value)}), e.g. 120000 for two minutes`,
    );
  return n;
}

/** `[shellmcp] default_timeout_ms` (ms), or undefined when absent. Throws `CONFIG` for a bad value. */
export function defaultTimeoutConfig(cfg: Config): number | undefined {
  const t = (cfg.shellmcp ?? {}) as Record<string, unknown>;
  if (typeof t !== "object" || t === null || Array.isArray(t) || t.default_timeout_ms === undefined) return undefined;
  return parseDefaultTimeoutMs(t.default_timeout_ms, "shellmcp.default_timeout_ms");
}

/**
 * `[shellmcp] max_sessions` and `session_idle_timeout_ms` (unified exec sessions, ../shell/session-manager.ts):
 * each undefined when absent. Throws `CONFIG` naming the key for a value that is not a positive whole number.
 */
export function sessionLimitsConfig(cfg: Config): { maxSessions?: number; idleTimeoutMs?: number } {
  const t = (cfg.shellmcp ?? {}) as Record<string, unknown>;
  if (typeof t !== "object" || t === null || Array.isArray(t)) return {};
  return {
    maxSessions: t.max_sessions === undefined ? undefined : parsePositive(t.max_sessions, "shellmcp.max_sessions", 1024),
    idleTimeoutMs:
      t.session_idle_timeout_ms === undefined
        ? undefined
        : parsePositive(t.session_idle_timeout_ms, "shellmcp.session_idle_timeout_ms", 7 * 24 * 3600 * 1000),
  };
}

/**
 * `[shellmcp] listen`: the URL `serve` listens on for MCP over streamable HTTP (`http://HOST:PORT/PATH`, see
 * ../http/server.ts), or undefined when absent (stdio). Throws `CONFIG` when it is not a string.
 */
export function listenConfig(cfg: Config): string | undefined {
  const t = (cfg.shellmcp ?? {}) as Record<string, unknown>;
  if (typeof t !== "object" || t === null || Array.isArray(t) || t.listen === undefined) return undefined;
  if (typeof t.listen !== "string")
    throw new ShellmcpError(
      "CONFIG",
      `shellmcp.listen must be a URL string such as "http://127.0.0.1:8765/mcp" (got ${JSON.stringify(t.listen)})`,
    );
  return t.listen;
}

/**
 * A whole number from 1 to `max`, from a flag (a string; `where` starts with `--`: `USAGE`) or a config key (`CONFIG`).
 * Throws with the flag or key named.
 */
export function parsePositive(value: unknown, where: string, max: number): number {
  const n = typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : typeof value === "bigint" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > max)
    throw new ShellmcpError(
      where.startsWith("--") ? "USAGE" : "CONFIG",
      `${where} must be a whole number from 1 to ${max} (got ${JSON.stringify(typeof value === "bigint" ? String(value) : value)})`,
    );
  return n;
}

/**
 * The modern era's timeouts (docs/mcp-eras.md): `[shellmcp] input_required_timeout_ms` (how long an exec parked for a
 * human's answer waits for the client's retry, ms, 1 ms to 24 hours) and `task_after_ms` (after how long a call of a
 * client that declares the tasks extension becomes a task, ms, 1 ms to 1 hour): each undefined when absent. Throws
 * `CONFIG` naming the key for a wrong type or value.
 */
export function modernEraConfig(cfg: Config): { inputRequiredTimeoutMs?: number; taskAfterMs?: number } {
  const t = (cfg.shellmcp ?? {}) as Record<string, unknown>;
  if (typeof t !== "object" || t === null || Array.isArray(t)) return {};
  return {
    inputRequiredTimeoutMs:
      t.input_required_timeout_ms === undefined
        ? undefined
        : parsePositive(t.input_required_timeout_ms, "shellmcp.input_required_timeout_ms", 24 * 3600 * 1000),
    taskAfterMs: t.task_after_ms === undefined ? undefined : parsePositive(t.task_after_ms, "shellmcp.task_after_ms", 3600 * 1000),
  };
}

/**
 * `[shellmcp] approver` (docs/approvals.md): `true` (a `prompt` for a client without elicitation waits for
 * `shellmcp approvals`), `"always"` (every `prompt` does, even where the client declares elicitation), `false`;
 * and `approver_timeout_ms` (how long, ms, from 1 to 24 hours): each undefined when absent. Throws `CONFIG` naming
 * the key for a wrong type or value.
 */
export function approverConfig(cfg: Config): { enabled?: boolean | "always"; timeoutMs?: number } {
  const t = (cfg.shellmcp ?? {}) as Record<string, unknown>;
  if (typeof t !== "object" || t === null || Array.isArray(t)) return {};
  if (t.approver !== undefined && typeof t.approver !== "boolean" && t.approver !== "always")
    throw new ShellmcpError("CONFIG", `shellmcp.approver must be true, false or "always" (got ${JSON.stringify(String(t.approver))})`);
  return {
    enabled: t.approver as boolean | "always" | undefined,
    timeoutMs:
      t.approver_timeout_ms === undefined
        ? undefined
        : parsePositive(t.approver_timeout_ms, "shellmcp.approver_timeout_ms", 24 * 3600 * 1000),
  };
}
