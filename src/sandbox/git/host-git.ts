/**
 * Whether `git` may run outside the sandbox (docs/security.md, the escalation boundary's "Git"): `git` reads its
 * repository's config and hooks, which run commands; when the repository's git dir, its config or hooks, a config
 * file git reads (system, global, included, `core.hooksPath`), or a place where the sandbox could create a nearer
 * `.git` is writable by the sandbox — or one of those files changed while this server ran where its sandboxes or
 * rooms could write (./taint.ts) — it may not. Used by the escalation boundary (src/escalate/decision/boundary.ts).
 */
import { existsSync, lstatSync, readdirSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { readUntrustedText } from "../../untrusted-fs.ts";
import { canonicalPath, canReplaceEntry, canWrite, type WritableView } from "../writable.ts";
import { discoverRepository, submodulePaths, trustedCommonDir, trustedGitdirPointer } from "./layout.ts";
import { originalGitDir, taintedControlFile, taintedGitDir, type TaintContext } from "./taint.ts";

/**
 * Why an escalated `git` could run something the sandbox wrote, or undefined when it cannot: this call's sandbox
 * can write a control file, or (`taint`) one changed while this server ran where its sandboxes could write.
 */
export function gitWritable(
  w: WritableView,
  argv: readonly string[],
  workdir: string,
  env: Record<string, string>,
  taint?: TaintContext,
): string | undefined {
  const opts = gitOptions(w, argv, workdir);
  if (typeof opts === "string") return opts;
  const { cwd } = opts;
  const repo = opts.gitDir === undefined ? discoverGit(w, cwd) : { gitDir: opts.gitDir, dirs: [] };
  if (typeof repo === "string") return repo;
  const configs: string[] = [];
  const control: string[] = [];
  const gitDirs: string[] = [];
  if (repo.gitDir !== undefined) {
    const why = gitDirsWritable(w, repo.gitDir, repo.dirs, repo.workTree, configs, control, gitDirs);
    if (why !== undefined) return why;
  }
  configs.push(...userGitConfigs(env));
  const why = configsWritable(w, configs, env.HOME, cwd, control);
  if (why !== undefined || taint === undefined) return why;
  const pointed = repo.gitDir === undefined ? undefined : repointedGitDir(taint, repo.workTree, repo.dirs);
  for (const t of [pointed, ...gitDirs.map((d) => taintedGitDir(taint, d)), ...control.map((f) => taintedControlFile(taint, f))]) {
    if (t !== undefined)
      return (
        `the repository's git control files changed while shellmcp ran, where a sandboxed command could write: ${t}. ` +
        "An earlier call may have written them; check them and run git yourself outside the agent (or restart shellmcp)"
      );
  }
  return undefined;
}

/**
 * A linked worktree whose pointer files (its `.git` file, its admin folder's `commondir` and `gitdir`) changed while
 * this server ran leads to a common git dir that must be an original `.git` folder ({@link originalGitDir}): the layout check
 * pins only the pointers' shape, which a project's folder of old git-looking files (a `config` with a
 * `core.fsmonitor` command, `worktrees/<name>/commondir` and `gitdir`) satisfies once a sandbox writes a `.git` file
 * naming it, and such a folder's files keep their old ctimes. A sentence saying so, else undefined.
 */
function repointedGitDir(taint: TaintContext, workTree: string | undefined, dirs: readonly string[]): string | undefined {
  if (dirs.length < 2) return undefined;
  const pointers = dirs.slice(0, -1).flatMap((d) => [join(d, "commondir"), join(d, "gitdir")]);
  if (workTree !== undefined) pointers.unshift(join(workTree, ".git"));
  const changed = pointers.map((p) => taintedControlFile(taint, p)).find((t) => t !== undefined);
  if (changed === undefined) return undefined;
  const common = dirs[dirs.length - 1]!;
  // Named `.git`: a project's files cannot be (git never checks out a `.git`), and one renamed into place is not
  // original at its new path. A folder of old files elsewhere may have been seen as a bare repository by the guard.
  return basename(common) === ".git" && originalGitDir(taint, common)
    ? undefined
    : `${changed}, a pointer to ${common}, which is not a repository's .git seen there before a sandbox could write there`;
}

/** Most entries of a hooks folder whose change times are checked (a folder holding more is not trusted). */
const MAX_HOOKS = 256;

/**
 * Hooks folder `dir` and its entries, appended to `control`: a hook added, or renamed from `pre-commit.sample`, has a
 * new ctime, and a folder renamed into place (whose entries keep their old ctimes) has one itself. An empty real
 * folder is left out (a room's mount point makes one; it runs nothing). Why not, when it holds more than
 * {@link MAX_HOOKS}.
 */
function addHooks(dir: string, control: string[]): string | undefined {
  let names: string[];
  try {
    const link = !lstatSync(dir).isDirectory();
    if (link) control.push(dir);
    if (!statSync(dir).isDirectory()) return undefined;
    names = readdirSync(dir);
    if (!link && names.length > 0) control.push(dir);
  } catch {
    return undefined;
  }
  if (names.length > MAX_HOOKS) return `git's hooks folder ${dir} holds more than ${MAX_HOOKS} entries`;
  for (const n of names) control.push(join(dir, n));
  return undefined;
}

/** `why` as the boundary's reason when the sandbox of `w` can write `p`: git's `what` there. */
function writableBy(w: WritableView, what: string, p: string): string | undefined {
  return canWrite(w, p) ? `git's ${what} ${p} can be written by the sandboxed command` : undefined;
}

/**
 * git's global options before the subcommand that change where it looks: `-C` (the folder git starts in, from
 * `workdir`), `--git-dir`; a sandbox-writable `--exec-path` is the reason returned.
 */
function gitOptions(w: WritableView, argv: readonly string[], workdir: string): { cwd: string; gitDir?: string } | string {
  let cwd = workdir;
  let gitDir: string | undefined;
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (flag: string) => (a === flag ? argv[++i] : a.startsWith(flag + "=") ? a.slice(flag.length + 1) : undefined);
    if (a === "-C") {
      const d = argv[++i];
      if (d !== undefined && d !== "") cwd = resolve(cwd, d);
      continue;
    }
    const gd = value("--git-dir");
    if (gd !== undefined) {
      gitDir = resolve(cwd, gd);
      continue;
    }
    const ep = a.startsWith("--exec-path=") ? a.slice("--exec-path=".length) : undefined;
    if (ep !== undefined && canWrite(w, resolve(cwd, ep))) return `git's --exec-path ${ep} can be written by the sandboxed command`;
    if (a === "-c" || a === "--work-tree" || a === "--namespace" || a === "--config-env") {
      i++;
      continue;
    }
    if (!a.startsWith("-")) break;
  }
  return gitDir === undefined ? { cwd } : { cwd, gitDir };
}

