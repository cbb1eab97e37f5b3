/**
 * Issue 34, item 7d: every early exit of a call's start-up (runCommand) and of planning its bubblewrap sandbox
 * (planBwrap) gives back what was acquired before it: the call's cgroup folder, the host mount points made for
 * missing protected paths (an empty `.codex` in the workspace), the output pipe, the listener and the bridges' fds.
 *
 * Through the compiled `serve` and a real MCP client: a real refusal (a symlinked `.git`, refused after the missing
 * `.codex` mount point was made), then each step made to fail (`SHELLMCP_FAULT_INJECT`, src/fault-injection.ts) on
 * three calls in a row, under bubblewrap and Landlock. Judged on the host: no `.codex` left in the workspace, no
 * `call-<n>` folder left in the server's cgroup, and the server holds no more fds after the third call than after
 * the first.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, fdCount, serveWithPid, type AttackSession } from "../helpers/attack.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

/** The `call-<n>` folders of server `pid`'s per-call cgroups (`<its cgroup>/shellmcp-<pid>`), or undefined without. */
function callCgroups(pid: number): string[] | undefined {
  const mount = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" - "))
    .find(([, tail]) => tail?.startsWith("cgroup2 "))?.[0]
    ?.split(" ");
  const line = readFileSync(`/proc/${pid}/cgroup`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("0::"));
  if (mount === undefined || line === undefined) return undefined;
  const rel = mount[3] === "/" ? line.slice(3) : line.slice(3).slice(mount[3]!.length);
  const base = join(mount[4]!, rel, `shellmcp-${pid}`);
  if (!existsSync(base)) return undefined;
  return readdirSync(base).filter((n) => n.startsWith("call-"));
}

/** Call `echo hi` in `ws`: the outcome as text (a tool result's output, or the protocol error's message). */
async function attempt(s: AttackSession, ws: string): Promise<string> {
  try {
    const r = await s.shell({ command: "echo hi", workdir: ws, login: false, timeout_ms: 20_000 });
    return `exit ${r.out.exit_code}: ${r.out.output}`;
  } catch (e) {
    return `error: ${(e as Error).message}`;
  }
}

describe.skipIf(skipWithout("early exits suite", shellsMissing() ?? toolMissing("bwrap")))(
  "item 7d: early exits release what they hold",
  () => {
    test("bwrap: a symlinked .git is refused after the .codex mount point was made; the mount point is removed", async () => {
      const s = await serveWithPid({ args: ["--sandbox-backend", "bwrap"] });
      const ws = confDir("early-link");
      symlinkSync(confDir("early-link-target"), join(ws, ".git"));
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
      const out = await attempt(s, ws);
      expect(out).toContain("symlink");
      expect(readdirSync(ws)).toEqual([".git"]);
      expect(lstatSync(join(ws, ".git")).isSymbolicLink()).toBe(true);
    }, 60_000);

    for (const backend of ["bwrap", "landlock"] as const)
      for (const step of ["bwrap_mounts", "call_cgroup", "call_listen", "call_spawn"] as const) {
        if (backend === "landlock" && step === "bwrap_mounts") continue;
        test(`${backend}, ${step} fails: nothing of the call is left`, async () => {
          const s = await serveWithPid({ args: ["--sandbox-backend", backend], env: { SHELLMCP_FAULT_INJECT: step } });
          const ws = confDir("early-ws");
          expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
          const first = await attempt(s, ws);
          expect(first).toContain("injected fault");
          const fds = fdCount(s.pid);
          for (let i = 0; i < 2; i++) expect(await attempt(s, ws)).toContain("injected fault");
          expect({ workspace: readdirSync(ws), cgroups: callCgroups(s.pid) ?? [], fdGrowth: fdCount(s.pid) - fds }).toEqual({
            workspace: [],
            cgroups: [],
            fdGrowth: 0,
          });
        }, 60_000);
      }
  },
);
