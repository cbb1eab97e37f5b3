/**
 * The escalation worker's copy of a call's output pipe, released by the main thread while the real worker starts an
 * escalated program that was handed a terminal (src/escalate/worker/output-gate.ts, src/escalate/worker/sessions.ts
 * `withOutput`, src/escalate/server.ts `releaseOutput`). A patched bash inside a pty (python's `pty.spawn`) execs an
 * escalated `sh`; the worker replaces its terminal stdout with a copy of the call's output pipe, or /dev/null once
 * released. The main thread releases at varied moments — before the worker has even taken the listener, right after
 * the decision, and spinning until the worker holds the fd (the slot reads BORROWED) — then at once opens "secret"
 * files, which take the freed fd number when the release closed it. Judged by host effects, every round: the
 * escalated program's stdout is the call's own pipe or /dev/null (never a secret file or anything else), each secret
 * fd is still open and still the secret (no double close), and the listener's slot is reused across rounds.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, openSync, readFileSync, readSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as libc from "../../ffi/libc.ts";
import type { Placement, Placed, EscalatedExec } from "../../src/escalate/placement.ts";
import { EscalationServer } from "../../src/escalate/server.ts";
import { ensureBinary, tempDir } from "../helpers/binary.ts";
import { openBoundary, ourWrapper } from "../helpers/escalation.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { patchedShell, shellsMissing } from "../helpers/shells.ts";

const skip = skipWithout("output release race", shellsMissing() ?? (existsSync("/usr/bin/python3") ? undefined : "python3 not installed"));

/** Places every escalated exec on the host as a room would: terminals on 0–2 are not passed (`noTerminals`). */
class HostRoomPlacement implements Placement {
  async prepareEscalatedExec(exec: EscalatedExec): Promise<Placed> {
    const env = Object.entries(exec.request.env).map(([k, v]) => `${k}=${v}`);
    return { spawn: { path: exec.request.file, argv: exec.request.argv, env, cwd: exec.request.workdir, setsid: true, noTerminals: true } };
  }
}

let server: EscalationServer;
beforeAll(async () => {
  ensureBinary();
  server = await EscalationServer.start(new HostRoomPlacement());
});
afterAll(async () => {
  await server?.stop();
});

const BORROWED = 1;
const ROUNDS = 240;

/** What fd `fd` of this process is now ("closed" when it is not open). */
function fdPath(fd: number): string {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return "closed";
  }
}

/** What is in the non-blocking pipe `fd` now, as text ("" when empty). */
function drain(fd: number): string {
  const buf = Buffer.alloc(65536);
  try {
    return buf.subarray(0, readSync(fd, buf)).toString();
  } catch {
    return ""; // EAGAIN: nothing written
  }
}

test.skipIf(skip)(
  `the worker's copy of the output pipe, released while an escalated program starts: its stdout is the call's pipe or /dev/null, and no fd opened after the release is touched (${ROUNDS} rounds)`,
  async () => {
    const dir = tempDir();
    const secret = join(dir, "secret");
    writeFileSync(secret, "SECRET\n");
    const slots = new Int32Array(server.gates.buffer);
    const seen = { pipe: 0, devnull: 0, borrowedAtRelease: 0, noReport: 0 };
    const gatesUsed = new Set<number>();
    for (let round = 0; round < ROUNDS; round++) {
      const mode = round % 3; // 0: release before the worker saw the listener; 1: soon after the decision; 2: while borrowed
      const linkFile = join(dir, `link-${round}`);
      const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
      libc.setNonblock(r, true);
      const ownPipe = readlinkSync(`/proc/self/fd/${r}`);
      const secrets: number[] = [];
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        if (listener.gate !== undefined && Atomics.load(slots, listener.gate) === BORROWED) seen.borrowedAtRelease++;
        listener.releaseOutput();
        // Whatever number the release freed is taken at once by files the escalated program must never get.
        for (let i = 0; i < 6; i++) secrets.push(openSync(secret, "r"));
      };
      const listener = server.listen({
        boundary: openBoundary({ PATH: "/usr/bin:/bin" }),
        outputFd: w,
        decide: async (req) => {
          if (!req.file.endsWith("/sh")) return { kind: "Run" };
          if (mode === 1) setTimeout(release, round % 2);
          if (mode === 2)
            setTimeout(() => {
              // Spin (bounded) until the worker holds the fd, then release under it.
              const t0 = performance.now();
              while (Atomics.load(slots, listener.gate!) !== BORROWED && performance.now() - t0 < 200);
              release();
            }, 0);
          return { kind: "Escalate" };
        },
      });
      if (listener.gate !== undefined) gatesUsed.add(listener.gate);
      if (mode === 0) release();
      const inner = `sh -c 'readlink /proc/self/fd/9 9>&1 > ${linkFile}; echo MARK-${round}'`;
      const program = `import pty, sys\npty.spawn([sys.argv[1], "-c", sys.argv[2]])\n`;
      const env = { PATH: "/usr/bin:/bin", HOME: "/nonexistent-home", LC_ALL: "C", ...listener.shellEnv(ourWrapper(), 3) };
      const p = Bun.spawn(
        [patchedShell("bash"), "-c", `python3 -c '${program}' "$BASH" "${inner.replaceAll('"', '\\"')}" > /dev/null 2>&1`],
        {
          env,
          stdio: ["ignore", "ignore", "pipe", listener.clientFd],
        },
      );
      listener.releaseClientFd();
      const stderr = await new Response(p.stderr).text();
      await p.exited;
      release();
      await listener.close();
      // Judged on the host.
      const link = existsSync(linkFile) ? readFileSync(linkFile, "utf8").trim() : undefined;
      if (link === undefined) seen.noReport++;
      else if (link === "/dev/null") seen.devnull++;
      else {
        // The call's own pipe, and the program's output reached it.
        expect({ round, link, stderr, output: drain(r) }).toEqual({ round, link: ownPipe, stderr, output: `MARK-${round}\n` });
        seen.pipe++;
      }
      for (const fd of secrets) expect({ round, fd, is: fdPath(fd) }).toEqual({ round, fd, is: secret });
      secrets.forEach(libc.closeQuiet);
      libc.closeQuiet(r);
      rmSync(linkFile, { force: true });
    }
    console.log(`output release race: ${JSON.stringify(seen)}; slots used: ${gatesUsed.size}`);
    // The rounds ran: most escalated programs reported, through both outcomes.
    expect(seen.noReport).toBeLessThan(ROUNDS / 10);
    expect(seen.pipe).toBeGreaterThan(0);
    expect(seen.devnull).toBeGreaterThan(0);
  },
  240_000,
);
