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
 * Each figure comes with its floor: a trivial relay in the same runtime (Bun's native sockets, a write queue for
 * short writes, no parsing, no policy, no half-close) that dials the server once the client's first bytes arrive,
 * as any proxy of absolute-form requests must. It is measured in the same rounds, so the reader sees what relaying
 * through a Bun process costs by itself and how close the proxy is to it. Latency and throughput are measured
 * twice: with the proxy in this process (client, server and proxy share one thread: the original setting of the
 * targets), and with the proxy (and the floor relay) in a process of their own, as in `shellmcp serve`, where the
 * command (curl) is another process.
 *
 *   bun bench/network.ts [rounds]
 */
import * as net from "node:net";
import { readFileSync } from "node:fs";
import { emptyNetworkPolicy } from "../src/network/policy.ts";
import { CallProxy } from "../src/network/proxy.ts";
import { median, pairedRatio } from "./lib.ts";

/** The bench's policy: the server's address, listed exactly. */
const policy = () => ({ ...emptyNetworkPolicy(), enabled: true, allow: ["127.0.0.1"] });

/**
 * The floor: relay every connection to `127.0.0.1:upstream` once the client's first bytes arrive (nothing parsed
 * or checked), with backpressure (a short write keeps its remainder and pauses the other side until `drain`).
 * Returns its listener.
 */
function floorRelay(upstream: number): Bun.TCPSocketListener<unknown> {
  type Side = { peer?: Bun.Socket<Side>; out: Buffer[]; early?: Buffer[] };
  const relay = (to: Bun.Socket<Side>, from: Bun.Socket<Side>, b: Buffer) => {
    if (to.data.out.length > 0) {
      to.data.out.push(Buffer.from(b));
      return;
    }
    const n = to.write(b);
    if (n >= 0 && n < b.length) {
      to.data.out.push(Buffer.from(b.subarray(n)));
      from.pause();
    }
  };
  const common: Bun.SocketHandler<Side> = {
    data: (s, d) => relay(s.data.peer!, s, d),
    drain(s) {
      const q = s.data.out;
      while (q.length > 0) {
        const n = s.write(q[0]!);
        if (n < 0) q.length = 0;
        else if (n < q[0]!.length) return void (q[0] = q[0]!.subarray(n));
        else q.shift();
      }
      s.data.peer?.resume();
    },
    close: (s) => void s.data.peer?.end(),
    error: () => undefined,
  };
  const l = Bun.listen<Side>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      ...common,
      open: (c) => void (c.data = { out: [], early: [] }),
      data(c, d) {
        if (c.data.peer !== undefined) return relay(c.data.peer, c, d);
        c.data.early!.push(Buffer.from(d));
        if (c.data.early!.length > 1) return;
        void Bun.connect<Side>({ hostname: "127.0.0.1", port: upstream, data: { peer: c, out: [] }, socket: common }).then(
          (u) => {
            c.data.peer = u;
            for (const b of c.data.early!) relay(u, c, b);
          },
          () => c.end(),
        );
      },
    },
  });
  return l as Bun.TCPSocketListener<unknown>;
}

if (process.argv[2] === "child") {
  // The proxy (and the floor relay) alone in this process: print their ports, serve until killed.
  const proxy = new CallProxy({ policy: policy() });
  const ports = await proxy.listenLoopback();
  console.log(`${ports.http} ${floorRelay(Number(process.argv[3])).port}`);
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
const connect = `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;

async function timeIt(f: () => Promise<unknown>): Promise<number> {
  const t0 = Bun.nanoseconds();
  await f();
  return (Bun.nanoseconds() - t0) / 1e6;
}

/** A process of its own serving the proxy and the floor relay; killed when this one exits. */
async function spawnChild(): Promise<{ pid: number; http: number; floor: number; kill: () => void }> {
  const child = Bun.spawn([process.execPath, import.meta.path, "child", String(port)], { stdout: "pipe", stderr: "inherit" });
  const first = new TextDecoder().decode((await child.stdout.getReader().read()).value);
  const [http, floor] = first.trim().split(" ").map(Number) as [number, number];
  process.on("exit", () => child.kill());
  return { pid: child.pid, http, floor, kill: () => child.kill() };
}

const f2 = (x: number) => x.toFixed(2);

/** Latency and throughput rounds against the proxy at `http` and the floor relay at `floor`. */
async function measure(where: string, http: number, floor: number): Promise<void> {
  // Latency: 200 requests per round.
  const REQS = 200;
  const perReq = async (to: number, absolute: boolean) =>
    (await timeIt(async () => {
      for (let i = 0; i < REQS; i++) await exchange(to, get("/", absolute));
    })) / REQS;
  const direct: number[] = [];
  const proxied: number[] = [];
  const floored: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    direct.push(await perReq(port, false));
    proxied.push(await perReq(http, true));
    floored.push(await perReq(floor, true));
  }
  console.log(
    `${where}: latency per request (new connection each): direct ${median(direct).toFixed(3)} ms, proxied ${median(proxied).toFixed(3)} ms, ratio ${f2(pairedRatio(proxied, direct))}×; floor relay ${median(floored).toFixed(3)} ms (${f2(pairedRatio(floored, direct))}×); proxy/floor ${f2(pairedRatio(proxied, floored))}×`,
  );
  // Throughput: MiB/s of a 64 MiB download.
  const rate = (ms: number) => BIG.length / 1048576 / (ms / 1000);
  const dRate: number[] = [];
  const pRate: number[] = [];
  const tRate: number[] = [];
  const fRate: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    dRate.push(rate(await timeIt(() => exchange(port, get("/big", false)))));
    pRate.push(rate(await timeIt(() => exchange(http, get("/big", true)))));
    tRate.push(rate(await timeIt(() => exchange(http, get("/big", false), connect))));
    fRate.push(rate(await timeIt(() => exchange(floor, get("/big", true)))));
  }
  const mibs = (xs: number[], ref: number[] = dRate) => `${median(xs).toFixed(0)} MiB/s (${f2(pairedRatio(xs, ref))}×)`;
  console.log(
    `${where}: throughput, 64 MiB: direct ${median(dRate).toFixed(0)} MiB/s, proxied ${mibs(pRate)}, CONNECT ${mibs(tRate)}; floor relay ${mibs(fRate)}`,
  );
}

const proxy = new CallProxy({ policy: policy() });
const { http } = await proxy.listenLoopback();
const floor = floorRelay(port);
await measure("in process", http, floor.port);
await proxy.close();
floor.stop(true);

const speed = await spawnChild();
await measure("own process", speed.http, speed.floor);
speed.kill();

// Memory: the proxy in its own process, 50 parallel downloads read slowly (paused sockets fill, backpressure holds).
const child = await spawnChild();
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))![1]) / 1024;
await Bun.sleep(300);
const idle = rss();
const sockets: net.Socket[] = [];
for (let i = 0; i < 50; i++) {
  const s = net.connect(child.http, "127.0.0.1", () => s.write(get("/big", true)));
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
await server.stop(true);
