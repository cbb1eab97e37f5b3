/**
 * Issue 34, item 7c: at shutdown `serve` kills the sessions of the calls that are still running, never a session id
 * it once started: a call's session id is its leader's pid, which the kernel gives to any new process once the
 * session is empty — serving as root, a reused pid may be any user's session leader.
 *
 * Pid reuse is made to happen (root: `/proc/sys/kernel/ns_last_pid`): a call runs and ends; then an unrelated
 * process is started in a new session whose id is the ended call's session id; then the client goes away (the
 * server's shutdown). The unrelated process must still run.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { closeAll, confDir, killWith, pidsWith, serveWithPid, waitFor } from "../helpers/attack.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);
const marks: string[] = [];
afterEach(() => {
  for (const m of marks.splice(0)) killWith(m);
});

/** Start `sleep <mark>` in a new session whose id (its pid) is `sid`: retries the pid allocation a few hundred times. */
const REUSE = `
import os, sys, time
target, mark = int(sys.argv[1]), sys.argv[2]
for _ in range(500):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(target - 1))
    pid = os.fork()
    if pid == 0:
        if os.getpid() == target:
            os.setsid()
            fd = os.open("/dev/null", os.O_RDWR)
            for i in (0, 1, 2): os.dup2(fd, i)
            os.execvp("sleep", ["sleep", mark])
        os._exit(0)
    if pid == target:
        # Said only once the child runs sleep: between its dup2 and its exec it still reads as python.
        want = ("sleep\\0" + mark + "\\0").encode()
        for _ in range(1000):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == want:
                    print("REUSED", flush=True)
                    sys.exit(0)
            time.sleep(0.005)
        print("NO EXEC", flush=True)
        sys.exit(1)
    os.waitpid(pid, 0)
print("MISSED", flush=True)
`;

/**
 * Why pid reuse cannot be arranged here, or undefined when it can: the test writes the kernel's last allocated pid,
 * which needs root (CAP_SYS_ADMIN over this pid namespace) and a `/proc/sys` mounted writable (a container's often is
 * not), and runs python3 to fork at that pid.
 */
function reuseMissing(): string | undefined {
  if (process.getuid?.() !== 0) return "not root";
  try {
    closeSync(openSync("/proc/sys/kernel/ns_last_pid", "w"));
  } catch (e) {
    return `/proc/sys/kernel/ns_last_pid is not writable here (${(e as NodeJS.ErrnoException).code})`;
  }
  return toolMissing("python3");
}

describe.skipIf(skipWithout("session reuse (needs root: ns_last_pid)", reuseMissing() ?? shellsMissing()))("item 7c", () => {
  test("shutdown leaves alone a process whose session id is that of a call that has ended", async () => {
    const s = await serveWithPid({});
    const ws = confDir("reuse-ws");
    expect(await s.sandboxState({ type: "danger-full-access" }, ws)).toEqual({});
    const r = await s.shell({ command: "awk '{print $6}' /proc/$$/stat", workdir: ws, login: false });
    const sid = Number(r.out.output.trim());
    expect(sid).toBeGreaterThan(1);
    // The call has ended: its session is empty (nothing was left behind), so its id is free for any new process.
    const mark = `4242.${process.pid}${Math.floor(Math.random() * 1e6)}`;
    marks.push(`sleep\x00${mark}`);
    const p = Bun.spawnSync(["/usr/bin/python3", "-c", REUSE, String(sid), mark], { stdout: "pipe", stderr: "pipe" });
    // Where ns_last_pid is writable the pid is had within 500 tries (another process would have to take it 500
    // times in a row): not having it is a failure of the test's setup, not a pass.
    expect(p.stdout.toString().trim(), `pid ${sid} was not reused: ${p.stderr.toString()}`).toBe("REUSED");
    const [victim] = pidsWith(`sleep\x00${mark}`);
    expect(victim).toBe(sid);
    await s.close(); // the server shuts down: it kills what its running calls left (none run)
    // Once the server has exited, a SIGKILL it sent has reached the victim: it is gone, a zombie, or has it pending.
    expect(
      await waitFor(() => !existsSync(`/proc/${s.pid}`) || /^State:\s+Z/m.test(readFileSync(`/proc/${s.pid}/status`, "utf8")), 20_000),
    ).toBe(true);
    expect(pidsWith(`sleep\x00${mark}`)).toEqual([sid]);
    const status = readFileSync(`/proc/${sid}/status`, "utf8");
    expect({
      state: /^State:\s+(\S)/m.exec(status)?.[1],
      killPending: (BigInt(`0x${/^ShdPnd:\s+(\S+)/m.exec(status)![1]}`) >> 8n) & 1n,
    }).toEqual({
      state: "S",
      killPending: 0n,
    });
  }, 60_000);
});
