/**
 * Building the escalation room on Linux (./plan.ts says what the room is): the argv that starts one escalated
 * program in it.
 *
 * - bubblewrap: the room's mounts (`/` read-only, the room's writable roots, the git control paths re-bound
 *   read-only, the call's denied paths and the credential stores), its own user, pid and ipc namespaces, its own
 *   `/proc`, no capabilities; its network as ./plan.ts `RoomNetwork` says: `off` = its own network namespace and
 *   the call's network-off seccomp filter (bwrap `--seccomp`), `proxy` = its own namespace bridged to the call's
 *   proxy, `host` = the host's. The pid namespace contains everything the program starts (a `setsid` or double fork
 *   included) and dies with bwrap, which dies with the escalation worker.
 * - Landlock: this binary's sandbox helper with a permission profile of the room's writable roots, its reads
 *   (everything, or everything beside the way to each hidden credential store) and its network (`off`: the
 *   helper's network-off sandbox — Landlock TCP rules from ABI 4, abstract sockets scoped from ABI 6, and the
 *   network-off seccomp filter, which refuses connect(2) on every socket). Landlock cannot keep a file inside a writable folder read-only, so a git dir the call's sandbox could
 *   not write stays read-only in a Landlock room (git's writes there fail; bubblewrap is the backend that makes
 *   escalated git work).
 * - Either way, a call with restricted reads gets no room (its read rules would need the inner stage): the
 *   program runs inside the call's sandbox instead.
 *
 * bwrap 0.8 cannot set `argv[0]`: when the judged `argv[0]` differs from the program path, the host's
 * `/bin/bash --norc --noprofile -c 'exec -a "$0" "$@"'` starts it inside the room (`BASH_ENV` and `ENV` unset).
 */
import { existsSync, realpathSync, statSync } from "node:fs";
import { serializePermissionProfile, type FileSystemSandboxEntry, type PermissionProfile } from "../../sandbox/permission-profile.ts";
import type { FilesystemPlan } from "../../sandbox/filesystem-plan.ts";
import type { RoomBackend } from "../../sandbox/room-backend.ts";
import { prepareRoom, ROOM_BRIDGE_FD, type PreparedRoom, type RoomPlan, type RoomProxy, type RoomSpec } from "./plan.ts";
import { seatbeltLaunch } from "../../sandbox/macos/seatbelt.ts";
import { hiddenPathsFlag } from "../../sandbox/secrets.ts";
import * as libc from "../../../ffi/libc.ts";
import { bwrapMounts, selfHelperCommand } from "../../sandbox/linux/bwrap.ts";
import { releaseBwrapPlan } from "../../sandbox/linux/mount-points.ts";
import { bytesPipe } from "../../sandbox/bytes-pipe.ts";
import { buildFilter } from "../../sandbox/linux/seccomp.ts";
import { countMounts, execLimits, refuseOversizeBwrap, refuseOversizeHelper, type ExecLimits } from "../../sandbox/linux/exec-limits.ts";

/** fd number of the seccomp program (a pipe bwrap reads with `--seccomp`) in a bubblewrap room without network. */
export const ROOM_SECCOMP_FD = 6;

/** The host bash that sets `argv[0]` inside the room. */
const EXEC_AS_BASH = "/bin/bash";

/** How to start one escalated program: `path` is exec'd with `argv` and `env`; `release` runs once it has ended. */
export interface RoomLaunch {
  path: string;
  argv: string[];
  env: string[];
  /** The program runs in a pid namespace of its own (nothing it starts can outlive the room's process). */
  contained: boolean;
  /** Control files that did not exist and must not exist after the program (see ./plan.ts). */
  mustNotAppear: string[];
  /** The room that was planned (undefined on the host). */
  room?: RoomPlan;
  /** Give back what building the room made on the host (mount points, temporary folders). */
  release: () => void;
  /** More fds for the program (`[fd here, fd in the child]`): the proxy bridge of a bubblewrap room. */
  extraFds?: [number, number][];
}

