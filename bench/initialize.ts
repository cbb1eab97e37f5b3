/**
 * The MCP handshake of `shellmcp serve` in both eras, beside Codex 0.97.0's `codex-exec-mcp-server` (Rust):
 * - `initialize` (legacy era): spawn → first byte of the answer (answered early, before the SDK loads:
 *   src/mcp/early-initialize.ts);
 * - ready: spawn → the answer to `tools/list` sent right after `initialize` (the SDK and the tools loaded);
 * - `server/discover` (modern era, 2026-07-28): spawn → first byte of the answer (the reference and a v1-SDK
 *   shellmcp answer an error; any answer is timed);
 * - idle RSS of a server that answered `initialize` + `tools/list` (500 ms later).
 * Each server starts `runs` times, the servers alternating within each round; medians and paired ratios.
 *
 *   bun bench/initialize.ts [runs]
 *   SHELLMCP_BENCH_BINARY=dist/shellmcp-old bun bench/initialize.ts   # add another build (e.g. before a change)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { benchHome, median, pairedRatio, referenceShellToolDir, ROOT } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 20);
const home = benchHome("shellmcp-bench-init-home-");
const env = { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home };

/** One server to measure. */
interface Target {
  name: string;
  argv: string[];
}

const targets: Target[] = [{ name: "shellmcp", argv: [join(ROOT, "dist", "shellmcp"), "serve"] }];
if (process.env.SHELLMCP_BENCH_BINARY !== undefined)
  targets.push({ name: `shellmcp (${process.env.SHELLMCP_BENCH_BINARY})`, argv: [process.env.SHELLMCP_BENCH_BINARY, "serve"] });
const ref = referenceShellToolDir();
if (ref !== undefined)
  targets.push({
    name: "Codex 0.97.0 (Rust)",
    argv: [
      join(ref, "codex-exec-mcp-server"),
      "--bash",
      join(ref, "bash", "debian-12", "bash"),
      "--execve",
      join(ref, "codex-execve-wrapper"),
    ],
  });

const line = (id: number, method: string, params: unknown) => JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n";
const INITIALIZE = line(1, "initialize", {
  protocolVersion: "2025-06-18",
  capabilities: { elicitation: {} },
  clientInfo: { name: "bench", version: "0" },
});
const INITIALIZED = JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n";
const TOOLS_LIST = line(2, "tools/list", {});
const DISCOVER = line(1, "server/discover", {
  _meta: {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": { name: "bench", version: "0" },
  },
});

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Start `argv`, write `input`, and return ms until `answers` complete lines have come back (and the process). */
async function timed(argv: string[], input: string, answers: number) {
  const t0 = Bun.nanoseconds();
  const p = Bun.spawn(argv, { env, stdin: "pipe", stdout: "pipe", stderr: "ignore" });
  await p.stdin.write(input);
  await p.stdin.flush();
  const reader = p.stdout.getReader();
  let text = "";
  let first = 0;
  const deadline = setTimeout(() => p.kill(), 10000);
  while (text.split("\n").length - 1 < answers) {
    const { value, done } = await reader.read();
    if (done) break;
    if (first === 0) first = (Bun.nanoseconds() - t0) / 1e6;
    text += new TextDecoder().decode(value);
  }
  clearTimeout(deadline);
  return { first, all: (Bun.nanoseconds() - t0) / 1e6, text, p, reader };
}

async function end(p: ReturnType<typeof Bun.spawn>): Promise<void> {
  await (p.stdin as import("bun").FileSink).end();
  p.kill();
  await p.exited;
}

const init = targets.map(() => [] as number[]);
const ready = targets.map(() => [] as number[]);
const discover = targets.map(() => [] as number[]);
const rss = targets.map(() => [] as number[]);
const discoverAnswer: string[] = targets.map(() => "");
for (let i = 0; i < RUNS; i++) {
  for (let j = 0; j < targets.length; j++) {
    const t = targets[j]!;
    const a = await timed(t.argv, INITIALIZE + INITIALIZED + TOOLS_LIST, 2);
    init[j]!.push(a.first);
    ready[j]!.push(a.all);
    if (i % 4 === 0) {
      await Bun.sleep(500);
      rss[j]!.push(rssMiB(a.p.pid));
    }
    await end(a.p);
    const d = await timed(t.argv, DISCOVER, 1);
    if (d.first > 0) discover[j]!.push(d.first);
    discoverAnswer[j] = d.text.trim().slice(0, 140) || "(no answer: the server closed)";
    await end(d.p);
  }
}

const f = (x: number) => (Number.isNaN(x) ? "n/a" : x.toFixed(1)).padStart(8);
const med = (xs: number[]) => (xs.length === 0 ? NaN : median(xs));
console.log(`MCP handshake over stdio, median of ${RUNS} starts (servers alternating); RSS: median of ${rss[0]!.length}`);
console.log(`${"".padEnd(40)}initialize ms  ready ms  discover ms  idle RSS MiB`);
targets.forEach((t, j) =>
  console.log(`${t.name.padEnd(40)}${f(med(init[j]!))}     ${f(med(ready[j]!))}  ${f(med(discover[j]!))}    ${f(med(rss[j]!))}`),
);
targets.forEach((t, j) => console.log(`server/discover → ${t.name}: ${discoverAnswer[j]}`));
const r = targets.length - 1;
if (ref !== undefined && r > 0)
  console.log(
    `ours / reference (paired; the reference has no server/discover): initialize ${pairedRatio(init[0]!, init[r]!).toFixed(2)}×, ready ${pairedRatio(ready[0]!, ready[r]!).toFixed(2)}×, ` +
      `idle RSS ${(median(rss[0]!) / median(rss[r]!)).toFixed(2)}× ` +
      `(issue 33 budget: initialize ≤ 2×, idle RSS ≤ 45 MiB)`,
  );
