/**
 * Where one sandboxed `shell` call of `shellmcp serve` spends its time (issue 40, "Measure first"): a trivial command
 * (`login: false`, workspace-write, the workspace outside /tmp) on each backend (bubblewrap, Landlock), its steps
 * from the server's own debug trace (`SHELLMCP_TRACE_STEPS=<file>`, src/trace-steps.ts: one mark per step; a step's
 * time is the gap since the mark before it), beside the client-side total of Codex 0.97.0's `codex-exec-mcp-server`
 * with Codex 0.97's own Linux sandbox helper under the same state (as bench/serve.ts runs it).
 *
 * Servers are called in interleaved rounds (order rotating) so that the other agents' load hits all alike.
 * `SHELLMCP_BENCH_OLD=<binary>` adds another build of shellmcp on both backends, traced too (its steps in columns of
 * their own: before/after figures per step, paired in the same rounds).
 *
 * `folders` > 0: each workspace is a git work tree holding that many folders (what a call's nested-repository search
 * walks: src/sandbox/git/discover.ts), else it is empty.
 *
 * `SHELLMCP_BENCH_POLICY=danger-full-access`: the same calls unsandboxed (the workspace-write check turned around: the
 * write outside must succeed), without the bubblewrap reference (no helper runs).
 *
 *   [SHELLMCP_BENCH_GAP_MS=ms] [SHELLMCP_BENCH_POLICY=danger-full-access] bun bench/call.ts [rounds=40] [command=true] [folders=0]
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startLineRpc, type LineRpc } from "../test/helpers/reference.ts";
import { benchDir, benchHome, codex0169Exe, codex097Exe, median, pairedRatio, referenceShellToolDir, ROOT, timeSpawns } from "./lib.ts";

const ROUNDS = Number(process.argv[2] ?? 40);
const COMMAND = process.argv[3] ?? "true";
const FOLDERS = Number(process.argv[4] ?? 0);
/**
 * `SHELLMCP_BENCH_GAP_MS`: a pause before each timed call, ms (default 0: back to back). A user's calls come seconds
 * apart, and some kernel work costs more then (moving a process into a cgroup waits for an RCU grace period that
 * back-to-back moves share).
 */
const GAP_MS = Number(process.env.SHELLMCP_BENCH_GAP_MS ?? 0);
const OURS = process.env.SHELLMCP_BENCH_BINARY ?? join(ROOT, "dist", "shellmcp");
const OLD = process.env.SHELLMCP_BENCH_OLD;
const dir = benchDir("shellmcp-bench-call-");
const home = benchHome("shellmcp-bench-call-home-");
// Outside /tmp and $TMPDIR (writable under workspace-write): the write outside the workspace must be refused.
const ww = benchHome("shellmcp-bench-call-ws-");
/** `SHELLMCP_BENCH_POLICY=danger-full-access`: every server runs its calls unsandboxed instead (issue 40's full-access figure). */
const FULL = process.env.SHELLMCP_BENCH_POLICY === "danger-full-access";
const WW_POLICY = FULL
  ? { type: "danger-full-access" }
  : { type: "workspace-write", network_access: false, exclude_tmpdir_env_var: true, exclude_slash_tmp: true };
const helper = codex097Exe() ?? join(ROOT, "dist", "codex-linux-sandbox");

interface Server {
  name: string;
  rpc: LineRpc;
  ws: string;
  trace?: string;
  ms: number[];
}

/** One `shell` call; its client-side ms. Throws when the call failed. */
async function call(s: Server): Promise<number> {
  const t0 = Bun.nanoseconds();
  const r = await s.rpc.request("tools/call", {
    name: "shell",
    arguments: { command: COMMAND, workdir: s.ws, login: false, timeout_ms: 30000 },
  });
  const ms = (Bun.nanoseconds() - t0) / 1e6;
  const res = r.result as { content?: { text?: string }[]; isError?: boolean } | undefined;
  if (r.error !== undefined || res?.isError === true) throw new Error(`${s.name}: ${JSON.stringify(r.error ?? res)}`.slice(0, 400));
  return ms;
}

