/**
 * Issue 34, item 1: nothing a sandbox can write is read on a path that can block or lie. Every synchronous read of
 * file content in `src/` and `ffi/` goes through src/untrusted-fs.ts, except the reads listed here, each with
 * the reason its path is not one a call chose or a sandbox could write. A new `readFileSync`, `openSync`, `readSync`
 * or `Bun.file(…)` anywhere else fails this test: route it through untrusted-fs.ts, or add it here with its reason.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

/** `file` → substrings of the allowed lines, each with why its path cannot be one a sandbox chose or wrote. */
const ALLOWED: Record<string, [string, string][]> = {
  "src/untrusted-fs.ts": [["", "the module itself"]],
  "ffi/libc.ts": [
    ['readFileSync("/proc/sys/kernel/cap_last_cap"', "a kernel file"],
    ['readFileSync("/proc/self/stat"', "the process's own /proc entry"],
  ],
  "src/escalate/protocol/wrapper.ts": [
    ['readFileSync("/proc/self/cmdline")', "the wrapper's own /proc entry (it runs inside the sandbox anyway)"],
    ['readFileSync("/proc/self/environ")', "the wrapper's own /proc entry"],
  ],
  "src/sandbox/linux/loopback-net.ts": [
    ["import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync", "import"],
    ["readSync(fd, buf", "the holder's stdout: a pipe this process made, written by its own bwrap child"],
    ["openSync(`/proc/${line}/ns/", "/proc: a namespace file (nsfs) of this process's own child, which is waiting"],
    ["readFileSync(`/proc/${line}/net/dev`", "/proc: kernel-made"],
  ],
  "src/escalate/worker/escalated-child.ts": [["readFileSync(`/proc/${p}/task/${t}/children`", "/proc: kernel-made, never blocks"]],
  "src/sandbox/linux/sandbox-exec.ts": [
    ["import { existsSync, readFileSync }", "import"],
    ['readFileSync("/proc/sys/fs/pipe-max-size"', "a kernel file"],
  ],
  "src/exec-server/tree.ts": [["readFileSync(`/proc/${pid}/stat`", "/proc: kernel-made"]],
  "src/exec-server/launch.ts": [
    ["Bun.file(fd).stream()", "the lifeline guard's status pipe (an fd this process made), read asynchronously"],
  ],
  "src/shell/sessions.ts": [["readFileSync(`/proc/${pid}/stat`", "/proc: kernel-made"]],
  "src/shell/cgroup.ts": [
    ['readFileSync("/proc/self/mountinfo"', "the process's own /proc entry"],
    ['readFileSync("/proc/self/cgroup"', "the process's own /proc entry"],
    ["readFileSync(this.procs", "a cgroup file of the server's own cgroup tree (cgroupfs, never a FIFO)"],
    ["readFileSync(`/proc/${pid}/stat`", "/proc: kernel-made"],
    ['readFileSync("/proc/stat"', "a kernel file"],
    ['readFileSync("/proc/sys/kernel/random/boot_id"', "/proc: kernel-made"],
  ],
  "src/sandbox/linux/mount-markers.ts": [
    ["readFileSync(`/proc/${pid}/stat`", "/proc: kernel-made"],
    ['readFileSync("/proc/sys/kernel/random/boot_id"', "a kernel file"],
    ['openSync(join(m.dir, "lock"), flags, 0o200)', "write-only, O_NONBLOCK|O_NOFOLLOW, in the private marker folder"],
  ],
  "src/sandbox/linux/mount-locks.ts": [
    [
      "openSync(p, OPEN_FLAGS)",
      "O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_NONBLOCK: a folder only (never a link or FIFO), for flock; nothing read",
    ],
  ],
  "src/sandbox/linux/run.ts": [['openSync("/proc/thread-self/ns/pid"', "the thread's own namespace"]],
  "src/sandbox/linux/mount-points.ts": [
    ["d.readSync() === null", "one entry of a folder just lstat-ed as a real folder (a folder listing never blocks)"],
  ],
  "src/sandbox/linux/bwrap.ts": [['readFileSync("/proc/self/status"', "the process's own /proc entry"]],
  "src/self.ts": [
    ['import { existsSync, openSync } from "node:fs"', "import"],
    ['openSync("/proc/self/exe"', "the running executable"],
  ],
  "src/sandbox/linux/exec-limits.ts": [
    ['import { readFileSync } from "node:fs"', "import"],
    ['readFileSync("/proc/self/limits"', "the process's own /proc entry"],
  ],
  "src/sandbox/linux/landlock.ts": [["openSync(r.path, O_PATH | O_CLOEXEC)", "O_PATH opens never block and read nothing"]],
  "src/sandbox/linux/bwrap-probe-cache.ts": [
    ['readFileSync("/proc/sys/kernel/random/boot_id"', "a kernel file"],
    ["readFileSync(file", "checked first by ownedAndPrivate (lstat: a regular file owned by the user, mode 0600 folder)"],
  ],
  "src/carried/portable-shells.ts": [
    ["openSync,", "import"],
    ["readFileSync,", "import"],
    ["openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW)", "the verified shells folder (owner, mode, no links), checked by hash"],
    ["readSync(fd, have", "the same verified file"],
    ["openSync(tmp, constants.O_WRONLY", "creates a new file (O_EXCL) in the verified folder"],
    ["readFileSync(EMBEDDED_SHELLS[kind])", "the executable's embedded /$bunfs/ copy"],
  ],
  "src/shell/output-pump.ts": [["Bun.file(readEnd)", "the call's own output pipe (an fd), read asynchronously"]],
  "src/log.ts": [["openSync(path, constants.O_WRONLY", "the user's log file: O_NONBLOCK|O_NOFOLLOW, write only"]],
  "src/trace-steps.ts": [["openSync(", "the debug trace file SHELLMCP_TRACE_STEPS names: O_NONBLOCK|O_NOFOLLOW, write only"]],
  "src/execpolicy/amend.ts": [["openSync(path, constants.O_RDWR", "O_NONBLOCK|O_NOFOLLOW, then fstat: regular files only"]],
  "src/auth/http.ts": [
    ["import { readFileSync, statSync }", "import"],
    ["readFileSync(a.authJwks", "the JWKS file the user names with --auth-jwks (public keys), a regular file"],
  ],
  "src/http/server.ts": [["Bun.file(o.tls.cert)", "the TLS certificate and key files the user names with --tls-cert/--tls-key"]],
  "src/auth/bearer.ts": [
    ["readFileSync(path", "a token file the user names on the command line"],
    ["openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL", "creates a new token file (O_EXCL|O_NOFOLLOW)"],
  ],
  "src/sandbox/git/restore.ts": [
    ["openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL", "creates a new file to restore from (O_EXCL|O_NOFOLLOW)"],
    ["openSync(p, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)", "O_DIRECTORY: a FIFO or link fails at once"],
  ],
  "src/sandbox/git/kept-aside.ts": [
    [
      "openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL",
      "creates a kept-aside copy under CODEX_HOME (O_EXCL|O_NOFOLLOW)",
    ],
  ],
  "src/sandbox/linux/git-repair-child.ts": [
    ["import { closeSync, openSync, readFileSync", "import"],
    ['openSync("/", O_PATH', "an O_PATH descriptor of / for a Landlock rule (reads nothing)"],
    ["readFileSync(0,", "stdin: the batch the server pipes in"],
  ],
  "src/exec-server/main.ts": [["readFileSync(file", "a file the user names on the command line"]],
};

const PATTERN = /\b(readFileSync|openSync|readSync)\b|Bun\.file\(/;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return sources(p);
    return p.endsWith(".ts") ? [p] : [];
  });
}

describe("issue 34: synchronous reads go through src/untrusted-fs.ts", () => {
  test("every synchronous read outside untrusted-fs.ts is on the allow-list, with its reason", () => {
    const offending: string[] = [];
    for (const file of [...sources(join(ROOT, "src")), ...sources(join(ROOT, "ffi"))]) {
      const rel = relative(ROOT, file);
      const allowed = ALLOWED[rel] ?? [];
      readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (!PATTERN.test(line) || /^\s*(\*|\/\/)/.test(line)) return;
          if (/^import |^\s+(readFileSync|openSync|readSync),?$/.test(line) && allowed.length > 0) return;
          if (allowed.some(([needle]) => line.includes(needle))) return;
          offending.push(`${rel}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(offending).toEqual([]);
  });

  test("the test sees a new read (it is not vacuous)", () => {
    expect(PATTERN.test('const t = readFileSync(join(gitDir, "commondir"), "utf8");')).toBe(true);
    expect(PATTERN.test("await Bun.file(p).text()")).toBe(true);
  });
});
