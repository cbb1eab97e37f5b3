/**
 * `shellmcp serve`: the MCP server (stdio) with the `shell` tool (and exec_command, write_stdin, list_sessions) — a drop-in for Codex's
 * `codex-exec-mcp-server`. {@link serveMain} is the list of steps; the pieces are in ./serve/ (start-up settings,
 * the sandbox backend choice, one call) and below (exec policy, escalation server, sandbox, shell, MCP).
 */
import * as libc from "../ffi/libc.ts";
import { existsSync } from "node:fs";
import { isatty } from "node:tty";
import { readFile, realpath } from "node:fs/promises";
import { dirname, join } from "node:path";
import { EscalationServer } from "./escalate/server.ts";
import { BoundaryPlacement } from "./escalate/placement.ts";
import { resolveCodexHome } from "./execpolicy/discovery.ts";
import { log, setLogFile } from "./log.ts";
import { INSTRUCTIONS } from "./mcp/early-initialize.ts";
import { parseSandboxState } from "./mcp/sandbox-state.ts";
import { serveStdio, type McpServerOptions } from "./mcp/server.ts";
import { isCodexClient, shellTool, shellToolFor } from "./mcp/shell-tool.ts";
import { sandboxSummary } from "./mcp/sandbox-summary.ts";
import { EXEC_COMMAND_TOOL, LIST_SESSIONS_TOOL, WRITE_STDIN_TOOL } from "./mcp/unified-exec.ts";
import { handleExecCommand, handleListSessions, handleWriteStdin } from "./serve/unified-exec-call.ts";
import { SessionManager } from "./shell/session-manager.ts";
import { errorResult, handleShellCall, type ServeRuntime } from "./serve/call.ts";
import { checkShellIntercepts } from "./serve/shell-check.ts";
import { loadServeSetup, type ServeOptions, type ServeSetup } from "./serve/setup.ts";
import { CgroupManager, cgroupWarnedDir, shouldSayNoCgroups } from "./shell/cgroup.ts";
import { runtimeDir, xdgRuntimeDir } from "./sandbox/linux/bwrap-probe-cache.ts";
import { portableShellBases, roleLink } from "./carried/portable-shells.ts";
import { endSessions } from "./shell/sessions.ts";
import { endLifeline, lifelineProblem } from "./sandbox/linux/lifeline.ts";
import { sweepMountMarkers } from "./sandbox/linux/mount-markers.ts";
import { sweepDeadApproverSockets } from "./approvals/server.ts";
import { writeStderr } from "./stderr.ts";
import { ShellmcpError } from "./errors.ts";
import { VERSION } from "./version.ts";
import { IS_COMPILED, selfExePath } from "./self.ts";
import type { SandboxRequest } from "./shell/backend-choice.ts";

export type { ServeOptions } from "./serve/setup.ts";

/** What `serve` says on stderr when its stdin is a terminal (a person typed it, not an MCP client starting it). */
export const TERMINAL_HINT =
  "shellmcp serve: this is an MCP server on stdio, waiting for an MCP client to speak JSON-RPC here; set a client up with `shellmcp init claude|gemini|codex|vscode|cursor` (Ctrl-D or Ctrl-C ends it)";