/** Make `ws` a git work tree (a minimal `.git`) with {@link FOLDERS} folders, 20 per parent folder. */
function populate(ws: string): void {
  for (const d of [".git/objects", ".git/refs/heads", ".git/hooks", ".git/info"]) mkdirSync(join(ws, d), { recursive: true });
  writeFileSync(join(ws, ".git", "HEAD"), "ref: refs/heads/main\n");
  writeFileSync(join(ws, ".git", "config"), "[core]\n");
  for (let i = 0; i < FOLDERS; i++) mkdirSync(join(ws, `d${Math.floor(i / 20)}`, `e${i % 20}`), { recursive: true });
}

/**
 * Codex 0.169's bubblewrap helper behind the 0.97 server's helper interface: a `/bin/sh` script named
 * `codex-linux-sandbox` that drops 0.97's `--sandbox-policy-cwd C --sandbox-policy JSON` and runs 0.169's helper
 * with the permission profile Codex 0.169 sends for the same workspace-write state (the root readable, `ws`
 * writable, its `.git`, `.agents` and `.codex` read-only where they exist; /tmp and `$TMPDIR` left out, network
 * restricted: docs of ../../shared/spec/sandbox.md §1.5). Returns the script's path; `direct` is the helper's own
 * argv for the same run (to time the script's own cost apart).
 */
function bwrapReferenceHelper(exe: string, ws: string): { shim: string; direct: string[] } {
  // Codex's helper leaves a folder of its own in /tmp (its synthetic mount targets): removed at exit if it made it.
  const synthetic = `/tmp/codex-bwrap-synthetic-mount-targets-${process.getuid?.() ?? 0}`;
  if (!existsSync(synthetic)) process.on("exit", () => rmSync(synthetic, { recursive: true, force: true }));
  const link = join(dir, "codex-0.169", "codex-linux-sandbox");
  mkdirSync(join(dir, "codex-0.169"), { recursive: true });
  if (!existsSync(link)) symlinkSync(exe, link);
  const entry = (path: string, access: string, skip = false) =>
    ({ path: { type: "path", path }, access, ...(skip ? { missing_path_behavior: "skip" } : {}) }) as const;
  const profile = JSON.stringify({
    type: "managed",
    file_system: {
      type: "restricted",
      entries: [
        { path: { type: "special", value: { kind: "root" } }, access: "read" },
        entry(ws, "write"),
        entry(join(ws, ".git"), "read", true),
        entry(join(ws, ".agents"), "read", true),
        entry(join(ws, ".codex"), "read", true),
      ],
    },
    network: "restricted",
  });
  const q = (x: string) => `'${x.replaceAll("'", `'\\''`)}'`;
  const shim = join(dir, "codex-0.169-shim");
  writeFileSync(
    shim,
    `#!/bin/sh\nwhile [ $# -gt 0 ]; do a=$1; shift; [ "$a" = -- ] && break; done\n` +
      `exec ${q(link)} --sandbox-policy-cwd ${q(ws)} --command-cwd "$PWD" --permission-profile ${q(profile)} -- "$@"\n`,
  );
  chmodSync(shim, 0o755);
  return { shim, direct: [link, "--sandbox-policy-cwd", ws, "--command-cwd", ws, "--permission-profile", profile, "--"] };
}

