/**
 * Codex's `SandboxPolicy` (docs/sandbox.md, "Policy model") — the JSON `codex/sandbox-state/update` carries and the Linux
 * helper takes with `--sandbox-policy`: its types, parsing and serialisation. The writable/readable roots every backend
 * enforces (docs/sandbox.md, "Writable roots" and "Read access") are in ./roots.ts.
 *
 * Canonical JSON is Codex's: internally tagged on `type` (kebab-case), snake_case fields. The camelCase mirror
 * of Codex's app-server API is accepted too. Unlike Codex, unknown fields are an error, not ignored: a typo in
 * `network_access` must not silently change what is enforced.
 */
import { isAbsolute, normalize } from "node:path";
import { ShellmcpError } from "../errors.ts";

/** Read access: everything, or only some roots (+ optional platform defaults). */
export type ReadOnlyAccess = { type: "full-access" } | { type: "restricted"; include_platform_defaults: boolean; readable_roots: string[] };

/** Codex's `SandboxPolicy`. */
export type SandboxPolicy =
  | { type: "danger-full-access" }
  | { type: "read-only"; access: ReadOnlyAccess; network_access: boolean }
  | { type: "external-sandbox"; network_access: "restricted" | "enabled" }
  | {
      type: "workspace-write";
      writable_roots: string[];
      read_only_access: ReadOnlyAccess;
      network_access: boolean;
      exclude_tmpdir_env_var: boolean;
      exclude_slash_tmp: boolean;
    };

/** The four policy types. */
export const POLICY_TYPES = ["danger-full-access", "read-only", "external-sandbox", "workspace-write"] as const;

function invalid(message: string, data: Record<string, unknown> = {}): ShellmcpError {
  return new ShellmcpError("USAGE", `invalid sandbox policy: ${message}`, data);
}

const CAMEL: Record<string, string> = {
  dangerFullAccess: "danger-full-access",
  readOnly: "read-only",
  externalSandbox: "external-sandbox",
  workspaceWrite: "workspace-write",
  fullAccess: "full-access",
};
const FIELD_ALIASES: Record<string, string> = {
  writableRoots: "writable_roots",
  networkAccess: "network_access",
  readOnlyAccess: "read_only_access",
  excludeTmpdirEnvVar: "exclude_tmpdir_env_var",
  excludeSlashTmp: "exclude_slash_tmp",
  includePlatformDefaults: "include_platform_defaults",
  readableRoots: "readable_roots",
};

function fields(o: Record<string, unknown>, allowed: readonly string[], where: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k0, v] of Object.entries(o)) {
    const k = FIELD_ALIASES[k0] ?? k0;
    if (k === "type") continue;
    if (!allowed.includes(k))
      throw invalid(`unknown field \`${k0}\` in ${where}, expected one of ${allowed.map((a) => `\`${a}\``).join(", ") || "none"}`);
    out[k] = v;
  }
  return out;
}

function bool(v: unknown, name: string, dflt: boolean): boolean {
  if (v === undefined) return dflt;
  if (typeof v !== "boolean") throw invalid(`\`${name}\` must be a boolean`);
  return v;
}

function absPaths(v: unknown, name: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) throw invalid(`\`${name}\` must be a list of paths`);
  for (const p of v as string[]) if (!isAbsolute(p)) throw invalid(`\`${name}\` entries must be absolute paths (got ${JSON.stringify(p)})`);
  return (v as string[]).map((p) => normalize(p));
}

function parseAccess(v: unknown, where: string): ReadOnlyAccess {
  if (v === undefined) return { type: "full-access" };
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw invalid(`\`${where}\` must be an object`);
  const o = v as Record<string, unknown>;
  const t = CAMEL[o.type as string] ?? o.type;
  if (t === "full-access") {
    fields(o, [], where);
    return { type: "full-access" };
  }
  if (t === "restricted") {
    const f = fields(o, ["include_platform_defaults", "readable_roots"], where);
    return {
      type: "restricted",
      include_platform_defaults: bool(f.include_platform_defaults, "include_platform_defaults", true),
      readable_roots: absPaths(f.readable_roots, "readable_roots"),
    };
  }
  throw invalid(`unknown variant \`${String(o.type)}\` in \`${where}\`, expected \`full-access\` or \`restricted\``);
}

