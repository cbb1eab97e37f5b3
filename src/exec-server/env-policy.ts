/**
 * `process/start`'s `envPolicy` (Codex's shell environment policy evaluated on the server, exec-server spec §7):
 * without a policy the child env is exactly `env`; with one, the server's own environment is filtered (inherit →
 * default excludes → exclude → set → includeOnly) and `env` is overlaid last. The filter is the one shared with
 * `serve` (../config/env-policy.ts), whose default excludes are wider than Codex's (passwords, PATs, credentials,
 * auth, URLs with user-info): a client that sends `ignoreDefaultExcludes: false` gets those dropped too.
 */
import { filterEnvironment } from "../config/env-policy.ts";
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

/** The child's environment (spec §7). `serverEnv` defaults to this process's environment. */
export function childEnv(
  env: Record<string, string>,
  policy: EnvPolicy | undefined,
  serverEnv: Record<string, string | undefined> = process.env,
): Record<string, string> {
  if (policy === undefined) return { ...env };
  return { ...filterEnvironment({ ...policy, coreNames: CORE_ENV_NAMES }, serverEnv), ...env };
}
