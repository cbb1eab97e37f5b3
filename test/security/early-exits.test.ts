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
import { lstatSync, readdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { callCgroups, closeAll, confDir, echoHi, fdCount, SERVER_PROC_HIDDEN, serveWithPid } from "../helpers/attack.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

/** The server's fds are counted only where this process may list them (root); elsewhere that check is skipped, said. */
const fdsHidden = skipWithout("early exits suite: the server's fd count", SERVER_PROC_HIDDEN);

describe.skipIf(skipWithout("early exits suite", shellsMissing() ?? toolMissing("bwrap")))(
  "item 7d: early exits release what they hold",
  () => {
    test("bwrap: a symlinked .git is refused after the .codex mount point was made; the mount point is removed", async () => {
      const s = await serveWithPid({ args: ["--sandbox-backend", "bwrap"] });
      const ws = confDir("early-link");
      symlinkSync(confDir("early-link-target"), join(ws, ".git"));
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
      const out = await echoHi(s, ws);
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
          const first = await echoHi(s, ws);
          expect(first).toContain("injected fault");
          const fds = fdsHidden ? 0 : fdCount(s.pid);
          for (let i = 0; i < 2; i++) expect(await echoHi(s, ws)).toContain("injected fault");
          expect({
            workspace: readdirSync(ws),
            cgroups: callCgroups(s.pid),
            ...(fdsHidden ? {} : { fdGrowth: fdCount(s.pid) - fds }),
          }).toEqual({
            workspace: [],
            cgroups: [],
            ...(fdsHidden ? {} : { fdGrowth: 0 }),
          });
        }, 60_000);
      }
  },
);
