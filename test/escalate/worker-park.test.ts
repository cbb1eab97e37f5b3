/**
 * Parking the real escalation worker (src/escalate/worker/port.ts) between shell runs: patched bash → compiled
 * wrapper → our server, whose worker is parked and started again. Each shell run after a park is decided by a new
 * worker exactly as before (Run, Escalate, Deny); a park is refused while anything of the worker is open (an
 * escalated program of an ended run still running); parks and restarts leave no fd or thread behind.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import type { EscalateAction as Decision } from "../../src/escalate/protocol/wire.ts";
import { EscalationServer, type EscalationListener } from "../../src/escalate/server.ts";
import { BoundaryPlacement, type Placement } from "../../src/escalate/placement.ts";
import type { ResolvedRequest } from "../../src/escalate/decision/request.ts";
import { ensureBinary, tempDir } from "../helpers/binary.ts";
import { openBoundary, runInShell } from "../helpers/escalation.ts";
import * as libc from "../../ffi/libc.ts";
import { FAIL_FLAG } from "../fixtures/worker-fails-after-park.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const skip = skipWithout("escalation worker parking", shellsMissing());
const servers: EscalationServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
});

const basename = (p: string) => p.slice(p.lastIndexOf("/") + 1);
/** `sh` escalates, `touch` is denied, everything else runs in place. */
const decide = (r: ResolvedRequest): Decision =>
  basename(r.file) === "sh"
    ? { kind: "Escalate" }
    : basename(r.file) === "touch"
      ? { kind: "Deny", reason: "forbidden here" }
      : { kind: "Run" };

/** This process's threads named `Worker` (Bun's worker threads, ours and any another test left ending): their tids. */
const workerTids = () =>
  readdirSync("/proc/self/task").filter((t) => {
    try {
      return readFileSync(`/proc/self/task/${t}/comm`, "utf8").trim() === "Worker";
    } catch {
      return false; // a thread that ended since the listing (a parked worker)
    }
  });
/** Worker threads started since `before` that still run (this test's workers and inspectors). */
const workersSince = (before: string[]) => workerTids().filter((t) => !before.includes(t)).length;
const fds = () => readdirSync("/proc/self/fd").length;

async function until(ok: () => boolean, ms = 10_000): Promise<void> {
  for (const end = performance.now() + ms; !ok(); await Bun.sleep(10)) if (performance.now() > end) throw new Error("timed out waiting");
}

async function start(): Promise<EscalationServer> {
  ensureBinary();
  const s = await EscalationServer.start(new BoundaryPlacement());
  servers.push(s);
  return s;
}