/** Start `argv` under Codex 0.97's workspace-write state; a write outside the workspace must fail. */
async function start(name: string, argv: string[], trace: boolean, helperFor?: (ws: string) => string): Promise<Server> {
  const ws = join(ww, `${name}-ws`);
  const outside = join(ww, `${name}-out`);
  mkdirSync(ws);
  mkdirSync(outside);
  if (FOLDERS > 0) populate(ws);
  const tracePath = trace ? join(dir, `${name}.trace`) : undefined;
  const env: Record<string, string> = { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home };
  if (tracePath !== undefined) env.SHELLMCP_TRACE_STEPS = tracePath;
  const s: Server = { name, rpc: await startLineRpc(argv, env), ws, trace: tracePath, ms: [] };
  const upd = await s.rpc.request("codex/sandbox-state/update", {
    sandboxPolicy: WW_POLICY,
    codexLinuxSandboxExe: helperFor?.(ws) ?? helper,
    sandboxCwd: ws,
    useLinuxSandboxBwrap: false,
  });
  if (upd.error !== undefined) throw new Error(`${name} refused the sandbox state: ${JSON.stringify(upd.error)}`);
  await s.rpc.request("tools/call", {
    name: "shell",
    arguments: { command: `touch '${outside}/x' 2>/dev/null; true`, workdir: ws, login: false, timeout_ms: 30000 },
  });
  if (existsSync(join(outside, "x")) !== FULL) throw new Error(`${name} does not run under ${WW_POLICY.type}`);
  return s;
}

