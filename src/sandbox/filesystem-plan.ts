/**
 * Planning: a Codex 0.169 permission profile or a legacy `SandboxPolicy`, resolved against the sandbox cwd, as
 * the {@link FilesystemPlan} every backend enforces; the nearest legacy policy of a plan; the Linux readable
 * roots of a plan; whether Landlock alone can enforce it. What a profile means (most specific entry wins, deny >
 * write > read, symlinks, missing paths, fail closed) is documented in ./permission-profile.ts, which this module
 * imports (and which imports nothing from here).
 */
import { existsSync, lstatSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, normalize, sep } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { log } from "../log.ts";
import {
  pathFromUri,
  wireEntry,
  type FileSystemAccessMode,
  type FileSystemSandboxEntry,
  type NetworkSandboxPolicy,
  type PermissionProfile,
} from "./permission-profile.ts";
import { configCarveOuts, configDirsUnder, PROTECTED_NAMES, rootInConfigDir } from "./protected-config.ts";
import { isCarriedBase } from "../carried/portable-shells.ts";
import { isDir, isUnder } from "./paths.ts";
import { LINUX_PLATFORM_READ_DEFAULTS, readableRoots, writableRootPaths, writableRoots, type NestedGitOption } from "./roots.ts";
import type { SandboxPolicy } from "./policy.ts";
import type { WritableRoot } from "./writable-model.ts";
import { hiddenPaths, type HiddenPaths } from "./secrets.ts";

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
 * - `hidden`: the credential stores and secrets this plan hides (./secrets.ts), also in `deniedPaths`; every
 *   sandboxed plan that does not write everywhere has them. A backend hides them and never refuses for them
 *   (Landlock: read and write rules beside them, ./secrets.ts `pathsBeside`). Escalation rooms start from them.
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
  hidden?: HiddenPaths;
}

/**
 * `plan` with this process's credential stores and secrets hidden (./secrets.ts `hiddenPaths`): added to its
 * denied paths and listed in `hidden`; a store that holds one of the plan's writable roots (the call works there)
 * is left readable. Plans that run unsandboxed or write everywhere are returned as they are
 * (Codex's `danger-full-access` and `external-sandbox` meanings).
 */
export function withHiddenPaths(plan: FilesystemPlan): FilesystemPlan {
  if (!plan.sandboxed || plan.fullWrite) return plan;
  const found = hiddenPaths();
  // A store the call works in (one of its writable roots lies in it: `pass`'s ~/.password-store is a git repository)
  // was handed to the call by its client: it stays readable there. Secrets never are.
  const hidden = { ...found, stores: found.stores.filter((s) => !plan.writableRoots.some((w) => isUnder(w.root, s))) };
  const all = [...hidden.stores, ...hidden.secrets];
  if (all.length === 0) return { ...plan, hidden };
  return { ...plan, deniedPaths: [...new Set([...plan.deniedPaths, ...all])], hidden };
}

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

  const { byPath, minimal } = resolveEntries(p.fileSystem.entries, canonical(pathFromUri(cwd, "sandboxCwd")), env);
  const { fullRead, fullWrite, writableRoots, readable, denied } = classifyEntries(byPath);
  if (fullWrite && (denied.length > 0 || writableRoots.some((w) => w.readOnlySubpaths.length > 0))) {
    throw new ShellmcpError(
      "SANDBOX_UNAVAILABLE",
      "cannot enforce a permission profile that makes `/` writable but keeps paths below it read-only or denied",
    );
  }
  // CODEX_HOME and /etc/codex stay read-only inside every writable root (docs/sandbox.md, "Protected paths").
  for (const w of writableRoots) for (const c of configCarveOuts(w.root)) if (!w.readOnlySubpaths.includes(c)) w.readOnlySubpaths.push(c);
  for (const w of writableRoots) w.readOnlySubpaths.sort((a, b) => depth(a) - depth(b));
  return withHiddenPaths({
    sandboxed: true,
    fullRead,
    fullWrite,
    readableRoots: fullRead ? [] : [...new Set(readable)],
    includePlatformDefaults: minimal,
    writableRoots,
    deniedPaths: denied,
    network: p.network,
    strict: true,
  });
}

/** One restricted profile's entries, resolved: the winning access per path (ties: deny > write > read). */
type ResolvedEntries = Map<string, { access: FileSystemAccessMode; exists: boolean }>;

/**
 * The paths of a restricted profile's `entries` (`cwdPath`: the canonical sandbox cwd, for `project_roots`; `env`:
 * `$TMPDIR`), each with the winning access and whether it exists now; `minimal` when an entry reads the platform's
 * system folders. Throws `SANDBOX_UNAVAILABLE` as {@link planPermissionProfile} says.
 */
