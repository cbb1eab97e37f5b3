/**
 * Attacks on the git guard and the escalation boundary from ordinary `shell` calls of the compiled `serve` (the issue
 * 34/30 attack review's set-up): a served workspace that is a fresh repository, and a user's repository outside every
 * writable root to judge on the host. Used by test/security/git-outside-untouched.test.ts, git-guard-memory and
 * git-guard-report.
 */
import { expect } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { confDir, hostGit, serveWithPid, type AttackSession } from "./attack.ts";
import { assertOutside } from "./test-dirs.ts";

/** The backends the review ran against. */
export type Backend = "bwrap" | "landlock";
/** How the client sets the sandbox: Codex's sandbox-state update (`codex`), or `serve`'s own flags (`plain`). */
export type Client = "codex" | "plain";

/**
 * A repository `name` in `parent` (outside every writable root), as the user's own project: one commit, and a
 * post-commit hook of the user's. Returns its path.
 */
export function victimRepo(parent: string, name = "proj"): string {
  const v = join(parent, name);
  hostGit(parent, "init", "-q", "-b", "main", name);
  writeFileSync(join(v, "f.txt"), "victim\n");
  hostGit(v, "add", "f.txt");
  hostGit(v, "commit", "-q", "-m", "victim's first");
  writeFileSync(join(v, ".git", "hooks", "post-commit"), "#!/bin/sh\n: the user's own hook\n");
  chmodSync(join(v, ".git", "hooks", "post-commit"), 0o755);
  return v;
}

/**
 * A serve session on `backend` (with `rules`), workspace-write over a fresh repository `ws` (one commit), set up
 * Codex-style or plain; `outside`: a fresh folder outside every writable root; `run(command)`: one call in `ws`.
 */
export async function repoSession(
  backend: Backend,
  client: Client,
  rules = "",
): Promise<{ s: AttackSession; ws: string; outside: string; run: (command: string, timeout_ms?: number) => Promise<{ output: string }> }> {
  const codexHome = confDir("r34-home");
  const ws = confDir("r34-ws");
  hostGit(ws, "init", "-q", "-b", "main");
  writeFileSync(join(ws, "f.txt"), "one\n");
  hostGit(ws, "add", "f.txt");
  hostGit(ws, "commit", "-q", "-m", "first");
  const args = ["--sandbox-backend", backend];
  if (client === "plain") args.push("--sandbox", "workspace-write", "--cd", ws);
  const s = await serveWithPid({ rules, codexHome, args, env: { SHELLMCP_LOG: "info" } });
  if (client === "codex") expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
  const outside = assertOutside(confDir("r34-outside"));
  const run = async (command: string, timeout_ms = 30_000) => (await s.shell({ command, workdir: ws, login: false, timeout_ms })).out;
  return { s, ws, outside, run };
}

/** The four configurations every review attack ran in: each backend, each way of setting the sandbox. */
export const CONFIGS: [Backend, Client][] = [
  ["landlock", "codex"],
  ["bwrap", "codex"],
  ["landlock", "plain"],
  ["bwrap", "plain"],
];
