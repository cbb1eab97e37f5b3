/**
 * Shared helpers for the attack suite (test/security/): workspaces inside and outside a sandbox's writable roots,
 * the serve process's pid, RSS and fd count, processes found by a marker in their argv, deadlines, and the
 * hostile Python programs a sandboxed command runs against the escalation socket (protocol: a 1-byte datagram on
 * `$CODEX_ESCALATE_SOCKET` carrying one stream socket by SCM_RIGHTS, then u32-LE length-prefixed JSON frames).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session, type StartOptions } from "./mcp.ts";
import { CONF_BASE } from "./test-dirs.ts";

/** A fresh directory under this run's CONF_BASE (outside every default writable root, see test-dirs.ts). */
export function confDir(prefix: string): string {
  const d = join(CONF_BASE, `${prefix}-${Math.random().toString(36).slice(2, 10)}`);
  mkdirSync(d, { recursive: true });
  return d;
}

/** A unique token for markers and argv tags. */
export function token(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

/** A serve session that remembers its server pid. */
export interface AttackSession extends Session {
  pid: number;
}

const live: AttackSession[] = [];

/** Start `shellmcp serve` (see {@link startServe}) and record its pid; {@link closeAll} closes every one. */
export async function serveWithPid(o: StartOptions = {}): Promise<AttackSession> {
  const s = await startServe(o);
  const pid = (s.client.transport as unknown as { pid: number | null }).pid;
  if (typeof pid !== "number") throw new Error("serve pid unknown");
  const a = Object.assign(s, { pid });
  live.push(a);
  return a;
}

/** Close every session started by {@link serveWithPid} (SIGKILL the server if close hangs). */
export async function closeAll(): Promise<void> {
  for (const s of live.splice(0)) {
    await withDeadline(s.close(), 5000, "close").catch(() => undefined);
    try {
      process.kill(s.pid, "SIGKILL");
    } catch {}
  }
}

/** `p`, or a rejection naming `what` after `ms` milliseconds. */
export function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: Timer;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<T>((_, rej) => {
      t = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]);
}

/** A field of /proc/<pid>/status in KiB (VmRSS, VmHWM, …). */
export function statusKiB(pid: number, field: string): number {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
  if (!m) throw new Error(`${field} not in /proc/${pid}/status`);
  return Number(m[1]);
}

/** Resident set size of `pid` in MiB. */
export function rssMiB(pid: number): number {
  return statusKiB(pid, "VmRSS") / 1024;
}

/** Peak resident set size of `pid` in MiB. */
export function peakRssMiB(pid: number): number {
  return statusKiB(pid, "VmHWM") / 1024;
}

/**
 * Why this process cannot read a `serve` process's fds (`/proc/<pid>/fd`), executable link or memory maps, or
 * undefined when it can: `serve` makes itself non-dumpable (src/serve.ts `hardenServerProcess`), and the kernel then
 * opens those files only to a process with CAP_SYS_PTRACE, i.e. root, never to another process of the same user.
 * For `skipWithout` (prereq.ts): a suite run as another user skips those checks, and says so.
 */
export const SERVER_PROC_HIDDEN: string | undefined =
  process.getuid?.() === 0 ? undefined : "serve is non-dumpable: only root can read its /proc/<pid>/fd, exe and smaps";

/** Open fds of `pid` (a `serve` process: root only, see {@link SERVER_PROC_HIDDEN}). */
export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** User + system CPU time of `pid` in seconds (from /proc/<pid>/stat). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