/** Run the server until the client disconnects. Returns the exit status. */
export async function serveMain(o: ServeOptions): Promise<number> {
  // Typed in a terminal, serve would wait silently for a JSON-RPC client (issue 41): one line says so.
  if (isatty(0) && o.listen === undefined) writeStderr(`${TERMINAL_HINT}\n`);
  // 1. Everything that can be wrong is checked before the MCP session starts (only `initialize` may have been
  //    answered already, see mcp/early-initialize.ts): fail at start-up, not mid-session.
  // 0. Everything the server writes also goes to its log file, from the first line on.
  openLogFile(o);
  let setup: ServeSetup;
  try {
    setup = loadServeSetup(o);
  } catch (e) {
    // A broken config, rules file, flag or shell keeps the server up: clients show a dead server only as
    // "Transport closed", so every call answers with the precise error instead (issue 22, item 7).
    const message = (e as Error).message;
    const remedy = startupRemedy(e);
    writeStderr(`shellmcp serve: ${message}${remedy === "" ? "" : `\n  To fix: ${remedy}`}\n`);
    // Over HTTP (`--listen`) no client started this process to show it the error: exit, as a service should.
    if (o.listen !== undefined) return 2;
    await serveBroken(message, remedy);
    return 1;
  }
  const platform = o.platform ?? process.platform;
  // 2. Keep the secrets the shells do not get out of reach of sandboxed commands.
  hardenServerProcess(platform, setup.env);
  // 3. The escalation server, per-call cgroups, and the shutdown that ends everything they started.
  const rt = startRuntime(o, setup, platform);
  // 3b. Once start-up has settled, and whenever no call has run for a while, give back the memory calls used but no
  //     longer need and the code pages that work touched (issues 33 and 40: most of the idle RSS).
  //     The code pages last, once the worker's release has run: what it compiles again afterwards runs code of the
  //     executable, whose pages come back when touched after their release (+3–5 MiB of RSS when both ran at once).
  //     After a longer pause the escalation worker is parked (./escalate/worker/port.ts: −2.5 MiB of RssAnon; the
  //     next call starts a new one, ~3.5 ms), and what it leaves on this thread is released the same way.
  const idle = new IdleRelease(
    () => {
      releaseHeap();
      void rt
        .server()
        .then(
          (s) => s.releaseHeap(),
          () => undefined,
        )
        .then(() => releaseCodePages(platform));
    },
    IDLE_RELEASE_MS,
    () =>
      void rt
        .server()
        .then(
          (s) => s.park(),
          () => false,
        )
        .then((parked) => {
          if (!parked) {
            log.debug("escalation worker not parked: a session, listener or room is still open");
            return;
          }
          log.debug("escalation worker parked (idle); the next call starts it again");
          releaseHeap();
          return releaseCodePages(platform);
        }),
    workerParkMs(),
  );
  //     The executable starts with the JIT's tier-up thresholds raised for start-up (build.ts `JIT_POLICY_AT_START`):
  //     the normal policy for the calls.
  void rt.shellRefused().then(() => {
    Bun.unsafe.setJITPolicy(1);
    idle.settled();
  });
  // 4. Serve: the session's sandbox state changes with 0.97's notification; each call runs one command. Over HTTP
  //    (`--listen`), each client gets the same behaviour with its own state and exec sessions (./http/serve.ts).
  if (setup.listen !== undefined) {
    const { serveHttp } = await import("./http/serve.ts");
    return serveHttp(o, setup, rt, () => clientRuntime(rt, setup, idle));
  }
  await serveStdio(clientOptions(rt, setup, idle));
  // 5. The client is gone: nothing this server started outlives it.
  await rt.shutdown();
  return 0;
}

/**
 * The MCP server behaviour of one client over runtime `rt`: its sandbox state (changed by 0.97's notification,
 * applying to the next call), and each tool call run against `rt` (whose `unified` holds this client's exec
 * sessions). On stdio `rt` is the server's; over HTTP each client has its own ({@link clientRuntime}).
 */
