/**
 * The lifeline guard puts what it starts into the call's cgroup (patches/room-launcher.c `guard_main`, issue 40's
 * "the call's cgroup without a move"): `clone3(CLONE_INTO_CGROUP)` makes its child inside that cgroup while the guard
 * itself stays where it was started; where clone3 cannot (Linux before 5.7: ENOSYS; a cgroup it cannot start a
 * process in directly), the guard joins the cgroup first and forks, so the child is in it all the same. This kernel
 * always takes the clone3 path, so the other one is reached here by running the guard under a seccomp filter that
 * answers clone3 with ENOSYS (what an older kernel answers; glibc itself falls back the same way).
 *
 * Root only (a cgroup of its own under this process's), cgroup v2; a visible skip otherwise.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { launcherBinary } from "../../src/sandbox/linux/room-launcher.ts";
import { skipWithout } from "../helpers/prereq.ts";

/**
 * This process's cgroup v2 folder (`dir`, where the hierarchy is mounted: /sys/fs/cgroup, or /sys/fs/cgroup/unified
 * on a hybrid host) and its path as /proc/<pid>/cgroup shows it (`path`), or why there is none to use.
 */
function ownCgroup(): { dir: string; path: string } | { missing: string } {
  if (process.getuid?.() !== 0) return { missing: "needs root (a cgroup of its own)" };
  const mount = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" - "))
    .find(([, tail]) => tail?.startsWith("cgroup2 "))?.[0]
    ?.split(" ");
  const line = readFileSync("/proc/self/cgroup", "utf8")
    .split("\n")
    .find((l) => l.startsWith("0::"));
  if (mount === undefined || line === undefined) return { missing: "no cgroup v2 hierarchy" };
  const [root, point] = [mount[3]!, mount[4]!];
  const path = line.slice(3);
  const dir = join(point, root === "/" ? path : path.slice(root.length));
  return existsSync(join(dir, "cgroup.procs")) ? { dir, path } : { missing: `${dir} is not a cgroup v2 folder` };
}

const own = ownCgroup();
const launcher = launcherBinary();
const skip =
  skipWithout("the guard's cgroup suite", "missing" in own ? own.missing : undefined) ||
  skipWithout("the guard's cgroup suite", "error" in launcher ? launcher.error : undefined);
const base = "dir" in own ? join(own.dir, `shellmcp-guard-test-${process.pid}`) : "";
const made: string[] = [];
afterAll(() => {
  for (const d of made.reverse())
    try {
      rmdirSync(d);
    } catch {
      // still holding a process: the leftover is reported by the next run's cgroup sweep
    }
});

/**
 * Python: a lifeline pipe whose write end stays open in the parent, and a child that (mode `noclone3`) installs a
 * seccomp filter answering clone3 (435 on x86_64 and arm64) with ENOSYS, then execs the guard with `--join-cgroup`.
 */
const HARNESS = `
import ctypes, os, platform, struct, sys
mode, launcher, procs, script = sys.argv[1:5]
r, w = os.pipe()
os.set_inheritable(r, True)
pid = os.fork()
if pid == 0:
    os.close(w)
    if mode == "noclone3":
        arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[platform.machine()]
        st = lambda code, k: struct.pack("HBBI", code, 0, 0, k)
        jeq = lambda k, jt, jf: struct.pack("HBBI", 0x15, jt, jf, k)
        prog = [st(0x20, 4), jeq(arch, 0, 3), st(0x20, 0), jeq(435, 0, 1), st(0x06, 0x00050000 | 38), st(0x06, 0x7FFF0000)]
        code = ctypes.create_string_buffer(b"".join(prog))
        fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(code)))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) != 0:
            os._exit(99)
    os.execv(launcher, ["shellmcp-guard", "--guard", str(r), "--join-cgroup", procs, "--", "/bin/sh", "sh", "-c", script])
os.close(r)
_, status = os.waitpid(pid, 0)
os.close(w)
sys.exit(os.waitstatus_to_exitcode(status))
`;

/** Run `script` under the guard into a fresh cgroup; its output, exit status, and the cgroup's path as /proc shows it. */
function guarded(mode: "plain" | "noclone3", script: string): { out: string; code: number; cgroup: string } {
  mkdirSync(base, { recursive: true });
  if (!made.includes(base)) made.push(base);
  const dir = join(base, `${mode}-${made.length}`);
  mkdirSync(dir);
  made.push(dir);
  const r = Bun.spawnSync(["python3", "-c", HARNESS, mode, (launcher as { path: string }).path, join(dir, "cgroup.procs"), script], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const { dir: ownDir, path: ownPath } = own as { dir: string; path: string };
  return { out: r.stdout.toString() + r.stderr.toString(), code: r.exitCode ?? -1, cgroup: join(ownPath, dir.slice(ownDir.length)) };
}

describe.skipIf(skip)("the lifeline guard's child is made in the call's cgroup", () => {
  const script = 'echo "child $(grep ^0:: /proc/self/cgroup)"; echo "guard $(grep ^0:: /proc/$PPID/cgroup)"';

  test("clone3(CLONE_INTO_CGROUP): the child starts in it, the guard stays where it was", () => {
    const r = guarded("plain", script);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`child 0::${r.cgroup}\n`);
    expect(r.out).toContain(`guard 0::${(own as { path: string }).path}\n`);
  });

  test("no clone3 (ENOSYS, as before Linux 5.7): the guard joins the cgroup first, and the child is in it all the same", () => {
    const r = guarded("noclone3", script);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`child 0::${r.cgroup}\n`);
    // The fallback ran: the guard itself moved into the call's cgroup (on the clone3 path it does not).
    expect(r.out).toContain(`guard 0::${r.cgroup}\n`);
  });

  test("no clone3 and a cgroup that cannot be joined: nothing runs (status 126)", () => {
    const r = guarded("noclone3", "echo ran");
    // A cgroup folder removed before the guard starts: clone3 is refused by the filter, joining fails.
    const gone = join(base, "gone");
    mkdirSync(gone);
    rmdirSync(gone);
    const g = Bun.spawnSync(
      ["python3", "-c", HARNESS, "noclone3", (launcher as { path: string }).path, join(gone, "cgroup.procs"), "echo ran"],
      {
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    expect(r.out).toBe("ran\n");
    expect(g.exitCode).toBe(126);
    expect(g.stdout.toString()).not.toContain("ran");
  });
});
