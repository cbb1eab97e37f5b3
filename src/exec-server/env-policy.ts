/**
 * `process/start`'s `envPolicy` (Codex's shell environment policy evaluated on the server, exec-server spec §7):
 * without a policy the child env is exactly `env`; with one, the server's own environment is filtered (inherit →
 * default excludes → exclude → set → includeOnly) and `env` is overlaid last.
 */
import { field, invalidParams, invalidType, paramsObject } from "./rpc.ts";

/** The decoded policy. All five fields are required on the wire. */
export interface EnvPolicy {
  inherit: "core" | "all" | "none";
  ignoreDefaultExcludes: boolean;
  exclude: string[];
  set: Record<string, string>;
  includeOnly: string[];
}

/** Unix core names kept by `inherit: "core"` (Codex 0.169, compared exactly). */
export const CORE_ENV_NAMES = ["PATH", "SHELL", "TMPDIR", "TEMP", "TMP", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "USER"];

/** Names dropped unless `ignoreDefaultExcludes` (case-insensitive globs). */
export const DEFAULT_EXCLUDES = ["*KEY*", "*SECRET*", "*TOKEN*"];

/** Decode an `envPolicy` value (null/absent → undefined). Throws −32602 like serde. */
export function decodeEnvPolicy(v: unknown): EnvPolicy | undefined {
  if (v === undefined || v === null) return undefined;
  const o = paramsObject(v, "ShellEnvironmentPolicy");
  const inherit = field.string(o, "inherit");
  if (inherit !== "core" && inherit !== "all" && inherit !== "none")
    throw invalidParams(`unknown variant \`${inherit}\`, expected one of \`core\`, \`all\`, \`none\``);
  const set = field.stringMap(o, "set", true)!;
  if (set === null) throw invalidType(null, "a map");
  return {
    inherit,
    ignoreDefaultExcludes: field.bool(o, "ignoreDefaultExcludes"),
    exclude: field.stringList(o, "exclude"),
    set,
    includeOnly: field.stringList(o, "includeOnly"),
  };
}

/** A wildmatch glob (`*`, `?`) matched against the whole name, case-insensitively. */
export function globMatcher(pattern: string): RegExp {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${re}$`, "is");
}

/** The child's environment (spec §7). `serverEnv` defaults to this process's environment. */
export function childEnv(
  env: Record<string, string>,
  policy: EnvPolicy | undefined,
  serverEnv: Record<string, string | undefined> = process.env,
): Record<string, string> {
  if (policy === undefined) return { ...env };
  let out: Record<string, string> = {};
  for (const [k, v] of Object.entries(serverEnv)) {
    if (v === undefined) continue;
    if (policy.inherit === "all" || (policy.inherit === "core" && CORE_ENV_NAMES.includes(k))) out[k] = v;
  }
  const drop = (patterns: string[]) => {
    const res = patterns.map(globMatcher);
    for (const k of Object.keys(out)) if (res.some((r) => r.test(k))) delete out[k];
  };
  if (!policy.ignoreDefaultExcludes) drop(DEFAULT_EXCLUDES);
  drop(policy.exclude);
  out = { ...out, ...policy.set };
  if (policy.includeOnly.length > 0) {
    const keep = policy.includeOnly.map(globMatcher);
    for (const k of Object.keys(out)) if (!keep.some((r) => r.test(k))) delete out[k];
  }
  return { ...out, ...env };
}