function clientOptions(rt: ServeRuntime & { unified: SessionManager }, setup: ServeSetup, idle: IdleRelease): McpServerOptions {
  let state = setup.initialState;
  return {
    name: "shellmcp",
    version: VERSION,
    instructions: INSTRUCTIONS,
    tools: [shellTool(setup.defaultTimeoutMs, summaryFor(setup, undefined)), EXEC_COMMAND_TOOL, WRITE_STDIN_TOOL, LIST_SESSIONS_TOOL],
    toolsFor: (client) => [
      shellToolFor(client, setup.defaultTimeoutMs, summaryFor(setup, client)),
      EXEC_COMMAND_TOOL,
      WRITE_STDIN_TOOL,
      LIST_SESSIONS_TOOL,
    ],
    parkedTimeoutMs: setup.inputRequiredTimeoutMs,
    taskAfterMs: setup.taskAfterMs,
    onSandboxState: (params) => {
      state = parseSandboxState(params); // applies to the next call; running calls keep their snapshot
      log.info("sandbox state", { policy: state.policy.type, profile: state.profile?.type, cwd: state.sandboxCwd });
    },
    callTool: (name, args, ctx) =>
      idle.during(() =>
        name === "exec_command"
          ? handleExecCommand(rt, state, args, ctx)
          : name === "write_stdin"
            ? handleWriteStdin(rt, args, ctx)
            : name === "list_sessions"
              ? Promise.resolve(handleListSessions(rt, args))
              : handleShellCall(rt, state, args, ctx),
      ),
  };
}

/**
 * One HTTP client's runtime and server behaviour: the server's runtime with the client's own exec sessions
 * (`unified`), running-call shells, network approvals and git-guard notice, so that no client sees, types into or
 * ends another's. `close()` ends its exec sessions and running calls' processes.
 */
function clientRuntime(rt: ServeRuntime & { unified: SessionManager }, setup: ServeSetup, idle: IdleRelease) {
  const own = {
    ...rt,
    setup: { ...setup, networkApproved: new Set<string>() },
    unified: new SessionManager(setup.sessionLimits),
    sessions: new Set<number>(),
  };
  return {
    options: clientOptions(own, own.setup, idle),
    close: async () => {
      const ended = own.unified.closeAll(3000);
      await endSessions(own.sessions, lifelineProblem() === undefined);
      await ended;
    },
  };
}

/**
 * The sandbox part of the `shell` tool's description for the client named `client` (./mcp/sandbox-summary.ts): Codex
 * (and a client that did not say who it is) gets the per-call wording; others the server's own starting state.
 */
function summaryFor(setup: ServeSetup, client: string | undefined): string {
  const s = setup.initialState;
  return sandboxSummary({
    codex: client === undefined || isCodexClient(client),
    policy: s.policy,
    cwd: s.sandboxCwd ?? process.cwd(),
    env: setup.env,
    network: setup.network,
  });
}

/**
 * The log file: `--log-file PATH`, else `SHELLMCP_LOG_FILE`, else `$CODEX_HOME/log/shellmcp.log` (next to Codex's
 * own logs). A file that cannot be used safely is reported on stderr and skipped (see {@link setLogFile}).
 */
function openLogFile(o: ServeOptions): void {
  let path = o.logFile ?? process.env.SHELLMCP_LOG_FILE;
  if (path === undefined) {
    try {
      path = join(resolveCodexHome(), "log", "shellmcp.log");
    } catch {
      return; // no CODEX_HOME to put it in: stderr only
    }
  }
  if (path === "") return;
  const why = setLogFile(path);
  if (why !== undefined) writeStderr(`shellmcp serve: not logging to a file: ${why}\n`);
}

/**
 * What to do about a start-up failure `e` (thrown by `loadServeSetup`), as one or two sentences naming the file,
 * line, flag or folder; "" when `e`'s message already ends with what to do (CODEX_HOME where sandboxes write, no
 * patched shell). Branches on `code` and `data`, never on the message.
 */
