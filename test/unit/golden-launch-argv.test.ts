/**
 * Golden launch argv (issue 33, part A): what one `shell` call of `serve` spawns — our helper's argv
 * (`--backend bwrap|landlock`), bubblewrap started directly, Codex's own `codex-linux-sandbox`, Seatbelt's
 * `sandbox-exec`, or the bare shell — for a matrix of sandbox states (legacy policies and permission profiles:
 * read-only, workspace-write with an extra writable root, restricted reads, network off / on / proxy mode,
 * danger-full-access) × backends (bubblewrap found, found without /proc, missing, forced but failing, Landlock
 * asked, the client's legacy Landlock, Codex's helper with and without bubblewrap, macOS).
 *
 * Pinned before the call's sandbox became one object (src/sandbox/backend.ts `CallSandbox`), which kept every argv
 * byte-identical. Pure: the
 * bubblewrap preflight is a fixed answer, the workspace is a fixture folder made here, and machine paths are
 * replaced by placeholders (`<W>` the fixture, `<SELF>` this process's executable as the helper, `<EXE>` and
 * `<MAIN>` how it starts itself, `<DENY>` the private folder of denied files). Direct bubblewrap is planned
 * from source here, so its inner stage has no `--ro-bind-fd` (the compiled binary adds one).
 *
 * Under Landlock a call starts sandbox-exec (`<SANDBOX_EXEC>`, issue 40) when it is built
 * (scripts/build-sandbox-exec.sh) and the kernel has Landlock ABI 6 or later (below, the helper still starts: the
 * command needs a pid namespace of its own): its plan is pinned decoded (flags, path rules, port rules, the seccomp
 * program's size), without what depends on the kernel's ABI (the handled masks) or on this machine (the portable
 * shells' folders, readable under restricted reads when they exist).
 *
 * The expected outputs are in golden/launch-argv.json; regenerate them only on purpose, with
 * `SHELLMCP_GOLDEN_UPDATE=1 bun test test/unit/golden-launch-argv.test.ts`, and review the diff. Beside them,
 * golden/launch-argv-size.json pins the size of every bubblewrap argv among them as src/sandbox/linux/exec-limits.ts
 * counts it against the kernel's and bubblewrap's limits: arguments (count, bwrap's own name included), bytes (each
 * string's UTF-8 bytes and its NUL, the placeholders counted as written, so machine paths do not change it), the
 * largest string (bytes), and the mount operations.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { SandboxState } from "../../src/mcp/sandbox-state.ts";
import { NAMESPACE_PORTS, PROXY_BRIDGE_FD } from "../../src/network/bridge.ts";
import type { BwrapProbe } from "../../src/sandbox/linux/bwrap.ts";
import { parsePermissionProfile, type PermissionProfile } from "../../src/sandbox/permission-profile.ts";
import { parseSandboxPolicy, type SandboxPolicy } from "../../src/sandbox/policy.ts";
import { protectedConfigDirs, setProtectedConfigDirs } from "../../src/sandbox/protected-config.ts";
import { BackendChoice } from "../../src/serve/backend.ts";
import { proxyModeFor, sandboxFor } from "../../src/serve/call.ts";
import type { Launch, ProxySpec } from "../../src/sandbox/backend.ts";
import { selfExePath } from "../../src/self.ts";
import { setServerLoopbackForTest } from "../../src/sandbox/linux/loopback-net.ts";
import { launcherBinary } from "../../src/sandbox/linux/room-launcher.ts";
import { portableShellBases } from "../../src/carried/portable-shells.ts";
import { decodeExecPlan, sandboxExecBinary } from "../../src/sandbox/linux/sandbox-exec.ts";
import { argvSize, countMounts } from "../../src/sandbox/linux/exec-limits.ts";

const GOLDEN = join(import.meta.dir, "golden", "launch-argv.json");
const GOLDEN_SIZE = join(import.meta.dir, "golden", "launch-argv-size.json");
const UPDATE = process.env.SHELLMCP_GOLDEN_UPDATE === "1";
/** The loopback ports a proxy listens on in the cases that use them (Landlock, Seatbelt): fixed numbers here. */
const LOOPBACK_PORTS = [41001, 41002];

const root = realpathSync(mkdtempSync(join(tmpdir(), "golden-launch-")));
const ws = join(root, "ws");
const codexHome = join(root, "codex-home");
for (const d of [
  ws,
  join(ws, ".git"),
  join(ws, "secret"),
  join(root, "extra"),
  join(root, "tmp"),
  join(root, "ro"),
  join(root, "bin"),
  codexHome,
])
  mkdirSync(d, { recursive: true });
