/**
 * What hiding credential stores and secrets (src/sandbox/secrets.ts, issue 39) costs a trivial workspace-write
 * `shell` call (`true`): this build against another build of shellmcp (`SHELLMCP_BENCH_BASE`, e.g. the build before
 * the change), interleaved round by round, paired ratios. Two HOMEs: one with six stores and secrets (`~/.ssh`,
 * `~/.aws`, `~/.config/gh`, `~/.npmrc`, `~/.netrc`, `$CODEX_HOME/auth.json`) and one with none.
 *
 *   SHELLMCP_BENCH_BASE=/path/to/old/shellmcp bun bench/hidden-paths.ts [bwrap|landlock] [rounds]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startLineRpc, type LineRpc } from "../test/helpers/reference.ts";
import { benchHome, median, pairedRatio, ROOT } from "./lib.ts";

const BACKEND = process.argv[2] ?? "bwrap";
const ROUNDS = Number(process.argv[3] ?? 60);
const BASE = process.env.SHELLMCP_BENCH_BASE;
if (BASE === undefined) throw new Error("set SHELLMCP_BENCH_BASE to the shellmcp build to compare with");
const OURS = join(ROOT, "dist", "shellmcp");

/** A HOME (with CODEX_HOME inside), a workspace and a TMPDIR; with `stores`, six things to hide. */
function world(stores: boolean): { home: string; codexHome: string; work: string; tmp: string } {
  const base = benchHome("shellmcp-bench-hidden-");
  const home = join(base, "home");
  const codexHome = join(home, ".codex");
  const work = join(base, "work");
  const tmp = join(base, "tmp");
  for (const d of [codexHome, work, tmp]) mkdirSync(d, { recursive: true });
  for (let i = 0; i < 20; i++) writeFileSync(join(home, `file${i}`), "x");
  writeFileSync(join(home, ".gitconfig"), "");
  if (stores) {
    for (const d of [".ssh", ".aws", ".config/gh"]) mkdirSync(join(home, d), { recursive: true });
    for (const f of [".npmrc", ".netrc", ".ssh/id_ed25519", ".aws/credentials", ".codex/auth.json"]) writeFileSync(join(home, f), "x\n");
  }
  return { home, codexHome, work, tmp };
}

async function server(exe: string, w: ReturnType<typeof world>): Promise<LineRpc> {
  const rpc = await startLineRpc([exe, "serve", "--sandbox-backend", BACKEND], {
    PATH: "/usr/bin:/bin",
    HOME: w.home,
    CODEX_HOME: w.codexHome,
    TMPDIR: w.tmp,
  });
  await rpc.request("codex/sandbox-state/update", {
    sandboxPolicy: { type: "workspace-write", network_access: false },
    sandboxCwd: w.work,
  });
  return rpc;
}

async function call(rpc: LineRpc, work: string): Promise<number> {
  const t0 = Bun.nanoseconds();
  const r = await rpc.request("tools/call", { name: "shell", arguments: { command: "true", workdir: work, login: false } });
  if (r.error !== undefined || (r.result as { isError?: boolean }).isError === true) throw new Error(JSON.stringify(r));
  return (Bun.nanoseconds() - t0) / 1e6;
}

for (const stores of [true, false]) {
  const w = world(stores);
  const servers = [await server(BASE, w), await server(OURS, w)];
  const t: number[][] = [[], []];
  for (const s of servers) for (let i = 0; i < 5; i++) await call(s, w.work);
  for (let i = 0; i < ROUNDS; i++)
    for (let k = 0; k < 2; k++) {
      const j = (i + k) % 2;
      t[j]!.push(await call(servers[j]!, w.work));
    }
  for (const s of servers) await s.close();
  console.log(
    `${BACKEND}, HOME ${stores ? "with six stores and secrets" : "with none"}: base ${median(t[0]!).toFixed(2)} ms, this build ${median(t[1]!).toFixed(2)} ms, paired ratio ${pairedRatio(t[1]!, t[0]!).toFixed(3)}`,
  );
}
process.exit(0);
