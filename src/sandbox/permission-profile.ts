/**
 * Codex 0.169's `PermissionProfile` — what Codex sends with every `tools/call` in
 * `params._meta["codex/sandbox-state"].permissionProfile` (and what its 0.169 Linux helper takes with
 * `--permission-profile`): its types and its wire format. What a backend enforces is the `FilesystemPlan` that
 * ./filesystem-plan.ts makes of a profile (or of a legacy `SandboxPolicy`); this module knows nothing of plans.
 *
 * API:
 *
 *   parsePermissionProfile(input: string | unknown): PermissionProfile        throws ShellmcpError "USAGE"
 *   serializePermissionProfile(p: PermissionProfile): string                  Codex's JSON shape
 *   pathFromUri(value: string, what: string): string                          `file://` URI or absolute path → path
 *
 * and in ./filesystem-plan.ts: planPermissionProfile, planSandboxPolicy, summarySandboxPolicy, linuxReadableRoots,
 * landlockCanEnforce.
 *
 * Wire shape (Codex 0.169, serde: internally tagged on `type`, snake_case):
 *
 *   PermissionProfile = {"type":"managed","file_system":ManagedFileSystem,"network":"restricted"|"enabled"}
 *                     | {"type":"disabled"}                                   (no sandbox at all: danger-full-access)
 *                     | {"type":"external","network":"restricted"|"enabled"}  (caller is sandboxed already)
 *   ManagedFileSystem = {"type":"restricted","entries":[Entry…],"glob_scan_max_depth"?:n} | {"type":"unrestricted"}
 *   Entry = {"path":Path,"access":"read"|"write"|"deny"  ("none" = legacy alias of "deny"),
 *            "missing_path_behavior"?:"skip"}
 *   Path  = {"type":"path","path":"/abs" | "file:///abs"} | {"type":"glob_pattern","pattern":"…"}
 *         | {"type":"special","value":{"kind":"root"|"minimal"|"tmpdir"|"slash_tmp"}}
 *         | {"type":"special","value":{"kind":"project_roots"|"current_working_directory","subpath"?:"rel"}}
 *
 * Meaning (Codex's): an entry applies to its path and everything below it; the most specific (deepest) entry
 * wins; between entries for the same path `deny` beats `write` beats `read`. `root` is `/`; `minimal` is the
 * platform's system folders (enough to start programs); `project_roots` is the sandbox cwd (plus `subpath`);
 * `tmpdir` is `$TMPDIR` and `slash_tmp` is `/tmp` (skipped when absent). Missing paths are skipped — except
 * that a `read` or `deny` entry inside a writable root is still enforced on a missing path (the backend blocks
 * its creation: otherwise a command could create `.codex/config.toml`), which is what Codex 0.169 does too.
 *
 * Symlinks: the paths of `write` entries are resolved; `read`/`deny` entries keep their last component, so a
 * backend sees (and refuses) a protected path that is a symlink a command could re-point.
 *
 * Fail closed: anything we cannot enforce throws — unknown fields or values, relative paths, `glob_pattern`
 * entries (not supported yet), unknown special kinds other than on `write` entries (an unknown `write` grant is
 * dropped, which only narrows), `..` in a subpath. A plan is never wider than the profile.
 */
import { isAbsolute, normalize } from "node:path";
import { ShellmcpError } from "../errors.ts";

/** Access of one entry. `deny` = neither read nor write (wire alias `none`). */
export type FileSystemAccessMode = "read" | "write" | "deny";

/** Codex's `FileSystemSpecialPath`; `unknown` keeps a kind from a newer Codex (only dropped, never widened). */
export type FileSystemSpecialPath =
  | { kind: "root" }
  | { kind: "minimal" }
  | { kind: "project_roots"; subpath?: string }
  | { kind: "tmpdir" }
  | { kind: "slash_tmp" }
  | { kind: "unknown"; name: string };

/** Codex's `FileSystemPath`. `path` is absolute (a `file://` URI on the wire is converted). */
export type FileSystemPath =
  { type: "path"; path: string } | { type: "glob_pattern"; pattern: string } | { type: "special"; value: FileSystemSpecialPath };

/** One entry of a restricted file system. */
export interface FileSystemSandboxEntry {
  path: FileSystemPath;
  access: FileSystemAccessMode;
  /** Codex's only value is `skip`; absent behaves the same here (missing paths are skipped, see the top). */
  missingPathBehavior?: "skip";
}

/** Codex's `ManagedFileSystemPermissions`. */
export type ManagedFileSystem =
  { type: "restricted"; entries: FileSystemSandboxEntry[]; globScanMaxDepth?: number } | { type: "unrestricted" };