function resolveEntries(
  entries: readonly FileSystemSandboxEntry[],
  cwdPath: string,
  env: Record<string, string | undefined>,
): { byPath: ResolvedEntries; minimal: boolean } {
  let minimal = false;
  const byPath: ResolvedEntries = new Map();
  for (const e of entries) {
    const raw = entryPath(e, cwdPath, env);
    if (raw === "minimal") minimal = true;
    if (raw === "minimal" || raw === undefined) continue;
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
  return { byPath, minimal };
}

/**
 * The path one profile entry names, as written (not yet canonical); `"minimal"` for the platform's system folders
 * (read only); undefined for an entry that names nothing here (no usable `$TMPDIR`, no `/tmp`, a write entry of an
 * unknown kind, which only narrows access). Throws `SANDBOX_UNAVAILABLE` as {@link planPermissionProfile} says.
 */
function entryPath(e: FileSystemSandboxEntry, cwdPath: string, env: Record<string, string | undefined>): string | "minimal" | undefined {
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
        return "minimal";
      case "project_roots":
        raw = v.subpath === undefined ? cwdPath : join(cwdPath, v.subpath);
        break;
      case "tmpdir": {
        const t = env.TMPDIR;
        if (t === undefined || t === "" || !isAbsolute(t)) return undefined;
        raw = t;
        break;
      }
      case "slash_tmp":
        if (!isDir("/tmp")) return undefined;
        raw = "/tmp";
        break;
      case "unknown":
        if (e.access === "write") {
          log.warn("permission profile: ignored a write entry with an unknown special path (it only narrows access)", { kind: v.name });
          return undefined;
        }
        throw new ShellmcpError(
          "SANDBOX_UNAVAILABLE",
          `cannot enforce permission profile entry ${where}: unknown special path kind \`${v.name}\``,
        );
    }
  }
  return raw;
}

/**
 * What the resolved entries give: full read or write (the root's entry), the writable roots (existing folders
 * outside the protected config folders) with their read-only carve-outs, the readable roots and the denied paths
 * where something above would grant access. Throws `SANDBOX_UNAVAILABLE` for a read-only path under a writable `/`.
 */
function classifyEntries(byPath: ResolvedEntries): {
  fullRead: boolean;
  fullWrite: boolean;
  writableRoots: WritableRoot[];
  readable: string[];
  denied: string[];
} {
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
      // A write entry in CODEX_HOME or /etc/codex grants nothing: those folders decide later sessions.
      if (v.exists && !fullWrite && rootInConfigDir(path) !== undefined)
        log.warn("permission profile: a writable folder lies in a protected config folder: it stays read-only", { path });
      else if (v.exists && !fullWrite) writableRoots.push({ root: path, readOnlySubpaths: [] });
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
  return { fullRead, fullWrite, writableRoots, readable, denied };
}

/**
 * A legacy `SandboxPolicy` as a plan (docs/sandbox.md, "Writable roots", "Protected paths inside writable roots" and "Read access"): the writable roots and read-only subpaths of
 * {@link writableRoots} (with `nested`, the `.git` of repositories below the roots' tops too: for bubblewrap), the
 * readable roots of {@link readableRoots} (without platform defaults, which are
 * `includePlatformDefaults`), `strict` false.
 */
