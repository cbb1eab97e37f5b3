/**
 * `shellmcp serve --listen` (MCP over streamable HTTP) against `serve` on stdio, the same binary, both driven by the
 * MCP SDK v1 client (`StreamableHTTPClientTransport` with the generated token vs `StdioClientTransport`):
 * - a transport round trip (`tools/list`) and a trivial call (`shell` of `true`, the default read-only sandbox),
 *   interleaved round by round, medians and the paired ratio HTTP / stdio (target ≤ 1.2× for the call);
 * - CLIENTS concurrent HTTP clients (default 64), each making CALLS trivial calls (default 5): latency
 *   percentiles, the server's RSS before and with every client connected, and RSS per client.
 * Bounded: every client and call is counted in advance, on 127.0.0.1 only, and the run gives up after 5 minutes.
 *
 *   bun bench/http.ts [rounds] [clients] [calls]
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { benchHome, median, pairedRatio, ROOT } from "./lib.ts";

const ROUNDS = Number(process.argv[2] ?? 40);
const CLIENTS = Number(process.argv[3] ?? 64);
const CALLS = Number(process.argv[4] ?? 5);
const BINARY = process.env.SHELLMCP_BENCH_BINARY ?? join(ROOT, "dist", "shellmcp");
setTimeout(() => {
  console.error("bench/http.ts: gave up after 5 minutes");
  process.exit(1);
}, 300_000).unref();

const home = benchHome("shellmcp-bench-http-");
const env = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: home, CODEX_HOME: home, LC_ALL: "C" };

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** Start `serve --listen http://127.0.0.1:0/mcp`; resolves with its URL, token and process. */
async function startHttp(): Promise<{ url: URL; token: string; proc: Bun.Subprocess<"ignore", "pipe", "pipe"> }> {
  const proc = Bun.spawn([BINARY, "serve", "--listen", "http://127.0.0.1:0/mcp"], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let out = "";
  let err = "";
  await new Promise<void>((res, rej) => {
    const check = () => out.includes("\n") && /Bearer [^"]+"/.test(err) && res();
    void (async () => {
      for await (const c of proc.stdout) ((out += new TextDecoder().decode(c)), check());
    })();
    void (async () => {
      for await (const c of proc.stderr) ((err += new TextDecoder().decode(c)), check());
    })();
    void proc.exited.then(() => rej(new Error(`serve --listen exited: ${err}`)));
  });
  return { url: new URL(out.split("\n")[0]!), token: /Bearer ([^"]+)"/.exec(err)![1]!, proc };
}

/** A connected client; `end()` ends its MCP session (DELETE: the v1 client's close() alone leaves it open). */
async function httpClient(url: URL, token: string): Promise<Client & { end: () => Promise<void> }> {
  const c = new Client({ name: "bench-http", version: "0" });
  const t = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await c.connect(t);
  return Object.assign(c, { end: async () => (await t.terminateSession(), await c.close()) });
}

async function timed(f: () => Promise<unknown>): Promise<number> {
  const t0 = Bun.nanoseconds();
  await f();
  return (Bun.nanoseconds() - t0) / 1e6;
}

const trivial = (c: Client) => c.callTool({ name: "shell", arguments: { command: "true", workdir: home, login: false } });

const http = await startHttp();
// The server is this bench's child: a failure below must not leave it running.
process.on("exit", () => http.proc.kill("SIGKILL"));
const stdio = new Client({ name: "bench-stdio", version: "0" });
await stdio.connect(new StdioClientTransport({ command: BINARY, args: ["serve"], env }));
const overHttp = await httpClient(http.url, http.token);
for (let i = 0; i < 5; i++) for (const c of [stdio, overHttp]) (await trivial(c), await c.listTools()); // warm-up

const lists: [number[], number[]] = [[], []];
const calls: [number[], number[]] = [[], []];
for (let i = 0; i < ROUNDS; i++) {
  const order = i % 2 === 0 ? [0, 1] : [1, 0];
  for (const k of order) {
    const c = k === 0 ? stdio : overHttp;
    lists[k]!.push(await timed(() => c.listTools()));
    calls[k]!.push(await timed(() => trivial(c)));
  }
}
const f = (x: number) => x.toFixed(2).padStart(7);
console.log(`rounds: ${ROUNDS} (interleaved), medians in ms`);
console.log(`                      stdio     http   http/stdio (paired)`);
console.log(`tools/list          ${f(median(lists[0]))}  ${f(median(lists[1]))}   ${pairedRatio(lists[1], lists[0]).toFixed(2)}×`);
console.log(`shell "true"        ${f(median(calls[0]))}  ${f(median(calls[1]))}   ${pairedRatio(calls[1], calls[0]).toFixed(2)}×`);
await stdio.close();
await overHttp.end();

// Many clients at once.
const rss0 = rssMiB(http.proc.pid);
const clients: (Client & { end: () => Promise<void> })[] = [];
for (let i = 0; i < CLIENTS; i++) clients.push(await httpClient(http.url, http.token));
const rss1 = rssMiB(http.proc.pid);
const lat: number[] = [];
const t0 = Bun.nanoseconds();
await Promise.all(
  clients.map(async (c) => {
    for (let j = 0; j < CALLS; j++) lat.push(await timed(() => trivial(c)));
  }),
);
const wall = (Bun.nanoseconds() - t0) / 1e9;
const rss2 = rssMiB(http.proc.pid);
console.log(
  `\n${CLIENTS} concurrent HTTP clients × ${CALLS} calls of shell "true": ${lat.length} calls in ${wall.toFixed(1)} s (${(lat.length / wall).toFixed(0)}/s)`,
);
console.log(`latency ms: p50 ${f(pct(lat, 50))}  p90 ${f(pct(lat, 90))}  p99 ${f(pct(lat, 99))}  max ${f(Math.max(...lat))}`);
console.log(
  `server RSS MiB: ${rss0.toFixed(1)} before, ${rss1.toFixed(1)} with ${CLIENTS} sessions open (${(((rss1 - rss0) * 1024) / CLIENTS).toFixed(0)} KiB per client), ${rss2.toFixed(1)} after the calls`,
);
for (const c of clients) await c.end().catch(() => undefined);
http.proc.kill("SIGTERM");
await http.proc.exited;
process.exit(0);
