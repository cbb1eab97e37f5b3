/**
 * The floor under issue 40's full-access and memory targets: bench/floor/server.ts (Bun and the MCP SDK v1's `Server`
 * with a `shell` that runs bash directly, nothing of shellmcp's) compiled as `serve` is, beside `shellmcp serve` and
 * Codex 0.97.0's `codex-exec-mcp-server`, all under danger-full-access: trivial `true` calls in interleaved rounds
 * (client-side ms, paired ratios to the reference), then RssAnon (/proc/PID/status) 5 s idle after `initialize` and
 * after the calls. If the floor alone is above a target, no work inside shellmcp reaches it under the fixed choices.
 *
 * `FLOOR_WITH_WORKER=1` adds the floor with one empty Worker (what shellmcp's escalation worker adds at least). Not
 * by default: with both floors running, one of them stopped answering in every run here (2026-11-29, Bun 1.4.5;
 * not investigated); an empty compiled Worker alone measured +2.0 MiB of RssAnon.
 *
 *   bun bench/floor.ts [rounds=60]
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startLineRpc, type LineRpc } from "../test/helpers/reference.ts";
import { benchDir, benchHome, codex097Exe, median, pairedRatio, referenceShellToolDir, ROOT } from "./lib.ts";

const ROUNDS = Number(process.argv[2] ?? 60);
const dir = benchDir("shellmcp-bench-floor-");
const home = benchHome("shellmcp-bench-floor-home-");
const ws = benchHome("shellmcp-bench-floor-ws-");
const floorExe = join(dir, "floor");
const built = Bun.spawnSync(
  [
    process.execPath,
    "build",
    "--compile",
    join(ROOT, "bench", "floor", "server.ts"),
    join(ROOT, "bench", "floor", "worker.ts"),
    "--outfile",
    floorExe,
  ],
  { stdout: "ignore", stderr: "pipe", cwd: ROOT },
);
if (built.exitCode !== 0) throw new Error(`cannot compile the floor server: ${built.stderr}`);

interface Server {
  name: string;
  rpc: LineRpc;
  ms: number[];
  anon: number[];
}

function anonOf(pid: number): number {
  return Number(/RssAnon:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;
}

async function start(name: string, argv: string[], env: Record<string, string> = {}): Promise<Server> {
  const rpc = await startLineRpc(argv, { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home, ...env });
  let err = "";
  void (async () => {
    for await (const c of rpc.proc.stderr) err += new TextDecoder().decode(c);
  })();
  void rpc.proc.exited.then((code) => {
    if (!closing) console.error(`${name} ended early (${code}, ${rpc.proc.signalCode ?? "no signal"}): ${err.slice(-2000)}`);
  });
  await rpc.request("codex/sandbox-state/update", {
    sandboxPolicy: { type: "danger-full-access" },
    codexLinuxSandboxExe: codex097Exe() ?? "",
    sandboxCwd: ws,
    useLinuxSandboxBwrap: false,
  });
  return { name, rpc, ms: [], anon: [] };
}

async function call(s: Server): Promise<number> {
  const t0 = Bun.nanoseconds();
  const r = await s.rpc.request("tools/call", { name: "shell", arguments: { command: "true", workdir: ws, login: false } });
  const ms = (Bun.nanoseconds() - t0) / 1e6;
  if (r.error !== undefined) throw new Error(`${s.name}: ${JSON.stringify(r.error)}`);
  return ms;
}

mkdirSync(ws, { recursive: true });
let closing = false;
const servers = [
  await start("floor (Bun + SDK)", [floorExe]),
  ...(process.env.FLOOR_WITH_WORKER === "1" ? [await start("floor + a worker", [floorExe], { FLOOR_WORKER: "1" })] : []),
  await start("shellmcp", [join(ROOT, "dist", "shellmcp"), "serve"]),
];
const ref = referenceShellToolDir();
let reference: Server | undefined;
if (ref !== undefined) {
  reference = await start("Codex 0.97.0", [
    join(ref, "codex-exec-mcp-server"),
    "--bash",
    join(ref, "bash", "debian-12", "bash"),
    "--execve",
    join(ref, "codex-execve-wrapper"),
  ]);
  servers.push(reference);
}
await Bun.sleep(5000);
for (const s of servers) s.anon.push(anonOf(s.rpc.proc.pid));
for (let i = 0; i < 3; i++) for (const s of servers) await call(s);
for (let i = 0; i < ROUNDS; i++)
  for (let k = 0; k < servers.length; k++) {
    const s = servers[(i + k) % servers.length]!;
    s.ms.push(await call(s));
  }
await Bun.sleep(5000);
for (const s of servers) s.anon.push(anonOf(s.rpc.proc.pid));
closing = true;
for (const s of servers) await s.rpc.close();

console.log(`danger-full-access, \`true\`, ${ROUNDS} interleaved rounds; RssAnon 5 s idle after initialize / after the calls`);
console.log(`${"server".padEnd(22)}${"median ms".padStart(11)}${"vs reference".padStart(14)}${"anon MiB".padStart(16)}`);
for (const s of servers)
  console.log(
    `${s.name.padEnd(22)}${median(s.ms).toFixed(2).padStart(11)}${(reference !== undefined && s !== reference ? `${pairedRatio(s.ms, reference.ms).toFixed(2)}×` : "").padStart(14)}${`${s.anon[0]!.toFixed(1)} / ${s.anon[1]!.toFixed(1)}`.padStart(16)}`,
  );
