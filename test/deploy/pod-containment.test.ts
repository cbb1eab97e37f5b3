/**
 * The containment suite's scenarios (test/security/containment/scenarios.ts: escape, persistence, exfiltration,
 * denial of service, secret discovery, local privilege) against `serve` in the pod made on this machine (./pod.ts:
 * uid 65532 without passwd entry, no capabilities, no_new_privs, read-only root, new user namespaces refused), where
 * `auto` runs every command under Landlock + seccomp (issue 44). Both client kinds: Codex-style (sandbox state per
 * session) and plain (`--sandbox workspace-write --cd`). The workspace, the outside folder and CODEX_HOME belong to
 * the pod's uid, so only shellmcp's sandbox — not file permissions — stands between a command and them. Judged by the
 * effect on the host, as the suite does. The pod shares the host's pid namespace here (a scenario names the server's
 * pid to its command and checks it from the host); a real pod has its own, which only hides more.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { confDir, oneCommitRepo, withDeadline } from "../helpers/attack.ts";
import { startServe } from "../helpers/mcp.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { PATCHED_SHELLS_DIR, shellsMissing } from "../helpers/shells.ts";
import { assertOutside } from "../helpers/test-dirs.ts";
import { SCENARIOS, type Target } from "../security/containment/scenarios.ts";
import { makePod, podMissing, POD_UID } from "./pod.ts";

/** The host pid of the program bwrap (`pid`) runs: its only child (bwrap without a pid namespace forks once). */
function childOf(pid: number): number {
  const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  if (kids.length !== 1) throw new Error(`bwrap ${pid} has ${kids.length} children`);
  return kids[0]!;
}

const missing = podMissing() ?? shellsMissing() ?? toolMissing("git", "python3");

describe.skipIf(skipWithout("containment suite in the pod", missing))(
  "containment suite in a pod-like confinement (Landlock by auto)",
  () => {
    for (const s of SCENARIOS)
      for (const client of ["codex", "plain"] as const)
        test(`${s.category}: ${s.id} (${client} client): held`, async () => {
          const pod = makePod();
          const ws = oneCommitRepo(confDir("pod-contain-ws"));
          const outside = assertOutside(confDir("pod-contain-outside"));
          const home = confDir("pod-contain-home");
          const env = { HOME: home, CODEX_HOME: home, SHELLMCP_SHELLS_DIR: PATCHED_SHELLS_DIR, LC_ALL: "C", ...s.env };
          // Everything the scenario touches belongs to the pod's uid: only the sandbox holds.
          for (const d of [ws, outside, home]) expect(Bun.spawnSync(["chown", "-R", `${POD_UID}:${POD_UID}`, d]).exitCode).toBe(0);
          const args = client === "plain" ? ["--sandbox", "workspace-write", "--cd", ws] : [];
          const server = await startServe({
            codexHome: home,
            ...(s.rules !== undefined ? { rules: s.rules } : {}),
            command: [...pod.argv(env, { binds: [CONF_BASE], hostPid: true }), ensureBinary()],
            args,
            cwd: ws,
          });
          try {
            if (client === "codex") await server.sandboxState({ type: "workspace-write", network_access: false }, ws);
            const t: Target = {
              ws,
              outside,
              home,
              pid: childOf((server.client.transport as unknown as { pid: number }).pid),
              run: async (command, timeoutMs = 20_000) =>
                (await server.shell({ command, workdir: ws, login: false, timeout_ms: timeoutMs })).out,
            };
            // The pod runs commands at all (a refused call would make every attack look held).
            expect((await t.run("echo alive; id -u")).output).toStartWith(`alive\n${POD_UID}\n`);
            const v = await s.attack(t);
            expect({ scenario: s.id, client, ...v }).toEqual({ scenario: s.id, client, held: true, detail: v.detail });
            expect(server.stderr()).toContain("commands run under Landlock");
          } finally {
            await withDeadline(server.close(), 10_000, "close").catch(() => undefined);
            pod.remove();
            for (const d of [ws, outside, home]) rmSync(d, { recursive: true, force: true });
          }
        }, 120_000);
  },
);
