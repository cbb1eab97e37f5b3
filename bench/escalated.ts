/**
 * Cost of one escalated exec (issue 21; target ≤ 1.5× the reference): N × `/bin/true` in one patched bash run, each
 * allowed by `prefix_rule(pattern=["true"], decision="allow")`, so each is decided Escalate, started, and waited for.
 *
 * - room (bwrap): our in-shell client → our EscalationServer → the program in its escalation room (bubblewrap with
 *   its own user, pid and ipc namespaces and /proc, the call's read-only plan plus the repository), as `serve` does:
 *   a kept room (src/sandbox/linux/room-launcher.ts), built by the first exec of the run and reused by the others;
 *   `SHELLMCP_ROOM_LAUNCHER=off` measures a room of its own per exec instead;
 * - room (landlock): the same with the Landlock backend (the compiled `dist/shellmcp` as the helper);
 * - host: the same with `escalation = "host"` (Codex's meaning: started directly), to show what the room costs;
 * - reference: Codex 0.97.0's codex-exec-mcp-server + its Rust wrapper + its bundled bash over MCP stdio, with the
 *   same rule (its escalated program runs on the host).
 * Per-exec cost = (time of the N-exec command − time of the same command with 0 execs) / N. Every variant and the
 * reference run in each round; ratios are medians of per-round ratios.
 *
 *   bun bench/escalated.ts [execs] [rounds]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EscalationServer } from "../src/escalate/server.ts";
import { BoundaryPlacement } from "../src/escalate/placement.ts";
import { policyFromSources } from "../src/execpolicy/load.ts";
import { decideExec, type EscalationSettings } from "../src/escalate/decision/decide.ts";
import { interceptSetFor } from "../src/escalate/decision/intercept-set.ts";
import { INTERCEPT_ENV_VAR } from "../src/escalate/protocol/wire.ts";
import { resolveCommand } from "../src/sandbox/linux/in-process.ts";
import { planSandboxPolicy } from "../src/sandbox/filesystem-plan.ts";
import type { RoomSpec } from "../src/escalate/rooms/plan.ts";
import { roomLauncherPath } from "../src/sandbox/linux/room-launcher.ts";
import { writableView } from "../src/sandbox/writable.ts";
import { startLineRpc } from "../test/helpers/reference.ts";
import { benchDir, median, pairedRatio, perExec, referenceShellToolDir, ROOT } from "./lib.ts";
import { patchedShell } from "../test/helpers/shells.ts";

// One "escalated" notice per exec would flood the output (and its write is not what is measured).
process.env.SHELLMCP_LOG ??= "warn";
const N = Number(process.argv[2] ?? 50);
const ROUNDS = Number(process.argv[3] ?? 7);
const loop = (n: number) => `for i in $(/usr/bin/seq 1 ${n}); do /bin/true; done`;
const RULES = 'prefix_rule(pattern=["true"], decision="allow")\n';

const dir = benchDir("shellmcp-bench-escalated-");
const work = join(dir, "work");
mkdirSync(work);
Bun.spawnSync(["git", "init", "-q", work]);
const bash = patchedShell("bash");
const policy = policyFromSources([{ path: "bench.rules", text: RULES }]);
const settings: EscalationSettings = { policy, codexHome: dir, preserveProgramPaths: false, onPrompt: "deny", memory: new Map() };
const readOnly = { type: "read-only" as const, access: { type: "full-access" as const }, network_access: false };
const bwrap = resolveCommand("bwrap");
if (bwrap === undefined) throw new Error("bench/escalated.ts needs bubblewrap (apt-get install bubblewrap)");
const room: RoomSpec = { backend: { kind: "bwrap", bwrap, noProc: false }, call: planSandboxPolicy(readOnly, work, {}), extraWritable: {} };

// The compiled binary's helper role (from source, this process's own command would be the bench itself).
const landlockRoom: RoomSpec = {
  ...room,
  backend: { kind: "landlock", helper: [join(ROOT, "dist", "shellmcp"), "--codex-run-as-linux-sandbox"] },
};

type Variant = "room" | "landlock" | "host";

async function oursOnce(server: EscalationServer, variant: Variant, script: string): Promise<number> {
  const baseEnv = { PATH: "/usr/bin:/bin" };
  const l = server.listen({
    decide: (r) => decideExec(settings, { paused: (f) => f() }, r),
    boundary: {
      baseEnv,
      writable: writableView(readOnly, work, variant === "landlock" ? "landlock" : "bwrap", {}),
      ...(variant === "room" ? { room } : variant === "landlock" ? { room: landlockRoom } : {}),
    },
  });
  const env = { ...baseEnv, ...l.shellEnv("/nonexistent-wrapper", 3), [INTERCEPT_ENV_VAR]: interceptSetFor(policy) };
  const t0 = Bun.nanoseconds();
  const p = Bun.spawn([bash, "-c", script], { cwd: work, env, stdio: ["ignore", "ignore", "ignore", l.clientFd] });
  l.releaseClientFd();
  await p.exited;
  const t = (Bun.nanoseconds() - t0) / 1e6;
  await l.close();
  if (p.exitCode !== 0) throw new Error(`${variant}: bash exited ${p.exitCode}`);
  return t;
}

async function startReference(): Promise<{ once: (script: string) => Promise<number>; close: () => Promise<void> } | undefined> {
  const ref = referenceShellToolDir();
  if (ref === undefined) return undefined;
  const home = join(dir, "codex-home");
  mkdirSync(join(home, "rules"), { recursive: true });
  writeFileSync(join(home, "rules", "default.rules"), RULES);
  const rpc = await startLineRpc(
    [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")],
    { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home },
  );
  await rpc.request("codex/sandbox-state/update", { sandboxPolicy: { type: "danger-full-access" }, sandboxCwd: work });
  const once = async (script: string) => {
    const t0 = Bun.nanoseconds();
    const r = (await rpc.request("tools/call", { name: "shell", arguments: { command: script, workdir: work, login: false } })) as {
      isError?: boolean;
    };
    if (r.isError === true) throw new Error(`reference: ${JSON.stringify(r)}`);
    return (Bun.nanoseconds() - t0) / 1e6;
  };
  return { once, close: () => rpc.close() };
}

const server = await EscalationServer.start(new BoundaryPlacement());
const reference = await startReference();
const variants: Variant[] = ["room", "landlock", "host"];
const results: Record<Variant | "reference", number[]> = { room: [], landlock: [], host: [], reference: [] };
for (const v of variants) await oursOnce(server, v, loop(5)); // warm-up
await reference?.once(loop(5));
for (let r = 0; r < ROUNDS; r++) {
  for (const v of variants) await perExec((s) => oursOnce(server, v, s), loop, N, results[v]);
  if (reference !== undefined) await perExec(reference.once, loop, N, results.reference);
}
await server.stop();
await reference?.close();

const kept = roomLauncherPath() !== undefined ? "kept room" : "a room per exec (no room launcher)";
console.log(`per escalated exec (${N} × allowed /bin/true in one bash run), median of ${ROUNDS} interleaved rounds; ${kept}`);
console.log(`room (bwrap) + in-shell client + our server   ${median(results.room).toFixed(3)} ms`);
console.log(`room (landlock)                               ${median(results.landlock).toFixed(3)} ms`);
console.log(`host (escalation = "host")                    ${median(results.host).toFixed(3)} ms`);
if (reference === undefined) {
  console.log("reference not installed (npm ci): skipped");
} else {
  console.log(`reference 0.97.0 (Rust wrapper + server, host) ${median(results.reference).toFixed(3)} ms`);
  console.log(
    `paired ratios: room / reference ${pairedRatio(results.room, results.reference).toFixed(2)}× (target ≤ 1.5×), landlock room / reference ${pairedRatio(results.landlock, results.reference).toFixed(2)}×, host / reference ${pairedRatio(results.host, results.reference).toFixed(2)}×, room / host ${pairedRatio(results.room, results.host).toFixed(2)}×`,
  );
}
