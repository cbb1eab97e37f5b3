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
import type { WritableRoot } from "./policy.ts";

// The code is in two modules, re-exported here so that the API above stays in one place:
// ./permission-profile-parse.ts (validating and serialising profiles) and ./permission-profile-plan.ts (plans).
import { parsePermissionProfile, pathFromUri, serializePermissionProfile } from "./permission-profile-parse.ts";
import {
  landlockCanEnforce,
  linuxReadableRoots,
  planPermissionProfile,
  planSandboxPolicy,
  summarySandboxPolicy,
} from "./permission-profile-plan.ts";

export {
  landlockCanEnforce,
  linuxReadableRoots,
  parsePermissionProfile,
  pathFromUri,
  planPermissionProfile,
  planSandboxPolicy,
  serializePermissionProfile,
  summarySandboxPolicy,
};

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
