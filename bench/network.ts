/**
 * The network proxy (src/network/proxy.ts) against a direct connection, on loopback only:
 *
 * - latency: one small GET per new TCP connection (connect, request, read to close), direct to the server vs
 *   through the proxy's HTTP listener (absolute-form); N alternating rounds, paired ratio (target ≤ 1.2×);
 * - throughput: a 64 MiB download, direct vs through the proxy (plain HTTP and a CONNECT tunnel); paired ratio of
 *   the rates (target ≥ 0.8×);
 * - memory: the proxy in a process of its own (like the server), its RSS idle and under 50 parallel downloads read
 *   slowly (target ≤ 50 MiB growth).
 *
 *   bun bench/network.ts [rounds]
 */
import * as net from "node:net";
import { emptyNetworkPolicy } from "../src/network/policy.ts";
import { CallProxy } from "../src/network/proxy.ts";
import { median, pairedRatio } from "./lib.ts";

if (process.argv[2] === "child") {
  // The proxy alone in this process: print its port, serve until killed.
  const proxy = new CallProxy({ policy: { ...emptyNetworkPolicy(), enabled: true, allow: ["127.0.0.1"] } });
  const ports = await proxy.listenLoopback();
  console.log(ports.http);
  await new Promise(() => undefined);
}

const ROUNDS = Number(process.argv[2] ?? 8);
const BIG = Buffer.alloc(64 * 1024 * 1024, 7);
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => (new URL(req.url).pathname === "/big" ? new Response(BIG) : new Response("ok\n")),
});
const port = server.port!;

/** Connect to `to`, send `head`, read until the peer closes; resolves with the bytes read (or counts them). */
function exchange(to: number, head: string, tunnel?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let n = 0;
    let tunnelled = tunnel === undefined;
    const s = net.connect(to, "127.0.0.1", () => s.write(tunnel ?? head));
    s.on("data", (d) => {
      if (!tunnelled) {
        tunnelled = true; // the proxy's "200 Connection established" arrives alone before anything is sent
        s.write(head);
        return;
      }
      n += d.length;
    });
    s.on("close", () => resolve(n));
    s.on("error", reject);
  });
}

const get = (path: string, absolute: boolean) =>
  `GET ${absolute ? `http://127.0.0.1:${port}` : ""}${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`;

const proxy = new CallProxy({ policy: { ...emptyNetworkPolicy(), enabled: true, allow: ["127.0.0.1"] } });
const { http } = await proxy.listenLoopback();

async function timeIt(f: () => Promise<unknown>): Promise<number> {
  const t0 = Bun.nanoseconds();
  await f();
  return (Bun.nanoseconds() - t0) / 1e6;
}

// Latency: 200 requests per round.
const REQS = 200;
const direct: number[] = [];
const proxied: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  direct.push(
    (await timeIt(async () => {
      for (let i = 0; i < REQS; i++) await exchange(port, get("/", false));
    })) / REQS,
  );
  proxied.push(
    (await timeIt(async () => {
      for (let i = 0; i < REQS; i++) await exchange(http, get("/", true));
    })) / REQS,
  );
}
console.log(
  `latency per request (new connection each): direct ${median(direct).toFixed(3)} ms, proxied ${median(proxied).toFixed(3)} ms, ratio ${pairedRatio(proxied, direct).toFixed(2)}×`,
);

// Throughput: MiB/s of a 64 MiB download.
const rate = (ms: number) => BIG.length / 1048576 / (ms / 1000);
const dRate: number[] = [];
const pRate: number[] = [];
const tRate: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  dRate.push(rate(await timeIt(() => exchange(port, get("/big", false)))));
  pRate.push(rate(await timeIt(() => exchange(http, get("/big", true)))));
  tRate.push(
    rate(await timeIt(() => exchange(http, get("/big", false), `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`))),
  );
}
console.log(
  `throughput, 64 MiB: direct ${median(dRate).toFixed(0)} MiB/s, proxied ${median(pRate).toFixed(0)} MiB/s (${pairedRatio(pRate, dRate).toFixed(2)}×), CONNECT ${median(tRate).toFixed(0)} MiB/s (${pairedRatio(tRate, dRate).toFixed(2)}×)`,
);
await proxy.close();

// Memory: the proxy in its own process, 50 parallel downloads read slowly (paused sockets fill, backpressure holds).
const child = Bun.spawn([process.execPath, import.meta.path, "child"], { stdout: "pipe", stderr: "inherit" });
const reader = child.stdout.getReader();
const first = new TextDecoder().decode((await reader.read()).value);
const childPort = Number(first.trim());
const rss = () => {
  const m = /VmRSS:\s+(\d+)/.exec(require("node:fs").readFileSync(`/proc/${child.pid}/status`, "utf8"));
  return Number(m![1]) / 1024;
};
await Bun.sleep(300);
const idle = rss();
const sockets: net.Socket[] = [];
for (let i = 0; i < 50; i++) {
  const s = net.connect(childPort, "127.0.0.1", () => s.write(get("/big", true)));
  s.on("error", () => undefined);
  s.on("data", () => s.pause()); // read one chunk, then stall: the proxy must not buffer the rest
  sockets.push(s);
}
let peak = idle;
for (let i = 0; i < 20; i++) {
  await Bun.sleep(100);
  peak = Math.max(peak, rss());
}
console.log(
  `proxy process RSS: idle ${idle.toFixed(1)} MiB, 50 stalled downloads of 64 MiB ${peak.toFixed(1)} MiB (+${(peak - idle).toFixed(1)} MiB)`,
);
for (const s of sockets) s.destroy();
child.kill();
server.stop(true);