// A bare repository in the workspace (the user's local backup remote): read-only whole under bubblewrap, its
// objects/ and refs/ bound writable again, its missing logs/ and worktrees/ held (issue 38 item 3).
for (const d of ["objects", "refs/heads", "hooks", "info"]) mkdirSync(join(ws, "backup.git", d), { recursive: true });
writeFileSync(join(ws, "backup.git", "HEAD"), "ref: refs/heads/main\n");
writeFileSync(join(ws, "backup.git", "config"), "[core]\n\tbare = true\n");
const shellPath = join(root, "bin", "bash");
writeFileSync(shellPath, "");
const env = { TMPDIR: join(root, "tmp"), HOME: join(root, "home"), PATH: "/usr/bin:/bin" };
const savedProtected = protectedConfigDirs();
setProtectedConfigDirs([codexHome]);
// Network-off bubblewrap calls join the server's loopback network (src/sandbox/linux/loopback-net.ts): a stand-in one
// (fd numbers only, no namespaces made here), so that the argv does not depend on this machine's user namespaces.
const savedLoopback = setServerLoopbackForTest({ userFd: 900, netFd: 901, netInode: 0 });
const launcher = launcherBinary();
// The helper plans with its own environment ($TMPDIR), and the credential stores hidden from every sandbox are
// this process's HOME's (src/sandbox/secrets.ts): both the fixture's, so the argv does not depend on this machine.
const savedTmpdir = process.env.TMPDIR;
const savedHome = process.env.HOME;
process.env.TMPDIR = env.TMPDIR;
process.env.HOME = env.HOME;
afterAll(() => {
  setProtectedConfigDirs(savedProtected);
  setServerLoopbackForTest(savedLoopback);
  if (savedTmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmpdir;
  if (savedHome === undefined) delete process.env.HOME;
  else process.env.HOME = savedHome;
  rmSync(root, { recursive: true, force: true });
});

const POLICIES: Record<string, SandboxPolicy> = {
  "read-only": parseSandboxPolicy({ type: "read-only" }),
  "read-only+net": parseSandboxPolicy({ type: "read-only", network_access: true }),
  "workspace-write": parseSandboxPolicy({ type: "workspace-write", writable_roots: [join(root, "extra")], exclude_slash_tmp: true }),
  "workspace-write+net": parseSandboxPolicy({
    type: "workspace-write",
    writable_roots: [join(root, "extra")],
    exclude_slash_tmp: true,
    network_access: true,
  }),
  "workspace-write+restricted-read": parseSandboxPolicy({
    type: "workspace-write",
    exclude_slash_tmp: true,
    read_only_access: { type: "restricted", include_platform_defaults: true, readable_roots: [join(root, "ro")] },
  }),
  "danger-full-access": parseSandboxPolicy({ type: "danger-full-access" }),
};

const special = (kind: string) => ({ type: "special", value: { kind } }) as const;
const PROFILES: Record<string, PermissionProfile> = {
  "profile-workspace": parsePermissionProfile({
    type: "managed",
    network: "restricted",
    file_system: {
      type: "restricted",
      entries: [
        { path: special("root"), access: "read" },
        { path: special("current_working_directory"), access: "write" },
        { path: { type: "path", path: join(ws, "secret") }, access: "deny" },
      ],
    },
  }),
  "profile-workspace+net": parsePermissionProfile({
    type: "managed",
    network: "enabled",
    file_system: {
      type: "restricted",
      entries: [
        { path: special("root"), access: "read" },
        { path: special("current_working_directory"), access: "write" },
      ],
    },
  }),
  "profile-disabled": parsePermissionProfile({ type: "disabled" }),
};

/** A backend situation: the server's flags and platform, the preflight's answer, the client's launcher wishes. */
interface Backend {
  platform: NodeJS.Platform;
  kind?: string;
  probe?: BwrapProbe;
  useCodexHelper?: boolean;
  useBwrap?: boolean;
  useLegacyLandlock?: boolean;
}
const BWRAP = "/usr/bin/bwrap";
const BACKENDS: Record<string, Backend> = {
  "auto, bwrap works": { platform: "linux", probe: { ok: true, path: BWRAP } },
  "auto, bwrap without /proc": { platform: "linux", probe: { ok: true, path: BWRAP, noProc: true } },
  "auto, bwrap missing": { platform: "linux", probe: { ok: false, reason: "bubblewrap is not installed" } },
  "bwrap forced, preflight fails": { platform: "linux", kind: "bwrap", probe: { ok: false, reason: "no user namespaces" } },
  "landlock asked": { platform: "linux", kind: "landlock" },
  "client's legacy landlock": { platform: "linux", probe: { ok: true, path: BWRAP }, useLegacyLandlock: true },
  "client's useBwrap": { platform: "linux", kind: "landlock", useBwrap: true },
  "codex helper": { platform: "linux", probe: { ok: true, path: BWRAP }, useCodexHelper: true },
  "codex helper with bwrap": { platform: "linux", probe: { ok: true, path: BWRAP }, useCodexHelper: true, useBwrap: true },
  macos: { platform: "darwin" },
};

const sandboxExec = sandboxExecBinary();
const SANDBOX_EXEC = "path" in sandboxExec ? sandboxExec.path : undefined;

/** Machine paths as placeholders (longest first, so a path inside another is replaced as itself). */
function normalize(s: string): string {
  const pairs: [string, string][] = [
    [root, "<W>"],
    [selfExePath(), "<SELF>"],
    [Bun.main, "<MAIN>"],
    [process.execPath, "<EXE>"],
    ...("path" in launcher ? [[launcher.path, "<LAUNCHER>"] as [string, string]] : []),
    [dirname(process.execPath), "<EXEDIR>"],
    ...(SANDBOX_EXEC !== undefined ? ([[SANDBOX_EXEC, "<SANDBOX_EXEC>"]] as [string, string][]) : []),
  ];
  let out = s.replace(new RegExp(`${escape(tmpdir())}/shellmcp-deny-[^/"\\s]+`, "g"), "<DENY>");
  for (const [from, to] of pairs.sort((a, b) => b[0].length - a[0].length)) out = out.split(from).join(to);
  return out;
}
function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/** Drop Codex's daemon folder hiding, present only where that folder exists on this machine. */
function withoutDaemonDir(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--perms" && argv[i + 2] === "--tmpfs" && /^\/tmp\/codex-daemon-\d+$/.test(argv[i + 3] ?? "")) {
      i += 5;
      continue;
    }
    out.push(argv[i]!);
  }
  return out;
}