/**
 * argv that execs `program` with `argv` exactly (argv[0] included), inside the room: the path itself when argv[0]
 * is that path, or is the absolute path the command named the program by (`named`, the request's file, whose
 * components the boundary checked); argv[0] alone when it is a bare name that `path` (the program's `PATH`) resolves to `program`
 * (bwrap execs with `execvp`, so it finds the same file: the common case, `git` found on the trusted PATH);
 * otherwise through the host bash's `exec -a`.
 */
export function execAs(program: string, argv: readonly string[], path = "", named?: string): string[] {
  const argv0 = argv[0]!;
  if (argv0 === program) return [...argv];
  // argv[0] is the path the command named the program by (`/bin/true` for /usr/bin/true on a merged /usr): the
  // boundary has checked every component of that path as not sandbox-writable, so it names the same file.
  if (named !== undefined && argv0 === named && named.startsWith("/")) return [...argv];
  if (!argv0.includes("/") && firstOnPath(argv0, path) === program) return [...argv];
  if (!existsSync(EXEC_AS_BASH)) return [program, ...argv.slice(1)];
  return [EXEC_AS_BASH, "--norc", "--noprofile", "-c", 'exec -a "$0" "$@"', argv0, program, ...argv.slice(1)];
}

/** The canonical path of the first executable `name` on `path`, as `execvp` searches it (undefined: none). */
function firstOnPath(name: string, path: string): string | undefined {
  for (const dir of path.split(":")) {
    if (dir === "" || !dir.startsWith("/")) continue;
    const p = `${dir}/${name}`;
    try {
      if (statSync(p).isFile()) return (statSync(p).mode & 0o111) !== 0 ? realpathSync(p) : undefined;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** A room built for one start: what {@link RoomLaunch} says, less what the plan already knows. */
export type BuiltRoom = Omit<RoomLaunch, "mustNotAppear" | "room">;

/**
 * The second half: the argv that starts `inner` (an argv, run with `env`) inside the room `room` planned by
 * ./plan.ts `prepareRoom`, starting in `cwd`, on the backend `spec.backend` says (one builder each, below).
 * bubblewrap rooms make mount points on the host (given back by `release`). Returns `{ unavailable }` when the
 * mounts cannot be planned, the backend builds no room, or the room's command could not start under the kernel's or
 * bubblewrap's `limits` (default: this process's, ../../sandbox/linux/exec-limits.ts; a room holds the call's
 * writable roots and denied paths and its own grants, so it can be over them where the call was not): the program
 * then runs inside the call's sandbox, as for any room that cannot be built.
 */
export function buildRoom(
  spec: RoomSpec,
  room: RoomPlan,
  cwd: string,
  env: string[],
  inner: string[],
  limits: ExecLimits = execLimits(),
): BuiltRoom | { unavailable: string } {
  const b = spec.backend;
  const proxy = room.network === "proxy" ? room.proxy : undefined;
  switch (b.kind) {
    case "bwrap":
      return bwrapRoom(b, room, cwd, env, proxy === undefined ? inner : proxyStage(cwd, proxy, inner), proxy, limits);
    case "seatbelt":
      return seatbeltRoom(b, room, env, inner, proxy);
    case "landlock":
      return landlockRoom(b, spec.call, room, cwd, env, inner, proxy, limits);
    default:
      return { unavailable: `no room backend (${b.kind})` };
  }
}

/**
 * Proxy mode under bubblewrap: this binary's inner stage builds the bridge's listeners in the room's network
 * namespace and installs the proxy seccomp filter before it execs `inner`. (A room without network gets the call's
 * network-off filter from bwrap itself, `--seccomp`: no connect or bind of any socket, so no host pathname Unix
 * socket either.)
 */
function proxyStage(cwd: string, proxy: RoomProxy, inner: string[]): string[] {
  return [
    ...selfHelperCommand(),
    "--apply-seccomp-then-exec",
    "--sandbox-policy-cwd",
    cwd,
    "--sandbox-policy",
    '{"type":"external-sandbox","network_access":"enabled"}',
    "--network-proxy-fd",
    String(ROOM_BRIDGE_FD),
    "--network-proxy-ports",
    proxy.ports.join(","),
    "--",
    ...inner,
  ];
}

/**
 * bubblewrap: the room's mounts (../../sandbox/linux/bwrap.ts `bwrapMounts`), its own user, pid and ipc namespaces,
 * its own network namespace unless the room's network is the host's, the network-off seccomp filter on fd
 * {@link ROOM_SECCOMP_FD} when it has none, the proxy bridge on fd {@link ROOM_BRIDGE_FD} in proxy mode.
 */
function bwrapRoom(
  b: Extract<RoomBackend, { kind: "bwrap" }>,
  room: RoomPlan,
  cwd: string,
  env: string[],
  staged: string[],
  proxy: RoomProxy | undefined,
  limits: ExecLimits,
): BuiltRoom | { unavailable: string } {
  const created: string[] = [];
  const tempDirs: string[] = [];
  const giveBack = () => releaseBwrapPlan({ argv: [], created, tempDirs, direct: false });
  let mounts: string[];
  try {
    mounts = bwrapMounts(room.plan, created, tempDirs);
  } catch (e) {
    giveBack();
    return { unavailable: (e as Error).message };
  }
  let bpf: number | undefined;
  try {
    if (room.network === "off") bpf = bytesPipe(buildFilter("restricted"));
  } catch (e) {
    giveBack();
    return { unavailable: `cannot prepare the room's seccomp filter: ${(e as Error).message}` };
  }
  const fds: [number, number][] = [
    ...(proxy !== undefined ? [[proxy.bridgeFd!, ROOM_BRIDGE_FD] as [number, number]] : []),
    ...(bpf !== undefined ? [[bpf, ROOM_SECCOMP_FD] as [number, number]] : []),
  ];
  const argv = [
    b.bwrap,
    "--die-with-parent",
    ...mounts,
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    ...(room.network !== "host" ? ["--unshare-net"] : []),
    ...(bpf !== undefined ? ["--seccomp", String(ROOM_SECCOMP_FD)] : []),
    ...(b.noProc ? [] : ["--proc", "/proc"]),
    "--cap-drop",
    "ALL",
    "--chdir",
    cwd,
    "--",
    ...staged,
  ];
  const release = () => {
    if (bpf !== undefined) libc.closeQuiet(bpf);
    giveBack();
  };
  const counts = { mounts: countMounts(mounts), writableRoots: room.plan.writableRoots.length, deniedPaths: room.plan.deniedPaths.length };
  try {
    refuseOversizeBwrap(argv, envRecord(env), counts, limits, "room");
  } catch (e) {
    release();
    return { unavailable: (e as Error).message };
  }
  return { path: b.bwrap, argv, env, contained: true, release, ...(fds.length > 0 ? { extraFds: fds } : {}) };
}

/**
 * macOS: the plan as a Seatbelt policy (../../sandbox/macos/seatbelt.ts; the proxy's loopback ports only, in proxy
 * mode), with Seatbelt's markers in the environment. No pid namespace.
 */
function seatbeltRoom(
  b: Extract<RoomBackend, { kind: "seatbelt" }>,
  room: RoomPlan,
  env: string[],
  inner: string[],
  proxy: RoomProxy | undefined,
): BuiltRoom {
  const launch = seatbeltLaunch(
    room.plan,
    inner,
    proxy === undefined ? {} : { proxy: { ports: proxy.ports, allowLocalBinding: b.allowLocalBinding } },
  );
  const marks = Object.entries(launch.env).map(([k, v]) => `${k}=${v}`);
  const keys = new Set(Object.keys(launch.env));
  return {
    path: launch.argv[0]!,
    argv: launch.argv,
    env: [...env.filter((e) => !keys.has(e.slice(0, e.indexOf("=")))), ...marks],
    contained: false,
    release: () => {},
  };
}

/**
 * Landlock: this binary's sandbox helper with a permission profile of the room's writable roots without carve-outs
 * (Landlock cannot enforce them), minus git dirs the call itself could not write (their config would become
 * writable); reads: everything, or, when credential stores must stay hidden, everything else (Landlock cannot deny
 * a path inside a readable folder: the helper, told to hide exactly those with `--hidden-paths`, makes rules for
 * every folder and file beside the way to each store, ../../sandbox/secrets.ts `pathsBeside`).
 */
function landlockRoom(
  b: Extract<RoomBackend, { kind: "landlock" }>,
  call: FilesystemPlan,
  room: RoomPlan,
  cwd: string,
  env: string[],
  inner: string[],
  proxy: RoomProxy | undefined,
  limits: ExecLimits,
): BuiltRoom | { unavailable: string } {
  const callRoots = new Set(call.writableRoots.map((w) => w.root));
  const gitDirs = new Set(room.repository?.gitDirs ?? []);
  const hidden = new Set(room.hiddenCredentials);
  // Reads: everything; the helper itself splits it around the hidden stores (`--hidden-paths` below: the rules name
  // every folder and file beside the way to each, ../../sandbox/linux/in-process.ts). Carried in this argv instead,
  // that list grows with the folders on the way (a HOME of a few thousand entries) past the kernel's 128 KiB per
  // argument, and the room could not start (E2BIG).
  const entries: FileSystemSandboxEntry[] = [{ path: { type: "special", value: { kind: "root" } }, access: "read" }];
  for (const w of room.plan.writableRoots) {
    if (gitDirs.has(w.root) && !callRoots.has(w.root)) continue;
    entries.push({ path: { type: "path", path: w.root }, access: "write" });
  }
  for (const d of room.plan.deniedPaths) if (!hidden.has(d)) entries.push({ path: { type: "path", path: d }, access: "deny" });
  const profile: PermissionProfile = { type: "managed", fileSystem: { type: "restricted", entries }, network: room.plan.network };
  const argv = [
    ...b.helper,
    "--sandbox-policy-cwd",
    cwd,
    "--permission-profile",
    serializePermissionProfile(profile),
    "--backend",
    "landlock",
    ...hiddenPathsFlag({ stores: [], secrets: room.hiddenCredentials }),
    ...(proxy !== undefined ? ["--network-proxy-ports", proxy.ports.join(",")] : []),
    "--",
    ...inner,
  ];
  try {
    refuseOversizeHelper(
      argv,
      envRecord(env),
      () => ({ writableRoots: entries.filter((e) => e.access === "write").length, deniedPaths: room.plan.deniedPaths.length }),
      limits,
      "room",
    );
  } catch (e) {
    return { unavailable: (e as Error).message };
  }
  return { path: argv[0]!, argv, env, contained: false, release: () => {} };
}

/** `KEY=VALUE` strings as the record ../../sandbox/linux/exec-limits.ts sizes (the first `=` splits). */
function envRecord(env: readonly string[]): Record<string, string> {
  return Object.fromEntries(env.map((e) => [e.slice(0, Math.max(e.indexOf("="), 0)), e.slice(e.indexOf("=") + 1)]));
}

/**
 * Plan and build a room of its own for `program` (canonical path) with `argv`, in `cwd`, with environment `env`
 * (KEY=VALUE); `named` is the path the command named the program by (the escalation request's file), judged by
 * the boundary; `prepared` is {@link prepareRoom}'s result when the caller has it (the escalation server's
 * inspector plans rooms off the main thread). The room lives as long as the program (a kept room that serves every program of a call is
 * ../../sandbox/linux/room-launcher.ts). Returns the launch, or `{ unavailable }` with the reason when no room can be built (the
 * caller then runs the program inside the call's sandbox). Throws nothing: a failure to plan is a reason too.
 */
export function roomLaunch(
  spec: RoomSpec,
  program: string,
  argv: readonly string[],
  cwd: string,
  env: readonly string[],
  named?: string,
  prepared: PreparedRoom = prepareRoom(spec, program, cwd, env, [named, argv[0]]),
): RoomLaunch | { unavailable: string } {
  if (prepared.kind === "unavailable") return { unavailable: prepared.reason };
  if (prepared.kind === "host")
    return { path: program, argv: [...argv], env: prepared.env, contained: false, mustNotAppear: [], release: () => {} };
  const pathVar = prepared.env.find((e) => e.startsWith("PATH="))?.slice(5) ?? "";
  const built = buildRoom(spec, prepared.room, cwd, prepared.env, execAs(program, argv, pathVar, named));
  if ("unavailable" in built) return built;
  return { ...built, mustNotAppear: prepared.room.mustNotAppear, room: prepared.room };
}
