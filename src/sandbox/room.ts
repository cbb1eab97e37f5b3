/**
 * The escalation room (issue 21): where an escalated program runs. An `allow` rule (or a human's approval) lets a
 * program out of the call's sandbox, but into a bounded room, not onto the host:
 *
 * - it reads what the call's sandbox could read;
 * - it writes what the call's sandbox could write, plus the repository it runs in (work tree and git dirs) — except
 *   what git executes or reads commands from: each git dir's `config`, `config.worktree`, `commondir`, `hooks/`,
 *   `info/`, and the same in every submodule git dir under `modules/` — plus the extra paths the user names for that
 *   program (`[shellmcp.room_writable]`); HOME's dotfiles, `/etc`, other projects and caches stay read-only;
 * - the network is on (the usual reason to escalate), through the call's proxy in network proxy mode;
 * - no terminal: a new session without a controlling terminal, terminal fds replaced (the worker does that), and a
 *   non-interactive environment ({@link NON_INTERACTIVE_ENV}) whatever the request said.
 *
 * This module plans the room (pure planning over the filesystem); the backends build it (./linux/room.ts:
 * bubblewrap with its own user, pid and ipc namespaces, Landlock through the helper, or Seatbelt on macOS), and the
 * escalation server starts programs in it. `escalation = "host"` keeps Codex's meaning (the program runs on the
 * host with the user's full power).
 *
 * Paths a room cannot keep read-only because they do not exist (a missing `commondir`, which git would follow to
 * another config) are returned as `mustNotAppear`: the server removes them when the program has ended.
 */
import { existsSync, lstatSync, readdirSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, isAbsolute, join } from "node:path";
import type { FilesystemPlan } from "./filesystem-plan.ts";
import { discoverRepository, type Repository } from "./git-layout.ts";
import { isUnder, PROTECTED_NAMES, type WritableRoot } from "./policy.ts";
import { readUntrustedText } from "../untrusted-fs.ts";
import { canonicalPath } from "./writable.ts";

export type { Repository } from "./git-layout.ts";

/** `escalation` in the config: `room` (default) or `host` (Codex's meaning: the program runs unconfined). */
export type EscalationMode = "room" | "host";

/** How rooms are built for one call. */
export type RoomBackend =
  /** No room: the program runs on the host (`escalation = "host"`, or the call itself is not sandboxed). */
  | { kind: "host" }
  /** bubblewrap at `bwrap`; `noProc` when `/proc` cannot be mounted here (as the call's own probe found). */
  | { kind: "bwrap"; bwrap: string; noProc: boolean }
  /** Landlock + seccomp through this binary's sandbox helper (`helper`: the argv that starts it). */
  | { kind: "landlock"; helper: string[] }
  /**
   * Seatbelt on macOS: `/usr/bin/sandbox-exec` with a policy generated from the room's plan (its read-only paths
   * inside writable roots included: Seatbelt excludes them by path). `allowLocalBinding`: proxy mode's local rules.
   */
  | { kind: "seatbelt"; allowLocalBinding: boolean }
  /** A room cannot be built here: escalated programs run inside the call's sandbox instead (never on the host). */
  | { kind: "unavailable"; reason: string };

/** Everything the escalation server needs to build rooms for one call. */
export interface RoomSpec {
  backend: RoomBackend;
  /** The call's sandbox, as its backend enforces it. */
  call: FilesystemPlan;
  /** Extra writable paths by program base name (`npm` → `["/home/u/.npm"]`), absolute. */
  extraWritable: Readonly<Record<string, readonly string[]>>;
  /**
   * Network proxy mode (docs/network.md): escalated programs reach the network only through the call's proxy.
   * bubblewrap rooms get a private network namespace whose listeners (`ports`, made by the inner stage) are sent over
   * `bridgeFd` (the call's room bridge, mapped to fd {@link ROOM_BRIDGE_FD}); Landlock rooms may connect only to
   * `ports` (the proxy's host-loopback ports). `env`: the proxy variables for the program.
   */
  proxy?: { ports: number[]; bridgeFd?: number; env: Readonly<Record<string, string>> };
}

/** fd number of the proxy bridge in a bubblewrap room. */
export const ROOM_BRIDGE_FD = 5;

/**
 * What every escalated program's environment says, whatever the request said: editors that do nothing (`true`:
 * `git commit` without `-m` aborts on the empty message, `rebase -i` keeps its plan), no pagers, no prompts for
 * credentials, a dumb terminal.
 */