/** What the call spawns (or its refusal), as today's serve plans it. */
function spawnOf(b: Backend, state: SandboxState, proxyMode: boolean): unknown {
  const backend = new BackendChoice(b.kind ?? "auto", [codexHome], () => b.probe ?? { ok: false, reason: "not probed" });
  const setup = { backend, env, network: { enabled: proxyMode } } as never;
  const rt = {
    helperExe: selfExePath(),
    platform: b.platform,
    options: { useCodexLinuxSandboxExe: b.useCodexHelper === true },
    setup,
  } as Parameters<typeof sandboxFor>[0];
  const call = sandboxFor(rt, state, ws);
  if ("content" in call) return { refused: normalize((call.content[0] as { text: string }).text) };
  const proxied = proxyModeFor(setup, state);
  if (proxied && call.backend.proxyWiring === "unsupported") return { refused: "proxy mode under Codex's helper" };
  const shell = { shellPath, login: false, command: "echo hi", wrapperPath: join(root, "bin", "codex-execve-wrapper") };
  let proxy: ProxySpec | undefined;
  if (proxied && call.sandboxed)
    proxy =
      call.backend.proxyWiring === "bridge"
        ? { fd: PROXY_BRIDGE_FD, ports: [NAMESPACE_PORTS.http] }
        : { ports: LOOPBACK_PORTS, allowLocalBinding: false };
  let launch: Launch;
  try {
    launch = call.launch(shell, proxy);
  } catch (e) {
    return { planRefused: normalize((e as Error).message) };
  }
  launch.release?.();
  return {
    argv: withoutDaemonDir(launch.argv).map(normalize),
    ...(launch.argv0 !== undefined ? { argv0: launch.argv0 } : {}),
    sandboxed: launch.sandboxed,
    ...(launch.env !== undefined && Object.keys(launch.env).length > 0 ? { env: launch.env } : {}),
    // Direct bubblewrap: whether it runs the shell itself (no inner stage of ours), and the seccomp program's size.
    ...(launch.ownPidNamespace === true
      ? { bwrapDirect: launch.selfExeFd === undefined, seccompBytes: launch.seccomp?.program.byteLength ?? 0 }
      : {}),
    ...(launch.argv[0] === SANDBOX_EXEC && launch.seccomp !== undefined ? { plan: planOf(launch.seccomp.program) } : {}),
  };
}

