/**
 * Issue 33, part A: runCommand releases every resource of a call through one stack (src/shell/call-resources.ts
 * `CallResources`), whatever way its start-up ends. Each early exit is made to happen (`SHELLMCP_FAULT_INJECT`,
 * src/fault-injection.ts) in a call that acquires everything a call can: network proxy mode (under bubblewrap the
 * call's and the rooms' bridges, under Landlock the proxy's loopback listeners), a `[shellmcp.room_network]` domain
 * grant (a proxy of its own with its bridge or listener), a missing `.codex` made as a mount point (bubblewrap),
 * the call's cgroup, the output pipe, the escalation listener, the stopwatch.
 *
 * Through the compiled `serve` and a real MCP client, three calls in a row per step; judged on the host after the
 * third: no `.codex` left in the workspace (mount point), no `call-<n>` folder in the server's cgroup, no process
 * left below the server, nothing left in the server's TMPDIR (socket files, private folders), and the server holds
 * no more fds (pipes, sockets, listeners) than after the first.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { callCgroups, closeAll, confDir, echoHi, fdCount, SERVER_PROC_HIDDEN, serveWithPid, waitFor } from "../helpers/attack.ts";
import { agentNetworkConfig } from "../helpers/network.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

/** Every process below `pid` (children, their children…), as `pid comm`. */
function descendants(pid: number): string[] {
  const byParent = new Map<number, { pid: number; comm: string }[]>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${e}/stat`, "utf8");
    } catch {
      continue; // ended meanwhile
    }
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    byParent.set(ppid, [...(byParent.get(ppid) ?? []), { pid: Number(e), comm }]);
  }
  const out: string[] = [];
  const walk = (p: number) => {
    for (const c of byParent.get(p) ?? []) {
      out.push(`${c.pid} ${c.comm}`);
      walk(c.pid);
    }
  };
  walk(pid);
  return out;
}

/** A CODEX_HOME whose config gives the agent profile's network with example.com allowed, also to python3 in a room. */
function networkHome(): string {
  const codexHome = confDir("res-home");
  writeFileSync(
    join(codexHome, "config.toml"),
    agentNetworkConfig({
      allowLocalBinding: false,
      domains: { "example.com": "allow" },
      extra: '[shellmcp.room_network]\npython3 = ["example.com"]\n',
    }),
  );
  return codexHome;
}

/** What each injected step makes the call answer. */
const EXPECTED: Record<string, string> = {
  bwrap_mounts: "injected fault",
  call_bridge: "injected fault",
  call_grants: "injected fault",
  call_cgroup: "injected fault",
  call_listen: "injected fault",
  call_expired: "exit 124",
  call_spawn: "injected fault",
};

/** The server's fds are counted only where this process may list them (root); elsewhere that check is skipped, said. */
const fdsHidden = skipWithout("call resources suite: the server's fd count", SERVER_PROC_HIDDEN);
/** `{ fdGrowth }` of the server `pid` since it held `before` fds; nothing where they cannot be counted. */
const fdGrowth = (pid: number, before: number) => (fdsHidden ? {} : { fdGrowth: fdCount(pid) - before });
/** The server's fd count now (0 where it cannot be counted: {@link fdGrowth} then checks nothing). */
const fdsNow = (pid: number) => (fdsHidden ? 0 : fdCount(pid));
const noGrowth = fdsHidden ? {} : { fdGrowth: 0 };

describe.skipIf(skipWithout("call resources suite", shellsMissing() ?? toolMissing("bwrap")))(
  "every early exit of a call releases everything it acquired",
  () => {
    for (const backend of ["bwrap", "landlock"] as const)
      for (const step of Object.keys(EXPECTED)) {
        // Landlock calls make no mount points and no bridges (the proxy listens on the host's loopback).
        if (backend === "landlock" && (step === "bwrap_mounts" || step === "call_bridge")) continue;
        test(`${backend}, ${step}: nothing of the call is left`, async () => {
          const codexHome = networkHome();
          const tmp = confDir("res-tmp");
          const s = await serveWithPid({
            codexHome,
            args: ["--sandbox-backend", backend],
            env: { SHELLMCP_FAULT_INJECT: step, TMPDIR: tmp },
          });
          const ws = confDir("res-ws");
          expect(await s.sandboxState({ type: "workspace-write", network_access: true }, ws)).toEqual({});
          expect(await echoHi(s, ws)).toContain(EXPECTED[step]!);
          const fds = fdsNow(s.pid);
          const tmpBefore = readdirSync(tmp);
          for (let i = 0; i < 2; i++) expect(await echoHi(s, ws)).toContain(EXPECTED[step]!);
          expect({
            workspace: readdirSync(ws),
            cgroups: callCgroups(s.pid),
            processes: descendants(s.pid),
            tmp: readdirSync(tmp),
            ...fdGrowth(s.pid, fds),
          }).toEqual({ workspace: [], cgroups: [], processes: [], tmp: tmpBefore, ...noGrowth });
        }, 60_000);
      }

    test("control: the same call with no fault runs, under both backends, and leaves nothing either", async () => {
      for (const backend of ["bwrap", "landlock"] as const) {
        const codexHome = networkHome();
        const s = await serveWithPid({ codexHome, args: ["--sandbox-backend", backend] });
        const ws = confDir("res-ws");
        expect(await s.sandboxState({ type: "workspace-write", network_access: true }, ws)).toEqual({});
        expect(await echoHi(s, ws)).toStartWith("exit 0: hi");
        const fds = fdsNow(s.pid);
        await echoHi(s, ws);
        // The late releases (the cgroup emptied and removed) finish after the result: waited for, then judged.
        await waitFor(() => callCgroups(s.pid).length === 0 && descendants(s.pid).length === 0 && fdsNow(s.pid) === fds, 10_000, 20);
        expect({
          workspace: readdirSync(ws),
          cgroups: callCgroups(s.pid),
          processes: descendants(s.pid),
          ...fdGrowth(s.pid, fds),
        }).toEqual({
          workspace: [],
          cgroups: [],
          processes: [],
          ...noGrowth,
        });
      }
    }, 60_000);
  },
);