const servers: Server[] = [
  await start("bwrap", [OURS, "serve"], true),
  await start("landlock", [OURS, "serve", "--sandbox-backend", "landlock"], true),
];
if (OLD !== undefined) {
  servers.push(await start("old-bwrap", [OLD, "serve"], true));
  servers.push(await start("old-landlock", [OLD, "serve", "--sandbox-backend", "landlock"], true));
}
const ref = referenceShellToolDir();
let refServer: Server | undefined;
if (ref !== undefined && codex097Exe() !== undefined) {
  refServer = await start(
    "reference",
    [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")],
    false,
  );
  servers.push(refServer);
}
// Codex's other backend: its bubblewrap helper (0.169; 0.97's was built without it), driven by the same Rust server.
const exe169 = codex0169Exe();
let refBwrap: Server | undefined;
let shimCost: { shim: number; direct: number } | undefined;
if (ref !== undefined && exe169 !== undefined && !FULL) {
  let made: ReturnType<typeof bwrapReferenceHelper> | undefined;
  refBwrap = await start(
    "reference-bwrap",
    [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")],
    false,
    (ws) => (made = bwrapReferenceHelper(exe169, ws)).shim,
  );
  servers.push(refBwrap);
  // What the script itself adds to each reference-bwrap call (a /bin/sh start and one exec): timed apart.
  shimCost = {
    shim: timeSpawns([made!.shim, "--sandbox-policy-cwd", refBwrap.ws, "--", "/bin/true"], 20, 3),
    direct: timeSpawns([...made!.direct, "/bin/true"], 20, 3),
  };
}
for (let i = 0; i < 3; i++) for (const s of servers) await call(s);
// Only the timed rounds' marks count.
const skip = new Map(servers.map((s) => [s, s.trace === undefined ? 0 : traceLines(s.trace).length]));
for (let i = 0; i < ROUNDS; i++)
  for (let k = 0; k < servers.length; k++) {
    const s = servers[(i + k) % servers.length]!;
    if (GAP_MS > 0) await Bun.sleep(GAP_MS);
    s.ms.push(await call(s));
  }
for (const s of servers) await s.rpc.close();

function traceLines(path: string): { step: string; t: number; ms?: number }[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { step: string; t: number; ms?: number });
}

/**
 * Per-step medians of a trace: each call runs from its `call` mark to its `result` mark; a step's time is the gap
 * since the previous mark (a step seen twice in one call is summed); marks with `ms` are nested spans, listed apart.
 */
function steps(lines: { step: string; t: number; ms?: number }[]): {
  order: string[];
  per: Map<string, number[]>;
  spans: Map<string, number[]>;
} {
  const order: string[] = [];
  const per = new Map<string, number[]>();
  const spans = new Map<string, number[]>();
  let cur: Map<string, number> | undefined;
  let curSpans: Map<string, number> | undefined;
  let prev = 0;
  for (const l of lines) {
    if (l.step === "call") {
      cur = new Map();
      curSpans = new Map();
      prev = l.t;
      continue;
    }
    if (cur === undefined) continue;
    if (l.ms !== undefined) {
      curSpans!.set(l.step, (curSpans!.get(l.step) ?? 0) + l.ms);
      continue;
    }
    if (!order.includes(l.step)) order.push(l.step);
    cur.set(l.step, (cur.get(l.step) ?? 0) + (l.t - prev));
    prev = l.t;
    if (l.step === "result") {
      cur.set(
        "(total in server)",
        [...cur.values()].reduce((a, b) => a + b, 0),
      );
      for (const [k, v] of cur) per.set(k, [...(per.get(k) ?? []), v]);
      for (const [k, v] of curSpans!) spans.set(k, [...(spans.get(k) ?? []), v]);
      cur = undefined;
    }
  }
  order.push("(total in server)");
  return { order, per, spans };
}

const traced = servers.filter((s) => s.trace !== undefined);
const tables = traced.map((s) => steps(traceLines(s.trace!).slice(skip.get(s))));
const allSteps: string[] = [];
for (const t of tables) for (const k of t.order) if (!allSteps.includes(k)) allSteps.push(k);
const f = (xs: number[] | undefined) => (xs === undefined || xs.length === 0 ? "-" : median(xs).toFixed(2)).padStart(13);
console.log(
  `one \`${COMMAND}\` call, login: false, workspace-write (/tmp left out), workspace ${FOLDERS > 0 ? `a work tree of ${FOLDERS} folders` : "empty"}; median ms of ${ROUNDS} interleaved rounds`,
);
console.log(`${"step (time since the previous mark)".padEnd(40)}${traced.map((s) => s.name.padStart(13)).join("")}`);
for (const k of allSteps) console.log(`${k.padEnd(40)}${tables.map((t) => f(t.per.get(k))).join("")}`);
const spanNames = [...new Set(tables.flatMap((t) => [...t.spans.keys()]))];
for (const k of spanNames) console.log(`${`  within: ${k}`.padEnd(40)}${tables.map((t) => f(t.spans.get(k))).join("")}`);
console.log(`${"client-side total".padEnd(40)}${traced.map((s) => f(s.ms)).join("")}`);
for (const s of servers.filter((s) => s.trace === undefined)) console.log(`${`${s.name}: client-side total`.padEnd(40)}${f(s.ms)}`);
if (refServer !== undefined)
  console.log(
    `paired ratios to the reference (Codex 0.97.0 + its Landlock helper): ` +
      servers
        .filter((s) => s !== refServer)
        .map((s) => `${s.name} ${pairedRatio(s.ms, refServer!.ms).toFixed(2)}×`)
        .join(", "),
  );
else console.log("reference (npm ci: @openai/codex-shell-tool-mcp, @openai/codex-0.97) not installed: no ratios");
if (refBwrap !== undefined) {
  console.log(
    `paired ratios to the reference on Codex's bubblewrap helper (Codex 0.97.0's server + Codex 0.169's helper): ` +
      servers
        .filter((s) => s !== refServer && s !== refBwrap)
        .map((s) => `${s.name} ${pairedRatio(s.ms, refBwrap!.ms).toFixed(2)}×`)
        .join(", "),
  );
  const adj = shimCost!.shim - shimCost!.direct;
  const bw = servers.find((s) => s.name === "bwrap")!;
  console.log(
    `  its shim (0.97's helper arguments to 0.169's): ${shimCost!.shim.toFixed(2)} ms a run vs the helper alone ${shimCost!.direct.toFixed(2)} ms;` +
      ` bwrap against the reference less the shim's ${adj.toFixed(2)} ms: ${(median(bw.ms) / (median(refBwrap.ms) - adj)).toFixed(2)}× (medians)`,
  );
}
if (OLD !== undefined)
  console.log(
    `paired new/old: bwrap ${pairedRatio(servers[0]!.ms, servers[2]!.ms).toFixed(2)}×, landlock ${pairedRatio(servers[1]!.ms, servers[3]!.ms).toFixed(2)}×`,
  );