/** Pids (any namespace's processes are visible from the host) whose argv contains `tag`. */
export function pidsWith(tag: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${e}/cmdline`, "utf8");
      if (argv.includes(tag)) out.push(Number(e));
    } catch {}
  }
  return out;
}

/**
 * One line per pid for a failing test's log: pid, state, ppid, session, cgroup v2 path and argv (spaces for NULs),
 * so a survivor in CI says where it lived and who held it. Pids that are gone read `pid: gone`.
 */
export function describePids(pids: number[]): string {
  return pids
    .map((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, "utf8");
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        const cg =
          readFileSync(`/proc/${p}/cgroup`, "utf8")
            .split("\n")
            .find((l) => l.startsWith("0::")) ?? "no v2";
        const argv = readFileSync(`/proc/${p}/cmdline`, "utf8").replaceAll("\0", " ").trim();
        return `${p}: state ${f[0]} ppid ${f[1]} sid ${f[3]} cgroup ${cg} argv ${argv}`;
      } catch {
        return `${p}: gone`;
      }
    })
    .join("\n");
}

/** Kill (SIGKILL) every process whose argv contains `tag`, so a failing test leaves nothing behind. */
export function killWith(tag: string): void {
  for (const p of pidsWith(tag)) {
    try {
      process.kill(p, "SIGKILL");
    } catch {}
  }
}

/** Wait until `cond()` holds or `ms` pass; returns the last value of `cond()`. */
export async function waitFor(cond: () => boolean, ms: number, stepMs = 100): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await Bun.sleep(stepMs);
  }
  return cond();
}

/** One `escalated` notice of a server's log: what ran outside the call's sandbox, in which room (`kept`: a kept room's id). */
export interface Escalation {
  file: string;
  argv: string[];
  /** The room's backend (`bwrap`, `landlock`, `seatbelt`), or `none` (`--escalation host`: the bare host). */
  room: string;
  kept?: number;
}

/**
 * The programs a server escalated, in order, from its stderr (`s.stderr()`): each `escalated {…}` notice
 * (src/escalate/server.ts logs one per escalated program, at the default level). How a test confirms that what it
 * attacks really ran in a (kept) room, rather than inside the call's sandbox.
 */
export function escalations(stderr: string): Escalation[] {
  return [...stderr.matchAll(/(?:^|\s)escalated (\{.*\})$/gm)].map((m) => JSON.parse(m[1]!) as Escalation);
}

/** True when `path` exists (for marker files written by an attack). */
export const exists = (path: string) => existsSync(path);

/** Wrap a Python program as a shell command (`python3 -c '…'`), quoting it for bash. */
export function py(program: string, args: string[] = []): string {
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  return `/usr/bin/python3 -c ${q(program)} ${args.map(q).join(" ")}`;
}

/** Python prelude: `handshake()` hands one end of a new stream socketpair to the escalation server. */
const PY_PRELUDE = `
import os, socket, struct, sys, time, json, array
ESC = int(os.environ["CODEX_ESCALATE_SOCKET"])
def frame(obj):
    b = json.dumps(obj).encode()
    return struct.pack("<I", len(b)) + b
def handshake(sock_to_give, flags=0):
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM, 0, os.dup(ESC))  # family given: no getsockopt (denied by seccomp)
    try:
        d.sendmsg([b"\\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [sock_to_give.fileno()]))], flags)
    finally:
        d.close()
def writeall(sock, data):
    # os.write, not send(): send() is sendto(…, NULL, 0), which today's network-off filter denies.
    view = memoryview(data)
    while view:
        view = view[os.write(sock.fileno(), view):]
def request(argv):
    return frame({"file": argv[0], "argv": argv, "workdir": os.getcwd(), "env": {"PATH": "/usr/bin:/bin"}})
`;

/**
 * The wedge (issue 11 item 1): fill the receive queue of `keep`, queue a request frame for `give`, hand `give` to
 * the server, then hold `keep` open without reading. Prints `HANDED`, then `CLOSED after Ns` once the server has
 * closed its end (POLLHUP: the session failed closed), or `STILL-OPEN` after `holdSeconds`. It never reads.
 */
export function wedgeProgram(holdSeconds: number): string {
  return (
    PY_PRELUDE +
    `
keep, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
give.setblocking(False)
n = 0
while True:
    try:
        n += give.sendmsg([b"x" * 4096])
    except BlockingIOError:
        break
keep.sendmsg([request(["/usr/bin/true"])])
handshake(give)
give.close()
print("HANDED", n, flush=True)
t0 = time.time()
# Never read (reading would let the server's answer through): poll for POLLHUP, which a stream socket reports
# once the peer has closed, even with unread data queued.
import select
p = select.poll()
p.register(keep.fileno(), select.POLLHUP)
state = "STILL-OPEN"
while time.time() - t0 < ${holdSeconds}:
    if any(ev & select.POLLHUP for _, ev in p.poll(500)):
        state = "CLOSED after %ds" % (time.time() - t0)
        break
print(state, flush=True)
`
  );
}

/**
 * Memory attack (issue 11 item 8): `sessions` sessions, each announcing and sending `mib` MiB as one request
 * frame, concurrently (one thread each). Prints `SENT <ok>/<sessions>`.
 */
export function floodProgram(sessions: number, mib: number): string {
  return (
    PY_PRELUDE +
    `
import threading
N, SIZE = ${sessions}, ${mib} * 1024 * 1024
ok = [0]
socks = []
def one():
    mine, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    handshake(give)
    give.close()
    socks.append(mine)
    try:
        writeall(mine, struct.pack("<I", SIZE))
        chunk = b"a" * (1024 * 1024)
        for _ in range(${mib}):
            writeall(mine, chunk)
        ok[0] += 1
    except OSError:
        pass
ts = [threading.Thread(target=one) for _ in range(N)]
for t in ts: t.start()
for t in ts: t.join(60)
time.sleep(1)
print("SENT %d/%d" % (ok[0], N), flush=True)
`
  );
}

/**
 * Fd attack (issue 11 item 8): `count` handshakes that never send a request, held open until `stopFile` exists
 * (or `maxSeconds`); writes `readyFile` once all are handed. Prints `IDLE <handed>`.
 */
export function idleProgram(count: number, readyFile: string, stopFile: string, maxSeconds: number): string {
  return (
    PY_PRELUDE +
    `
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
handed = 0
stalled = 0.0
for i in range(${count}):
    try:
        mine, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as e:
        print("stopped at", i, e, flush=True)
        # Our own fd limit (we hold one end per session): free a few so that the ready file can be written.
        for m in held[-16:]:
            m.close()
        del held[-16:]
        break
    # A server that stops taking handshakes (a cap) leaves them queued: give up after 2 s without progress.
    while True:
        try:
            handshake(give, socket.MSG_DONTWAIT)
            stalled = 0.0
            break
        except BlockingIOError:
            if stalled >= 2.0:
                break
            time.sleep(0.05)
            stalled += 0.05
        except OSError as e:  # our own fd limit
            stalled = 2.0
            break
    give.close()
    if stalled >= 2.0:
        mine.close()
        print("stopped at", i, "(no more handshakes taken, or our own fd limit)", flush=True)
        break
    held.append(mine)
    handed += 1
open(${JSON.stringify(readyFile)}, "w").close()
t0 = time.time()
while not os.path.exists(${JSON.stringify(stopFile)}) and time.time() - t0 < ${maxSeconds}:
    time.sleep(0.2)
print("IDLE", handed, flush=True)
`
  );
}

/** C source of a preload library whose constructor creates `marker` (issue 11 item 2). */
export function preloadSource(marker: string): string {
  return `#include <fcntl.h>\n#include <unistd.h>\n__attribute__((constructor)) static void pwn(void) { int fd = open(${JSON.stringify(marker)}, O_CREAT | O_WRONLY, 0644); if (fd >= 0) { write(fd, "pwned\\n", 6); close(fd); } }\n`;
}

/** Compile `preloadSource(marker)` into `soPath` with the host's cc (throws if cc is missing). */
export function buildPreload(marker: string, soPath: string): void {
  const src = `${soPath}.c`;
  require("node:fs").writeFileSync(src, preloadSource(marker));
  const r = Bun.spawnSync(["cc", "-shared", "-fPIC", "-o", soPath, src]);
  if (r.exitCode !== 0) throw new Error(`cc failed: ${r.stderr}`);
}

/** Run git on the host (tests' own setup), throwing on failure. */
export function hostGit(dir: string, ...args: string[]): string {
  const r = Bun.spawnSync(["git", "-C", dir, ...args], {
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@example.com",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@example.com",
    },
  });
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
  return r.stdout.toString().trim();
}

