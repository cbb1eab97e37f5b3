/**
 * Codex's `SandboxPolicy` (docs/sandbox.md, "Policy model") — the JSON `codex/sandbox-state/update` carries and the Linux
 * helper takes with `--sandbox-policy` — plus the writable/readable roots every backend enforces (docs/sandbox.md, "Writable roots" and "Read access").
 *
 * Canonical JSON is Codex's: internally tagged on `type` (kebab-case), snake_case fields. The camelCase mirror
 * of Codex's app-server API is accepted too. Unlike Codex, unknown fields are an error, not ignored: a typo in
 * `network_access` must not silently change what is enforced.
 */
import { existsSync, lstatSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, normalize, resolve, sep } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { log } from "../log.ts";
import { readUntrustedText } from "../untrusted-fs.ts";
import { discoverRoot, frontierBindLimit, MAX_FRONTIER_BINDS } from "./git/discover.ts";

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

/**
 * A writable root, the paths inside it that stay read-only, and the paths inside those that are writable again.
 * What the sandbox can write below `root` is decided by the deepest entry holding a path ({@link writableInModel}):
 * only bubblewrap plans have `writableAgain` (a bare repository's folder read-only, its `objects/`, `refs/`, `logs/`
 * and `worktrees/` bound writable again, {@link nestedGitPaths}); absent means none.
 */
export interface WritableRoot {
  root: string;
  readOnlySubpaths: string[];
  /** Canonical folders inside one of `readOnlySubpaths` that are bound writable again (after it). */
  writableAgain?: string[];
}

/**
 * Whether canonical `p` is writable in the model of `roots` (writable), `readOnly` (read-only inside them) and
 * `writableAgain` (writable again inside a read-only entry): under a root, and either under no read-only entry or
 * under a writable-again entry that lies strictly deeper than every read-only entry holding `p` (the deepest wins,
 * as the bubblewrap binds made in depth order; a read-only entry beats a root at any depth, as before). The one
 * rule every reader of the writable model uses (writable.ts `canWrite`, {@link pinFolders}).
 */
