/**
 * `shellmcp serve` vs Codex 0.97.0's `codex-exec-mcp-server`, over the same newline JSON-RPC driver:
 * - `initialize` latency: from spawn to the answer's first byte, median of N starts (what decides whether
 *   Codex 0.169 offers the tool at all when the server is not `required`; target ≤ 20 ms);
 * - trivial call latency (`true`), median of N;
 * - a call with 200 intercepted execs (`for i in $(seq 200); do /bin/true; done`);
 * - server RSS idle and during 8 parallel calls.
 *   These run with danger-full-access on both; ours is also measured under its default read-only sandbox.
 * - trivial call with `login: true` under workspace-write, both sent Codex 0.97's `codex/sandbox-state/update`
 *   (the reference then runs each command through Codex 0.97's own Linux sandbox helper, as Codex 0.97 does);
 *   each must first show it enforces the sandbox, else the figure is n/a with the reason. Target ≤ 0.8×.
 * Ratios: ours / reference.
 *
 *   bun bench/serve.ts [runs]
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { startLineRpc, type LineRpc } from "../test/helpers/reference.ts";
import { benchDir, benchHome, codex097Exe, initializeOnce, median, pairedRatio, referenceShellToolDir, ROOT } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 30);
/** `SHELLMCP_BENCH_BINARY`: another build of shellmcp to measure (e.g. the build before a change), else dist/shellmcp. */
const OURS = process.env.SHELLMCP_BENCH_BINARY ?? join(ROOT, "dist", "shellmcp");
const dir = benchDir("shellmcp-bench-serve-");
const work = join(dir, "work");
mkdirSync(work);

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** One `shell` call on `rpc` (login: false, in `work`); returns its ms. */
async function timedCall(name: string, rpc: LineRpc, command: string): Promise<number> {
  const t0 = Bun.nanoseconds();
  const r = await rpc.request("tools/call", { name: "shell", arguments: { command, workdir: work, login: false, timeout_ms: 120000 } });
  if (r.error !== undefined) throw new Error(`${name}: ${JSON.stringify(r.error)}`);
  return (Bun.nanoseconds() - t0) / 1e6;
}

/**
 * Latencies of `command` on every server, interleaved: round i calls each server once, in an order that rotates
 * every round, so that a slow patch of the machine (this is a VM with CPU steal) hits all of them alike.
 * Returns each server's samples, in rounds.
 */
async function interleaved(servers: { name: string; rpc: LineRpc }[], command: string, rounds: number): Promise<number[][]> {
  const out = servers.map(() => [] as number[]);
  for (let i = 0; i < rounds; i++) {
    for (let k = 0; k < servers.length; k++) {
      const j = (i + k) % servers.length;
      out[j]!.push(await timedCall(servers[j]!.name, servers[j]!.rpc, command));
    }
  }
  return out;
}

/** Server RSS idle, then while 8 `sleep 1.5` calls run. */
async function memory(name: string, rpc: LineRpc): Promise<{ idle: number; busy: number }> {
  await Bun.sleep(300);
  const idle = rssMiB(rpc.proc.pid);
  const parallel = Promise.all(Array.from({ length: 8 }, () => timedCall(name, rpc, "sleep 1.5")));
  await Bun.sleep(800);
  const busy = rssMiB(rpc.proc.pid);
  await parallel;
  return { idle, busy };
}

const home = benchHome("shellmcp-bench-serve-home-");
const env = { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home };

