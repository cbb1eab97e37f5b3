/**
 * The escalation room (issue 21): where an escalated program runs. An `allow` rule (or a human's approval) lets a
 * program out of the call's sandbox, but into a bounded room, not onto the host:
 *
 * - it reads what the call's sandbox could read: never the secrets (../../sandbox/secrets.ts), and not the user's
 *   credential stores (`~/.ssh`, `~/.aws`, `~/.netrc` …) unless `[shellmcp.room_readable]` names one for that
 *   program (or `[shellmcp] sandbox_readable` opened it for every sandbox);
 * - it writes what the call's sandbox could write, plus the repository it runs in (work tree and git dirs) — except
 *   what git executes or reads commands from: each git dir's `config`, `config.worktree`, `commondir`, `hooks/`,
 *   `info/`, and the same in every submodule git dir under `modules/` — plus the extra paths the user names for that
 *   program (`[shellmcp.room_writable]`); HOME's dotfiles, `/etc`, other projects and caches stay read-only;
 * - its network is granted, never inherited ({@link RoomNetwork}): by default the call's own (off → none at all: no
 *   TCP, no host Unix socket, pathname or abstract; proxy mode → the call's proxy; a call with the full network →
 *   the full network), or what `[shellmcp.room_network]` grants that program (`"host"`: the host's network);
 * - no terminal: a new session without a controlling terminal, terminal fds replaced (the worker does that), and a
 *   non-interactive environment ({@link NON_INTERACTIVE_ENV}) whatever the request said.
 *
 * This module plans the room (pure planning over the filesystem); the backends build it (./build.ts:
 * bubblewrap with its own user, pid and ipc namespaces, Landlock through the helper, or Seatbelt on macOS), and the
 * escalation server starts programs in it. `escalation = "host"` keeps Codex's meaning (the program runs on the
 * host with the user's full power).
 *
 * Paths a room cannot keep read-only because they do not exist (a missing `commondir`, which git would follow to
 * another config) are returned as `mustNotAppear`: the server removes them when the program has ended.
 */
import { existsSync, lstatSync, readdirSync, statSync } from "node:fs";
import { userHome } from "../../self.ts";
import { basename, dirname, isAbsolute, join } from "node:path";
import type { FilesystemPlan } from "../../sandbox/filesystem-plan.ts";
import type { RoomBackend } from "../../sandbox/room-backend.ts";
import { discoverRepository, type Repository } from "../../sandbox/git/layout.ts";
import { isUnder } from "../../sandbox/paths.ts";
import { PROTECTED_NAMES } from "../../sandbox/protected-config.ts";
import type { WritableRoot } from "../../sandbox/writable-model.ts";
import { readUntrustedText } from "../../untrusted-fs.ts";
import { credentialStores, secretPaths } from "../../sandbox/secrets.ts";
import { canonicalPath } from "../../sandbox/writable.ts";

/** `escalation` in the config: `room` (default) or `host` (Codex's meaning: the program runs unconfined). */
export type EscalationMode = "room" | "host";

/**
 * Everything the escalation server needs to build rooms for one call: how rooms are built (`backend`), the call's own
 * sandbox every room starts from (`call`), and the settings' grants by program name (`[shellmcp.room_writable]`,
 * `[shellmcp.room_network]`, `[shellmcp.room_readable]`), with the proxies the call's network needs. Made once per
 * call; {@link planRoom} turns it into one program's {@link RoomPlan}.
 */
