/**
 * The differential tier's layouts (issue 38, "The boundary's model checked against the kernel"): a seeded
 * generator of workspaces with the shapes the writable model must get right — a project `.git` folder or a `.git`
 * file pointing at a gitdir, a nested repository 1–5 levels down, a linked worktree's `.git` file, a bare repository
 * (HEAD, objects/, refs/, config, hooks/), `.codex`, `.agents`, missing protected paths, symlinks inside writable
 * roots (to folders outside, to `.git`, dangling), an extra writable root, a `$TMPDIR`-like root with a repository of
 * its own, files and folders whose modes deny writing — and the paths a probe tries in it, each with the
 * operations that make sense for what is there.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { planPermissionProfile, summarySandboxPolicy } from "../../../src/sandbox/filesystem-plan.ts";
import { parsePermissionProfile, type PermissionProfile } from "../../../src/sandbox/permission-profile.ts";
import { parseSandboxPolicy, type SandboxPolicy } from "../../../src/sandbox/policy.ts";
import { rng } from "../../helpers/rng.ts";
export { rng } from "../../helpers/rng.ts";

/** What the probe does with a path (probe.py): see harness.ts `expected` for what each needs. */
export type Op =
  "create" | "mkdir" | "symlink" | "renamein" | "write" | "truncate" | "chmod" | "chown" | "utime" | "rename" | "move" | "link" | "linkin";

/** One probe: operation `op` on `path`; `aux` is the second name (rename/link target, the file moved in). */
export interface Probe {
  op: Op;
  path: string;
  aux?: string;
}

/** One generated layout on disk, with the call that runs in it and the probes to try. */
export interface Layout {
  seed: number;
  /** Short description of the choices made (for reports). */
  shape: string;
  base: string;
  /** The policy cwd (the workspace). */
  ws: string;
  /** The folder the shell starts in. */
  workdir: string;
  /** The legacy policy (for a profile, the nearest one never wider, as serve derives it). */
  policy: SandboxPolicy;
  /** Codex 0.169's permission profile, which the sandbox then enforces instead of `policy`. */
  profile?: PermissionProfile;
  /** The shell's environment (`TMPDIR` is a writable root unless the policy excludes it). */
  env: Record<string, string>;
  /**
   * `$TMPDIR` of the server process that starts the call (bubblewrap started directly is planned there): the
   * shell's own unless the layout models a `shell_environment_policy` that leaves `TMPDIR` out of the shell's
   * environment (then `envDiffers`).
   */
  serverTmpdir: string;
  envDiffers: boolean;
  /** A protected config folder (CODEX_HOME's stand-in), outside every writable root. */
  codexHome: string;
  probes: Probe[];
}

/** Folder in each writable root where moves, links and files to move in are made (created by the generator). */
export const SCRATCH = ".diff-scratch";

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const names = ["lib", "src", "vendor", "pkg", "app", "mod", "ext", "third_party"];

function file(p: string, text = "x\n", mode?: number): void {
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, text);
  if (mode !== undefined) chmodSync(p, mode);
}

/** A git directory's control files: HEAD, config, objects/, refs/heads/, hooks/ (with a sample), info/. */
function gitDir(dir: string): void {
  file(join(dir, "HEAD"), "ref: refs/heads/main\n");
  file(join(dir, "config"), "[core]\n\trepositoryformatversion = 0\n");
  file(join(dir, "hooks", "pre-commit.sample"), "#!/bin/sh\n", 0o755);
  file(join(dir, "info", "exclude"), "");
  mkdirSync(join(dir, "objects", "pack"), { recursive: true });
  mkdirSync(join(dir, "refs", "heads"), { recursive: true });
}

/**
 * Make layout `seed` under the empty folder `base` (canonical). The choices (and so the paths) depend on the seed
 * only. Missing protected paths and new names get probes for create/mkdir/renamein; existing files for write,
 * truncate, chmod, rename, move, link and linkin; folders for chmod, rename and move; symlinks for what follows
 * them (write, chmod…) and what acts on the link itself (rename, move, link).
 */