/**
 * Discovery, as git does it from `cwd`: the nearest folder with a .git; a bare repository on the way is refused (the
 * reason returned), as git's `safe.bareRepository=explicit` refuses it. Any folder on
 * the way where the sandbox could create a .git would win over the real one (the reason returned). Pointer files (a
 * `.git` file, `commondir`) are trusted only in git's own shape (../../sandbox/git/layout.ts): a forged one fails
 * closed. `dirs`: the repository's git dirs when discovery found them (empty for a bare repository).
 */
function discoverGit(w: WritableView, cwd: string): { workTree?: string; gitDir?: string; dirs: string[] } | string {
  for (let d = canonicalPath(cwd); ; d = dirname(d)) {
    const dotGit = join(d, ".git");
    if (existsSync(dotGit)) {
      const why = writableBy(w, "repository", dotGit);
      if (why !== undefined) return why;
      // A `.git` symlink whose entry the sandbox can replace is a pointer the sandbox chose (hole 2 of the review).
      const found = discoverRepository(d, 0, (link) => !linkReplaceable(w, link));
      if (found.kind === "untrusted") return `git's repository layout cannot be trusted: ${found.reason}`;
      if (found.kind === "repository")
        return { workTree: found.repository.workTree, gitDir: found.repository.gitDirs[0], dirs: found.repository.gitDirs };
      return { dirs: [] };
    }
    if (canWrite(w, dotGit)) return `the sandboxed command can create a repository at ${dotGit}, which git would use`;
    // A bare repository found by discovery (git's own `safe.bareRepository=explicit` refuses the same): one
    // embedded in a project — files nobody had to write in a sandbox — would otherwise bring its hooks and config
    // to the escalated git (review of the taint check, bypass 2).
    if (existsSync(join(d, "HEAD")) && existsSync(join(d, "objects")) && existsSync(join(d, "refs")))
      return `git would use the bare repository at ${d}, found from the working folder (as git's safe.bareRepository=explicit refuses): its hooks and config may be project files, so git does not leave the sandbox there`;
    if (dirname(d) === d) return { dirs: [] };
  }
}