export interface RoomSpec {
  /** How rooms are built for this call (../../sandbox/room-backend.ts): on the host, bubblewrap, Landlock, Seatbelt, or none possible. */
  backend: RoomBackend;
  /** The call's sandbox, as its backend enforces it: every room starts from it (its reads, writable roots, denied paths). */
  call: FilesystemPlan;
  /**
   * Extra writable paths by program base name (`[shellmcp.room_writable]`: `npm` → `["/home/u/.npm"]`), absolute; one
   * that does not exist is left out.
   */
  extraWritable: Readonly<Record<string, readonly string[]>>;
  /**
   * Network grants by program base name (`[shellmcp.room_network]`): a program named here gets that network in its
   * room instead of the call's own. Absent: every room gets the call's network.
   */
  networkGrants?: Readonly<Record<string, RoomNetworkGrant>>;
  /**
   * Credential stores a program's room may read after all (`[shellmcp.room_readable]`), by program base name:
   * absolute paths; each credential store (../../sandbox/secrets.ts `CREDENTIAL_STORES`) under one of them stays
   * readable for that program. Secrets never do.
   */
  readableGrants?: Readonly<Record<string, readonly string[]>>;
  /**
   * Network proxy mode (docs/network.md): escalated programs reach the network only through the call's proxy.
   * bubblewrap rooms get a private network namespace whose listeners (`ports`, made by the inner stage) are sent over
   * `bridgeFd` (the call's room bridge, mapped to fd {@link ROOM_BRIDGE_FD}); Landlock rooms may connect only to
   * `ports` (the proxy's host-loopback ports). `env`: the proxy variables for the program.
   */
  proxy?: RoomProxy;
  /**
   * The proxies of domain grants, by the program name the grant names (`[shellmcp.room_network] npm = [...]`),
   * started for the call (./room-grants.ts). A program granted domains whose proxy is missing here gets
   * no room (never a wider network).
   */
  grantProxies?: Readonly<Record<string, RoomProxy>>;
}

/**
 * A network grant for one program's room (`[shellmcp.room_network]` in config.toml): `host` = the host's network
 * namespace, loopback services and Unix sockets included (the behaviour before issue 30, chosen knowingly);
 * `call` = the call's own network (the default, the same as naming nothing); a list of domains = a proxy of its
 * own allowing exactly those (Codex's allow-list patterns; a local target only when listed exactly), plus the
 * call's allow-list in proxy mode (./room-grants.ts).
 */
export type RoomNetworkGrant = "host" | "call" | readonly string[];

/** How a room reaches a proxy (the call's, or a grant's): ports, the bubblewrap bridge, the proxy variables. */
export interface RoomProxy {
  /** The ports TCP may reach: in the room's namespace (bubblewrap) or the proxy's on the host's loopback (Landlock). */
  ports: number[];
  /** bubblewrap: the bridge's child end, mapped to fd {@link ROOM_BRIDGE_FD} in the room. */
  bridgeFd?: number;
  /** The proxy variables for the program. */
  env: Readonly<Record<string, string>>;
}

/**
 * What a room's network is, as its backend builds it:
 * - `off`: no network at all. bubblewrap: a network namespace of its own (`--unshare-net`: no host loopback, no
 *   abstract Unix socket of the host) and the call's network-off seccomp filter (no `connect`/`bind` of any socket,
 *   so no host pathname Unix socket either; `socketpair` works). Landlock: the helper's network-off sandbox (ABI ≥ 4:
 *   no TCP connect or bind; ABI ≥ 6: abstract Unix sockets scoped) and the same seccomp filter.
 * - `proxy`: the call's proxy only (network proxy mode, {@link RoomSpec.proxy}).
 * - `host`: the host's network namespace: a call that itself has the full network, or a `host` grant.
 */
