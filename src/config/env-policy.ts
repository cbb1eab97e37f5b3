/**
 * The one implementation of Codex's shell environment policy filter, used by `serve` (`shell_environment_policy`
 * in config.toml, ./config.ts) and by `exec-server` (`process/start`'s `envPolicy`, ../exec-server/env-policy.ts).
 * Order, as Codex: start set (inherit all / core / none) → default excludes (unless `ignoreDefaultExcludes`) →
 * `exclude` → `set` (overriding) → `includeOnly` (keeps only matching names, `set` entries included).
 *
 * Patterns are wildmatch globs matched against the whole variable name, case-insensitively: `*` any run of
 * characters (possibly empty), `?` exactly one; every other character is literal (Codex's `wildmatch`). Not
 * picomatch, whose path globs cannot mean this (docs/sandbox.md, "Environment").
 *
 * The default excludes are wider than Codex's `*KEY*`, `*SECRET*`, `*TOKEN*` (issue 30): secrets under their
 * common names — passwords, personal access tokens, credentials, auth — and any variable whose value is a URL
 * carrying user-info (`postgres://user:pass@db/x`, `https://TOKEN@host`). Deliberate choices:
 * - `PWD` and `OLDPWD` are kept (`*_PWD` needs the underscore: `MYSQL_PWD` goes);
 * - `*AUTH*` drops `XAUTHORITY` (the X11 cookie file: keystrokes into every window) and `SSH_AUTH_SOCK` (the ssh
 *   agent signs as the user): both are handles to a credential, and a command the agent runs should not act with
 *   them unless the user says so; `GIT_AUTHOR_*` (a name, an e-mail, a date) is not a credential and is kept;
 * - a URL with a user name but no password (`ssh://git@host/repo`) is dropped too: a bare token is often sent as
 *   the user name (`https://ghp_…@github.com`), and the value cannot tell the two apart.
 * To get one back: `set` it explicitly, or `ignore_default_excludes = true` with your own `exclude` list.
 */

/** Name globs dropped unless `ignoreDefaultExcludes` (case-insensitive). */
export const DEFAULT_EXCLUDES: readonly string[] = [
  "*KEY*",
  "*SECRET*",
  "*TOKEN*",
  "*PASSWORD*",
  "*PASSWD*",
  "*PASSPHRASE*",
  "*_PWD",
  "*_PASS",
  "*_PAT",
  "*CREDENTIAL*",
  "*AUTH*",
];

/** Name globs the default excludes never drop (not secrets although a default pattern matches them). */
export const DEFAULT_EXCLUDE_EXCEPTIONS: readonly string[] = ["GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE"];

/**
 * A wildmatch glob (`*`, `?`) as a regular expression matching the whole name, case-insensitively. Every other
 * character (regex syntax included) is literal.
 */
export function globMatcher(pattern: string): RegExp {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${re}$`, "is");
}

/** A predicate: does a name match any of `patterns` (see {@link globMatcher})? Empty list: never. */
export function anyGlob(patterns: readonly string[]): (name: string) => boolean {
  const res = patterns.map(globMatcher);
  return (name) => res.some((r) => r.test(name));
}

/** `scheme://user-info@…` anywhere in a value (user-info: no `/`, `?`, `#`, `@` or white space). */
const URL_WITH_USERINFO = /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#@\s]+@/;

/** Whether `value` holds a URL with user-info (`scheme://user:pass@host`, `scheme://token@host`). */
export function hasUrlUserInfo(value: string): boolean {
  return URL_WITH_USERINFO.test(value);
}

const defaultName = anyGlob(DEFAULT_EXCLUDES);
const exceptedName = anyGlob(DEFAULT_EXCLUDE_EXCEPTIONS);

/**
 * Whether the default excludes drop the variable `name=value`: its name matches {@link DEFAULT_EXCLUDES} (and
 * none of {@link DEFAULT_EXCLUDE_EXCEPTIONS}), or its value holds a URL with user-info.
 */
export function isDefaultExcluded(name: string, value: string): boolean {
  return (defaultName(name) && !exceptedName(name)) || hasUrlUserInfo(value);
}

/** The policy's fields (Codex's names, camel-cased); `coreNames` is what `inherit: "core"` keeps (exact names). */
export interface EnvFilter {
  inherit: "all" | "core" | "none";
  coreNames: readonly string[];
  ignoreDefaultExcludes: boolean;
  exclude: readonly string[];
  set: Readonly<Record<string, string>>;
  includeOnly: readonly string[];
}

/**
 * Apply `f` to `env` (undefined values are skipped; `env` is not modified) and return the resulting environment,
 * in Codex's order (see the module comment).
 */
export function filterEnvironment(f: EnvFilter, env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || f.inherit === "none") continue;
    if (f.inherit === "core" && !f.coreNames.includes(k)) continue;
    out[k] = v;
  }
  const excluded = anyGlob(f.exclude);
  for (const [k, v] of Object.entries(out)) {
    if ((!f.ignoreDefaultExcludes && isDefaultExcluded(k, v)) || excluded(k)) delete out[k];
  }
  Object.assign(out, f.set);
  if (f.includeOnly.length > 0) {
    const keep = anyGlob(f.includeOnly);
    for (const k of Object.keys(out)) if (!keep(k)) delete out[k];
  }
  return out;
}
