/**
 * A room's network request (issue 30), through the compiled `serve` and a real MCP client: one `shell` call runs an
 * allowed python3 that makes N sequential HTTP GETs to a server on 127.0.0.1 (a new connection each), in its room.
 * Per-request cost = the time python3 itself measures around the N requests (after one warm-up request), / N: the
 * room's start is not in it. Median of rounds (one call each).
 *
 * - direct: `[shellmcp.room_network] python3 = "host"` (the room on the host's network: what every room had before
 *   issue 30, and what the reference does — Codex runs escalated programs on the host, with no proxy to compare);
 * - grant: `python3 = ["127.0.0.1"]` (a proxy of its own, issue 30's domain grant);
 * - proxy mode: `[features] network_proxy` with 127.0.0.1 allowed and a network-on call (the call's proxy, the only
 *   proxied room before issue 30; run this with `SHELLMCP_BENCH_BINARY=/path/to/old/dist/shellmcp` for "before").
 * Both backends. Needs bubblewrap and python3.
 *
 *   bun bench/room-network.ts [requests] [rounds]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { homeDir } from "../test/helpers/binary.ts";
import { startServe } from "../test/helpers/mcp.ts";
import { median } from "./lib.ts";

const N = Number(process.argv[2] ?? 50);
const ROUNDS = Number(process.argv[3] ?? 5);
const binary = process.env.SHELLMCP_BENCH_BINARY;
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
const url = `http://127.0.0.1:${server.port}/`;
const GET = `import sys, time, urllib.request
n = int(sys.argv[1]); url = sys.argv[2]
urllib.request.urlopen(url, timeout=10).read()
t0 = time.perf_counter()
for _ in range(n):
    urllib.request.urlopen(url, timeout=10).read()
print("done", n, "ms", (time.perf_counter() - t0) * 1000)`;

type Variant = "direct" | "grant" | "proxy-mode";
const CONFIG: Record<Variant, string> = {
  direct: '[shellmcp.room_network]\npython3 = "host"\n',
  grant: '[shellmcp.room_network]\npython3 = ["127.0.0.1"]\n',
  "proxy-mode": '[features.network_proxy]\nenabled = true\n[features.network_proxy.domains]\n"127.0.0.1" = "allow"\n',
};

async function measure(variant: Variant, backend: "bwrap" | "landlock"): Promise<number[]> {
  // Outside /tmp: serve refuses a CODEX_HOME a sandboxed command could have written.
  const home = homeDir(`shellmcp-bench-${variant}-${backend}-`);
  const ws = join(home, "ws");
  mkdirSync(ws, { recursive: true });
  writeFileSync(join(home, "config.toml"), CONFIG[variant]);
  writeFileSync(join(ws, "get.py"), GET);
  const s = await startServe({
    rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
    args: ["--sandbox-backend", backend],
    codexHome: home,
    ...(binary !== undefined ? { command: [binary] } : {}),
  });
  try {
    await s.sandboxState({ type: "workspace-write", network_access: variant === "proxy-mode" }, ws);
    const per: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const out = (await s.shell({ command: `python3 get.py ${N} ${url}`, workdir: ws, login: false, timeout_ms: 60_000 })).out.output;
      const m = /done \d+ ms ([\d.]+)/.exec(out);
      if (m === null) throw new Error(`${variant}/${backend}: ${out}`);
      per.push(Number(m[1]) / N);
    }
    return per;
  } finally {
    await s.close();
  }
}

const only = process.env.SHELLMCP_BENCH_VARIANTS?.split(",") as Variant[] | undefined;
const variants: Variant[] = only ?? ["direct", "grant", "proxy-mode"];
console.log(`per request (${N} sequential GETs from an escalated python3 in its room), median of ${ROUNDS} rounds`);
for (const backend of ["bwrap", "landlock"] as const)
  for (const v of variants) {
    try {
      console.log(`${backend.padEnd(9)} ${v.padEnd(11)} ${median(await measure(v, backend)).toFixed(3)} ms`);
    } catch (e) {
      console.log(`${backend.padEnd(9)} ${v.padEnd(11)} failed: ${(e as Error).message.slice(0, 200)}`);
    }
  }
await server.stop(true);
