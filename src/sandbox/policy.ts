/**
 * Codex's `SandboxPolicy` (docs/sandbox.md, "Policy model") — the JSON `codex/sandbox-state/update` carries and the Linux
 * helper takes with `--sandbox-policy` — plus the writable/readable roots every backend enforces (docs/sandbox.md, "Writable roots" and "Read access").
 *
 * Canonical JSON is Codex's: internally tagged on `type` (kebab-case), snake_case fields. The camelCase mirror
 * of Codex's app-server API is accepted too. Unlike Codex, unknown fields are an error, not ignored: a typo in
 * `network_access` must not silently change what is enforced.
 */
import { existsSync, lstatSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, normalize, resolve, sep } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { readUntrustedText } from "./untrusted-fs.ts";

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

/** Reads allowed everywhere. */
export function hasFullRead(p: SandboxPolicy): boolean {
  if (p.type === "read-only") return p.access.type === "full-access";
  if (p.type === "workspace-write") return p.read_only_access.type === "full-access";
  return true;
}

/** A writable root and the paths inside it that stay read-only. */
export interface WritableRoot {
  root: string;
  readOnlySubpaths: string[];
}

function canonical(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return normalize(p);
  }
}

/** Whether `p` is a directory (symlinks followed); false when it does not exist or cannot be read. */
export function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The gitdir a `.git` *file* points at (`gitdir: <path>`, relative to the file's folder), if it exists.
 */
export function gitdirPointer(dotGit: string): string | undefined {
  try {
    if (!lstatSync(dotGit).isFile()) return undefined;
    const r = readUntrustedText(dotGit, { maxBytes: 4096 }); // the sandbox may have put a FIFO there since
    if (!r.ok) return undefined;
    const text = r.text;
    const i = text.indexOf(":");
    if (i < 0 || text.slice(0, i).trim() !== "gitdir") return undefined;
    const target = resolve(dirname(dotGit), text.slice(i + 1).trim());
    return existsSync(target) ? target : undefined;
  } catch {
    return undefined;
  }
}

/** Names kept read-only at the top of every writable root. */
export const PROTECTED_NAMES = [".git", ".agents", ".codex"] as const;

/**
 * Read-only subpaths of `root` (docs/sandbox.md, "Protected paths inside writable roots"): `.git` if it exists as a directory or file (and the gitdir a
 * `.git` file points at, listed first); `.agents` if it is a directory; `.codex` if it is a directory, or always
 * when `root` is the policy cwd (so the agent cannot create `.codex/config.toml`).
 */
export function readOnlySubpaths(root: string, isCwd: boolean): string[] {
  const out: string[] = [];
  const git = join(root, ".git");
  if (existsSync(git)) {
    const pointed = gitdirPointer(git);
    if (pointed !== undefined) out.push(pointed);
    out.push(git);
  }
  if (isDir(join(root, ".agents"))) out.push(join(root, ".agents"));
  const codex = join(root, ".codex");
  if (existsSync(codex) || isCwd) out.push(codex);
  return [...new Set(out)];
}

/**
 * Writable roots of a policy (docs/sandbox.md, "Writable roots"): `writable_roots`, then `cwd`, then `/tmp` (unless
 * `exclude_slash_tmp`, and only if it is a directory), then `$TMPDIR` (unless `exclude_tmpdir_env_var`; must be
 * absolute). Roots that do not exist are skipped; duplicates (by canonical path) keep the first. Empty for
 * policies without workspace writes.
 */
export function writableRoots(p: SandboxPolicy, cwd: string, env: Record<string, string | undefined> = process.env): WritableRoot[] {
  if (p.type !== "workspace-write") return [];
  const candidates: string[] = [...p.writable_roots];
  if (isAbsolute(cwd)) candidates.push(cwd);
  if (!p.exclude_slash_tmp && isDir("/tmp")) candidates.push("/tmp");
  const tmpdir = env.TMPDIR;
  if (!p.exclude_tmpdir_env_var && tmpdir !== undefined && tmpdir !== "" && isAbsolute(tmpdir)) candidates.push(tmpdir);
  const cwdCanon = canonical(cwd);
  const seen = new Set<string>();
  const out: WritableRoot[] = [];
  for (const c of candidates) {
    if (!existsSync(c)) continue;
    const root = canonical(c);
    if (seen.has(root)) continue;
    seen.add(root);
    out.push({ root, readOnlySubpaths: readOnlySubpaths(root, root === cwdCanon) });
  }
  return out;
}

/** Linux platform defaults for restricted reads: system folders a program needs to start. */
export const LINUX_PLATFORM_READ_DEFAULTS = [
  "/bin",
  "/sbin",
  "/usr",
  "/lib",
  "/lib32",
  "/lib64",
  "/libx32",
  "/etc",
  "/dev",
  "/proc",
  "/sys/devices/system/cpu",
];

/**
 * Readable roots for a restricted-read policy (docs/sandbox.md, "Read access"): `readable_roots`, the cwd, every writable root,
 * the platform defaults when asked for, and `extra` (e.g. the shellmcp binary's folder). `undefined` means
 * everything is readable.
 */
export function readableRoots(p: SandboxPolicy, cwd: string, writable: WritableRoot[], extra: string[] = []): string[] | undefined {
  const access = p.type === "read-only" ? p.access : p.type === "workspace-write" ? p.read_only_access : undefined;
  if (access === undefined || access.type === "full-access") return undefined;
  const roots = [
    ...access.readable_roots,
    cwd,
    ...writable.map((w) => w.root),
    ...(access.include_platform_defaults ? LINUX_PLATFORM_READ_DEFAULTS : []),
    ...extra,
  ];
  return [...new Set(roots.filter((r) => existsSync(r)).map(canonical))];
}

/** Whether `path` lies under `root` (component-wise). */
export function isUnder(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