export type RoomNetwork = "off" | "proxy" | "host";

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
 * The repository `cwd` lies in, as git discovers it (../../sandbox/git/layout.ts: pointer files are followed only where they
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

/**
 * The room for one escalated program ({@link planRoom}): the plan its backend enforces, its network, and what the
 * server checks once the program has ended. Paths are canonical and absolute.
 */
export interface RoomPlan {
  /**
   * The room's walls, a strict plan: the call's reads; writable the repository the program runs in (less what git
   * executes or reads commands from), the call's writable roots (less the carve-outs of git dirs the room writes)
   * and the program's `[shellmcp.room_writable]` grant; denied the call's own denied paths and `hiddenCredentials`;
   * network `enabled` unless the room's network is `off`.
   */
  plan: FilesystemPlan;
  /** The room's network ({@link RoomNetwork}): the call's own by default, or what the program's grant says. */
  network: RoomNetwork;
  /** The proxy a `proxy` room goes through (the call's, or its program's grant's). */
  proxy?: RoomProxy;
  /**
   * The credential stores and secrets the room must not read (../../sandbox/secrets.ts; the stores the program's
   * `[shellmcp.room_readable]` grant opens left out): also in `plan.deniedPaths`, which a backend hides without ever
   * refusing the room for them (Landlock: read rules beside them).
   */
  hiddenCredentials: string[];
  /**
   * Git control files that did not exist when the room was planned and that the room could create (a missing
   * `commondir`, which git would follow to another config): the server removes any that appeared once the program
   * has ended (./check.ts).
   */
  mustNotAppear: string[];
  /**
   * The repository the program runs in (found from its cwd, ../../sandbox/git/layout.ts): its work tree and git dirs.
   * Absent outside one.
   */
  repository?: Repository;
}

/**
 * The names a grant (`[shellmcp.room_writable|room_network|room_readable]`) may know `program` (canonical path) by:
 * its base name and the base names of `aliases` (the path the command named it by and its judged `argv[0]`, which
 * the escalation boundary has checked name this very file: `python3` for `/usr/bin/python3.11`).
 */
export function grantNames(program: string, aliases: readonly (string | undefined)[] = []): string[] {
  return [...new Set([program, ...aliases].filter((a): a is string => a !== undefined && a !== "").map((a) => basename(a)))];
}

/** The first of `names` that `table` has a grant for, or undefined. */
function grantKey(table: Readonly<Record<string, unknown>> | undefined, names: readonly string[]): string | undefined {
  if (table === undefined) return undefined;
  return names.find((n) => Object.hasOwn(table, n));
}

/** The first grant of `table` for one of `names`, or undefined. */
function grantFor<T>(table: Readonly<Record<string, T>> | undefined, names: readonly string[]): T | undefined {
  const k = grantKey(table, names);
  return k === undefined ? undefined : table![k];
}

/**
 * The network of `program`'s room under `spec` ({@link RoomNetwork}) and the proxy it goes through: a `host` grant
 * for one of its {@link grantNames} (`aliases` as there) → `host`; a domain grant → `proxy` through that grant's
 * proxy ({@link RoomSpec.grantProxies}); else the call's: proxy mode → `proxy` through the call's, a call with the
 * network → `host`, a call without → `off`. Throws when a domain grant's proxy is missing (the room is then
 * refused, with this reason).
 */
export function roomNetwork(
  spec: RoomSpec,
  program: string,
  aliases: readonly (string | undefined)[] = [],
): { network: RoomNetwork; proxy?: RoomProxy } {
  const names = grantNames(program, aliases);
  const key = grantKey(spec.networkGrants, names);
  const grant = key === undefined ? undefined : spec.networkGrants![key];
  if (grant === "host") return { network: "host" };
  if (Array.isArray(grant)) {
    const proxy = spec.grantProxies?.[key!];
    if (proxy === undefined)
      throw new Error(
        `[shellmcp.room_network] grants ${key} the domains ${grant.join(", ")}, through a proxy this room cannot have here (a bubblewrap or Landlock room of a sandboxed call only)`,
      );
    return { network: "proxy", proxy };
  }
  if (spec.proxy !== undefined) return { network: "proxy", proxy: spec.proxy };
  return { network: spec.call.network === "enabled" ? "host" : "off" };
}

/** Writable roots being planned: root → its read-only subpaths, in the order roots were first added. */
type RootPlan = Map<string, Set<string>>;

/** Add `root` (and more read-only subpaths of it) to `roots`. */
function addRoot(roots: RootPlan, root: string, readOnly: readonly string[]): void {
  const set = roots.get(root) ?? new Set<string>();
  for (const r of readOnly) set.add(r);
  roots.set(root, set);
}

/**
 * Add what a room writes of `repo` to `roots`: its work tree (unless it is HOME or one of its ancestors, a dotfiles
 * repository: HOME's dotfiles stay read-only) with its protected names and `.git` pointer file read-only; each git
 * dir with its control paths read-only; for `git`, the git dirs of its local remotes too. Returns the git dirs
 * released (carve-outs of the call that the room writes) and the control files that must not appear.
 */
function addRepository(roots: RootPlan, repo: Repository, isGit: boolean): { released: Set<string>; mustNotAppear: string[] } {
  const released = new Set<string>();
  const mustNotAppear: string[] = [];
  if (!isUnder(canonicalPath(userHome()), repo.workTree)) {
    const own = PROTECTED_NAMES.filter((n) => n !== ".git").map((n) => join(repo.workTree, n));
    const dotGit = join(repo.workTree, ".git");
    if (lstatSync(dotGit).isFile()) own.push(dotGit); // the pointer decides where the git dir is
    addRoot(roots, repo.workTree, own);
  }
  const addGitDir = (g: string) => {
    const c = gitControlPaths(g);
    addRoot(roots, g, c.readOnly);
    mustNotAppear.push(...c.mustNotAppear);
  };
  for (const g of repo.gitDirs) {
    addGitDir(g);
    released.add(g);
  }
  // git pushing to a remote that is a path on this machine writes that repository: the remotes named in the
  // repository's config (which the call's sandbox cannot write, or git would not be escalated), never a path the
  // command gives itself.
  // Such a remote (a bare repository in the call's root) is read-only whole in the call's bubblewrap plan, with
  // what git writes bound writable again (policy.ts `nestedGit`): the room writes it as its own root instead.
  if (isGit)
    for (const g of localRemotes(repo)) {
      addGitDir(g);
      released.add(g);
    }
  return { released, mustNotAppear };
}

/**
 * Plan the room for `program` (canonical path; `aliases`: see {@link grantNames}) started in `cwd` under the
 * call's sandbox `spec.call`: the repository's roots ({@link addRepository}), then the call's writable roots
 * (less the carve-outs of git dirs the room writes), then the program's `[shellmcp.room_writable]` grant. The plan
 * is strict (a backend that cannot keep a read-only path read-only must say so); its network is the room's
 * ({@link roomNetwork}); the credential stores of HOME are denied unless granted to the program. Throws when the
 * repository's layout cannot be trusted ({@link findRepository}) or a domain grant has no proxy.
 */
export function planRoom(spec: RoomSpec, cwd: string, program: string, aliases: readonly (string | undefined)[] = []): RoomPlan {
  const call = spec.call;
  const names = grantNames(program, aliases);
  const roots: RootPlan = new Map();
  const repo = findRepository(cwd);
  const { released, mustNotAppear } =
    repo === undefined ? { released: new Set<string>(), mustNotAppear: [] } : addRepository(roots, repo, basename(program) === "git");
  for (const w of call.writableRoots)
    addRoot(
      roots,
      w.root,
      w.readOnlySubpaths.filter((p) => !released.has(canonicalPath(p))),
    );
  for (const p of grantFor(spec.extraWritable, names) ?? []) if (isAbsolute(p) && existsSync(p)) addRoot(roots, canonicalPath(p), []);
  // The call's folders bound writable again inside its read-only entries (a bare repository's `objects/`, under
  // bubblewrap), less those of a git dir the room writes as a root of its own.
  const again = new Map<string, string[]>();
  for (const w of call.writableRoots) {
    const kept = (w.writableAgain ?? []).filter((a) => !released.has(canonicalPath(dirname(a))));
    if (kept.length > 0) again.set(w.root, [...(again.get(w.root) ?? []), ...kept]);
  }
  const writableRoots: WritableRoot[] = [...roots].map(([root, ro]) => ({
    root,
    readOnlySubpaths: [...ro],
    ...(again.has(root) ? { writableAgain: again.get(root)! } : {}),
  }));
  const { network, proxy } = roomNetwork(spec, program, aliases);
  // What the call hides (its plan's `hidden`, planned in the server's main thread with every setting; computed
  // here for a plan that has none), less the stores this program's grant opens. Secrets stay hidden.
  const grants = (grantFor(spec.readableGrants, names) ?? []).map((g) => canonicalPath(g));
  const callHidden = call.hidden ?? { stores: credentialStores(canonicalPath(userHome())), secrets: secretPaths() };
  const callHiddenSet = new Set([...callHidden.stores, ...callHidden.secrets]);
  const ownDenied = call.deniedPaths.filter((d) => !callHiddenSet.has(d));
  const stores = callHidden.stores.filter((c) => !grants.some((g) => isUnder(c, g)));
  const hiddenCredentials = [...new Set([...stores, ...callHidden.secrets])].filter((c) => !ownDenied.includes(c));
  const plan: FilesystemPlan = {
    sandboxed: true,
    fullRead: call.fullRead,
    fullWrite: call.fullWrite,
    readableRoots: call.readableRoots,
    includePlatformDefaults: call.includePlatformDefaults,
    writableRoots,
    deniedPaths: [...ownDenied, ...hiddenCredentials],
    network: network === "off" ? "restricted" : "enabled",
    strict: true,
  };
  const r: RoomPlan = { plan, network, ...(proxy !== undefined ? { proxy } : {}), hiddenCredentials, mustNotAppear };
  return repo === undefined ? r : { ...r, repository: repo };
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

/** What {@link prepareRoom} found: no room (the host), no room possible, or the room's plan and its reuse key. */
export type PreparedRoom =
  { kind: "host"; env: string[] } | { kind: "unavailable"; reason: string } | { kind: "room"; room: RoomPlan; env: string[]; key: string };

/**
 * The first, side-effect-free half of building a room: the program's environment (non-interactive; in a room
 * without network `CODEX_SANDBOX_NETWORK_DISABLED=1`, through the proxy the proxy's variables winning over the
 * request's), whether a room applies, and its plan (`aliases`: the names grants may know `program` by, {@link grantNames}). `key` is equal for two programs exactly when their rooms would have the same walls (backend, plan,
 * network, proxy): a kept room (../../sandbox/linux/room-launcher.ts) is reused by key. Under Landlock a room whose writable roots
 * hold a credential store or secret it must not read is unavailable (Landlock cannot hide it there). Throws nothing: a failure to
 * plan is a reason.
 */
export function prepareRoom(
  spec: RoomSpec,
  program: string,
  cwd: string,
  env: readonly string[],
  aliases: readonly (string | undefined)[] = [],
): PreparedRoom {
  const proxy = spec.proxy;
  const b = spec.backend;
  const base = nonInteractiveEnv(env);
  if (b.kind === "host" || !spec.call.sandboxed)
    return { kind: "host", env: roomEnv(base, proxy !== undefined ? "proxy" : "host", proxy?.env) };
  if (b.kind === "unavailable") return { kind: "unavailable", reason: b.reason };
  if (!spec.call.fullRead)
    return { kind: "unavailable", reason: "the call's sandbox restricts reads, which an escalation room does not reproduce yet" };
  let room: RoomPlan;
  try {
    room = planRoom(spec, cwd, program, aliases);
  } catch (e) {
    return { kind: "unavailable", reason: `cannot plan the escalation room: ${(e as Error).message}` };
  }
  if (room.network === "proxy" && b.kind === "bwrap" && room.proxy?.bridgeFd === undefined)
    return { kind: "unavailable", reason: "network proxy mode: no bridge for a bubblewrap room" };
  if (b.kind === "landlock") {
    // Landlock cannot carve a hole in a folder it lets the room read or write: the credential stores are left out
    // of the room's read rules (../../sandbox/secrets.ts `pathsBeside`), which cannot work under a writable root.
    const under = room.hiddenCredentials.find((c) => room.plan.writableRoots.some((w) => isUnder(c, w.root)));
    if (under !== undefined)
      return {
        kind: "unavailable",
        reason: `the room would write ${under}, a credential store it must not read, and Landlock cannot hide a path inside a writable folder (use the bubblewrap backend, or grant it in [shellmcp.room_readable])`,
      };
  }
  const key = JSON.stringify([b, room.plan, room.network, room.proxy ?? null]);
  return { kind: "room", room, env: roomEnv(base, room.network, room.proxy?.env, proxy?.env), key };
}

/**
 * A room program's environment from `env` (already non-interactive) for a room whose network is `network`: the
 * call's "network disabled" marker (Codex's) only when it has none; its proxy's variables `proxyEnv` (winning over
 * the request's) only when it goes through a proxy; the call's proxy variables `callProxyEnv` removed otherwise.
 */
function roomEnv(
  env: readonly string[],
  network: RoomNetwork,
  proxyEnv: Readonly<Record<string, string>> | undefined,
  callProxyEnv?: Readonly<Record<string, string>>,
): string[] {
  // The call's proxy variables never reach a room that does not go through that proxy.
  const drop = new Set(["CODEX_SANDBOX_NETWORK_DISABLED", ...Object.keys(proxyEnv ?? {}), ...Object.keys(callProxyEnv ?? {})]);
  const kept = env.filter((e) => !drop.has(e.slice(0, Math.max(0, e.indexOf("=")))));
  if (network === "off") return [...kept, "CODEX_SANDBOX_NETWORK_DISABLED=1"];
  if (network === "proxy" && proxyEnv !== undefined) return [...kept, ...Object.entries(proxyEnv).map(([k, v]) => `${k}=${v}`)];
  return kept;
}
