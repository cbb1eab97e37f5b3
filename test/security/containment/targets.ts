/**
 * The servers a containment scenario (./scenarios.ts) runs against: shellmcp, on a backend and as a kind of client
 * drives it, and the Rust reference 0.97 (./generate.ts only). Each target gets a fresh workspace (a git repository
 * with one commit), a folder outside every writable root, and its own HOME/CODEX_HOME holding the scenario's rules.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { confDir, oneCommitRepo, serveWithPid } from "../../helpers/attack.ts";
import { ROOT } from "../../helpers/binary.ts";
import { startReference } from "../../helpers/reference.ts";
import { assertOutside } from "../../helpers/test-dirs.ts";
import type { ScenarioSetup, Target } from "./scenarios.ts";

/** shellmcp's sandbox backends. */
export type Backend = "bwrap" | "landlock";
/** `codex`: the client sends Codex's sandbox state; `plain`: none (the server's `--sandbox`/`--cd` decide). */
export type ClientKind = "codex" | "plain";
export { COLUMNS } from "./targets-columns.ts";

/** A fresh workspace (a git repository, one commit) and an outside folder. */
function folders(): { ws: string; outside: string } {
  return { ws: oneCommitRepo(confDir("contain-ws")), outside: assertOutside(confDir("contain-outside")) };
}

/** shellmcp serving `setup` on `backend`, driven as `client` would (workspace-write, network off). */
export async function oursTarget(setup: ScenarioSetup, backend: Backend, client: ClientKind): Promise<Target & { close(): Promise<void> }> {
  const { ws, outside } = folders();
  const args = ["--sandbox-backend", backend, ...(client === "plain" ? ["--sandbox", "workspace-write", "--cd", ws] : [])];
  const s = await serveWithPid({ ...(setup.rules !== undefined ? { rules: setup.rules } : {}), args, env: { ...setup.env } });
  if (client === "codex") await s.sandboxState({ type: "workspace-write", network_access: false }, ws);
  return {
    ws,
    outside,
    home: s.codexHome,
    pid: s.pid,
    run: async (command, timeoutMs = 20_000) => (await s.shell({ command, workdir: ws, login: false, timeout_ms: timeoutMs })).out,
    close: () => s.close(),
  };
}

/** Codex 0.97's own binary: the reference server's sandbox helper, as Codex 0.97 passes it. */
const CODEX_097 = join(ROOT, "node_modules", "@openai", "codex-0.97", "vendor", "x86_64-unknown-linux-musl", "codex", "codex");

/**
 * The Rust reference 0.97 serving `setup` (workspace-write, network off, Landlock: the published 0.97 helper was
 * built without bubblewrap). Throws when the reference or Codex 0.97 is not installed.
 */
export async function referenceTarget(setup: ScenarioSetup): Promise<Target & { close(): Promise<void> }> {
  if (!existsSync(CODEX_097)) throw new Error(`Codex 0.97 is not installed (${CODEX_097})`);
  const { ws, outside } = folders();
  const r = await startReference(CODEX_097, {
    ws,
    home: confDir("contain-refhome"),
    policy: { type: "workspace-write", network_access: false },
    ...(setup.rules !== undefined ? { rules: setup.rules } : {}),
    ...(setup.env !== undefined ? { env: setup.env } : {}),
  });
  return {
    ws,
    outside,
    home: r.home,
    pid: r.pid,
    run: async (command, timeoutMs = 20_000) => {
      const x = await r.shell(command, timeoutMs);
      return { exit_code: x.exit_code, output: x.output ?? x.error ?? "" };
    },
    close: () => r.close(),
  };
}
