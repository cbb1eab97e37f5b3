/**
 * The writable and readable roots of a policy (docs/sandbox.md, "Writable roots" and "Read access"): which folders a
 * command may write, the protected subpaths that stay read-only inside each (protected names, config folders,
 * nested repositories' git control state), and which folders it may read under a restricted-read policy.
 */
import { existsSync, lstatSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { log } from "../log.ts";
import { gitdirPointer, nestedGit } from "./git/nested.ts";
import { canonical, canonicalMissing, isDir, isUnder } from "./paths.ts";
import type { SandboxPolicy } from "./policy.ts";
import { configCarveOuts, rootInConfigDir } from "./protected-config.ts";
import type { WritableRoot } from "./writable-model.ts";

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
