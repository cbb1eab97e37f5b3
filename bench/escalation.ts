/**
 * Per-exec cost of interception: N × `/bin/true` in one patched bash run, decision Run.
 *
 * - bare: our patched bash with no interception at all (no EXEC_WRAPPER) — the floor;
 * - skip: interception on, `SHELLMCP_INTERCEPT` = the set of a typical policy that does not name `true`: the shell
 *   execs it directly (issue 13 item 1; target ≤ 1.05× bare);
 * - in-shell client: the set names `true` (a rule `true never-matches` exists), so each exec is decided by the
 *   real decision code (`decideExec`) over the in-shell client (patches/escalate-client.c) and our
 *   EscalationServer; the answer is Run (issue 13 item 2; target ≤ 0.8× the reference);
 * - client, minimal server: the same in-shell client answered Run by a trivial synchronous responder in this
 *   process (no worker, no decision code): what the client itself costs, so the rest is the server's share;
 * - wrapper: the same decision through the `codex-execve-wrapper` role (a Bun start per exec), for comparison;
 * - reference: Codex 0.97.0's codex-exec-mcp-server + its Rust wrapper + its bundled bash, driven over MCP stdio
 *   (`tools/call shell` under danger-full-access).
 * Per-exec cost = (time of the N-exec command − time of the same command with 0 execs) / N, so the fixed cost of
 * a call (MCP round trip, shell start) cancels out. Median of ROUNDS rounds; every variant and the reference run in
 * each round, and ratios are medians of per-round ratios (the VM's speed drifts between rounds).
 *
 *   bun bench/escalation.ts [execs] [rounds]
 */
import { mkdirSync, symlinkSync } from "node:fs";

import { join } from "node:path";
import * as libc from "../ffi/libc.ts";
import { encodeResponse } from "../src/escalate/protocol/wire.ts";
import { EscalationServer } from "../src/escalate/server.ts";
import { BoundaryPlacement } from "../src/escalate/placement.ts";
import { recvFrame, sendFrame } from "../src/escalate/protocol/socket.ts";
import { policyFromSources } from "../src/execpolicy/load.ts";
import { decideExec, type EscalationSettings } from "../src/escalate/decision/decide.ts";
import { interceptSetFor } from "../src/escalate/decision/intercept-set.ts";
import { INTERCEPT_ENV_VAR } from "../src/escalate/protocol/wire.ts";
import { startLineRpc } from "../test/helpers/reference.ts";
import { benchDir, median, pairedRatio, perExec, referenceShellToolDir, ROOT } from "./lib.ts";
import { patchedShell } from "../test/helpers/shells.ts";

const N = Number(process.argv[2] ?? 200);
const ROUNDS = Number(process.argv[3] ?? 7);
const loop = (n: number) => `for i in $(/usr/bin/seq 1 ${n}); do /bin/true; done`;

const dir = benchDir("shellmcp-bench-");
const wrapper = join(dir, "codex-execve-wrapper");
symlinkSync(join(ROOT, "dist", "shellmcp"), wrapper);
const bash = patchedShell("bash");

// A typical policy: a few rules, none for `true` (skip), and one that names `true` (in-shell client; never matches).
const RULES = [
  'prefix_rule(pattern=["git", "push"], decision="prompt")',
  'prefix_rule(pattern=["npm", "publish"], decision="forbidden")',
  'prefix_rule(pattern=["ls"], decision="allow")',
];
const skipPolicy = policyFromSources([{ path: "bench.rules", text: RULES.join("\n") + "\n" }]);
const namedPolicy = policyFromSources([
  { path: "bench.rules", text: [...RULES, 'prefix_rule(pattern=["true", "never-matches"], decision="forbidden")'].join("\n") + "\n" },
]);
const settings = (policy: typeof skipPolicy): EscalationSettings => ({
  policy,
  codexHome: dir,
  preserveProgramPaths: false,
  onPrompt: "deny",
  memory: new Map(),
});

type Variant = "bare" | "skip" | "client" | "minimal" | "wrapper";

/** The in-shell client against a blocking responder that answers Run at once (the shell's exit seen via pidfd). */
function minimalOnce(script: string): number {
  const { AF_UNIX, SOCK_DGRAM, SOCK_CLOEXEC } = libc.SOCK;
  const [srv, cli] = libc.socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC);
  const env = {
    PATH: "/usr/bin:/bin",
    CODEX_ESCALATE_SOCKET: "3",
    EXEC_WRAPPER: wrapper,
    [INTERCEPT_ENV_VAR]: interceptSetFor(namedPolicy),
  };
  const t0 = Bun.nanoseconds();
  const p = Bun.spawn([bash, "-c", script], { env, stdio: ["ignore", "ignore", "ignore", cli] });
  libc.closeQuiet(cli);
  const pidfd = libc.pidfdOpen(p.pid);
  for (;;) {
    const ready = libc.poll(
      [
        { fd: srv, events: libc.POLL.IN },
        { fd: pidfd, events: libc.POLL.IN },
      ],
      -1,
    );
    if (ready[0]! & libc.POLL.IN) {
      const stream = libc.recvmsg(srv, 16, 1).fds[0]!;
      recvFrame(stream);
      sendFrame(stream, encodeResponse({ kind: "Run" }));
      libc.closeQuiet(stream);
    } else if (ready[1]! & libc.POLL.IN) break;
  }
  const t = (Bun.nanoseconds() - t0) / 1e6;
  libc.closeQuiet(srv);
  libc.closeQuiet(pidfd);
  return t;
}