/**
 * Why git dir `gitDir` (its git dirs `dirs`: empty for `--git-dir` or a bare repository, whose `commondir` is then
 * followed), its hooks, its configs, or a submodule's `.git` in `workTree`, can be written by the sandbox; the git
 * dirs' config files are appended to `configs`, their hooks and submodules' configs and hooks to `control`. Pointer
 * files (`commondir`, `gitdir`, a `.git` file) are not: their content is pinned by the layout check
 * (../../sandbox/git/layout.ts), so who wrote them changes nothing (a `git worktree add` through the room is kept).
 * The git dirs whose folder may not have moved (the common one, a submodule's, a linked worktree's own when it
 * holds a `config.worktree`) are appended to `gitDirs`.
 */
function gitDirsWritable(
  w: WritableView,
  gitDir: string,
  dirs: string[],
  workTree: string | undefined,
  configs: string[],
  control: string[],
  gitDirs: string[],
): string | undefined {
  if (dirs.length === 0) {
    // --git-dir, or a bare repository: its commondir too (a linked worktree of a bare repository).
    const common = trustedCommonDir(canonicalPath(gitDir));
    if (typeof common === "object") return `git's repository layout cannot be trusted: ${common.untrusted}`;
    dirs = common === undefined ? [gitDir] : [gitDir, common];
  }
  for (const d of dirs) {
    for (const [what, p] of [
      ["git dir", d],
      ["hooks", join(d, "hooks")],
      ["config", join(d, "config")],
      ["config", join(d, "config.worktree")],
    ] as const) {
      const why = writableBy(w, what, p);
      if (why !== undefined) return why;
    }
    configs.push(join(d, "config"), join(d, "config.worktree"));
    const many = addHooks(join(d, "hooks"), control);
    if (many !== undefined) return many;
    // A linked worktree's own admin folder is made by `git worktree add` (through a room, too): only what it could
    // carry, a `config.worktree`, makes its folder matter.
    if (d === dirs[dirs.length - 1] || existsSync(join(d, "config.worktree"))) gitDirs.push(d);
  }
  // Submodules: git recurses into them (status, diff, fetch…) and runs *their* config and hooks. A submodule's
  // .git lives in the work tree, where the sandbox may create or replace it.
  if (workTree === undefined) return undefined;
  const subs = submodulePaths(gitDir, workTree);
  if (typeof subs === "string") return subs;
  for (const sub of subs) {
    const dotGit = join(workTree, sub, ".git");
    const why = writableBy(w, "submodule repository", dotGit);
    if (why !== undefined) return why;
    const subDir = submoduleGitDir(join(workTree, sub));
    if (subDir !== undefined) {
      gitDirs.push(subDir);
      control.push(join(subDir, "config"), join(subDir, "config.worktree"));
      const many = addHooks(join(subDir, "hooks"), control);
      if (many !== undefined) return many;
    }
  }
  return undefined;
}