export const NON_INTERACTIVE_ENV: Readonly<Record<string, string>> = {
  GIT_EDITOR: "true",
  GIT_SEQUENCE_EDITOR: "true",
  EDITOR: "true",
  VISUAL: "true",
  PAGER: "cat",
  GIT_PAGER: "cat",
  MANPAGER: "cat",
  LESSSECURE: "1",
  GIT_TERMINAL_PROMPT: "0",
  SSH_ASKPASS_REQUIRE: "never",
  GCM_INTERACTIVE: "never",
  TERM: "dumb",
};

/** Variables removed from every escalated program's environment (askpass helpers, displays, shell start files). */
export const NON_INTERACTIVE_UNSET: readonly string[] = ["GIT_ASKPASS", "SSH_ASKPASS", "DISPLAY", "WAYLAND_DISPLAY", "BASH_ENV", "ENV"];

/** `env` (KEY=VALUE entries) made non-interactive: {@link NON_INTERACTIVE_ENV} set, {@link NON_INTERACTIVE_UNSET} removed. */
export function nonInteractiveEnv(env: readonly string[]): string[] {
  const drop = new Set([...NON_INTERACTIVE_UNSET, ...Object.keys(NON_INTERACTIVE_ENV)]);
  const kept = env.filter((e) => !drop.has(e.slice(0, Math.max(0, e.indexOf("=")))));
  return [...kept, ...Object.entries(NON_INTERACTIVE_ENV).map(([k, v]) => `${k}=${v}`)];
}

/**
 * The repository `cwd` lies in, as git discovers it (./git-layout.ts: pointer files are followed only where they
 * have git's own shape), or undefined. Throws when the layout cannot be trusted (a forged `commondir` or `.git`
 * file, a FIFO in their place): {@link prepareRoom}'s caller then builds no room.
 */
export function findRepository(cwd: string): Repository | undefined {
  const d = discoverRepository(cwd);
  if (d.kind === "untrusted") throw new Error(`the repository's layout cannot be trusted: ${d.reason}`);
  return d.kind === "repository" ? d.repository : undefined;
}

/** Files git reads commands from, or follows to another config, at the top of a git dir. */
const GIT_CONTROL_FILES = ["config", "config.worktree", "commondir"];
/** Folders of a git dir whose contents git executes or treats as configuration. */
const GIT_CONTROL_DIRS = ["hooks", "info"];
/** How deep submodule git dirs (`modules/<name>/modules/…`) are followed. */
const MAX_MODULE_DEPTH = 4;

/**
 * What stays read-only inside git dir `dir` (existing control files and folders, those of its linked worktrees'
 * admin folders and of its submodule git dirs), and the control files that do not exist and must not appear.
 * Missing control folders are listed as read-only too: the backend keeps them from being created.
 */
export function gitControlPaths(dir: string, depth = 0): { readOnly: string[]; mustNotAppear: string[] } {
  const readOnly: string[] = [];
  const mustNotAppear: string[] = [];
  for (const f of GIT_CONTROL_FILES) {
    const p = join(dir, f);
    if (existsSync(p)) readOnly.push(p);
    else mustNotAppear.push(p);
  }
  for (const d of GIT_CONTROL_DIRS) readOnly.push(join(dir, d));
  for (const [sub, recurse] of [
    ["worktrees", false],
    ["modules", true],
  ] as const) {
    let names: string[];
    try {
      names = readdirSync(join(dir, sub));
    } catch {
      continue;
    }
    for (const n of names) {
      const child = join(dir, sub, n);
      if (!isDir(child)) continue;
      if (recurse && depth < MAX_MODULE_DEPTH) {
        // A submodule's git dir may itself hold submodules (modules/<a>/modules/<b>): nested names are folders.
        const inner = isDir(join(child, "objects")) ? [child] : subGitDirs(child);
        for (const g of inner) {
          const r = gitControlPaths(g, depth + 1);
          readOnly.push(...r.readOnly);
          mustNotAppear.push(...r.mustNotAppear);
        }
      } else {
        for (const f of GIT_CONTROL_FILES) if (existsSync(join(child, f))) readOnly.push(join(child, f));
      }
    }
  }
  return { readOnly, mustNotAppear };
}