async function oursOnce(server: EscalationServer, variant: Variant, script: string): Promise<number> {
  if (variant === "minimal") return minimalOnce(script);
  const s = settings(variant === "skip" ? skipPolicy : namedPolicy);
  const l = server.listen({
    decide: (r) => decideExec(s, { paused: (f) => f() }, r),
    boundary: { baseEnv: {}, writable: { full: false, roots: [], readOnly: [] } },
  });
  let env: Record<string, string> = { PATH: "/usr/bin:/bin", ...l.shellEnv(wrapper, 3) };
  if (variant === "bare") env = { PATH: "/usr/bin:/bin" };
  if (variant === "skip" || variant === "client") env[INTERCEPT_ENV_VAR] = interceptSetFor(s.policy);
  const t0 = Bun.nanoseconds();
  const p = Bun.spawn([bash, "-c", script], { env, stdio: ["ignore", "ignore", "ignore", l.clientFd] });
  l.releaseClientFd();
  await p.exited;
  const t = (Bun.nanoseconds() - t0) / 1e6;
  await l.close();
  if (p.exitCode !== 0) throw new Error(`${variant}: bash exited ${p.exitCode}`);
  return t;
}

/** Codex 0.97.0's server + Rust wrapper + bundled bash over MCP stdio (danger-full-access), or undefined. */
async function startReference(): Promise<{ once: (script: string) => Promise<number>; close: () => Promise<void> } | undefined> {
  const ref = referenceShellToolDir();
  if (ref === undefined) return undefined;
  const home = join(dir, "codex-home");
  mkdirSync(home);
  const work = join(dir, "work");
  mkdirSync(work);
  const rpc = await startLineRpc(
    [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")],
    { PATH: "/usr/bin:/bin", HOME: "/root", CODEX_HOME: home },
  );
  await rpc.request("codex/sandbox-state/update", { sandboxPolicy: { type: "danger-full-access" }, sandboxCwd: work });
  const once = async (script: string) => {
    const t0 = Bun.nanoseconds();
    await rpc.request("tools/call", { name: "shell", arguments: { command: script, workdir: work, login: false } });
    return (Bun.nanoseconds() - t0) / 1e6;
  };
  return { once, close: () => rpc.close() };
}

const server = await EscalationServer.start(new BoundaryPlacement());
const reference = await startReference();
const variants: Variant[] = ["bare", "skip", "client", "minimal", "wrapper"];
const results: Record<Variant | "reference", number[]> = { bare: [], skip: [], client: [], minimal: [], wrapper: [], reference: [] };
for (const v of variants) await oursOnce(server, v, loop(10)); // warm-up
await reference?.once(loop(10));
// Every round runs every variant and the reference back to back, so the per-round ratios cancel the VM's drift.
for (let r = 0; r < ROUNDS; r++) {
  for (const v of variants) await perExec((s) => oursOnce(server, v, s), loop, N, results[v]);
  if (reference !== undefined) await perExec(reference.once, loop, N, results.reference);
}
await server.stop();
await reference?.close();
const ours = Object.fromEntries(variants.map((v) => [v, median(results[v])])) as Record<Variant, number>;

console.log(`per exec (${N} × /bin/true in one bash run, decision Run), median of ${ROUNDS} interleaved rounds`);
console.log(`bare patched bash, no interception          ${ours.bare.toFixed(3)} ms`);
console.log(
  `skip (program outside the intercept set)    ${ours.skip.toFixed(3)} ms   ${pairedRatio(results.skip, results.bare).toFixed(2)}× bare (target ≤ 1.05×)`,
);
console.log(`in-shell client + our server (named, Run)   ${ours.client.toFixed(3)} ms`);
console.log(
  `in-shell client + minimal responder         ${ours.minimal.toFixed(3)} ms   (the client's own cost; the rest is the server's)`,
);
console.log(`codex-execve-wrapper role + our server      ${ours.wrapper.toFixed(3)} ms`);
if (reference === undefined) {
  console.log("reference not installed (npm i): skipped");
} else {
  console.log(`reference 0.97.0 (Rust wrapper + server)    ${median(results.reference).toFixed(3)} ms`);
  console.log(`paired ratios (median of per-round ratios):`);
  console.log(`  in-shell client / reference: ${pairedRatio(results.client, results.reference).toFixed(2)}× (target ≤ 0.8×)`);
  console.log(`  wrapper role / reference:    ${pairedRatio(results.wrapper, results.reference).toFixed(2)}×`);
}