export function makeLayout(base: string, seed: number): Layout {
  const r = rng(seed);
  const ws = join(base, "ws");
  const outside = join(base, "outside");
  const extra = join(base, "extra");
  const tmp = join(base, "tmp");
  const codexHome = join(base, "codex-home");
  const shape: string[] = [];
  for (const d of [ws, outside, extra, tmp, codexHome]) mkdirSync(d, { recursive: true });
  for (const d of [ws, extra, tmp]) mkdirSync(join(d, SCRATCH));
  file(join(codexHome, "config.toml"), "");
  file(join(outside, "f.txt"));
  file(join(outside, "dir", "g.txt"));
  file(join(ws, "file.txt"));
  file(join(ws, "secret.txt")); // denied by the permission-profile variant
  file(join(ws, "sub", "deep", "x.txt"));
  file(join(ws, "bin", "tool.sh"), "#!/bin/sh\n", 0o755);
  file(join(extra, "e.txt"));
  file(join(tmp, "t.txt"));

  const topGit = pick(r, ["dir", "dir", "file", "none"] as const);
  shape.push(`top .git: ${topGit}`);
  if (topGit === "dir") gitDir(join(ws, ".git"));
  if (topGit === "file") {
    const where = pick(r, [join(ws, ".gitdirs", "main"), join(extra, "gitdirs", "main"), join(outside, "gitdirs", "main")]);
    gitDir(where);
    file(join(ws, ".git"), `gitdir: ${where}\n`);
    shape.push(`its gitdir: ${where.slice(base.length + 1)}`);
  }
  if (r() < 0.5) {
    file(join(ws, ".codex", "config.toml"), "");
    shape.push(".codex present");
  }
  if (r() < 0.5) {
    file(join(ws, ".agents", "skills", "s.md"), "");
    shape.push(".agents present");
  }
  // A nested repository 1–5 levels down (beyond policy.ts NESTED_GIT_MAX_DEPTH only the workdir's is protected).
  const depth = 1 + Math.floor(r() * 5);
  const nested = join(ws, ...Array.from({ length: depth }, () => pick(r, names)));
  gitDir(join(nested, ".git"));
  file(join(nested, "main.c"));
  shape.push(`nested repo depth ${depth}`);
  // A linked worktree: a `.git` file pointing at a gitdir.
  if (r() < 0.6) {
    const where = pick(r, [join(ws, ".gitdirs", "wt"), join(extra, "gitdirs", "wt")]);
    gitDir(where);
    file(join(where, "commondir"), "../..\n");
    file(join(ws, "wt", ".git"), `gitdir: ${where}\n`);
    file(join(ws, "wt", "w.txt"));
    shape.push(`worktree gitdir: ${where.slice(base.length + 1)}`);
  }
  if (r() < 0.6) {
    gitDir(join(ws, "backup.git"));
    file(join(ws, "backup.git", "description"), "");
    shape.push("bare repo");
  }
  if (r() < 0.5) {
    file(join(ws, "ro.txt"), "x\n", 0o444);
    file(join(ws, "rodir", "in.txt"));
    chmodSync(join(ws, "rodir"), 0o555);
    shape.push("read-only modes");
  }
  const links: [string, string][] = [
    ["link-out", join(outside, "dir")],
    ["link-out-file", join(outside, "f.txt")],
    ["link-git", topGit === "none" ? join(nested, ".git") : join(ws, ".git")],
    ["link-nested-git", join(nested, ".git")],
    ["link-sub", join(ws, "sub")],
    ["dangling-out", join(outside, "nowhere.txt")],
    ["dangling-in", join(ws, "sub", "later.txt")],
    ["link-extra", extra],
  ];
  for (const [name, target] of links) if (r() < 0.6) symlinkSync(target, join(ws, name));
  // A $TMPDIR-like root: a repository of its own, sometimes a `.git` at its top.
  gitDir(join(tmp, "proj", ".git"));
  if (r() < 0.3) {
    gitDir(join(tmp, ".git"));
    shape.push("tmp root has .git");
  }

  const readOnlyPolicy = r() < 0.1;
  const withExtra = r() < 0.7;
  const withTmp = r() < 0.7;
  const policy: SandboxPolicy = parseSandboxPolicy(
    readOnlyPolicy
      ? { type: "read-only" }
      : {
          type: "workspace-write",
          writable_roots: withExtra ? [extra] : [],
          exclude_tmpdir_env_var: !withTmp,
          exclude_slash_tmp: true,
        },
  );
  shape.push(readOnlyPolicy ? "policy read-only" : `roots: ws${withExtra ? " extra" : ""}${withTmp ? " $TMPDIR" : ""}`);
  const workdir = pick(r, [ws, ws, join(ws, "sub"), nested, ...(shape.some((s) => s.startsWith("worktree")) ? [join(ws, "wt")] : [])]);
  shape.push(`workdir ${workdir.slice(base.length + 1)}`);

  const probes: Probe[] = [];
  const scratchFor = (p: string) => {
    for (const root of [ws, extra, tmp]) if (p === root || p.startsWith(root + "/")) return join(root, SCRATCH);
    return join(ws, SCRATCH);
  };
  let n = 0;
  const fresh = (dir: string) => join(dir, `.dmv${n++}`);
  const walk = (dir: string, depthLeft: number) => {
    for (const e of readdirSync(dir)) {
      if (e === SCRATCH) continue;
      const p = join(dir, e);
      const st = lstatSync(p);
      addExisting(p, st);
      if (st.isDirectory() && depthLeft > 0) walk(p, depthLeft - 1);
    }
    addMissing(join(dir, "new.txt"));
  };
  const addMissing = (p: string) => {
    // Only where the nearest existing ancestor is a folder (a path through a file is no question for the model).
    let d = dirname(p);
    while (!existsSync(d)) d = dirname(d);
    if (!statSync(d).isDirectory()) return;
    probes.push(
      { op: "create", path: p },
      { op: "mkdir", path: p },
      { op: "symlink", path: p },
      { op: "renamein", path: p, aux: fresh(scratchFor(p)) },
    );
  };
  // What changes an entry's metadata (links followed): mode, owner, times, each set to what it is.
  const meta = (p: string): Probe[] => [
    { op: "chmod", path: p },
    { op: "chown", path: p },
    { op: "utime", path: p },
  ];
  const addExisting = (p: string, st: import("node:fs").Stats) => {
    const entry = () => probes.push({ op: "rename", path: p, aux: fresh(dirname(p)) }, { op: "move", path: p, aux: fresh(scratchFor(p)) });
    if (st.isSymbolicLink()) {
      entry();
      probes.push({ op: "link", path: p, aux: fresh(dirname(p)) });
      let target: ReturnType<typeof statSync> | undefined;
      try {
        target = statSync(p);
      } catch {
        target = undefined;
      }
      if (target === undefined) probes.push({ op: "create", path: p });
      else if (target.isFile())
        probes.push({ op: "write", path: p }, { op: "truncate", path: p }, ...meta(p), {
          op: "linkin",
          path: p,
          aux: fresh(scratchFor(p)),
        });
      else {
        probes.push(...meta(p));
        addMissing(join(p, "via-link.txt"));
      }
      return;
    }
    entry();
    probes.push(...meta(p));
    if (st.isFile())
      probes.push(
        { op: "write", path: p },
        { op: "truncate", path: p },
        { op: "link", path: p, aux: fresh(dirname(p)) },
        { op: "linkin", path: p, aux: fresh(scratchFor(p)) },
      );
  };
  walk(base, 8);
  // Missing protected paths (a `.codex` in the policy cwd is held by an empty read-only mount point under bubblewrap).
  for (const p of [
    join(ws, ".codex", "config.toml"),
    join(ws, ".agents", "x.md"),
    join(ws, ".git", "hooks", "pre-commit"),
    join(nested, ".git", "hooks", "pre-commit"),
    join(ws, "backup.git", "hooks", "pre-receive"),
    join(tmp, ".codex", "config.toml"),
    join(extra, ".git", "config"),
    join(codexHome, "rules", "x.rules"),
  ])
    if (!probes.some((q) => q.path === p)) addMissing(p);
  // The roots and their parents.
  for (const p of [ws, extra, tmp, base]) probes.push(...meta(p));
  // Sometimes the shell's environment has no TMPDIR (shell_environment_policy `exclude`), the server's has.
  let envDiffers = !readOnlyPolicy && r() < 0.15;
  // Sometimes Codex 0.169's permission profile instead of the legacy policy: the same roots, plus a folder kept
  // read-only and a file (and a missing path) denied inside the workspace.
  let profile: PermissionProfile | undefined;
  if (!readOnlyPolicy && r() < 0.25) {
    envDiffers = false;
    const at = (path: string) => ({ type: "path", path });
    const special = (kind: string) => ({ type: "special", value: { kind } });
    profile = parsePermissionProfile({
      type: "managed",
      network: "restricted",
      file_system: {
        type: "restricted",
        entries: [
          { path: special("root"), access: "read" },
          { path: special("project_roots"), access: "write" },
          ...(withTmp ? [{ path: special("tmpdir"), access: "write" }] : []),
          ...(withExtra ? [{ path: at(extra), access: "write" }] : []),
          { path: at(join(ws, "sub", "deep")), access: "read" },
          { path: at(join(ws, "secret.txt")), access: "deny" },
          { path: at(join(ws, ".env")), access: "deny" },
        ],
      },
    });
    shape.push("permission profile (sub/deep read, secret.txt and .env denied)");
  }
  if (envDiffers) shape.push("shell env without TMPDIR");
  const env: Record<string, string> = envDiffers ? { PATH: "/usr/bin:/bin" } : { PATH: "/usr/bin:/bin", TMPDIR: tmp };
  const callPolicy = profile !== undefined ? summarySandboxPolicy(planPermissionProfile(profile, ws, env)) : policy;
  if (profile !== undefined && !probes.some((q) => q.path === join(ws, ".env"))) addMissing(join(ws, ".env"));
  return {
    seed,
    shape: shape.join(", "),
    base,
    ws,
    workdir,
    policy: callPolicy,
    profile,
    env,
    serverTmpdir: tmp,
    envDiffers,
    codexHome,
    probes: dedupe(probes),
  };
}

function dedupe(ps: Probe[]): Probe[] {
  const seen = new Set<string>();
  return ps.filter((p) => {
    const k = `${p.op}\0${p.path}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
