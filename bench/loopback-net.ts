/**
 * What the server's loopback network (src/sandbox/linux/loopback-net.ts) costs a network-off bubblewrap call: a trivial
 * `shell` call (`true`) on a server whose calls join it vs one with `SHELLMCP_SERVER_LOOPBACK=off` (a fresh
 * `--unshare-net` per call, as before), interleaved, medians and the paired ratio; and the first call of each (the
 * loopback server's makes the namespace). Through the compiled binary and the MCP SDK client.
 *
 *   bun bench/loopback-net.ts [runs]
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../test/helpers/mcp.ts";
import { benchDir, benchHome, median, pairedRatio } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 40);
const work = join(benchDir("shellmcp-bench-loopback-"), "work");
mkdirSync(work);

async function server(env: Record<string, string>): Promise<Session> {
  const s = await startServe({ args: ["--sandbox-backend", "bwrap"], env, codexHome: benchHome("shellmcp-bench-lo-home-") });
  await s.sandboxState({ type: "workspace-write", network_access: false, writable_roots: [work] }, work);
  return s;
}

async function timed(s: Session): Promise<number> {
  const t0 = Bun.nanoseconds();
  const r = await s.shell({ command: "true", workdir: work, login: false });
  if (r.isError) throw new Error(JSON.stringify(r.raw));
  return (Bun.nanoseconds() - t0) / 1e6;
}

const joined = await server({});
const fresh = await server({ SHELLMCP_SERVER_LOOPBACK: "off" });
const first = { joined: await timed(joined), fresh: await timed(fresh) };
const a: number[] = [];
const b: number[] = [];
for (let i = 0; i < RUNS; i++) {
  if (i % 2 === 0) {
    a.push(await timed(joined));
    b.push(await timed(fresh));
  } else {
    b.push(await timed(fresh));
    a.push(await timed(joined));
  }
}
console.log(`first call: joined ${first.joined.toFixed(1)} ms (makes the namespace), fresh ${first.fresh.toFixed(1)} ms`);
console.log(
  `trivial call, median of ${RUNS}: joined ${median(a).toFixed(2)} ms, fresh ${median(b).toFixed(2)} ms, paired ratio ${pairedRatio(a, b).toFixed(2)}×`,
);
await joined.close();
await fresh.close();