export function planSandboxPolicy(
  policy: SandboxPolicy,
  cwd: string,
  env: Record<string, string | undefined> = process.env,
  nested?: NestedGitOption,
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
      const roots = writableRoots(policy, cwd, env, nested);
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
      return withHiddenPaths({
        ...base,
        sandboxed: true,
        fullRead: restricted === undefined,
        fullWrite: false,
        readableRoots: readable,
        includePlatformDefaults: restricted?.include_platform_defaults ?? false,
        writableRoots: roots,
        network: policy.network_access ? "enabled" : "restricted",
      });
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
 * The first protected config folder (policy.ts `protectedConfigDirs`: CODEX_HOME, `/etc/codex`) that lies inside a
 * writable root of `plan` (canonical forms), with that root; undefined when none does or the plan writes
 * everywhere (nothing to keep apart there). Every backend keeps such a folder read-only or refuses.
 */
export function configDirInWritableRoot(plan: FilesystemPlan): { root: string; dir: string } | undefined {
  if (!plan.sandboxed || plan.fullWrite) return undefined;
  for (const w of plan.writableRoots) {
    const dir = configDirsUnder(canonical(w.root))[0];
    if (dir !== undefined) return { root: w.root, dir };
  }
  return undefined;
}

/** The sentence that refuses a Landlock run whose writable `root` contains the protected config folder `dir`. */
function configDirWhy(root: string, dir: string): string {
  if (isCarriedBase(dir))
    return (
      `the writable folder ${root} contains ${dir}, where shellmcp keeps the programs it runs outside the sandbox ` +
      `(its lifeline guard, sandbox-exec), and Landlock cannot keep a folder inside a writable one read-only (a command ` +
      `could replace one and run unsandboxed at the next call): use the bubblewrap backend (install bubblewrap, or ` +
      `--sandbox-backend bwrap), work in a folder that does not contain ${dir}, or give this user a runtime folder ` +
      `/run/user/${process.getuid?.() ?? "<uid>"} (a login session, or \`loginctl enable-linger\`), which shellmcp uses first`
    );
  return (
    `the writable folder ${root} contains ${dir}, where shellmcp and Codex read their rules and config from, and ` +
    `Landlock cannot keep a folder inside a writable one read-only (a command could give the next session any ` +
    `permission): use the bubblewrap backend (install bubblewrap, or --sandbox-backend bwrap), work in a folder that ` +
    `does not contain ${dir}, or set CODEX_HOME to a folder outside every writable root`
  );
}

/**
 * {@link configDirInWritableRoot} for a legacy policy, cheaply (no search for nested repositories): the root of
 * `policy` (with `cwd` and `env`'s `$TMPDIR`) that contains a protected config folder, that folder, and the
 * sentence a Landlock refusal gives; undefined when none does.
 */
export function configDirExposure(
  policy: SandboxPolicy,
  cwd: string,
  env: Record<string, string | undefined> = process.env,
): { root: string; dir: string; why: string } | undefined {
  for (const root of writableRootPaths(policy, cwd, env)) {
    const dir = configDirsUnder(root)[0];
    if (dir !== undefined) return { root, dir, why: configDirWhy(root, dir) };
  }
  return undefined;
}

/**
 * Whether a Landlock run of a strict plan (a permission profile) may leave `sub`, a read-only subpath of the writable
 * `root`, writable — as a legacy policy's Landlock run does (issue 44: Codex 0.169's workspace-write profile keeps
 * `.git`, `.agents`, `.codex` and `.aws` of each project root read-only, and was refused under Landlock even where
 * none existed, so no Codex command ran in a pod without user namespaces). True for:
 * - Codex's protected names at the top of the root (policy.ts `PROTECTED_NAMES`: `.git`, `.agents`, `.codex`),
 *   what `serve`'s Landlock calls leave writable: the git guard records `.git` (and every repository below the
 *   root) before the call and undoes what the call changed there (docs/git-guard.md), and the first Landlock call
 *   says what the kernel does not keep;
 * - a subpath that does not exist (nothing there to keep; Landlock cannot stop a file being created in a writable
 *   folder, and neither can it under a legacy policy).
 * False for an existing other subpath (a project's `.aws`, a profile's own carve-outs): that call is refused.
 */
function landlockMayLeaveWritable(root: string, sub: string): boolean {
  if (dirname(sub) === root && (PROTECTED_NAMES as readonly string[]).includes(basename(sub))) return true;
  try {
    lstatSync(sub);
    return false;
  } catch {
    return true;
  }
}

/**
 * Why Landlock alone cannot enforce a strict plan (it can only grant, never take away below a grant), or
 * `undefined` when it can. Every plan whose writable roots contain a protected config folder is refused (CODEX_HOME,
 * `/etc/codex`: {@link configDirInWritableRoot}); otherwise non-strict (legacy) plans pass: their `.git`/`.codex`
 * gap is documented. A strict plan's read-only subpaths pass when {@link landlockMayLeaveWritable} says so (the
 * same gap, the git guard repairing `.git`); any other is refused with the path.
 */
export function landlockCanEnforce(plan: FilesystemPlan): string | undefined {
  const config = configDirInWritableRoot(plan);
  if (config !== undefined) return configDirWhy(config.root, config.dir);
  if (!plan.strict) return undefined;
  for (const w of plan.writableRoots) {
    const kept = w.readOnlySubpaths.find((p) => !landlockMayLeaveWritable(w.root, p));
    if (kept !== undefined)
      return `the permission profile keeps ${kept} read-only inside the writable ${w.root}, which Landlock cannot enforce: use the bubblewrap backend (install bubblewrap, or --sandbox-backend bwrap)`;
  }
  const readArea = (p: string) =>
    plan.fullRead || plan.readableRoots.some((r) => isUnder(p, r)) || plan.writableRoots.some((w) => isUnder(p, w.root));
  // The hidden credential stores and secrets are never a reason to refuse: Landlock hides them by leaving them out
  // of its rules (./linux/in-process.ts).
  const hidden = new Set([...(plan.hidden?.stores ?? []), ...(plan.hidden?.secrets ?? [])]);
  const d = plan.deniedPaths.find((p) => !hidden.has(p) && readArea(p));
  if (d !== undefined)
    return `the permission profile denies ${d} inside a readable folder, which Landlock cannot enforce: use the bubblewrap backend (install bubblewrap, or --sandbox-backend bwrap)`;
  return undefined;
}