/** The git dir of the submodule checked out at `subTree` (its `.git` folder, or what its trusted `.git` file names). */
function submoduleGitDir(subTree: string): string | undefined {
  const dotGit = join(subTree, ".git");
  try {
    const st = lstatSync(dotGit);
    if (st.isDirectory()) return dotGit;
    if (!st.isFile()) return undefined;
  } catch {
    return undefined;
  }
  const p = trustedGitdirPointer(subTree);
  return typeof p === "string" ? p : undefined;
}

/** The system and global config files git reads under `env` (`GIT_CONFIG_NOSYSTEM`, `…_SYSTEM`, `…_GLOBAL`, HOME, XDG). */
function userGitConfigs(env: Record<string, string>): string[] {
  const configs: string[] = [];
  const home = env.HOME;
  if (env.GIT_CONFIG_NOSYSTEM === undefined) configs.push(env.GIT_CONFIG_SYSTEM ?? "/etc/gitconfig");
  if (env.GIT_CONFIG_GLOBAL !== undefined) configs.push(env.GIT_CONFIG_GLOBAL);
  else if (home !== undefined && isAbsolute(home)) {
    configs.push(
      join(home, ".gitconfig"),
      join(env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(home, ".config"), "git", "config"),
    );
  }
  return configs;
}

/**
 * Why one of `configs`, or a file or hook folder they name (`include.path`, `core.hooksPath`, `core.fsmonitor`; two
 * levels of includes), can be written by the sandbox, or cannot be read; relative names resolve against the config's
 * folder and against `cwd`, `~/` against `home`. Each of those files (and a hooks folder's entries) is appended to
 * `control`.
 */
function configsWritable(
  w: WritableView,
  configs: readonly string[],
  home: string | undefined,
  cwd: string,
  control: string[],
): string | undefined {
  // Config files, and the files and hook folders they name.
  const seen = new Set<string>();
  const queue = configs.map((c) => ({ file: c, depth: 0 }));
  while (queue.length > 0) {
    const { file, depth } = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const why = writableBy(w, "config file", file);
    if (why !== undefined) return why;
    control.push(file);
    const r = readUntrustedText(file, { follow: true });
    if (!r.ok) {
      if (r.why === "missing") continue;
      return `cannot read git's config file: ${r.reason}`;
    }
    for (const m of r.text.matchAll(/^\s*(path|hookspath|fsmonitor)\s*=\s*(.+?)\s*$/gim)) {
      let v = m[2]!.replace(/^"(.*)"$/, "$1");
      if (m[1]!.toLowerCase() === "fsmonitor" && !v.includes("/")) continue; // a boolean or a command name on PATH
      if (v.startsWith("~/") && home !== undefined) v = join(home, v.slice(2));
      const targets = isAbsolute(v) ? [v] : [resolve(dirname(file), v), resolve(cwd, v)];
      for (const t of targets) {
        const why2 = writableBy(
          w,
          m[1]!.toLowerCase() === "path" ? "included config" : m[1]!.toLowerCase() === "hookspath" ? "core.hooksPath" : "core.fsmonitor",
          t,
        );
        if (why2 !== undefined) return why2;
        if (m[1]!.toLowerCase() === "hookspath") {
          const many = addHooks(t, control);
          if (many !== undefined) return many;
        } else if (m[1]!.toLowerCase() === "fsmonitor") control.push(t);
        if (m[1]!.toLowerCase() === "path" && depth < 2) queue.push({ file: t, depth: depth + 1 });
      }
    }
  }
  return undefined;
}

/**
 * Whether the sandbox of `w` can replace the directory entry `p` itself (not where it leads): a link in a writable
 * folder can be removed and made again naming anything.
 */
function linkReplaceable(w: WritableView, p: string): boolean {
  if (w.full) return true;
  const entry = join(canonicalPath(dirname(p)), basename(p));
  return !w.roots.includes(entry) && canReplaceEntry(w, entry);
}