export function startupRemedy(e: unknown): string {
  if (!(e instanceof ShellmcpError))
    return `this is not a configuration problem shellmcp knows: run the same "shellmcp serve" command in a terminal with SHELLMCP_LOG=debug to see where it fails, and report it`;
  const d = e.data;
  const str = (k: string): string | undefined => (typeof d[k] === "string" ? (d[k] as string) : undefined);
  const at =
    typeof d.line === "number"
      ? ` at line ${d.line}${typeof d.column === "number" ? `, column ${d.column}` : typeof d.col === "number" ? `, column ${d.col}` : ""}`
      : "";
  switch (e.code) {
    case "USAGE":
      return `correct that flag in the command line that starts the server (its \`args\` in your MCP client's configuration); "shellmcp serve --help" lists every flag`;
    case "RULES_PARSE":
      return `correct ${str("path") ?? "that rules file"}${at} (or move it out of the rules folder); "shellmcp execpolicy check --rules FILE -- true" re-checks a file without restarting anything`;
    case "CONFIG":
      if (d.writableBy !== undefined || d.kind !== undefined) return ""; // the message says what to do
      if (str("codexHome") !== undefined) return `create that folder (mkdir -p ${str("codexHome")}), or unset CODEX_HOME to use ~/.codex`;
      if (Array.isArray(d.refused))
        return `make one of ${portableShellBases().join(" or ")} a folder of this user that nobody else can write and that is not a symlink (mkdir -p -m 700; owner uid ${process.getuid?.() ?? "?"}), or point SHELLMCP_SHELLS_DIR at a folder holding the patched shells`;
      if (str("shell") !== undefined)
        return `pass --shell the path of a patched bash or zsh that exists, or drop --shell and CODEX_BASH_PATH to use the shell this executable carries`;
      if (str("path") !== undefined)
        return at === ""
          ? `make ${str("path")} readable by this user, or move it aside (shellmcp then starts from the defaults)`
          : `correct ${str("path")}${at} (it is TOML 1.0), or move it aside to start from the defaults`;
      return `correct that key in $CODEX_HOME/config.toml (default ~/.codex/config.toml), or the -c override in the server's command line`;
    default:
      return "";
  }
}

/**
 * Serve without being able to run anything: `tools/list` answers as usual, and every call fails closed with
 * `message` (what is wrong, where) and `remedy` (what to do, see {@link startupRemedy}), until the client
 * disconnects.
 */
async function serveBroken(message: string, remedy: string): Promise<void> {
  await serveStdio({
    name: "shellmcp",
    version: VERSION,
    instructions: INSTRUCTIONS,
    tools: [shellTool(), EXEC_COMMAND_TOOL, WRITE_STDIN_TOOL, LIST_SESSIONS_TOOL],
    onSandboxState: () => {},
    callTool: async () =>
      errorResult(
        `shellmcp cannot run commands: ${message}.${remedy === "" ? "" : ` To fix: ${remedy}.`} Then restart the MCP server (or the client that started it).`,
      ),
  });
}

/**
 * Non-dumpable: this process's /proc files (environ: the secrets the shells do not get) are readable only with
 * CAP_SYS_PTRACE, which no sandboxed command has (bwrap drops every capability, the Landlock helper drops this
 * one); children are dumpable again after their exec. Root can read any process's environ whatever its
 * dumpability, and the Landlock backend shares the host's /proc: so the secrets themselves leave the initial
 * environment block — every variable the shells do not get (`shell_environment_policy`: *KEY*, *SECRET*,
 * *TOKEN* by default) is blanked there; this process keeps its copy in process.env, which never reaches a
 * sandboxed command.
 */
function hardenServerProcess(platform: NodeJS.Platform, shellEnv: Record<string, string>): void {
  try {
    libc.prctl(libc.PR.SET_DUMPABLE, 0);
  } catch (e) {
    log.warn("cannot make the server non-dumpable", { error: (e as Error).message });
  }
  if (platform !== "linux") return;
  try {
    const scrubbed = libc.scrubInitialEnviron((name) => !(name in shellEnv));
    if (scrubbed.length > 0) log.info("blanked in this process's /proc environ", { names: scrubbed });
  } catch (e) {
    log.warn("cannot blank secrets in this process's environment block", { error: (e as Error).message });
  }
}

