/**
 * Per-exec cost of interception: 200 intercepted `/bin/true` in one bash run, decision Run.
 *
 * - ours: patched bash → shellmcp as codex-execve-wrapper → our EscalationServer (in this process);
 * - reference: Codex 0.97.0's codex-exec-mcp-server + its wrapper + its bundled bash, driven over MCP stdio
 *   (`tools/call shell` under danger-full-access).
 * Per-exec cost = (time of the 200-exec command − time of the same command with 0 execs) / 200, so the fixed
 * cost of a call (MCP round trip, shell start) cancels out. Median of 5 rounds.
 *
 *   bun bench/escalation.ts [execs]
 */
import { mkdirSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EscalationServer } from "../src/escalate/server.ts";
import { startLineRpc } from "../test/helpers/reference.ts";
import { median, referenceShellToolDir, ROOT } from "./lib.ts";

const N = Number(process.argv[2] ?? 200);
const ROUNDS = 5;
const loop = (n: number) => `for i in $(/usr/bin/seq 1 ${n}); do /bin/true; done`;

const dir = mkdtempSync(join(tmpdir(), "shellmcp-bench-"));
const wrapper = join(dir, "codex-execve-wrapper");
symlinkSync(join(ROOT, "dist", "shellmcp"), wrapper);

async function oursOnce(server: EscalationServer, script: string): Promise<number> {
  const l = server.listen({ decide: () => ({ kind: "Run" }), boundary: { baseEnv: {}, writable: { full: false, roots: [], readOnly: [] } } });
  const t0 = Bun.nanoseconds();
  const p = Bun.spawn([join(ROOT, "dist", "shells", "bash"), "-c", script], {
    env: { PATH: "/usr/bin:/bin", ...l.shellEnv(wrapper, 3) },
    stdio: ["ignore", "ignore", "ignore", l.clientFd],
  });
  l.releaseClientFd();
  await p.exited;
  const t = (Bun.nanoseconds() - t0) / 1e6;
  await l.close();
  return t;
}

async function measure(run: (script: string) => Promise<number>): Promise<number> {
  await run(loop(10)); // warm-up
  const per: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const base = await run(loop(0));
    const full = await run(loop(N));
    per.push((full - base) / N);
  }
  return median(per);
}

const server = await EscalationServer.start();
const ours = await measure((s) => oursOnce(server, s));
await server.stop();
console.log(`per intercepted exec (${N} × /bin/true in one bash run, decision Run), median of ${ROUNDS}`);
console.log(`ours (shellmcp wrapper + server)        ${ours.toFixed(3)} ms`);

const ref = referenceShellToolDir();
if (ref === undefined) {
  console.log("reference not installed (npm i): skipped");
} else {
  const home = join(dir, "codex-home");
  mkdirSync(home);
  const work = join(dir, "work");
  mkdirSync(work);
  const rpc = await startLineRpc([join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")], {
    PATH: "/usr/bin:/bin",
    HOME: "/root",
    CODEX_HOME: home,
  });
  await rpc.request("codex/sandbox-state/update", { sandboxPolicy: { type: "danger-full-access" }, sandboxCwd: work });
  const refOnce = async (script: string) => {
    const t0 = Bun.nanoseconds();
    await rpc.request("tools/call", { name: "shell", arguments: { command: script, workdir: work, login: false } });
    return (Bun.nanoseconds() - t0) / 1e6;
  };
  const theirs = await measure(refOnce);
  await rpc.close();
  console.log(`reference 0.97.0 (Rust wrapper + server) ${theirs.toFixed(3)} ms`);
  console.log(`ours / reference: ${(ours / theirs).toFixed(2)}×`);
}
