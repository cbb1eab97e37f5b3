/**
 * Codex 0.169's `PermissionProfile` — what Codex sends with every `tools/call` in
 * `params._meta["codex/sandbox-state"].permissionProfile` (and what its 0.169 Linux helper takes with
 * `--permission-profile`) — and the {@link FilesystemPlan} every shellmcp backend enforces (bubblewrap, Landlock,
 * Seatbelt, the exec-server). Legacy `SandboxPolicy` values (0.97's `codex/sandbox-state/update`) map onto the
 * same plan with {@link planSandboxPolicy}, so a backend only ever consumes plans.
 *
 * API (other modules code against exactly this):
 *
 *   parsePermissionProfile(input: string | unknown): PermissionProfile        throws ShellmcpError "USAGE"
 *   serializePermissionProfile(p: PermissionProfile): string                  Codex's JSON shape
 *   pathFromUri(value: string, what: string): string                          `file://` URI or absolute path → path
 *   planPermissionProfile(p, cwd, env?): FilesystemPlan                       throws "SANDBOX_UNAVAILABLE"
 *   planSandboxPolicy(policy: SandboxPolicy, cwd, env?): FilesystemPlan       the legacy policy as a plan
 *   summarySandboxPolicy(plan: FilesystemPlan): SandboxPolicy                 nearest legacy policy, never wider
 *   linuxReadableRoots(plan, extra?): string[] | undefined                    readable roots incl. platform defaults
 *   landlockCanEnforce(plan): string | undefined                              why Landlock alone cannot (or undefined)
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
import { existsSync, lstatSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, normalize, sep } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { log } from "../log.ts";
import { isUnder, LINUX_PLATFORM_READ_DEFAULTS, readableRoots, writableRoots, type SandboxPolicy, type WritableRoot } from "./policy.ts";

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

/**
 * What a backend enforces, with every path resolved (absolute, symlinks resolved where the path exists).
 *
 * - `sandboxed` false: run with no sandbox at all (profile `disabled`, policy `danger-full-access`).
 * - `fullRead`: everything is readable (except `deniedPaths`); else only `readableRoots` (+ the platform
 *   defaults when `includePlatformDefaults`, + every writable root).
 * - `fullWrite`: everything is writable (profile `external`/unrestricted, policy `external-sandbox`); else only
 *   `writableRoots`, minus each root's `readOnlySubpaths` (which may not exist yet: the backend must then stop
 *   them from being created, e.g. bwrap mounts an empty read-only directory there).
 * - `deniedPaths`: neither readable nor writable (files or folders; a missing one inside a writable root must be
 *   kept from being created, one elsewhere can be ignored).
 * - `network`: `restricted` = no network (seccomp + network namespace), `enabled` = full network.
 * - `strict`: true for permission profiles: a backend that cannot enforce a read-only subpath or a denied path
 *   must refuse (see {@link landlockCanEnforce}). False for legacy policies, whose `.git`/`.codex` protection
 *   Codex's own Landlock helper never enforced (shellmcp warns instead, as before).
 */
export interface FilesystemPlan {
  sandboxed: boolean;
  fullRead: boolean;
  fullWrite: boolean;
  readableRoots: string[];
  includePlatformDefaults: boolean;
  writableRoots: WritableRoot[];
  deniedPaths: string[];
  network: NetworkSandboxPolicy;
  strict: boolean;
}

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

function wireEntry(e: FileSystemSandboxEntry): unknown {
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

// ---------------------------------------------------------------------------------------------------------
// Planning

/** `p` with symlinks resolved: the whole path if it exists, else its parent's real path + its name. */
function canonical(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    try {
      return join(realpathSync(dirname(p)), basename(p));
    } catch {
      return normalize(p);
    }
  }
}

