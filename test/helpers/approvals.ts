/**
 * What the approver suites with real clients (test/approvals/claude-code.test.ts, gemini.test.ts) share: a private
 * CODEX_HOME whose rules make `touch` ask, and the person at `shellmcp approvals` approving the request that waits.
 */
import { expect } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { confDir } from "./attack.ts";
import { ensureBinary } from "./binary.ts";

/** A fresh CODEX_HOME (`confDir(prefix)`) whose `rules/default.rules` makes every `touch` a prompt. */
export function touchPromptsHome(prefix: string): string {
  const codexHome = confDir(prefix);
  mkdirSync(join(codexHome, "rules"));
  writeFileSync(join(codexHome, "rules", "default.rules"), 'prefix_rule(pattern=["touch"], decision="prompt")\n');
  return codexHome;
}

/**
 * Approve, as the person beside the client, the first request waiting under `codexHome`: poll `shellmcp approvals
 * --list --json` for up to 40 s, expect one to appear, then expect `--approve <id>` to succeed.
 */
export async function approveWaiting(codexHome: string): Promise<void> {
  const env = { PATH: "/usr/bin:/bin", HOME: codexHome, CODEX_HOME: codexHome };
  let id: string | undefined;
  const until = Date.now() + 40_000;
  while (id === undefined && Date.now() < until) {
    const out = Bun.spawnSync([ensureBinary(), "approvals", "--list", "--json"], { env }).stdout.toString();
    if (out !== "") id = (JSON.parse(out.split("\n")[0]!) as { id: string }).id;
    else await Bun.sleep(200);
  }
  expect(id).toBeDefined();
  expect(Bun.spawnSync([ensureBinary(), "approvals", "--approve", id!], { env }).exitCode).toBe(0);
}

/**
 * What client `p` printed, once it has ended with exit status 0 (expected); first, when `approve`, the waiting
 * request is approved ({@link approveWaiting}). If anything fails on the way, the client is killed and reaped.
 */
export async function clientOutput(
  p: { stdout: ReadableStream<Uint8Array>; exited: Promise<number>; kill(): void },
  codexHome: string,
  approve: boolean,
): Promise<string> {
  try {
    if (approve) await approveWaiting(codexHome);
    const out = await new Response(p.stdout).text();
    expect(await p.exited).toBe(0);
    return out;
  } finally {
    p.kill();
    await p.exited;
  }
}