describe.skipIf(skip)("escalation worker parking (patched bash, compiled wrapper, real worker)", () => {
  test("after each of 8 parks a new worker decides the next run as before (Run, Escalate, Deny); no fd or thread is left", async () => {
    const before = workerTids();
    const s = await start();
    const dir = tempDir();
    let baseline = 0;
    for (let i = 0; i < 8; i++) {
      const r = await runInShell(s, { script: `/bin/echo run-${i}; sh -c 'echo esc-$$'; /usr/bin/touch ${dir}/t${i}; echo rc=$?`, decide });
      expect(r.stdout).toMatch(new RegExp(`^run-${i}\\nesc-\\d+\\nrc=1\\n$`));
      expect(r.stderr).toBe("Execution denied: forbidden here\n");
      expect(existsSync(join(dir, `t${i}`))).toBe(false);
      expect(await s.park()).toBe(true);
      await until(() => workersSince(before) === 0);
      if (i === 1) baseline = fds();
      if (i > 1) expect(fds()).toBe(baseline);
    }
  }, 120_000);

  test("a program of this executable (a Landlock room's helper) escalated after each of 8 parks leaves no fd behind", async () => {
    // The Landlock backend's rooms run this executable (/proc/self/exe: from source, bun) as the sandbox helper; the
    // worker opens it once to hand it to the guard. Each worker opened its own copy and none closed it.
    ensureBinary();
    const selfExe: Placement = {
      prepareEscalatedExec: async () => ({
        spawn: { path: "/proc/self/exe", argv: ["bun", "--version"], env: ["PATH=/usr/bin:/bin"], cwd: "/", setsid: true },
      }),
    };
    const s = await EscalationServer.start(selfExe);
    servers.push(s);
    const selfFds = () =>
      readdirSync("/proc/self/fd").filter((f) => {
        try {
          return readlinkSync(`/proc/self/fd/${f}`) === readlinkSync("/proc/self/exe");
        } catch {
          return false;
        }
      }).length;
    let baseline = 0;
    for (let i = 0; i < 8; i++) {
      const r = await runInShell(s, { script: "sh -c 'exit 3'; echo rc=$?", decide });
      expect(r.stdout).toMatch(/^\d+\.\d+\.\d+\nrc=0\n$/); // bun's version: the program of this executable ran
      expect(await s.park()).toBe(true);
      if (i === 0) baseline = selfFds();
      else expect(selfFds()).toBe(baseline);
    }
  }, 120_000);

  test("a run that starts while the park waits is served by the next worker", async () => {
    const s = await start();
    await runInShell(s, { script: "/bin/true", decide });
    const parked = s.park();
    const r = await runInShell(s, { script: "sh -c 'echo escalated'", decide });
    expect(await parked).toBe(true);
    expect(r.stdout).toBe("escalated\n");
    expect(r.exitCode).toBe(0);
  }, 60_000);

  test("refused while an escalated program of an ended run still runs; parked once it has ended", async () => {
    const s = await start();
    const up = join(tempDir(), "up");
    // The shell ends once its escalated program runs (it wrote `up`); that program runs on.
    const script = `sh -c 'echo up > ${up}; exec sleep 30' >/dev/null 2>&1 & while [ ! -s ${up} ]; do sleep 0.05; done; echo started`;
    const r = await runInShell(s, { script, decide, keepOpen: true });
    expect(r.stdout).toBe("started\n");
    // The run's listener closes without killing its escalated program (the worker keeps its session).
    await s.unlisten(r.listener.id, false);
    expect(await s.park()).toBe(false);
    r.listener.signalChildren(9);
    let parked = false;
    for (let i = 0; i < 100 && !parked; i++) {
      parked = await s.park();
      if (!parked) await Bun.sleep(50);
    }
    expect(parked).toBe(true);
  }, 60_000);

  test("a decision that comes after the park (its run ended meanwhile) never answers an exec of the next worker", async () => {
    // Run A's `touch` waits for a human (a prompt) while A ends; the worker parks; run B's first exec, in a new
    // worker, waits for its own answer (a Deny) when A's late answer (Run) comes in. Session ids of the new worker
    // start again from 1, so A's answer named B's exec: B's forbidden `touch` ran.
    const s = await start();
    const dir = tempDir();
    let answerA!: (d: Decision) => void;
    let askedA!: () => void;
    const aAsked = new Promise<void>((r) => (askedA = r));
    const decideA = (r: ResolvedRequest): Decision | Promise<Decision> =>
      basename(r.file) === "touch"
        ? new Promise<Decision>((res) => {
            answerA = res;
            askedA();
          })
        : { kind: "Run" };
    let listenerA!: EscalationListener;
    const a = runInShell(s, { script: `/usr/bin/touch ${dir}/a; echo rc=$?`, decide: decideA, onSpawn: (_, l) => (listenerA = l) });
    await aAsked;
    // A's call ends (its timeout, a cancel) while the question is open: its listener closes, its exec fails closed.
    await listenerA.close();
    expect((await a).stdout).toBe("rc=1\n");
    expect(await s.park()).toBe(true);
    const decideB = async (r: ResolvedRequest): Promise<Decision> => {
      if (basename(r.file) !== "touch") return { kind: "Run" };
      answerA({ kind: "Run" }); // the human answers A's question now
      await new Promise((res) => setTimeout(res, 0)); // A's answer is on its way to the worker before B's
      return { kind: "Deny", reason: "forbidden here" };
    };
    const b = await runInShell(s, { script: `/usr/bin/touch ${dir}/b; echo rc=$?`, decide: decideB });
    expect(b.stderr).toBe("Execution denied: forbidden here\n");
    expect(b.stdout).toBe("rc=1\n");
    expect(existsSync(join(dir, "b"))).toBe(false);
  }, 60_000);

  test("session ids go on across parks: no two execs of the server's life share one", async () => {
    // A decision names its session by id only, and one may still be on its way when its run ends and the worker
    // parks (decided, then placed: the placement takes its time). Each new worker started again from 1.
    const sessions: number[] = [];
    const recording: Placement = {
      prepareEscalatedExec: async (e) => (sessions.push(e.session), { inside: "recorded" }),
    };
    const s = await EscalationServer.start(recording);
    servers.push(s);
    for (let i = 0; i < 3; i++) {
      const r = await runInShell(s, { script: "sh -c 'echo ran'", decide });
      expect(r.stdout).toBe("ran\n");
      expect(await s.park()).toBe(true);
    }
    expect(sessions.length).toBe(3);
    expect(new Set(sessions).size).toBe(3);
  }, 60_000);

  test("a decision that comes after its run ended places nothing and starts no worker", async () => {
    // The human answers (Escalate) after the run ended and the worker parked: nothing is left to answer. The answer
    // was placed (a room built for an ended call, whose mount points nothing gives back) and sent, starting a worker
    // that then stays up with nothing to do (no call ends to park it again).
    const before = workerTids();
    let placed = 0;
    const counting: Placement = {
      prepareEscalatedExec: async () => (placed++, { inside: "counted" }),
    };
    const s = await EscalationServer.start(counting);
    servers.push(s);
    let answer!: (d: Decision) => void;
    let asked!: () => void;
    const isAsked = new Promise<void>((r) => (asked = r));
    let listener!: EscalationListener;
    const run = runInShell(s, {
      script: "sh -c 'echo never'; echo rc=$?",
      decide: () =>
        new Promise<Decision>((res) => {
          answer = res;
          asked();
        }),
      onSpawn: (_, l) => (listener = l),
    });
    await isAsked;
    await listener.close();
    expect((await run).stdout).toBe("rc=1\n");
    expect(await s.park()).toBe(true);
    await until(() => workersSince(before) === 0);
    answer({ kind: "Escalate" });
    await new Promise((r) => setTimeout(r, 0)); // the late decision's own steps (microtasks) have all run
    expect(placed).toBe(0);
    expect(workersSince(before)).toBe(0);
  }, 60_000);

  test("a listener whose worker cannot start again (out of fds) is not left open: the worker parks again later", async () => {
    // Two fds left: the listener's own socket pair is made, the new worker's control socket is not.
    const s = await EscalationServer.start({ prepareEscalatedExec: async () => ({ inside: "no rooms here" }) });
    servers.push(s);
    expect(await s.park()).toBe(true);
    const before = fds();
    const filler: number[] = [];
    let refused: unknown;
    try {
      for (;;) filler.push(libc.fcntl(0, libc.SOCK.F_DUPFD_CLOEXEC, 0));
    } catch {
      // EMFILE: every fd is taken
    }
    try {
      libc.closeQuiet(filler.pop()!);
      libc.closeQuiet(filler.pop()!);
      s.listen({ decide, boundary: openBoundary() });
    } catch (e) {
      refused = e;
    } finally {
      filler.forEach(libc.closeQuiet);
    }
    expect(String(refused)).toContain("Too many open files"); // the call fails closed, saying why
    expect(fds()).toBe(before);
    expect(await s.park()).toBe(true);
    const r = await runInShell(s, { script: "sh -c 'echo escalated'", decide });
    expect(r.stdout).toBe("escalated\n");
  }, 60_000);

  test("a worker that fails as it starts again: the run waiting for it fails closed at once; the next run starts one anew", async () => {
    // A parked worker that cannot start again (its thread fails as it starts) never reads the listener of the run
    // that started it: the shell's wrapper waited on its handshake forever (in serve: until the call's timeout).
    ensureBinary();
    const s = await EscalationServer.start(
      new BoundaryPlacement(),
      new URL("../fixtures/worker-fails-after-park.ts", import.meta.url).href,
    );
    servers.push(s);
    expect((await runInShell(s, { script: "/bin/echo one", decide })).stdout).toBe("one\n");
    expect(await s.park()).toBe(true);
    const slots = new Int32Array(s.gates.buffer);
    Atomics.store(slots, slots.length - 1, FAIL_FLAG); // the next worker fails
    const r = await runInShell(s, { script: "/bin/echo two; echo rc=$?", decide });
    expect(r.stdout).toBe("rc=1\n");
    // Fails closed either way: the socket closed before the wrapper's handshake, or while it waited for the answer.
    expect(r.stderr).toMatch(/failed to (send handshake datagram|receive EscalateResponse)/);
    // Parked again: the next run tries anew (a limit hit for a moment does not refuse every later call).
    Atomics.store(slots, slots.length - 1, 0);
    const next = await runInShell(s, { script: "/bin/echo three; sh -c 'echo escalated'", decide });
    expect(next.stdout).toBe("three\nescalated\n");
    expect(next.stderr).toBe("");
  }, 30_000);

  test("refused while a listener is open", async () => {
    const s = await start();
    const r = await runInShell(s, { script: "/bin/true", decide, keepOpen: true });
    expect(await s.park()).toBe(false);
    await r.listener.close();
    expect(await s.park()).toBe(true);
  }, 60_000);

  test("parked: the heap release and the stop answer at once, without starting a worker", async () => {
    const before = workerTids();
    const s = await start();
    expect(await s.park()).toBe(true);
    await until(() => workersSince(before) === 0);
    await s.releaseHeap();
    await s.stop();
    expect(workersSince(before)).toBe(0);
  }, 60_000);
});
