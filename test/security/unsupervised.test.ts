/**
 * Issue 34, item 7e: an escalated program (or a kept room) whose pidfd the escalation worker cannot open must not run
 * on unsupervised — nothing would reap it, signal it, or end it with its call. The failure is injected
 * (`SHELLMCP_FAULT_INJECT=pidfd_open`, src/fault-injection.ts), per-call cgroups are off (`SHELLMCP_NO_CGROUP=1`: the
 * cgroup would otherwise kill it at the end of the call and hide the leak), and an allowed `python3` that ignores
 * SIGTERM and sleeps is escalated: into a kept room, and into a room of its own (`SHELLMCP_ROOM_LAUNCHER=off`), under
 * bubblewrap and Landlock. The escalation must fail closed (python3 does not report success), the server must answer
 * the next call, and once the call has ended nothing started for it may remain (found by marker in argv or by its
 * working folder, the call's unique workspace).
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { closeAll, confDir, describePids, serveWithPid, waitFor } from "../helpers/attack.ts";
import { killMarked, marked } from "../helpers/marked.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const RULES = 'prefix_rule(pattern=["python3"], decision="allow")\n';

describe.skipIf(skipWithout("unsupervised escalation suite", shellsMissing() ?? toolMissing("bwrap", "python3")))(
  "item 7e: a child the worker cannot supervise is stopped",
  () => {
    for (const backend of ["bwrap", "landlock"] as const)
      for (const kept of [true, false])
        test(`${backend}, ${kept ? "kept room" : "a room of its own"}: fails closed, nothing left`, async () => {
          const s = await serveWithPid({
            rules: RULES,
            args: ["--sandbox-backend", backend],
            env: { SHELLMCP_FAULT_INJECT: "pidfd_open", SHELLMCP_NO_CGROUP: "1", ...(kept ? {} : { SHELLMCP_ROOM_LAUNCHER: "off" }) },
          });
          const ws = confDir("unsup-ws");
          const n = `3006.${process.pid}${Math.floor(Math.random() * 1e6)}`;
          cleanups.push(() => killMarked([n, ws], ws));
          const py = `import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print("RAN", flush=True); time.sleep(${n})`;
          const r = await s.shell({ command: `python3 -c '${py}'; echo rc=$?`, workdir: ws, login: false, timeout_ms: 30_000 });
          expect(r.out.output).not.toContain("RAN");
          expect(r.out.output).not.toContain("rc=0");
          // The server still answers.
          expect((await s.shell({ command: "echo alive", workdir: ws, login: false, timeout_ms: 30_000 })).out.output).toBe("alive\n");
          await waitFor(() => marked([n, ws], ws).length === 0, 10_000); // generous: a loaded CI machine
          const left = marked([n, ws], ws);
          if (left.length > 0) console.log(`survivors:\n${describePids(left)}\noutput: ${r.out.output}`);
          expect(left).toEqual([]);
        }, 60_000);
  },
);