/** Codex's `NetworkSandboxPolicy`. */
export type NetworkSandboxPolicy = "restricted" | "enabled";

/** Codex 0.169's `PermissionProfile`, camelCase inside (wire form: see the top of this file). */
export type PermissionProfile =
  | { type: "managed"; fileSystem: ManagedFileSystem; network: NetworkSandboxPolicy }
  | { type: "disabled" }
  | { type: "external"; network: NetworkSandboxPolicy };

// --- the wire format: validating and serialising profiles ----------------------------------------------------

function invalid(message: string, data: Record<string, unknown> = {}): ShellmcpError {
  return new ShellmcpError("USAGE", `invalid permission profile: ${message}`, data);
}

function object(v: unknown, where: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw invalid(`\`${where}\` must be an object`);
  return v as Record<string, unknown>;
}

function only(o: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const k of Object.keys(o)) {
    if (!allowed.includes(k))
      throw invalid(`unknown field \`${k}\` in ${where}, expected one of ${allowed.map((a) => `\`${a}\``).join(", ")}`);
  }
}

function network(v: unknown, where: string): NetworkSandboxPolicy {
  if (v === "restricted" || v === "enabled") return v;
  throw invalid(`\`${where}\` must be "restricted" or "enabled" (got ${JSON.stringify(v)})`);
}

/**
 * A path from Codex: an absolute path, or a `file://` URI (Codex 0.169 sends `sandboxCwd` as one; host empty or
 * `localhost`; percent-escapes decoded). Throws `USAGE` for other schemes, relative paths, NUL bytes.
 */
export function pathFromUri(value: string, what: string): string {
  let p = value;
  if (/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(value)) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw invalid(`\`${what}\` is not a valid URI: ${JSON.stringify(value)}`);
    }
    if (url.protocol !== "file:") throw invalid(`\`${what}\` must be a file:// URI or an absolute path (got ${JSON.stringify(value)})`);
    if (url.host !== "" && url.host !== "localhost") throw invalid(`\`${what}\` names a remote host: ${JSON.stringify(value)}`);
    try {
      p = decodeURIComponent(url.pathname);
    } catch {
      throw invalid(`\`${what}\` has a bad percent-escape: ${JSON.stringify(value)}`);
    }
  }
  if (p.includes("\0")) throw invalid(`\`${what}\` contains a NUL byte`);
  if (!isAbsolute(p)) throw invalid(`\`${what}\` must be an absolute path (got ${JSON.stringify(value)})`);
  return normalize(p);
}

function parseSpecial(v: unknown): FileSystemSpecialPath {
  const o = object(v, "value");
  const kind = o.kind;
  switch (kind) {
    case "root":
    case "minimal":
    case "tmpdir":
    case "slash_tmp":
      only(o, ["kind"], `special path \`${kind}\``);
      return { kind };
    case "project_roots":
    case "current_working_directory": {
      only(o, ["kind", "subpath"], `special path \`${kind}\``);
      if (o.subpath === undefined || o.subpath === null) return { kind: "project_roots" };
      if (typeof o.subpath !== "string") throw invalid("`subpath` must be a string");
      if (isAbsolute(o.subpath) || o.subpath.split(/[\\/]/).includes("..") || o.subpath.includes("\0")) {
        throw invalid(`\`subpath\` must be a relative path inside the project (got ${JSON.stringify(o.subpath)})`);
      }
      return { kind: "project_roots", subpath: o.subpath };
    }
    default:
      if (typeof kind !== "string" || kind === "") throw invalid("special path needs a `kind`");
      return { kind: "unknown", name: kind };
  }
}

function parsePath(v: unknown): FileSystemPath {
  const o = object(v, "path");
  switch (o.type) {
    case "path":
      only(o, ["type", "path"], "path");
      if (typeof o.path !== "string") throw invalid("`path.path` must be a string");
      return { type: "path", path: pathFromUri(o.path, "path.path") };
    case "glob_pattern":
      only(o, ["type", "pattern"], "glob_pattern");
      if (typeof o.pattern !== "string") throw invalid("`pattern` must be a string");
      return { type: "glob_pattern", pattern: o.pattern };
    case "special":
      only(o, ["type", "value"], "special path");
      return { type: "special", value: parseSpecial(o.value) };
    default:
      throw invalid(`unknown path type ${JSON.stringify(o.type)}, expected \`path\`, \`glob_pattern\` or \`special\``);
  }
}