/** sandbox-exec's plan without what depends on the kernel's Landlock ABI or this machine (see the top). */
function planOf(bytes: Uint8Array): unknown {
  const p = decodeExecPlan(bytes);
  const shells = new Set(portableShellBases(undefined, env.HOME));
  return {
    flags: p.flags,
    pathRules: p.pathRules.filter((r) => !shells.has(r.path)).map((r) => ({ path: normalize(r.path), access: r.access })),
    connectTcpPorts: p.connectTcpPorts,
    seccompBytes: p.seccomp?.byteLength ?? 0,
  };
}

function stateFor(name: string, b: Backend): SandboxState {
  const base = {
    sandboxCwd: ws,
    useBwrap: b.useBwrap === true,
    useLegacyLandlock: b.useLegacyLandlock === true,
    ...(b.useCodexHelper === true ? { codexLinuxSandboxExe: "/opt/codex/codex-linux-sandbox" } : {}),
  };
  const profile = PROFILES[name];
  if (profile !== undefined) {
    const policy: SandboxPolicy =
      profile.type === "disabled"
        ? { type: "danger-full-access" }
        : parseSandboxPolicy({ type: "workspace-write", exclude_slash_tmp: true, network_access: profile.network === "enabled" });
    return { ...base, policy, profile };
  }
  return { ...base, policy: POLICIES[name]! };
}

function computeAll(): Record<string, unknown> {
  const all: Record<string, unknown> = {};
  for (const [bName, b] of Object.entries(BACKENDS))
    for (const sName of [...Object.keys(POLICIES), ...Object.keys(PROFILES)])
      for (const proxyMode of [false, true]) {
        const state = stateFor(sName, b);
        // Proxy mode only changes calls whose sandbox has the network.
        if (proxyMode && !sName.endsWith("+net")) continue;
        all[`${bName} | ${sName}${proxyMode ? " | proxy" : ""}`] = spawnOf(b, state, proxyMode);
      }
  return all;
}

/** `actual` against the golden file `path` (written first under SHELLMCP_GOLDEN_UPDATE=1), case by case. */
async function expectGolden(path: string, actual: Record<string, unknown>): Promise<void> {
  if (UPDATE || !existsSync(path)) {
    if (!UPDATE) throw new Error(`${path} is missing: run with SHELLMCP_GOLDEN_UPDATE=1 to write it`);
    mkdirSync(dirname(path), { recursive: true });
    // Written as prettier formats it (the repository's check covers this file too).
    const prettier = await import("prettier");
    writeFileSync(path, await prettier.format(JSON.stringify(actual), { ...(await prettier.resolveConfig(path)), parser: "json" }));
  }
  const expected = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
  for (const k of Object.keys(expected)) expect({ case: k, spawn: actual[k] }).toEqual({ case: k, spawn: expected[k] });
}

test("every call's launch argv is as pinned (golden/launch-argv.json)", async () => {
  await expectGolden(GOLDEN, computeAll());
});

/**
 * The bubblewrap argv of a pinned launch (what bwrap itself receives: after the loopback launcher's words, which
 * pass bwrap's path and then its argv), or undefined for a launch that does not start bubblewrap.
 */
function bwrapArgvOf(spawn: unknown): string[] | undefined {
  const argv = (spawn as { argv?: string[] }).argv;
  const at = argv?.indexOf(BWRAP) ?? -1;
  if (argv === undefined || at < 0) return undefined;
  return argv.slice(argv[at + 1] === BWRAP ? at + 1 : at);
}

test("every bubblewrap launch's size is as pinned (golden/launch-argv-size.json)", async () => {
  const sizes: Record<string, unknown> = {};
  for (const [k, spawn] of Object.entries(computeAll())) {
    const argv = bwrapArgvOf(spawn);
    if (argv === undefined) continue;
    const { strings, bytes, largest } = argvSize(argv);
    // The mounts: from bwrapMounts' first option to the namespaces (src/sandbox/linux/bwrap.ts planBwrap).
    const mounts = countMounts(argv.slice(3, argv.indexOf("--unshare-user")));
    sizes[k] = { arguments: strings, bytes, largest, mounts };
  }
  expect(Object.keys(sizes).length).toBeGreaterThan(0);
  await expectGolden(GOLDEN_SIZE, sizes);
});

test("the fixture's missing protected folders were given back (no .codex or .agents mount point left)", () => {
  computeAll();
  expect(existsSync(join(ws, ".codex"))).toBe(false);
  expect(existsSync(join(ws, ".agents"))).toBe(false);
});