/**
 * Validate a policy given as JSON text or a parsed value. Throws `USAGE` with a message naming the problem
 * (unknown variant — Codex's wording — unknown field, relative path, wrong type).
 */
export function parseSandboxPolicy(input: string | unknown): SandboxPolicy {
  let v: unknown = input;
  if (typeof input === "string") {
    try {
      v = JSON.parse(input);
    } catch (e) {
      throw invalid(`not JSON: ${(e as Error).message}`);
    }
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw invalid("expected a JSON object with a `type`");
  const o = v as Record<string, unknown>;
  const type = CAMEL[o.type as string] ?? o.type;
  switch (type) {
    case "danger-full-access":
      fields(o, [], type);
      return { type };
    case "read-only": {
      const f = fields(o, ["access", "network_access"], type);
      return { type, access: parseAccess(f.access, "access"), network_access: bool(f.network_access, "network_access", false) };
    }
    case "external-sandbox": {
      const f = fields(o, ["network_access"], type);
      const n = f.network_access ?? "restricted";
      if (n !== "restricted" && n !== "enabled") throw invalid('`network_access` of external-sandbox must be "restricted" or "enabled"');
      return { type, network_access: n };
    }
    case "workspace-write": {
      const f = fields(o, ["writable_roots", "read_only_access", "network_access", "exclude_tmpdir_env_var", "exclude_slash_tmp"], type);
      return {
        type,
        writable_roots: absPaths(f.writable_roots, "writable_roots"),
        read_only_access: parseAccess(f.read_only_access, "read_only_access"),
        network_access: bool(f.network_access, "network_access", false),
        exclude_tmpdir_env_var: bool(f.exclude_tmpdir_env_var, "exclude_tmpdir_env_var", false),
        exclude_slash_tmp: bool(f.exclude_slash_tmp, "exclude_slash_tmp", false),
      };
    }
    default:
      throw invalid(`unknown variant \`${String(o.type)}\`, expected one of ${POLICY_TYPES.map((t) => `\`${t}\``).join(", ")}`, {
        type: o.type,
      });
  }
}

/** Codex's exact serialisation (defaults omitted as serde does: empty `writable_roots`, full access). */
export function serializeSandboxPolicy(p: SandboxPolicy): string {
  switch (p.type) {
    case "danger-full-access":
      return JSON.stringify({ type: p.type });
    case "read-only": {
      const o: Record<string, unknown> = { type: p.type };
      if (p.access.type !== "full-access") o.access = p.access;
      if (p.network_access) o.network_access = true;
      return JSON.stringify(o);
    }
    case "external-sandbox":
      return JSON.stringify({ type: p.type, network_access: p.network_access });
    case "workspace-write": {
      const o: Record<string, unknown> = { type: p.type };
      if (p.writable_roots.length > 0) o.writable_roots = p.writable_roots;
      if (p.read_only_access.type !== "full-access") o.read_only_access = p.read_only_access;
      Object.assign(o, {
        network_access: p.network_access,
        exclude_tmpdir_env_var: p.exclude_tmpdir_env_var,
        exclude_slash_tmp: p.exclude_slash_tmp,
      });
      return JSON.stringify(o);
    }
  }
}

/** Writes allowed everywhere (danger-full-access, external-sandbox). */
export function hasFullDiskWrite(p: SandboxPolicy): boolean {
  return p.type === "danger-full-access" || p.type === "external-sandbox";
}

/** Network fully allowed. */
export function hasFullNetwork(p: SandboxPolicy): boolean {
  switch (p.type) {
    case "danger-full-access":
      return true;
    case "external-sandbox":
      return p.network_access === "enabled";
    case "read-only":
    case "workspace-write":
      return p.network_access;
  }
}
