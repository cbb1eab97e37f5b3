/**
 * Attacks on kept rooms (src/sandbox/linux/room-launcher.ts) from an ordinary `shell` call, judged on the host.
 * Each test states what must hold; they fail on the branch that introduced kept rooms (attack-review findings):
 * 1. a call can open any number of rooms (one per repository it `cd`s into), and each lives until the call ends:
 *    3 processes and 2 fds of the shared escalation worker per room;
 * 2. a program of a room takes the launcher's socket (pidfd_getfd on its parent: same uid, same namespaces or
 *    Landlock domain) and forges another program's exit status to the worker;
 * 3. under Landlock a program of the room can signal its launcher (its parent, in the same Landlock domain): a
 *    SIGKILL orphans what the room started (only the call's cgroup still catches it; without one it outlives
 *    the call), a SIGSTOP keeps the room from ever ending.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, escalations, pidsWith, serveWithPid, waitFor } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { keepsRooms, MAX_KEPT_ROOMS_PER_CALL } from "../../src/sandbox/linux/room-launcher.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

const RULES = ['prefix_rule(pattern=["cat"], decision="allow")', 'prefix_rule(pattern=["python3"], decision="allow")'].join("\n") + "\n";

/** Takes the launcher's socket (fd 3 of its parent) and tells the worker that programs 1..1999 exited 42. */
const FORGE = `
import os, ctypes, struct, socket, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(438, os.pidfd_open(os.getppid()), 3, 0)  # pidfd_getfd
if fd < 0:
    print("no socket", ctypes.get_errno()); raise SystemExit(0)
time.sleep(0.5)
socket.socket(fileno=fd).sendall(b"".join(struct.pack("<IIi", 2, i, 42 << 8) for i in range(1, 2000)))
print("forged")
`;
/** Says it has started (a line on its stdout), then ends with 7 after 3 s. */
const SLOW = `import time, sys; print("started", flush=True); time.sleep(3); sys.exit(7)`;

/** Starts a setsid'd sleep, then SIGKILLs its parent (the launcher). */
const KILL_PARENT = (marker: string) => `
import os, subprocess, time, signal
subprocess.Popen(["sleep", "${marker}"], start_new_session=True)
try:
    os.kill(os.getppid(), signal.SIGKILL)
    print("launcher killed")
except OSError as e:
    print("kill refused", e.errno)
time.sleep(0.3)
`;

describe.skipIf(skipWithout("kept room attack suite", shellsMissing()))("kept rooms under attack", () => {
  test("bwrap: a call cannot keep an unbounded number of rooms alive (one per repository it enters)", async () => {
    const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", "bwrap"] });
    const ws = confDir("kra-many");
    expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
    const call = s.shell({
      command: `for i in $(seq 40); do mkdir -p r$i/.git; (cd r$i && cat /dev/null); done; echo done; : > loop-done; sleep 3`,
      workdir: ws,
      login: false,
      timeout_ms: 60_000,
    });
    // Counted while the call still runs (its `sleep 3`), once every program has ended.
    expect(await waitFor(() => existsSync(join(ws, "loop-done")), 30_000), "the loop did not end").toBe(true);
    const launchers = Bun.spawnSync(["pgrep", "-x", "room-launcher"]).stdout.toString().split("\n").filter(Boolean).length;
    expect((await call).out.output).toContain("done");
    // The attack ran: each of the 40 `cat`s was escalated into a bubblewrap room, the first ones into kept rooms of
    // their own (one per repository: different walls), up to the call's bound; the rest into rooms of their own.
    const cats = escalations(s.stderr()).filter((e) => e.argv[0] === "cat");
    expect(cats.map((e) => e.room)).toEqual(Array(40).fill("bwrap"));
    const kept = cats.flatMap((e) => (e.kept !== undefined ? [e.kept] : []));
    expect(new Set(kept).size).toBe(kept.length);
    expect(kept.length).toBeGreaterThan(1);
    expect(kept.length).toBeLessThanOrEqual(MAX_KEPT_ROOMS_PER_CALL);
    // 40 programs, each done before the next: at most a few idle rooms should be kept (found: 40 launchers, each
    // with its bwrap and bwrap's init, 80 fds in the worker, all alive until the call ends).
    expect(launchers).toBeLessThanOrEqual(8);
  }, 90_000);

  // Kept Landlock rooms need ABI 6 (signal scoping); below it every program gets a room of its own and there is no
  // shared launcher to attack: a visible skip, not a pass.
  const noKeptRooms = (backend: "bwrap" | "landlock") =>
    skipWithout(`kept ${backend} rooms`, keepsRooms(backend) ? undefined : "this kernel's Landlock ABI is below 6: no kept rooms");
  for (const backend of ["bwrap", "landlock"] as const)
    test.skipIf(noKeptRooms(backend))(
      `${backend}: a program of the room cannot take the launcher's socket and forge another program's exit`,
      async () => {
        const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", backend] });
        const ws = confDir("kra-forge");
        writeFileSync(join(ws, "forge.py"), FORGE);
        writeFileSync(join(ws, "slow.py"), SLOW);
        const r = await s.shell({
          // The forger starts once its victim runs (a fixed sleep here let a loaded machine start them the other way).
          command: `python3 slow.py | { read -r started; python3 forge.py; }; echo slow=\${PIPESTATUS[0]}`,
          workdir: ws,
          login: false,
          timeout_ms: 20_000,
        });
        // Found: "slow=42" after ~1 s (slow.py never finished: the call ended and its room was shut).
        expect(r.out.output).toContain("slow=7");
        // The attack ran: both programs were escalated into the same kept room (the forger beside its victim).
        const programs = escalations(s.stderr()).filter((e) => e.argv[0] === "python3");
        const [slow, forge] = ["slow.py", "forge.py"].map((f) => programs.find((e) => e.argv[1] === f));
        expect({ slow: slow?.argv[1], forge: forge?.argv[1], room: forge?.room }).toEqual({
          slow: "slow.py",
          forge: "forge.py",
          room: backend,
        });
        expect(forge!.kept).toBeDefined();
        expect(forge!.kept).toBe(slow!.kept!);
      },
      60_000,
    );

  test.skipIf(noKeptRooms("landlock"))(
    "landlock without a cgroup: a program of the room cannot kill its launcher and outlive the call",
    async () => {
      const s = await serveWithPid({ rules: RULES, args: ["--sandbox-backend", "landlock"], env: { SHELLMCP_NO_CGROUP: "1" } });
      const ws = confDir("kra-kill");
      const marker = `35${Math.floor(Math.random() * 1e6)}`;
      writeFileSync(join(ws, "k.py"), KILL_PARENT(marker));
      const r = await s.shell({ command: `python3 k.py; echo rc=$?; sleep 1`, workdir: ws, login: false, timeout_ms: 20_000 });
      // The attack ran: k.py was escalated into a kept Landlock room (the launcher it tries to kill is its parent).
      expect(escalations(s.stderr()).find((e) => e.argv[1] === "k.py")).toMatchObject({ room: "landlock", kept: expect.any(Number) });
      // Its `sleep` is gone once the call has ended and taken its room: waited for (a loaded machine), then judged.
      await waitFor(() => pidsWith(`sleep\0${marker}`).length === 0, 5000);
      const left = pidsWith(`sleep\0${marker}`);
      for (const p of left) process.kill(p, "SIGKILL");
      // Found: "launcher killed", rc=126, and the sleep alive after the call (reparented to the host's init).
      expect({ left, out: r.out.output }).toEqual({ left: [], out: expect.not.stringContaining("launcher killed") });
    },
    60_000,
  );
});