/**
 * Start what every call shares: the exec wrapper and helper paths, the escalation server (a worker, started
 * beside the MCP session; a call waits for it, a failure ends the server), one cgroup per call (so detached
 * processes end with their call), and the shutdown — on a signal or when the client goes away.
 */
function startRuntime(
  o: ServeOptions,
  setup: ServeSetup,
  platform: NodeJS.Platform,
): ServeRuntime & { unified: SessionManager; shutdown: () => Promise<void>; onShutdown: (hook: () => Promise<void>) => void } {
  let server: EscalationServer | undefined;
  const wrapperPath = o.execve ?? selfAs("codex-execve-wrapper");
  // The sandbox helper runs outside every sandbox, started by this process: as the file this process runs
  // (/proc/<pid>/exe on Linux, role by argv[0]), never by a path a sandboxed command might have replaced.
  const helperExe = platform === "linux" && IS_COMPILED ? selfExePath() : selfAs("codex-linux-sandbox");
  const serverReady = EscalationServer.start(new BoundaryPlacement()).then(
    (s) => (server = s),
    (e: unknown) => {
      writeStderr(`shellmcp serve: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
  // What servers killed with SIGKILL left: bubblewrap's mount points and deny folders, approver sockets (the cgroups:
  // CgroupManager.detect).
  if (platform === "linux") sweepMountMarkers();
  void sweepDeadApproverSockets();
  const cg = CgroupManager.detect();
  const cgroups = cg instanceof CgroupManager ? cg : undefined;
  if (!(cg instanceof CgroupManager)) {
    // Said once per user, reason and boot (a non-root user without a delegated cgroup meets it on every start).
    const text = `no per-call cgroups (${cg.error}); a process that leaves its process group (setsid) can outlive its call`;
    const uid = process.getuid?.() ?? -1;
    if (shouldSayNoCgroups(cg.error, cgroupWarnedDir(uid, xdgRuntimeDir(uid) ?? runtimeDir(uid))))
      writeStderr(`shellmcp: ${text} (said once per boot)\n`);
    else log.debug(text);
  }
  const lifeline = platform === "linux" ? lifelineProblem() : undefined;
  if (lifeline !== undefined)
    writeStderr(`shellmcp: no lifeline guard (${lifeline}); a process this server starts can outlive a server killed by a signal\n`);
  // The shell must hand its execs to the server (an unpatched one would run every command with no rule applied):
  // checked once, beside the MCP session, as an ordinary call of this server (read-only, network off); calls wait
  // for the answer and fail closed with it.
  const shellChecked = serverReady.then(async (s) => {
    const probeState: SandboxRequest = {
      ...setup.initialState,
      policy: { type: "read-only", access: { type: "full-access" }, network_access: false },
      profile: undefined,
      sandboxCwd: "/",
    };
    const call = setup.backend.forCall(probeState, "/", { platform, helperExe, env: setup.env });
    const why =
      "refused" in call
        ? `cannot sandbox the shell check: ${call.refused}`
        : await checkShellIntercepts(s, setup.shellPath, wrapperPath, call, cgroups);
    if (why !== undefined) writeStderr(`shellmcp serve: ${why}\n`);
    return why;
  });
  const sessions = new Set<number>();
  // exec_command sessions (Codex's unified exec): bounded, and ended first at shutdown.
  const unified = new SessionManager(setup.sessionLimits);
  const hooks: (() => Promise<void>)[] = [];
  const shutdown = async () => {
    await Promise.all(hooks.splice(0).map((h) => h().catch(() => undefined))); // e.g. the HTTP listener's drain
    endLifeline(); // every call's guard kills what runs below it
    const sessionsEnded = unified.closeAll(3000);
    await cgroups?.shutdown();
    await endSessions(sessions, lifelineProblem() === undefined); // the guards finish first (the lifeline is closed)
    await sessionsEnded;
    await server?.stop();
  };
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.on(sig, () => {
      void shutdown().then(() => process.exit(128 + (sig === "SIGINT" ? 2 : sig === "SIGTERM" ? 15 : 1)));
    });
  }
  return {
    setup,
    options: o,
    platform,
    wrapperPath,
    helperExe,
    server: async () => serverReady,
    shellRefused: () => shellChecked,
    sessions,
    cgroups,
    unified,
    shutdown,
    onShutdown: (hook) => void hooks.push(hook),
  };
}

/** `madvise` numbers, and `MADV_DONTNEED`: the syscall is not in ffi/layout.ts's table. */
const MADVISE_NR: Partial<Record<NodeJS.Architecture, number>> = { x64: 28, arm64: 233 };
const MADV_DONTNEED = 4;

/** How long the server must have had no call running before it gives back its code pages, ms. */
const IDLE_RELEASE_MS = 3000;

/** How long the server must have had no call running before its escalation worker is parked, ms (by default). */
export const WORKER_PARK_MS = 30_000;

/**
 * When to park the escalation worker, ms of idleness: `SHELLMCP_WORKER_PARK_MS` of `env` (a whole number of ms, at
 * most 9 digits; 0: never), else {@link WORKER_PARK_MS}. Any other value is refused with one line through `warn`
 * (which names the variable, the value and the default that holds instead); never throws.
 */
export function workerParkMs(env: Record<string, string | undefined> = process.env, warn: (line: string) => void = writeStderr): number {
  const v = env.SHELLMCP_WORKER_PARK_MS;
  if (v === undefined) return WORKER_PARK_MS;
  if (/^\d{1,9}$/.test(v)) return Number(v);
  warn(
    `shellmcp serve: SHELLMCP_WORKER_PARK_MS=${JSON.stringify(v.slice(0, 40))} is not a whole number of milliseconds (0: never); the worker parks after ${WORKER_PARK_MS} ms\n`,
  );
  return WORKER_PARK_MS;
}

/**
 * Runs `release` once the server is idle: {@link IDLE_RELEASE_MS} after start-up settled ({@link settled}), and
 * again that long after the last of its calls ended ({@link during}); a call that starts in between postpones it.
 * `park`, when given, runs the same way `parkMs` after the last call (0: never), and after start-up right after the
 * first `release` (`delayMs` + {@link PARK_AFTER_START_MS}): what start-up ran (the shell check) needs no worker
 * kept until the first call, and a park that early leaves ~0.5 MiB less anonymous memory than one 30 s later
 * (measured, bench/memory.ts; not explained).
 */
export class IdleRelease {
  private active = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private parkTimer: ReturnType<typeof setTimeout> | undefined;
  /** No call has run yet: the park follows start-up's release. */
  private beforeFirstCall = true;
  /** How long after the first release the park follows it at start-up, ms. */
  static readonly PARK_AFTER_START_MS = 500;

  constructor(
    private readonly release: () => void,
    private readonly delayMs: number = IDLE_RELEASE_MS,
    private readonly park?: () => void,
    private readonly parkMs = 0,
  ) {}

  /** Start-up work is done: release once idle. */
  settled(): void {
    this.arm();
  }

  /** Run one call: no release while it runs; one is armed when the last running call ends. */
  async during<T>(call: () => Promise<T>): Promise<T> {
    this.active++;
    this.beforeFirstCall = false;
    clearTimeout(this.timer);
    clearTimeout(this.parkTimer);
    try {
      return await call();
    } finally {
      this.active--;
      this.arm();
    }
  }

  private arm(): void {
    clearTimeout(this.timer);
    clearTimeout(this.parkTimer);
    if (this.active !== 0) return;
    this.timer = setTimeout(this.release, this.delayMs).unref();
    if (this.park === undefined || this.parkMs <= 0) return;
    const parkMs = this.beforeFirstCall ? this.delayMs + IdleRelease.PARK_AFTER_START_MS : this.parkMs;
    this.parkTimer = setTimeout(this.park, parkMs).unref();
  }
}

/**
 * Give back the heap memory calls left behind (issue 40): a full collection (`Bun.gc(true)`: JavaScriptCore's heap,
 * then mimalloc's free pages) and `Bun.shrink()` (JavaScriptCore drops its free heap blocks and the JIT code of
 * functions not running, compiled again when next called). Without it the server's anonymous RSS rose from 18 to
 * 38–53 MiB over 100–1,000 trivial calls while its live objects stayed ~60,000 (`bun:jsc` `heapStats`): freed
 * blocks and JIT code kept resident, not objects kept. Takes a few ms on the main thread, only when no call runs
 * ({@link IdleRelease}). Returns its ms; never throws. `Bun.shrink()` only queues its work until this thread's
 * JavaScript returns to the event loop (the escalation worker's loop returns for it: ./escalate/worker/worker.ts).
 * What 100–1,000 calls leave after it (2–5 MiB of RssAnon five seconds after the last call, live objects flat) is
 * held by JavaScriptCore's JIT compiler threads, given back when they end ~10 s after the last call (bench/memory.ts).
 */
export function releaseHeap(): number {
  const t0 = performance.now();
  try {
    Bun.gc(true);
    Bun.shrink();
  } catch (e) {
    log.debug("could not release the heap", { error: (e as Error).message });
  }
  const ms = performance.now() - t0;
  log.debug("released the heap", { ms });
  return ms;
}

/**
 * Give back this process's mapping of the code pages of its own executable (Bun's runtime: ~33 MiB of the ~60 MiB
 * idle RSS after start-up, issue 33), with `madvise(MADV_DONTNEED)` on each executable mapping of the binary that
 * holds no page of its own (`Private_Dirty` and `Anonymous` 0 in /proc/self/smaps: never written, so every page
 * is the file's and comes back from it unchanged). The pages stay in the page cache, shared with every other
 * process of this binary; the code the server runs afterwards maps them again (a minor fault each). Only the
 * resident set changes, never what runs. Linux only; `SHELLMCP_KEEP_CODE_PAGES=1` turns it off. Never throws.
 */
export async function releaseCodePages(platform: NodeJS.Platform): Promise<number> {
  const nr = MADVISE_NR[process.arch];
  if (platform !== "linux" || nr === undefined || process.env.SHELLMCP_KEEP_CODE_PAGES === "1") return 0;
  let released = 0;
  try {
    const [smaps, exe] = await Promise.all([readFile("/proc/self/smaps", "utf8"), realpath("/proc/self/exe")]);
    for (const block of smaps.split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
      const head = /^([0-9a-f]+)-([0-9a-f]+) r-xp [0-9a-f]+ \S+ \d+\s+(.*)$/m.exec(block);
      if (head === null || head[3] !== exe) continue;
      if (!/^Private_Dirty:\s+0 kB$/m.test(block) || !/^Anonymous:\s+0 kB$/m.test(block)) continue;
      const start = BigInt(`0x${head[1]}`);
      const end = BigInt(`0x${head[2]}`);
      libc.syscall("madvise", nr, start, end - start, MADV_DONTNEED);
      released += Number(end - start);
    }
    log.debug("released the code pages", { bytes: released });
  } catch (e) {
    log.debug("could not release the code pages", { error: (e as Error).message });
  }
  return released;
}

/**
 * Path of a file named `name` that runs this binary: `<dir of binary>/name` if present, else a checked symlink
 * (`roleLink`). For the exec wrapper, which runs inside the call's sandbox and is looked up there by path.
 */
function selfAs(name: string): string {
  const beside = join(dirname(process.execPath), name);
  if (existsSync(beside)) return beside;
  // Not in the temporary folder, which is a writable root of most sandboxes: a checked link of our own.
  return roleLink(name);
}