/**
 * Make `dir` (created if missing) a git repository on branch main with user t <t@example.com> in its config and
 * one commit of `f.txt` ("one\n", message "first"); returns `dir`.
 */
export function oneCommitRepo(dir: string): string {
  mkdirSync(dir, { recursive: true });
  hostGit(dir, "init", "-q", "-b", "main");
  hostGit(dir, "config", "user.name", "t");
  hostGit(dir, "config", "user.email", "t@example.com");
  writeFileSync(`${dir}/f.txt`, "one\n");
  hostGit(dir, "add", "f.txt");
  hostGit(dir, "commit", "-q", "-m", "first");
  return dir;
}

/** Fail (not skip) when a program the suite needs is missing. */
export function requirePrograms(...names: string[]): void {
  for (const n of names) if (Bun.which(n) === null && !existsSync(n)) throw new Error(`the attack suite needs ${n}`);
}

/** The environment of {@link isolatedGit}: this process's, without the user's or the system's git config. */
export const ISOLATED_GIT_ENV = { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" };

/** Run git in `cwd` on the host without the user's or the system's git config, throwing on failure. */
export function isolatedGit(cwd: string, ...args: string[]): void {
  const r = Bun.spawnSync(["git", ...args], { cwd, env: ISOLATED_GIT_ENV, stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.toString()}`);
}

/**
 * Make `dir` (with its parents) a repository with one commit of `f` ("f\n", message "one", author t <t@t>), by
 * {@link isolatedGit}; returns its `.git/config` text.
 */
export function isolatedRepo(dir: string): string {
  mkdirSync(dir, { recursive: true });
  isolatedGit(dir, "init", "-q");
  writeFileSync(join(dir, "f"), "f\n");
  isolatedGit(dir, "add", "f");
  isolatedGit(dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one");
  return readFileSync(join(dir, ".git", "config"), "utf8");
}

/**
 * The `call-<n>` folders of server `pid`'s per-call cgroups (`<its cgroup>/shellmcp-<pid>`) that belong to a call;
 * [] without. The server makes the next call's cgroup ahead as each call takes one (src/shell/cgroup.ts
 * `CgroupManager.create`): the highest-numbered folder, when it has no process, is that one and is left out. A call's
 * own folder left behind is always below it, and so still counted.
 */
export function callCgroups(pid: number): string[] {
  const mount = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" - "))
    .find(([, tail]) => tail?.startsWith("cgroup2 "))?.[0]
    ?.split(" ");
  const line = readFileSync(`/proc/${pid}/cgroup`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("0::"));
  if (mount === undefined || line === undefined) return [];
  const rel = mount[3] === "/" ? line.slice(3) : line.slice(3).slice(mount[3]!.length);
  const base = join(mount[4]!, rel, `shellmcp-${pid}`);
  if (!existsSync(base)) return [];
  const calls = readdirSync(base)
    .filter((n) => /^call-[0-9]+$/.test(n))
    .sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
  const ahead = calls.at(-1);
  const empty = (n: string) => {
    try {
      return readFileSync(join(base, n, "cgroup.procs"), "utf8").trim() === "";
    } catch {
      return true; // removed meanwhile
    }
  };
  return ahead !== undefined && empty(ahead) ? calls.slice(0, -1) : calls;
}

/** Call `echo hi` in `ws`: the outcome as text (a tool result's exit code and output, or the protocol error's message). */
export async function echoHi(s: AttackSession, ws: string): Promise<string> {
  try {
    const r = await s.shell({ command: "echo hi", workdir: ws, login: false, timeout_ms: 20_000 });
    return `exit ${r.out.exit_code}: ${r.out.output}`;
  } catch (e) {
    return `error: ${(e as Error).message}`;
  }
}
