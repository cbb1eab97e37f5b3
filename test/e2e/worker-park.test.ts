/**
 * The escalation worker parks while `serve` is idle and starts again with the next call (issue 40, idle memory;
 * src/escalate/worker/port.ts), through the compiled binary and the SDK client: the rules still decide every exec
 * after each restart (a forbidden `touch` is denied and never runs, the other programs run), on workspace-write.
 * `SHELLMCP_WORKER_PARK_MS` shortens the park's delay after a call; the server's debug log says when it parks and
 * starts again.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../helpers/mcp.ts";
import { homeDir } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const skip = skipWithout("worker parking (binary)", shellsMissing());
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close();
});

/** Until `ok()` holds (every 20 ms, up to `ms`); throws with `what` when it never does. */
async function until(ok: () => boolean, what: string, ms = 20_000): Promise<void> {
  for (const end = performance.now() + ms; !ok(); await Bun.sleep(20)) if (performance.now() > end) throw new Error(`timed out: ${what}`);
}

const count = (text: string, needle: string) => text.split(needle).length - 1;
const PARKED = "escalation worker parked";
const STARTED = "escalation worker started again";

describe.skipIf(skip)("serve parks its escalation worker when idle", () => {
  test("after start-up and after each call it parks; the next call's execs are decided by the rules as before", async () => {
    const home = homeDir();
    const ws = homeDir("shellmcp-ws-");
    const s = await startServe({
      codexHome: home,
      rules: 'prefix_rule(pattern=["touch"], decision="forbidden")\n',
      env: { SHELLMCP_WORKER_PARK_MS: "300", SHELLMCP_LOG: "debug" },
    });
    sessions.push(s);
    await s.sandboxState({ type: "workspace-write", network_access: false }, ws);
    await until(() => s.stderr().includes(PARKED), "the park after start-up");
    for (let i = 1; i <= 3; i++) {
      const r = await s.shell({ command: `touch t${i}; echo rc=$?; /bin/echo ran-${i} > out${i}; cat out${i}`, workdir: ws, login: false });
      expect(r.out.output).toContain("Execution denied: Execution forbidden by policy");
      expect(r.out.output).toContain("rc=1");
      expect(r.out.output).toContain(`ran-${i}`);
      expect(existsSync(join(ws, `t${i}`))).toBe(false);
      expect(count(s.stderr(), STARTED)).toBe(i);
      await until(() => count(s.stderr(), PARKED) === i + 1, `park ${i + 1}`);
    }
  }, 120_000);
});
