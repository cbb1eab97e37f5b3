/**
 * A trivial `shell` call (`true`, login: false) under workspace-write with the Landlock backend (issue 40): shellmcp
 * before (`SHELLMCP_BENCH_BEFORE`, default /work/main/dist/shellmcp when it exists: the helper, a Bun start per call),
 * after (dist/shellmcp: sandbox-exec, patches/sandbox-exec.c), the same binary with `SHELLMCP_SANDBOX_EXEC=off`
 * (the helper again, same build), and Codex 0.97.0's `codex-exec-mcp-server` with Codex 0.97's own Landlock helper.
 * Every server gets Codex 0.97's `codex/sandbox-state/update` and must first show it enforces the sandbox (a write
 * inside the workspace works, one beside it fails), else it is left out with the reason. A floor beside them: this
 * build with danger-full-access (what a call costs with no sandbox at all). Calls interleaved, the
 * order rotating each round; median per server and paired ratios to the reference.
 *
 *   bun bench/call-landlock.ts [calls=60]
 */
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { startLineRpc, type LineRpc } from "../test/helpers/reference.ts";
import { benchHome, codex097Exe, median, pairedRatio, referenceShellToolDir, ROOT } from "./lib.ts";

const CALLS = Number(process.argv[2] ?? 60);
const AFTER = join(ROOT, "dist", "shellmcp");
const BEFORE = process.env.SHELLMCP_BENCH_BEFORE ?? (existsSync("/work/main/dist/shellmcp") ? "/work/main/dist/shellmcp" : undefined);
const home = benchHome("shellmcp-bench-landlock-");
const env = { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home };
// The workspaces lie outside /tmp and $TMPDIR (writable roots of workspace-write) and outside CODEX_HOME.
const ww = benchHome("shellmcp-bench-landlock-ws-");
const WW_POLICY = { type: "workspace-write", network_access: false, exclude_tmpdir_env_var: false, exclude_slash_tmp: false };
const codex097 = codex097Exe();

interface Server {
  name: string;
  rpc: LineRpc;
  ws: string;
}

/** One `shell` call; its ms and text, or throws. */
async function call(s: Server, command: string): Promise<{ ms: number; text: string }> {
  const t0 = Bun.nanoseconds();
  const r = await s.rpc.request("tools/call", { name: "shell", arguments: { command, workdir: s.ws, login: false, timeout_ms: 30000 } });
  const ms = (Bun.nanoseconds() - t0) / 1e6;
  if (r.error !== undefined) throw new Error(`${s.name}: ${JSON.stringify(r.error)}`);
  const res = r.result as { content?: { text?: string }[]; isError?: boolean };
  const text = res.content?.map((c) => c.text ?? "").join("") ?? "";
  if (res.isError === true) throw new Error(`${s.name}: call failed: ${text.slice(0, 300)}`);
  return { ms, text };
}

/**
 * Start `argv` (with `extraEnv`), send it the workspace-write state (`policy`), check that it enforces it (not for
 * danger-full-access, the floor: the same call with no sandbox at all).
 */
async function start(name: string, argv: string[], extraEnv: Record<string, string> = {}, policy: object = WW_POLICY): Promise<Server> {
  const ws = join(ww, `${name}-ws`);
  const outside = join(ww, `${name}-outside`);
  mkdirSync(ws);
  mkdirSync(outside);
  const s: Server = { name, rpc: await startLineRpc(argv, { ...env, ...extraEnv }), ws };
  const upd = await s.rpc.request("codex/sandbox-state/update", {
    sandboxPolicy: policy,
    codexLinuxSandboxExe: codex097 ?? join(ROOT, "dist", "codex-linux-sandbox"),
    sandboxCwd: ws,
    useLinuxSandboxBwrap: false,
  });
  if (upd.error !== undefined) throw new Error(`${name} refused the sandbox state: ${JSON.stringify(upd.error)}`);
  if (policy !== WW_POLICY) return s;
  const { text } = await call(s, `touch probe-in; touch '${outside}/probe-out'; true`);
  const inside = existsSync(join(ws, "probe-in"));
  const escaped = existsSync(join(outside, "probe-out"));
  if (!inside || escaped)
    throw new Error(`${name} does not enforce workspace-write (inside ${inside}, outside ${escaped}): ${text.slice(0, 300)}`);
  rmSync(join(ws, "probe-in"));
  return s;
}

const servers: Server[] = [];
const missing: string[] = [];
const tryStart = async (name: string, argv: () => string[] | string, extraEnv?: Record<string, string>, policy?: object) => {
  const a = argv();
  if (typeof a === "string") return void missing.push(`${name}: ${a}`);
  try {
    servers.push(await start(name, a, extraEnv, policy));
  } catch (e) {
    missing.push(`${name}: ${(e as Error).message}`);
  }
};
const LANDLOCK = ["serve", "--sandbox-backend", "landlock"];
await tryStart("before (main, helper)", () => (BEFORE === undefined ? "no before binary (SHELLMCP_BENCH_BEFORE)" : [BEFORE, ...LANDLOCK]));
await tryStart("after (sandbox-exec)", () => [AFTER, ...LANDLOCK]);
await tryStart("after, SHELLMCP_SANDBOX_EXEC=off (helper)", () => [AFTER, ...LANDLOCK], { SHELLMCP_SANDBOX_EXEC: "off" });
await tryStart("after, danger-full-access (floor, no sandbox)", () => [AFTER, ...LANDLOCK], {}, { type: "danger-full-access" });
const ref = referenceShellToolDir();
await tryStart("Codex 0.97.0 + 0.97 helper (Landlock)", () =>
  ref === undefined || codex097 === undefined
    ? "reference not installed (npm ci)"
    : [join(ref, "codex-exec-mcp-server"), "--bash", join(ref, "bash", "debian-12", "bash"), "--execve", join(ref, "codex-execve-wrapper")],
);

for (let i = 0; i < 3; i++) for (const s of servers) await call(s, "true");
const samples = new Map<Server, number[]>(servers.map((s) => [s, []]));
for (let i = 0; i < CALLS; i++)
  for (let k = 0; k < servers.length; k++) {
    const s = servers[(i + k) % servers.length]!;
    samples.get(s)!.push((await call(s, "true")).ms);
  }
for (const s of servers) await s.rpc.close();

const refServer = servers.find((s) => s.name.startsWith("Codex"));
console.log(`trivial call (true, login: false), workspace-write, Landlock backend, median of ${CALLS} interleaved calls:`);
for (const s of servers) {
  const xs = samples.get(s)!;
  const ratio = refServer !== undefined && s !== refServer ? `, ${pairedRatio(xs, samples.get(refServer)!).toFixed(2)}× the reference` : "";
  console.log(`  ${s.name.padEnd(44)} ${median(xs).toFixed(1).padStart(6)} ms${ratio}`);
}
for (const m of missing) console.log(`  n/a ${m}`);