function parseEntry(v: unknown, i: number): FileSystemSandboxEntry {
  const o = object(v, `entries[${i}]`);
  only(o, ["path", "access", "missing_path_behavior"], `entries[${i}]`);
  const access = o.access === "none" ? "deny" : o.access;
  if (access !== "read" && access !== "write" && access !== "deny")
    throw invalid(`entries[${i}].access must be "read", "write" or "deny" (got ${JSON.stringify(o.access)})`);
  const entry: FileSystemSandboxEntry = { path: parsePath(o.path), access };
  if (o.missing_path_behavior !== undefined && o.missing_path_behavior !== null) {
    if (o.missing_path_behavior !== "skip")
      throw invalid(`entries[${i}].missing_path_behavior must be "skip" (got ${JSON.stringify(o.missing_path_behavior)})`);
    entry.missingPathBehavior = "skip";
  }
  return entry;
}

/**
 * Validate a profile given as JSON text or a parsed value. Throws `USAGE` naming the problem (unknown type,
 * field or access value; relative path; bad URI). Mirrors Codex 0.169's deserialiser, except that unknown fields
 * are errors (a misspelt restriction must not vanish) and `file://` URIs are accepted wherever a path is.
 */
export function parsePermissionProfile(input: string | unknown): PermissionProfile {
  let v: unknown = input;
  if (typeof input === "string") {
    try {
      v = JSON.parse(input);
    } catch (e) {
      throw invalid(`not JSON: ${(e as Error).message}`);
    }
  }
  const o = object(v, "permissionProfile");
  switch (o.type) {
    case "disabled":
      only(o, ["type"], "disabled");
      return { type: "disabled" };
    case "external":
      only(o, ["type", "network"], "external");
      return { type: "external", network: network(o.network ?? "restricted", "network") };
    case "managed": {
      only(o, ["type", "file_system", "network"], "managed");
      const fs = object(o.file_system, "file_system");
      let fileSystem: ManagedFileSystem;
      if (fs.type === "unrestricted") {
        only(fs, ["type"], "file_system");
        fileSystem = { type: "unrestricted" };
      } else if (fs.type === "restricted") {
        only(fs, ["type", "entries", "glob_scan_max_depth"], "file_system");
        const entries = fs.entries ?? [];
        if (!Array.isArray(entries)) throw invalid("`file_system.entries` must be a list");
        fileSystem = { type: "restricted", entries: entries.map(parseEntry) };
        if (fs.glob_scan_max_depth !== undefined && fs.glob_scan_max_depth !== null) {
          if (typeof fs.glob_scan_max_depth !== "number" || !Number.isInteger(fs.glob_scan_max_depth) || fs.glob_scan_max_depth < 1)
            throw invalid("`glob_scan_max_depth` must be a positive integer");
          fileSystem.globScanMaxDepth = fs.glob_scan_max_depth;
        }
      } else throw invalid(`unknown file_system type ${JSON.stringify(fs.type)}, expected \`restricted\` or \`unrestricted\``);
      return { type: "managed", fileSystem, network: network(o.network ?? "restricted", "network") };
    }
    default:
      throw invalid(`unknown type ${JSON.stringify(o.type)}, expected \`managed\`, \`disabled\` or \`external\``);
  }
}

function wirePath(p: FileSystemPath): unknown {
  if (p.type === "path") return { type: "path", path: p.path };
  if (p.type === "glob_pattern") return { type: "glob_pattern", pattern: p.pattern };
  const v = p.value;
  if (v.kind === "unknown") return { type: "special", value: { kind: v.name } };
  if (v.kind === "project_roots" && v.subpath !== undefined) return { type: "special", value: { kind: v.kind, subpath: v.subpath } };
  return { type: "special", value: { kind: v.kind } };
}

/** One entry in Codex's wire shape (snake_case, `missing_path_behavior` only when set), as serialised and quoted in errors. */
export function wireEntry(e: FileSystemSandboxEntry): unknown {
  return { path: wirePath(e.path), access: e.access, ...(e.missingPathBehavior ? { missing_path_behavior: e.missingPathBehavior } : {}) };
}

/** Codex's JSON for a profile (the shape {@link parsePermissionProfile} reads back; paths as plain paths). */
export function serializePermissionProfile(p: PermissionProfile): string {
  if (p.type === "disabled") return JSON.stringify({ type: "disabled" });
  if (p.type === "external") return JSON.stringify({ type: "external", network: p.network });
  const fs =
    p.fileSystem.type === "unrestricted"
      ? { type: "unrestricted" }
      : {
          type: "restricted",
          entries: p.fileSystem.entries.map(wireEntry),
          ...(p.fileSystem.globScanMaxDepth !== undefined ? { glob_scan_max_depth: p.fileSystem.globScanMaxDepth } : {}),
        };
  return JSON.stringify({ type: "managed", file_system: fs, network: p.network });
}