/** Git dirs below `dir` (submodule names with slashes are nested folders), up to a few levels. */
function subGitDirs(dir: string, depth = 0): string[] {
  if (depth > MAX_MODULE_DEPTH) return [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((n) => {
    const c = join(dir, n);
    if (!isDir(c)) return [];
    return isDir(join(c, "objects")) ? [c] : subGitDirs(c, depth + 1);
  });
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory() && !lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** The room for one escalated program: the plan a backend enforces, and the paths to check once it has ended. */
export interface RoomPlan {
  plan: FilesystemPlan;
  mustNotAppear: string[];
  repository?: Repository;
}

/**
 * Plan the room for `program` (canonical path) started in `cwd` under the call's sandbox `spec.call`. The plan is
 * strict (a backend that cannot keep a read-only path read-only must say so); its network is enabled.
 */
export function planRoom(spec: RoomSpec, cwd: string, program: string): RoomPlan {
  const call = spec.call;
  const roots = new Map<string, Set<string>>();
  const add = (root: string, readOnly: readonly string[]) => {
    const set = roots.get(root) ?? new Set<string>();
    for (const r of readOnly) set.add(r);
    roots.set(root, set);
  };
  const repo = findRepository(cwd);
  const released = new Set<string>(); // carve-outs of the call that the room writes (the repository's git dir)
  const mustNotAppear: string[] = [];
  if (repo !== undefined) {
    const home = canonicalPath(homedir());
    // The work tree is the project, unless it is HOME itself or one of its ancestors (a dotfiles repository):
    // HOME's dotfiles stay read-only.
    if (!isUnder(home, repo.workTree)) {
      const own = PROTECTED_NAMES.filter((n) => n !== ".git").map((n) => join(repo.workTree, n));
      const dotGit = join(repo.workTree, ".git");
      if (lstatSync(dotGit).isFile()) own.push(dotGit); // the pointer decides where the git dir is
      add(repo.workTree, own);
    }
    for (const g of repo.gitDirs) {
      const c = gitControlPaths(g);
      add(g, c.readOnly);
      mustNotAppear.push(...c.mustNotAppear);
      released.add(g);
    }
  }
  // git pushing to a remote that is a path on this machine writes that repository: the remotes named in the
  // repository's config (which the call's sandbox cannot write, or git would not be escalated), never a path the
  // command gives itself.
  if (repo !== undefined && basename(program) === "git") {
    for (const g of localRemotes(repo)) {
      const c = gitControlPaths(g);
      add(g, c.readOnly);
      mustNotAppear.push(...c.mustNotAppear);
    }
  }
  for (const w of call.writableRoots)
    add(
      w.root,
      w.readOnlySubpaths.filter((p) => !released.has(canonicalPath(p))),
    );
  for (const p of spec.extraWritable[basename(program)] ?? []) if (isAbsolute(p) && existsSync(p)) add(canonicalPath(p), []);
  const writableRoots: WritableRoot[] = [...roots].map(([root, ro]) => ({ root, readOnlySubpaths: [...ro] }));
  const plan: FilesystemPlan = {
    sandboxed: true,
    fullRead: call.fullRead,
    fullWrite: call.fullWrite,
    readableRoots: call.readableRoots,
    includePlatformDefaults: call.includePlatformDefaults,
    writableRoots,
    deniedPaths: call.deniedPaths,
    network: "enabled",
    strict: true,
  };
  return repo === undefined ? { plan, mustNotAppear } : { plan, mustNotAppear, repository: repo };
}

/**
 * Git dirs of the remotes of `repo` that are repositories on this machine: `url`/`pushurl` values of its config
 * that are absolute paths or `file://` URLs of existing folders (a bare repository, or a work tree's `.git`).
 */
export function localRemotes(repo: Repository): string[] {
  const out = new Set<string>();
  for (const g of repo.gitDirs) {
    const r = readUntrustedText(join(g, "config"), { follow: true });
    if (!r.ok) continue; // no config, or none git could read either: no local remotes
    for (const m of r.text.matchAll(/^\s*(?:url|pushurl)\s*=\s*(.+?)\s*$/gim)) {
      let v = m[1]!.replace(/^"(.*)"$/, "$1");
      if (v.startsWith("file://")) v = decodeURIComponent(v.slice("file://".length));
      if (!isAbsolute(v) || !isDir(v)) continue;
      const dir = canonicalPath(v);
      out.add(isDir(join(dir, ".git")) ? join(dir, ".git") : dir);
    }
  }
  return [...out];
}