/** `initialize` latencies of each argv over `runs` rounds, the argvs alternating within each round. */
async function initializeLatencies(argvs: string[][], runs = RUNS): Promise<number[][]> {
  const out = argvs.map(() => [] as number[]);
  for (let i = 0; i < runs; i++) for (let j = 0; j < argvs.length; j++) out[j]!.push(await initializeOnce(argvs[j]!, env));
  return out;
}
const ref = referenceShellToolDir();
const refArgv =
  ref === undefined
    ? undefined
    : [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")];
const [oursInit, theirsInit] = await initializeLatencies([[OURS, "serve"], ...(refArgv === undefined ? [] : [refArgv])]);
const servers: { name: string; rpc: LineRpc }[] = [
  {
    name: "shellmcp, danger-full-access",
    rpc: await startLineRpc([OURS, "serve", "--sandbox", "danger-full-access"], env),
  },
  { name: "shellmcp, read-only (bwrap)", rpc: await startLineRpc([OURS, "serve"], env) },
];
if (refArgv !== undefined) {
  const theirs = await startLineRpc(refArgv, env);
  await theirs.request("codex/sandbox-state/update", { sandboxPolicy: { type: "danger-full-access" }, sandboxCwd: work });
  servers.push({ name: "Codex 0.97.0, danger-full-access", rpc: theirs });
}
await interleaved(servers, "true", 3); // warm-up
const trivial = await interleaved(servers, "true", RUNS);
const execs = await interleaved(servers, "for i in $(seq 200); do /bin/true; done", 7);
const mem: { idle: number; busy: number }[] = [];
for (const s of servers) mem.push(await memory(s.name, s.rpc));
for (const s of servers) await s.rpc.close();

const fmt = (x: number) => x.toFixed(1).padStart(8);
console.log(`shell tool over stdio, median (trivial: ${RUNS} calls; 200 execs: 7 calls; interleaved rounds)`);
console.log(`${"".padEnd(38)} trivial ms  200-exec ms  RSS idle MiB  RSS 8 calls MiB`);
servers.forEach((s, i) =>
  console.log(
    `${s.name.padEnd(38)}${fmt(median(trivial[i]!))}   ${fmt(median(execs[i]!))}     ${fmt(mem[i]!.idle)}       ${fmt(mem[i]!.busy)}`,
  ),
);
if (theirsInit === undefined)
  console.log(`initialize: shellmcp ${median(oursInit!).toFixed(1)} ms (reference not installed (npm i): no ratios)`);
else {
  console.log(
    `initialize (spawn → answer), median of ${RUNS} alternating: shellmcp ${median(oursInit!).toFixed(1)} ms, Codex 0.97.0 ${median(theirsInit).toFixed(1)} ms, ` +
      `paired ratio ${pairedRatio(oursInit!, theirsInit).toFixed(1)}× (target ≤ 20 ms)`,
  );
  console.log(
    `ratios ours/reference (danger-full-access, median of paired rounds): trivial ${pairedRatio(trivial[0]!, trivial[2]!).toFixed(2)}×, ` +
      `200 execs ${pairedRatio(execs[0]!, execs[2]!).toFixed(2)}×, RSS idle ${(mem[0]!.idle / mem[2]!.idle).toFixed(1)}×, RSS busy ${(mem[0]!.busy / mem[2]!.busy).toFixed(1)}×`,
  );
}

// ---- workspace-write, login: true: ours vs the reference with Codex 0.97's own Linux sandbox helper ----
// Both servers get exactly what Codex 0.97 sends after initialize: `codex/sandbox-state/update` with its
// serialised workspace-write policy, the workspace as `sandboxCwd`, its own binary (`current_exe()`) as
// `codexLinuxSandboxExe` (the 0.97 server runs it with arg0 `codex-linux-sandbox`; ours ignores it and uses its
// own helper, as `shellmcp serve` does without `--use-codex-linux-sandbox-exe`) and `useLinuxSandboxBwrap: false`
// (0.97's default; its published helper has no bubblewrap). The workspace is outside /tmp (a writable root of
// workspace-write). Before timing, each server must show that it really sandboxes: a write inside the workspace
// works, one to a sibling folder fails; otherwise the figure is not printed.
const wwBase = join(homedir(), ".cache", "shellmcp-bench");
mkdirSync(wwBase, { recursive: true });
const ww = mkdtempSync(join(wwBase, "serve-"));
const codex097 = codex097Exe();
const WW_POLICY = { type: "workspace-write", network_access: false, exclude_tmpdir_env_var: false, exclude_slash_tmp: false };

interface WwServer {
  name: string;
  rpc: LineRpc;
  ws: string;
}

/** One `shell` call; returns ms and the text of the result, or throws with what went wrong. */
async function shellCall(s: WwServer, command: string, login: boolean): Promise<{ ms: number; text: string }> {
  const t0 = Bun.nanoseconds();
  const r = await s.rpc.request("tools/call", { name: "shell", arguments: { command, workdir: s.ws, login, timeout_ms: 30000 } });
  const ms = (Bun.nanoseconds() - t0) / 1e6;
  if (r.error !== undefined) throw new Error(`${s.name}: ${JSON.stringify(r.error)}`);
  const res = r.result as { content?: { text?: string }[]; isError?: boolean };
  const text = res.content?.map((c) => c.text ?? "").join("") ?? "";
  if (res.isError === true) throw new Error(`${s.name}: call failed: ${text.slice(0, 300)}`);
  return { ms, text };
}

/** Start `argv`, send it Codex 0.97's workspace-write state, and check that it enforces it. */
async function startWorkspaceWrite(name: string, argv: string[], helper: string): Promise<WwServer> {
  const ws = join(ww, `${name}-ws`);
  const outside = join(ww, `${name}-outside`);
  mkdirSync(ws);
  mkdirSync(outside);
  const s: WwServer = { name, rpc: await startLineRpc(argv, env), ws };
  const upd = await s.rpc.request("codex/sandbox-state/update", {
    sandboxPolicy: WW_POLICY,
    codexLinuxSandboxExe: helper,
    sandboxCwd: ws,
    useLinuxSandboxBwrap: false,
  });
  if (upd.error !== undefined) throw new Error(`${name} refused the sandbox state: ${JSON.stringify(upd.error)}`);
  const { text } = await shellCall(s, `touch probe-in; touch '${outside}/probe-out'; true`, true);
  const inside = existsSync(join(ws, "probe-in"));
  const escaped = existsSync(join(outside, "probe-out"));
  if (!inside || escaped)
    throw new Error(
      `${name} does not enforce workspace-write: write inside the workspace ${inside ? "worked" : "failed"}, ` +
        `write outside ${escaped ? "worked" : "failed"} (output: ${text.replace(/\s+/g, " ").slice(0, 300)})`,
    );
  rmSync(join(ws, "probe-in"));
  return s;
}

const ourWw = await startWorkspaceWrite("shellmcp", [OURS, "serve"], codex097 ?? join(ROOT, "dist", "codex-linux-sandbox"));
// The same with the Landlock backend (the protection Codex 0.97's helper gives: no .git carve-outs), for comparison.
const ourWwLandlock = await startWorkspaceWrite(
  "shellmcp-landlock",
  [OURS, "serve", "--sandbox-backend", "landlock"],
  codex097 ?? join(ROOT, "dist", "codex-linux-sandbox"),
);
let refWw: WwServer | undefined;
let refWwMissing: string | undefined;
if (ref === undefined) refWwMissing = "reference @openai/codex-shell-tool-mcp not installed (npm ci)";
else if (codex097 === undefined)
  refWwMissing = "Codex 0.97's helper (@openai/codex-0.97 = npm:@openai/codex@0.97.0) not installed (npm ci)";
else {
  try {
    refWw = await startWorkspaceWrite(
      "reference",
      [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")],
      codex097,
    );
  } catch (e) {
    refWwMissing = (e as Error).message;
  }
}
// Interleaved (order rotating each round) so all see the same load from the other core.
const wwServers = refWw === undefined ? [ourWw, ourWwLandlock] : [ourWw, ourWwLandlock, refWw];
for (let i = 0; i < 3; i++) for (const s of wwServers) await shellCall(s, "true", true);
const wwMs = new Map<WwServer, number[]>(wwServers.map((s) => [s, []]));
for (let i = 0; i < RUNS; i++) {
  for (let k = 0; k < wwServers.length; k++) {
    const s = wwServers[(i + k) % wwServers.length]!;
    wwMs.get(s)!.push((await shellCall(s, "true", true)).ms);
  }
}
for (const s of wwServers) await s.rpc.close();
rmSync(ww, { recursive: true, force: true });
const wwHead = `trivial call, login: true, workspace-write (sandbox checked: inside writable, outside refused), median of ${RUNS}:`;
const ms = (s: WwServer) => median(wwMs.get(s)!).toFixed(1);
if (refWw === undefined)
  console.log(
    `${wwHead} shellmcp ${ms(ourWw)} ms (Landlock backend ${ms(ourWwLandlock)} ms); Codex 0.97.0 + 0.97 helper: n/a (${refWwMissing}) (target ≤ 0.8×)`,
  );
else {
  console.log(
    `${wwHead} shellmcp (bwrap, the default) ${ms(ourWw)} ms, shellmcp --sandbox-backend landlock ${ms(ourWwLandlock)} ms, ` +
      `Codex 0.97.0 + 0.97 helper (Landlock) ${ms(refWw)} ms; paired ratios: bwrap ${pairedRatio(wwMs.get(ourWw)!, wwMs.get(refWw)!).toFixed(2)}×, ` +
      `landlock ${pairedRatio(wwMs.get(ourWwLandlock)!, wwMs.get(refWw)!).toFixed(2)}× (target ≤ 0.8×)`,
  );
}
