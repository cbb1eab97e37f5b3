/**
 * The escalated program's environment (docs/security.md, the escalation boundary's "Environment"): the shell's
 * starting environment plus only the request's changes known to be harmless ({@link HARMLESS_ENV}), and `PATH`
 * without entries the sandbox can write.
 */
import { delimiter, isAbsolute } from "node:path";
import { canWrite, type WritableView } from "../../sandbox/writable.ts";
import { PROTOCOL_ENV_VARS } from "../protocol/wire.ts";
import type { EscalationBoundary } from "./boundary.ts";

/**
 * Request variables that may differ from the shell's starting environment and still reach an escalated program:
 * names whose values change presentation or metadata, never what is loaded or executed. `LANG`/`LC_*` and `TZ`
 * only when their value names no file.
 */
export const HARMLESS_ENV: readonly string[] = [
  "PWD",
  "OLDPWD",
  "SHLVL",
  "_",
  "COLUMNS",
  "LINES",
  "TERM",
  "COLORTERM",
  "NO_COLOR",
  "FORCE_COLOR",
  "CLICOLOR",
  "CLICOLOR_FORCE",
  "LANG",
  "LANGUAGE",
  "TZ",
  "GIT_AUTHOR_NAME",
  "GIT_AUTHOR_EMAIL",
  "GIT_AUTHOR_DATE",
  "GIT_COMMITTER_NAME",
  "GIT_COMMITTER_EMAIL",
  "GIT_COMMITTER_DATE",
  "GIT_TERMINAL_PROMPT",
  "GIT_OPTIONAL_LOCKS",
  "GIT_MERGE_AUTOEDIT",
];

/** Whether the request's `name=value` may reach the escalated program ({@link HARMLESS_ENV}, file-free locale and `TZ`). */
function harmless(name: string, value: string): boolean {
  const namesFile = value.includes("/") || value.includes("..");
  if (name === "LANG" || name === "LANGUAGE" || /^LC_[A-Z]+$/.test(name)) return !namesFile;
  if (name === "TZ") return !value.startsWith("/") && !value.startsWith(":") && !value.includes("..");
  return HARMLESS_ENV.includes(name);
}

/** The escalated program's environment, and the names of the request's changes that were dropped. */
export function escalatedEnv(b: EscalationBoundary, request: Record<string, string>): { env: Record<string, string>; dropped: string[] } {
  const env: Record<string, string> = { ...b.baseEnv };
  for (const k of PROTOCOL_ENV_VARS) delete env[k];
  const dropped: string[] = [];
  for (const [k, v] of Object.entries(request)) {
    if (env[k] === v || (PROTOCOL_ENV_VARS as readonly string[]).includes(k)) continue;
    if (harmless(k, v)) env[k] = v;
    else dropped.push(k);
  }
  if (env.PATH !== undefined) env.PATH = safePath(b.writable, env.PATH);
  return { env, dropped: dropped.sort() };
}

/** `PATH` without empty or relative entries (the cwd) and entries the sandbox can write. */
export function safePath(w: WritableView, path: string): string {
  if (w.full) return path;
  return path
    .split(delimiter)
    .filter((d) => d !== "" && isAbsolute(d) && !canWrite(w, d))
    .join(delimiter);
}

/** `PATH` the escalation trusts: the shell's starting PATH without entries the sandbox can write. */
export function trustedPath(b: EscalationBoundary): string {
  return safePath(b.writable, b.baseEnv.PATH ?? "");
}