/** `p` with its parent's symlinks resolved, its last component kept as is. */
function canonicalParent(p: string): string {
  if (p === "/") return p;
  try {
    return join(realpathSync(dirname(p)), basename(p));
  } catch {
    return normalize(p);
  }
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

const RANK: Record<FileSystemAccessMode, number> = { read: 0, write: 1, deny: 2 };

function depth(p: string): number {
  return p === sep ? 0 : p.split(sep).length - 1;
}

/**
 * Resolve a profile against the sandbox cwd (`cwd`, absolute; a `file://` URI is accepted) into a plan.
 * `env` supplies `$TMPDIR` for the `tmpdir` special path. Throws `SANDBOX_UNAVAILABLE` for what cannot be
 * enforced (glob patterns, unknown special kinds on read/deny entries) and `USAGE` for a bad cwd.
 */
export function planPermissionProfile(
  p: PermissionProfile,
  cwd: string,
  env: Record<string, string | undefined> = process.env,
): FilesystemPlan {
  const open = (fullWrite: boolean, net: NetworkSandboxPolicy, sandboxed: boolean): FilesystemPlan => ({
    sandboxed,
    fullRead: true,
    fullWrite,
    readableRoots: [],
    includePlatformDefaults: false,
    writableRoots: [],
    deniedPaths: [],
    network: net,
    strict: true,
  });
  if (p.type === "disabled") return open(true, "enabled", false);
  if (p.type === "external") return open(true, p.network, true);
  if (p.fileSystem.type === "unrestricted") return open(true, p.network, true);

  const cwdPath = canonical(pathFromUri(cwd, "sandboxCwd"));
  let minimal = false;
  /** Winning access per resolved path (ties: deny > write > read). */
  const byPath = new Map<string, { access: FileSystemAccessMode; exists: boolean }>();
  for (const e of p.fileSystem.entries) {
    let raw: string | undefined;
    const where = JSON.stringify(wireEntry(e));
    if (e.path.type === "glob_pattern") {
      throw new ShellmcpError(
        "SANDBOX_UNAVAILABLE",
        `cannot enforce permission profile entry ${where}: glob_pattern entries are not supported by shellmcp yet`,
      );
    }
    if (e.path.type === "path") raw = e.path.path;
    else {
      const v = e.path.value;
      switch (v.kind) {
        case "root":
          raw = "/";
          break;
        case "minimal":
          if (e.access === "deny")
            throw new ShellmcpError(
              "SANDBOX_UNAVAILABLE",
              `cannot enforce permission profile entry ${where}: denying the platform's system folders is not supported`,
            );
          if (e.access === "write")
            throw new ShellmcpError(
              "SANDBOX_UNAVAILABLE",
              `cannot enforce permission profile entry ${where}: write access to the platform's system folders is not supported`,
            );
          minimal = true;
          continue;
        case "project_roots":
          raw = v.subpath === undefined ? cwdPath : join(cwdPath, v.subpath);
          break;
        case "tmpdir": {
          const t = env.TMPDIR;
          if (t === undefined || t === "" || !isAbsolute(t)) continue;
          raw = t;
          break;
        }
        case "slash_tmp":
          if (!isDir("/tmp")) continue;
          raw = "/tmp";
          break;
        case "unknown":
          if (e.access === "write") {
            log.warn("permission profile: ignored a write entry with an unknown special path (it only narrows access)", { kind: v.name });
            continue;
          }
          throw new ShellmcpError(
            "SANDBOX_UNAVAILABLE",
            `cannot enforce permission profile entry ${where}: unknown special path kind \`${v.name}\``,
          );
      }
    }
    // Grants follow symlinks (a project reached through a link is the project). Restrictions do not follow
    // their last component: a `.git` that is a symlink must stay visible as one, so that a backend refuses it
    // (a sandboxed command could re-point it) instead of protecting whatever it points at today.
    const path = e.access === "write" ? canonical(raw) : canonicalParent(raw);
    let exists: boolean;
    try {
      lstatSync(path);
      exists = true;
    } catch {
      exists = false;
    }
    const prev = byPath.get(path);
    if (prev === undefined || RANK[e.access] > RANK[prev.access]) byPath.set(path, { access: e.access, exists });
  }

  const rootAccess = byPath.get("/")?.access;
  const fullRead = rootAccess === "read" || rootAccess === "write";
  const fullWrite = rootAccess === "write";
  const entries = [...byPath.entries()].filter(([path]) => path !== "/").sort((a, b) => depth(a[0]) - depth(b[0]));
  const writes = entries.filter(([, v]) => v.access === "write" && v.exists).map(([path]) => path);
  /** The access the most specific entry strictly above `path` gives (the root's when none). */
  const inherited = (path: string): FileSystemAccessMode | undefined => {
    let best: { d: number; access: FileSystemAccessMode } | undefined;
    for (const [q, v] of entries) {
      if (q !== path && isUnder(path, q) && (best === undefined || depth(q) > best.d)) best = { d: depth(q), access: v.access };
    }
    return best?.access ?? rootAccess;
  };

  const writableRoots: WritableRoot[] = [];
  const readable: string[] = [];
  const denied: string[] = [];
  for (const [path, v] of entries) {
    const above = inherited(path);
    if (v.access === "write") {
      if (v.exists && !fullWrite) writableRoots.push({ root: path, readOnlySubpaths: [] });
    } else if (v.access === "read") {
      if (above === "write") {
        // A read-only carve-out inside something writable (enforced even when missing: its creation is blocked).
        const owner = [...writes].reverse().find((w) => isUnder(path, w) && w !== path);
        if (owner !== undefined) writableRoots.find((w) => w.root === owner)?.readOnlySubpaths.push(path);
        else if (fullWrite)
          throw new ShellmcpError(
            "SANDBOX_UNAVAILABLE",
            `cannot enforce read-only ${path} under a writable root folder: shellmcp keeps the root read-only in that case`,
          );
      } else if (!fullRead && v.exists) readable.push(path);
    } else {
      // deny: only meaningful where something above would grant access.
      if (above !== undefined && above !== "deny") {
        if (v.exists || above === "write") denied.push(path);
      }
    }
  }
  if (fullWrite && (denied.length > 0 || writableRoots.some((w) => w.readOnlySubpaths.length > 0))) {
    throw new ShellmcpError(
      "SANDBOX_UNAVAILABLE",
      "cannot enforce a permission profile that makes `/` writable but keeps paths below it read-only or denied",
    );
  }
  for (const w of writableRoots) w.readOnlySubpaths.sort((a, b) => depth(a) - depth(b));
  return {
    sandboxed: true,
    fullRead,
    fullWrite,
    readableRoots: fullRead ? [] : [...new Set(readable)],
    includePlatformDefaults: minimal,
    writableRoots,
    deniedPaths: denied,
    network: p.network,
    strict: true,
  };
}

/**
 * A legacy `SandboxPolicy` as a plan (docs/sandbox.md, "Writable roots", "Protected paths inside writable roots" and "Read access"): the writable roots and read-only subpaths of
 * {@link writableRoots}, the readable roots of {@link readableRoots} (without platform defaults, which are
 * `includePlatformDefaults`), `strict` false.
 */
export function planSandboxPolicy(
  policy: SandboxPolicy,
  cwd: string,
  env: Record<string, string | undefined> = process.env,
): FilesystemPlan {
  const base = {
    readableRoots: [] as string[],
    includePlatformDefaults: false,
    writableRoots: [] as WritableRoot[],
    deniedPaths: [] as string[],
    strict: false,
  };
  switch (policy.type) {
    case "danger-full-access":
      return { ...base, sandboxed: false, fullRead: true, fullWrite: true, network: "enabled" };
    case "external-sandbox":
      return { ...base, sandboxed: true, fullRead: true, fullWrite: true, network: policy.network_access };
    case "read-only":
    case "workspace-write": {
      const roots = writableRoots(policy, cwd, env);
      const access = policy.type === "read-only" ? policy.access : policy.read_only_access;
      const restricted = access.type === "restricted" ? access : undefined;
      const readable =
        restricted === undefined
          ? []
          : (readableRoots(
              {
                ...policy,
                ...(policy.type === "read-only"
                  ? { access: { ...restricted, include_platform_defaults: false } }
                  : { read_only_access: { ...restricted, include_platform_defaults: false } }),
              } as SandboxPolicy,
              cwd,
              roots,
            ) ?? []);
      return {
        ...base,
        sandboxed: true,
        fullRead: restricted === undefined,
        fullWrite: false,
        readableRoots: readable,
        includePlatformDefaults: restricted?.include_platform_defaults ?? false,
        writableRoots: roots,
        network: policy.network_access ? "enabled" : "restricted",
      };
    }
  }
}

/**
 * The nearest legacy policy that is never wider than `plan` (for code that still decides on a `SandboxPolicy`,
 * e.g. whether to sandbox at all, `CODEX_SANDBOX_NETWORK_DISABLED`, Codex's 0.97 helper): `danger-full-access`
 * when unsandboxed, `external-sandbox` for full write, else `workspace-write` (with the writable roots, no `/tmp`,
 * no `$TMPDIR`) or `read-only`. Read-only subpaths and denied paths have no legacy form: enforce the plan itself.
 */
export function summarySandboxPolicy(plan: FilesystemPlan): SandboxPolicy {
  if (!plan.sandboxed) return { type: "danger-full-access" };
  if (plan.fullWrite) return { type: "external-sandbox", network_access: plan.network };
  const access = plan.fullRead
    ? ({ type: "full-access" } as const)
    : ({ type: "restricted", include_platform_defaults: plan.includePlatformDefaults, readable_roots: plan.readableRoots } as const);
  const net = plan.network === "enabled";
  if (plan.writableRoots.length === 0) return { type: "read-only", access, network_access: net };
  return {
    type: "workspace-write",
    writable_roots: plan.writableRoots.map((w) => w.root),
    read_only_access: access,
    network_access: net,
    exclude_tmpdir_env_var: true,
    exclude_slash_tmp: true,
  };
}

/**
 * Readable roots on Linux: `undefined` when everything is readable; else the plan's readable roots, every
 * writable root, the Linux platform defaults when asked for, and `extra` (e.g. the shellmcp binary's folder);
 * only paths that exist, de-duplicated.
 */
export function linuxReadableRoots(plan: FilesystemPlan, extra: string[] = []): string[] | undefined {
  if (plan.fullRead) return undefined;
  const roots = [
    ...plan.readableRoots,
    ...plan.writableRoots.map((w) => w.root),
    ...(plan.includePlatformDefaults ? LINUX_PLATFORM_READ_DEFAULTS : []),
    ...extra,
  ];
  return [...new Set(roots.filter((r) => existsSync(r)).map(canonical))];
}

/**
 * Why Landlock alone cannot enforce a strict plan (it can only grant, never take away below a grant), or
 * `undefined` when it can. Non-strict (legacy) plans always pass: their `.git`/`.codex` gap is documented.
 */
export function landlockCanEnforce(plan: FilesystemPlan): string | undefined {
  if (!plan.strict) return undefined;
  const sub = plan.writableRoots.find((w) => w.readOnlySubpaths.length > 0);
  if (sub !== undefined)
    return `the permission profile keeps ${sub.readOnlySubpaths[0]} read-only inside the writable ${sub.root}, which Landlock cannot enforce: use the bubblewrap backend (install bubblewrap, or --sandbox-backend bwrap)`;
  const readArea = (p: string) =>
    plan.fullRead || plan.readableRoots.some((r) => isUnder(p, r)) || plan.writableRoots.some((w) => isUnder(p, w.root));
  const d = plan.deniedPaths.find(readArea);
  if (d !== undefined)
    return `the permission profile denies ${d} inside a readable folder, which Landlock cannot enforce: use the bubblewrap backend (install bubblewrap, or --sandbox-backend bwrap)`;
  return undefined;
}