export function writableInModel(
  p: string,
  roots: readonly string[],
  readOnly: readonly string[],
  writableAgain: readonly string[] = [],
): boolean {
  if (!roots.some((r) => isUnder(p, r))) return false;
  let ro: string | undefined;
  for (const r of readOnly) if (isUnder(p, r) && (ro === undefined || r.length > ro.length)) ro = r;
  if (ro === undefined) return true;
  return writableAgain.some((a) => isUnder(p, a) && a !== ro && isUnder(a, ro));
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
 * The gitdir a `.git` *file* points at (`gitdir: <path>`, relative to the file's folder), if it exists. The file
 * may have been written by a sandboxed command: it is read through ../untrusted-fs.ts (never blocks on a FIFO,
 * refuses a symlink, a non-regular or an oversized file), and anything but a small regular file gives undefined.
 */
export function gitdirPointer(dotGit: string): string | undefined {
  const r = readUntrustedText(dotGit, { maxBytes: 4096 });
  if (!r.ok) return undefined;
  const text = r.text;
  const i = text.indexOf(":");
  if (i < 0 || text.slice(0, i).trim() !== "gitdir") return undefined;
  const target = resolve(dirname(dotGit), text.slice(i + 1).trim());
  return existsSync(target) ? target : undefined;
}

/** Names kept read-only at the top of every writable root. */
export const PROTECTED_NAMES = [".git", ".agents", ".codex"] as const;

/** The system folder Codex and shellmcp read rules and config from (`/etc/codex`). */
export const SYSTEM_CONFIG_DIR = "/etc/codex";

/** Config folders no sandbox may write (see {@link setProtectedConfigDirs}); canonical forms are taken when used. */
let configDirs: readonly string[] = [SYSTEM_CONFIG_DIR];

/**
 * Declare the folders whose contents decide what later sessions may do — `CODEX_HOME` (rules, `config.toml`) and
 * `/etc/codex` — for this process: every plan made afterwards keeps them read-only inside any writable root
 * (docs/sandbox.md, "Protected paths inside writable roots"). `serve` calls it at start-up; the sandbox helper
 * from its `--protected-config-dir` flags. Paths must be absolute; `/etc/codex` is always included. Default:
 * `/etc/codex` only.
 */
export function setProtectedConfigDirs(dirs: readonly string[]): void {
  configDirs = [...new Set([SYSTEM_CONFIG_DIR, ...dirs.filter((d) => isAbsolute(d)).map((d) => normalize(d))])];
}

/** The folders set by {@link setProtectedConfigDirs} (absolute, as given; `/etc/codex` first). */
export function protectedConfigDirs(): readonly string[] {
  return configDirs;
}

/**
 * Canonical form of an absolute path that may not exist: the real path of its nearest existing ancestor with the
 * missing components appended (a dangling last link is not followed).
 */
function canonicalMissing(p: string): string {
  const abs = normalize(p);
  try {
    return realpathSync(abs);
  } catch {
    const parent = dirname(abs);
    return parent === abs ? abs : join(canonicalMissing(parent), basename(abs));
  }
}

/**
 * The symlinks on the way to `p` as written (absolute): each component that is a link, by its own path (its
 * parent's real path + its name), following each to go on. A sandbox that can write where such a link lies can
 * re-point it, and with it the folder `p` names.
 */
export function symlinksOnTheWay(p: string): string[] {
  const out: string[] = [];
  let cur: string = sep;
  for (const part of normalize(p).split(sep).filter(Boolean)) {
    const next = join(cur, part);
    try {
      if (lstatSync(next).isSymbolicLink()) {
        out.push(next);
        cur = realpathSync(next);
      } else cur = next;
    } catch {
      break; // missing (or a dangling link, listed above): nothing further to follow
    }
  }
  return out;
}

/**
 * The paths to keep read-only inside the writable `root` (canonical) so that no protected config folder
 * ({@link protectedConfigDirs}) lying below it can be written: the folder itself when it exists, else its first
 * missing component below `root` (so that it cannot be created either: the bubblewrap backend mounts an empty
 * read-only folder there for the run). A folder that `root` itself lies in is not listed: see
 * {@link rootInConfigDir}. Empty when no protected folder lies below `root`.
 */
export function configCarveOuts(root: string): string[] {
  const out: string[] = [];
  for (const d of configDirs) {
    const c = canonicalMissing(d);
    if (c === root || !isUnder(c, root)) continue;
    let p = root;
    for (const part of c.slice(root.length + (root.endsWith(sep) ? 0 : 1)).split(sep)) {
      p = join(p, part);
      try {
        lstatSync(p);
      } catch {
        break; // the first missing component: blocking it blocks everything below
      }
    }
    out.push(p);
  }
  // A link on the way to a protected folder (`~/.codex -> elsewhere`) that lies in the root: the sandbox could
  // re-point it. Listed as it is (a link): bubblewrap then refuses the run ("crosses writable symlink"), since a
  // mount cannot cover a link; Landlock refuses it too ({@link configDirsUnder}).
  for (const d of configDirs) for (const link of symlinksOnTheWay(d)) if (link !== root && isUnder(link, root)) out.push(link);
  return [...new Set(out)];
}

/**
 * The protected config folders ({@link protectedConfigDirs}, as given) lying strictly below the writable `root`
 * (canonical), or reached through a symlink that lies below it.
 */
export function configDirsUnder(root: string): string[] {
  return configDirs.filter((d) => {
    const c = canonicalMissing(d);
    return (c !== root && isUnder(c, root)) || symlinksOnTheWay(d).some((l) => l !== root && isUnder(l, root));
  });
}

/** The protected config folder (canonical) that `root` (canonical) is or lies in, if any: such a root is never writable. */
export function rootInConfigDir(root: string): string | undefined {
  for (const d of configDirs) {
    const c = canonicalMissing(d);
    if (isUnder(root, c)) return c;
  }
  return undefined;
}

/**
 * The control entries of a git dir that git reads commands or another git dir's location from: kept read-only under
 * bubblewrap in every git dir found that is not already inside a read-only `.git` (bare repositories, git dirs named
 * otherwise). Folders (`hooks/`, `info/`) are kept from being created when missing; missing files are not (a mount
 * point for a file would have to be made on the host, where git reads it: the git guard checks them after the call).
 */
export const GIT_CONTROL_FILES = ["config", "config.worktree", "commondir", "gitdir"] as const;
/** See {@link GIT_CONTROL_FILES}: the control folders (hooks run, info read as configuration). */
export const GIT_CONTROL_DIRS = ["hooks", "info"] as const;

/**
 * The git control paths of the `.git` entry `dotGit` (an `lstat`ed entry): the entry itself when it is a folder
 * or a file, plus — for a file — the gitdir it points at when that is a git dir (holds `HEAD`) strictly inside
 * one of `roots` that contains no writable root (a pointer a sandboxed command wrote must not turn a writable
 * root read-only). A symlink gives nothing: a sandboxed command can make one anywhere, and refusing every later
 * call over it would hand it the session (top-level `.git` links are still refused, see bwrap.ts).
 */
function gitEntryPaths(dotGit: string, kind: "dir" | "file" | "other", roots: readonly string[]): string[] {
  if (kind === "dir") return [dotGit];
  if (kind !== "file") return [];
  const out = [dotGit];
  const target = gitdirPointer(dotGit);
  if (target !== undefined) {
    const t = canonicalMissing(target);
    const inside = roots.some((r) => t !== r && isUnder(t, r));
    const holdsRoot = roots.some((r) => isUnder(r, t));
    let head = false;
    try {
      head = lstatSync(join(t, "HEAD")).isFile();
    } catch {
      head = false;
    }
    if (inside && !holdsRoot && head) out.unshift(t);
  }
  return out;
}

function entryKind(p: string): "dir" | "file" | "other" | undefined {
  try {
    const st = lstatSync(p);
    return st.isDirectory() ? "dir" : st.isFile() ? "file" : "other";
  } catch {
    return undefined;
  }
}

/**
 * The read-only paths that keep the git control state of every git dir below the writable `root` (canonical) out of
 * the sandbox's reach, from the one discovery (./git/discover.ts `discoverRoot`: complete the first time a root is
 * planned, recorded by identity, no depth limit, symlinks never followed, `node_modules` never entered):
 * - every work tree's `.git` folder or file below the top, whole, plus the git dir a `.git` file names (see
 *   {@link gitEntryPaths}); `root`'s own `.git` is not listed ({@link protectedSubpaths} has it);
 * - every other git dir (bare repositories, `--separate-git-dir` folders, linked worktrees' admin folders, submodule
 *   git dirs) not inside one of those: one with no `commondir` (all but a linked worktree's admin folder) whole,
 *   with its {@link GIT_WRITABLE_AGAIN} folders bound writable again ({@link nestedGit}); an admin folder its
 *   {@link GIT_CONTROL_FILES} that exist and its {@link GIT_CONTROL_DIRS} (held when missing); when one of them is a
 *   symlink, the whole git dir (a link cannot be covered by a mount, and the sandbox could replace it), plus the
 *   link's target when that lies inside `root`;
 * - the folders the complete search did not read (its bound was reached): unknown, so read-only; past
 *   {@link MAX_FRONTIER_BINDS} of them none (the git guard then refuses the call, with the reason);
 * - every `.git` on the way from `workdir` (when it lies below `root`) up to `root`.
 * `roots`: every writable root of the plan (canonical), for the pointer checks. Never throws.
 */
export function nestedGitPaths(root: string, roots: readonly string[], workdir?: string): string[] {
  return nestedGit(root, roots, workdir).readOnly;
}

/**
 * The folders of a bare repository bound writable again inside its read-only folder: what git writes there on a
 * push (objects, loose refs, reflogs) and a linked worktree's admin folder. A push that deletes a packed ref or a
 * fetch run inside the repository writes its top (`packed-refs`, `FETCH_HEAD`) and fails under bubblewrap.
 */
export const GIT_WRITABLE_AGAIN = ["objects", "refs", "logs", "worktrees", "reftable"] as const;

/**
 * The {@link GIT_WRITABLE_AGAIN} folders listed even when missing (git makes them on first use: a reflog in a linked
 * worktree's commit, `git worktree add`): bubblewrap makes an empty folder on the host to bind writable
 * (./linux/bwrap.ts `holdMountPoint`, removed after the call when still empty).
 */
export const GIT_HELD_WRITABLE = ["logs", "worktrees"] as const;

/**
 * {@link nestedGitPaths} with the folders bound writable again inside them: a git dir that is not a work tree's
 * `.git` folder and has no `commondir` (a bare repository, a `--separate-git-dir` folder, a submodule git dir) is
 * read-only whole, so that no control file (above all `commondir`, which a placeholder cannot hold) can be created
 * at its top, with its {@link GIT_WRITABLE_AGAIN} folders (real folders, not links; existing, or missing and in
 * {@link GIT_HELD_WRITABLE}) writable again; a
 * linked worktree's admin folder (it has a `commondir`) keeps its control entries read-only one by one.
 */
export function nestedGit(root: string, roots: readonly string[], workdir?: string): { readOnly: string[]; writableAgain: string[] } {
  const found = discoverRoot(root);
  const whole: string[] = [];
  const ownGit = join(root, ".git");
  if (entryKind(ownGit) === "dir") whole.push(ownGit);
  const others: string[] = [];
  for (const e of found.repos) {
    if (e.dotGit && e.workTree !== undefined) {
      const dotGit = e.pointer ?? join(e.workTree, ".git");
      if (e.workTree === root) continue;
      const kind = entryKind(dotGit);
      if (kind !== undefined) whole.push(...gitEntryPaths(dotGit, kind, roots));
    } else if (e.gitDir !== undefined) others.push(e.gitDir);
  }
  const out = [...whole.filter((p) => p !== ownGit)];
  const again: string[] = [];
  const covered = (p: string) => whole.some((w) => isUnder(p, w)) || !writableInModel(p, [root], out, again);
  // Shallowest first: a bare repository's `worktrees/` is writable again before its admin folders are seen.
  for (const g of [...new Set(others)].sort((a, b) => a.length - b.length)) {
    if (!isUnder(g, root) || roots.some((r) => isUnder(r, g)) || covered(g)) continue;
    const entries = controlEntries(g, root);
    if (entryKind(join(g, "commondir")) !== undefined || entries.includes(g)) {
      out.push(...entries);
      continue;
    }
    out.push(g);
    for (const name of GIT_WRITABLE_AGAIN) {
      const kind = entryKind(join(g, name));
      if (kind === "dir" || (kind === undefined && (GIT_HELD_WRITABLE as readonly string[]).includes(name))) again.push(join(g, name));
    }
  }
  const frontier = found.frontier.filter((f) => isUnder(f, root) && entryKind(f) === "dir" && !covered(f));
  // Too many to bind one by one: none is listed, so the writable model lets the sandbox write them and the git
  // guard refuses the call with the reason (git/guard.ts `findGitDirs`).
  if (frontier.length <= frontierBindLimit()) out.push(...frontier);
  if (workdir !== undefined) {
    const w = canonicalMissing(workdir);
    if (w !== root && isUnder(w, root)) {
      for (let d = w; d !== root && isUnder(d, root); d = dirname(d)) {
        const g = join(d, ".git");
        const kind = entryKind(g);
        if (kind !== undefined) out.push(...gitEntryPaths(g, kind, roots));
      }
    }
  }
  // An entry inside another (a submodule's `.git` kept in a read-only `.git/modules/`) needs no mount of its own,
  // unless a writable-again folder lies between them.
  const all = [...new Set(out)];
  const outer = [...all, ...whole.filter((w) => w === ownGit)];
  const listed = all.filter((p) =>
    writableInModel(
      p,
      [root, ...roots],
      outer.filter((o) => o !== p),
      again,
    ),
  );
  const keptAgain = again.filter((a) => listed.includes(dirname(a)));
  if (discoveredPaths.size > MAX_FOUND_REMEMBERED) discoveredPaths.clear();
  for (const p of [...listed, ...keptAgain]) if (p !== root) discoveredPaths.add(p);
  return { readOnly: listed, writableAgain: keptAgain };
}

/** Paths {@link nestedGitPaths} listed (at most {@link MAX_FOUND_REMEMBERED}; past it the set starts again). */
const discoveredPaths = new Set<string>();
const MAX_FOUND_REMEMBERED = 100_000;

/**
 * Whether `p` is a read-only path {@link nestedGitPaths} listed in this process (a git control entry or a folder the
 * discovery did not read): bubblewrap binds such a path with `-try`, since the folder it lies in may be removed by
 * another process before the mounts are made (./linux/bwrap.ts). A path forgotten is bound strictly (safe, only
 * less forgiving).
 */
export function foundByDiscovery(p: string): boolean {
  return discoveredPaths.has(p);
}

/** The read-only entries of git dir `g` inside `root` (see {@link nestedGitPaths}). */
function controlEntries(g: string, root: string): string[] {
  const out: string[] = [];
  for (const name of [...GIT_CONTROL_FILES, ...GIT_CONTROL_DIRS]) {
    const p = join(g, name);
    const kind = entryKind(p);
    if (kind === undefined) {
      if ((GIT_CONTROL_DIRS as readonly string[]).includes(name)) out.push(p);
      continue;
    }
    if (kind === "other") {
      let target: string | undefined;
      try {
        target = lstatSync(p).isSymbolicLink() ? realpathSync(p) : undefined;
      } catch {
        target = undefined;
      }
      // The link's target too, when it lies in the root — for a git dir of this user's only: another local user's
      // repository in a shared /tmp must not choose a folder of ours to make read-only.
      const mine = (() => {
        try {
          return lstatSync(g).uid === process.getuid?.();
        } catch {
          return false;
        }
      })();
      const links = mine && target !== undefined && target !== root && isUnder(target, root) && !isUnder(g, target) ? [target] : [];
      return [g, ...links];
    }
    out.push(p);
  }
  return out;
}

/**
 * The protected subpaths of `root` (docs/sandbox.md, "Protected paths inside writable roots"). `readOnly`: `.git` if
 * it exists as a directory or file (and the gitdir a `.git` file points at, listed first); `.agents` if it is a
 * directory; `.codex` if it is a directory, or always when `root` is the policy cwd (so the agent cannot create
 * `.codex/config.toml`); the protected config folders below `root` ({@link configCarveOuts}). With `nested` (the
 * plan's writable roots, canonical), also the `.git` of every repository below the top ({@link nestedGitPaths},
 * with `workdir`). `writableAgain`: the folders bound writable again inside them ({@link nestedGit}).
 */
function protectedSubpaths(
  root: string,
  isCwd: boolean,
  nested?: { roots: readonly string[]; workdir?: string },
): { readOnly: string[]; writableAgain: string[] } {
  const out: string[] = [];
  let again: string[] = [];
  // A symlink named like a protected path at the top of a root that is not the cwd's (`ln -s /var /tmp/.codex`,
  // made by another local user or an earlier call) is treated as absent rather than refusing every later call: a
  // mount cannot cover a link, and nothing is lost by not covering it. An absent `.git`, `.agents` or `.codex` at
  // such a top is not protected either (the sandbox may create one there), and writing through the link reaches
  // only its target, which is read-only unless it lies in a writable root, where it has that root's protection
  // (a repository there is found and kept read-only on its own). The cwd root's own entries keep Codex's rule: a
  // symlink there is listed, and bubblewrap refuses the call ("crosses writable symlink").
  const present = (p: string, dirOnly: boolean) => {
    let st;
    try {
      st = lstatSync(p);
    } catch {
      return false;
    }
    if (st.isSymbolicLink()) return isCwd && (dirOnly ? isDir(p) : existsSync(p));
    return dirOnly ? st.isDirectory() : true;
  };
  const git = join(root, ".git");
  if (present(git, false)) {
    const pointed = gitdirPointer(git);
    // At a shared root's top (`/tmp/.git` of another local user) a pointer decides nothing it could abuse: only a
    // git dir (with `HEAD`) that holds no writable root is kept read-only (else `gitdir: /home/me/project` would
    // make the user's workspace read-only in every call).
    const sharedOk = (t: string) => {
      const c = canonicalMissing(t);
      const head = (() => {
        try {
          return lstatSync(join(c, "HEAD")).isFile();
        } catch {
          return false;
        }
      })();
      return head && !isUnder(root, c) && !(nested?.roots ?? []).some((r) => isUnder(r, c));
    };
    if (pointed !== undefined && (isCwd || sharedOk(pointed))) out.push(pointed);
    out.push(git);
  }
  if (present(join(root, ".agents"), true)) out.push(join(root, ".agents"));
  const codex = join(root, ".codex");
  if (present(codex, false) || isCwd) out.push(codex);
  if (nested !== undefined) {
    const n = nestedGit(root, nested.roots, nested.workdir);
    out.push(...n.readOnly);
    again = n.writableAgain;
  }
  out.push(...configCarveOuts(root));
  return { readOnly: [...new Set(out)], writableAgain: again };
}

/**
 * Whether a plan lists the `.git` of repositories below its writable roots' tops, and from which folder: for
 * backends that enforce them (bubblewrap). `workdir`: the folder the command starts in, whose repository is
 * protected at any depth. Seatbelt plans do not ask (their policy text must not depend on what the host holds,
 * issue 20), nor Landlock ones (nothing below a writable root can be kept read-only there).
 */
export interface NestedGitOption {
  workdir?: string;
}

/**
 * Writable roots of a policy (docs/sandbox.md, "Writable roots"): `writable_roots`, then `cwd`, then `/tmp` (unless
 * `exclude_slash_tmp`, and only if it is a directory), then `$TMPDIR` (unless `exclude_tmpdir_env_var`; must be
 * absolute). Roots that do not exist are skipped; duplicates (by canonical path) keep the first; a root that lies
 * in a protected config folder ({@link rootInConfigDir}) is dropped (logged). Each root's read-only subpaths are
 * {@link protectedSubpaths}, with nested repositories when `nested` is given (and then the folders bound writable
 * again inside them, `writableAgain`, when there are any). Empty for policies without
 * workspace writes.
 */
export function writableRoots(
  p: SandboxPolicy,
  cwd: string,
  env: Record<string, string | undefined> = process.env,
  nested?: NestedGitOption,
): WritableRoot[] {
  const roots = writableRootPaths(p, cwd, env);
  const cwdCanon = canonical(cwd);
  const workdir = nested?.workdir !== undefined && isAbsolute(nested.workdir) ? nested.workdir : undefined;
  return roots.map((root) => {
    const p = protectedSubpaths(root, root === cwdCanon, nested === undefined ? undefined : { roots, workdir });
    return { root, readOnlySubpaths: p.readOnly, ...(p.writableAgain.length > 0 ? { writableAgain: p.writableAgain } : {}) };
  });
}

/**
 * The canonical writable root folders of {@link writableRoots}, without their read-only subpaths (cheap: no search
 * for nested repositories). A root in a protected config folder is left out (logged).
 */
export function writableRootPaths(p: SandboxPolicy, cwd: string, env: Record<string, string | undefined> = process.env): string[] {
  if (p.type !== "workspace-write") return [];
  const candidates: string[] = [...p.writable_roots];
  if (isAbsolute(cwd)) candidates.push(cwd);
  if (!p.exclude_slash_tmp && isDir("/tmp")) candidates.push("/tmp");
  const tmpdir = env.TMPDIR;
  if (!p.exclude_tmpdir_env_var && tmpdir !== undefined && tmpdir !== "" && isAbsolute(tmpdir)) candidates.push(tmpdir);
  const roots: string[] = [];
  for (const c of candidates) {
    if (!existsSync(c)) continue;
    const root = canonical(c);
    if (roots.includes(root)) continue;
    const inConfig = rootInConfigDir(root);
    if (inConfig !== undefined) {
      log.warn("a writable root lies in a protected config folder: it stays read-only", { root, config: inConfig });
      continue;
    }
    roots.push(root);
  }
  return roots;
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

/**
 * The folders a bubblewrap plan binds onto themselves (writable, as they were) so that none of the `readOnly` entries
 * inside the writable `roots` can be moved: a bind mount moves with its parent folder, and a folder that is a mount
 * point cannot be renamed (EBUSY). Without them the sandbox could rename the folder of a nested repository (its `.git`
 * bound read-only inside) and make another one, with a writable `.git`, at the old path. One per folder above an
 * entry that is not a mount point (a root, an entry, a folder bound writable again: `writableAgain`, see
 * {@link WritableRoot}) and lies in a folder the sandbox can write ({@link writableInModel}); only existing
 * folders (canonical paths in, canonical out). writable.ts `pinnedReadOnly` trusts an entry by path only where
 * these are bound.
 */
export function pinFolders(roots: readonly string[], readOnly: readonly string[], writableAgain: readonly string[] = []): string[] {
  const mounts = new Set([...roots, ...readOnly, ...writableAgain]);
  const writableDir = (d: string) => writableInModel(d, roots, readOnly, writableAgain);
  const out = new Set<string>();
  for (const p of readOnly)
    for (let a = dirname(p); a !== dirname(a); a = dirname(a)) {
      if (mounts.has(a) || out.has(a) || !writableDir(dirname(a))) continue;
      try {
        if (lstatSync(a).isDirectory()) out.add(a);
      } catch {
        // missing: the entry below it stays unpinned (writable.ts treats it as writable)
      }
    }
  return [...out];
}

/** Whether `path` lies under `root` (component-wise). */
export function isUnder(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
