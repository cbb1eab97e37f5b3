/**
 * Acceptance: a real agent session, end to end. The compiled `shellmcp serve` is started by the MCP SDK client
 * exactly as Codex starts it (stdio, then `codex/sandbox-state/update` with workspace-write on a git repository
 * holding a small Node project with a failing test), with examples/rules/agent.rules as the user's rules. The
 * session does what an agent would, and every step asserts real effects on disk and in git — on the patched
 * bash and on the patched zsh.
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hostGit } from "../helpers/attack.ts";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";

const skip = skipWithout("agent session", shellsMissing() ?? toolMissing("node", "curl", "git"));

const RULES = join(ROOT, "examples", "rules", "agent.rules");

/** A Node project with a failing test, committed, with a bare remote; all outside /tmp. */
function project() {
  const base = join(CONF_BASE, `agent-${Math.random().toString(36).slice(2)}`);
  const repo = join(base, "repo");
  const remote = join(base, "remote.git");
  const outside = join(base, "outside");
  for (const d of [repo, outside]) mkdirSync(d, { recursive: true });
  writeFileSync(join(repo, "package.json"), JSON.stringify({ name: "demo", version: "1.0.0", type: "module" }, null, 2) + "\n");
  writeFileSync(join(repo, "sum.js"), "export function sum(a, b) {\n  return a - b;\n}\n");
  writeFileSync(
    join(repo, "sum.test.js"),
    'import { test } from "node:test";\nimport assert from "node:assert";\nimport { sum } from "./sum.js";\n\ntest("sum", () => assert.strictEqual(sum(2, 3), 5));\n',
  );
  hostGit(repo, "init", "-q", "-b", "main");
  hostGit(repo, "add", "-A");
  hostGit(repo, "commit", "-qm", "initial");
  Bun.spawnSync(["git", "init", "-q", "--bare", remote]);
  hostGit(repo, "remote", "add", "origin", remote);
  writeFileSync(join(outside, "canary"), "still here");
  return { base, repo, remote, outside };
}

const sessions: Session[] = [];
const servers: { stop(): void }[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
  for (const s of servers) s.stop();
});

for (const shell of ["bash", "zsh"] as const) {
  describe.skipIf(skip)(`agent session on the patched ${shell}`, () => {
    test("status, read, test, fix, test, commit, sandbox denial, network on/off, push declined then accepted, forbidden rm, env", async () => {
      const p = project();
      const http = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("pong") });
      servers.push(http);
      const home = join(p.base, "codex-home");
      mkdirSync(join(home, "rules"), { recursive: true });
      copyFileSync(RULES, join(home, "rules", "agent.rules"));
      // Safety net before anything destructive is even attempted: the rules must forbid it.
      const check = Bun.spawnSync([ensureBinary(), "execpolicy", "check", "--rules", RULES, "--", "rm", "-rf", "/"]);
      expect(JSON.parse(check.stdout.toString()).decision).toBe("forbidden");

      let pushAsks = 0;
      const s = await startServe({
        codexHome: home,
        args: ["--shell", shell],
        env: {
          HOME: p.base,
          GIT_AUTHOR_NAME: "Agent",
          GIT_AUTHOR_EMAIL: "agent@example.com",
          GIT_COMMITTER_NAME: "Agent",
          GIT_COMMITTER_EMAIL: "agent@example.com",
          MY_SECRET_TOKEN: "s3cr3t-value",
        },
        onElicit: (message) => {
          if (message.includes("git push")) return { action: ++pushAsks === 1 ? "decline" : "accept" };
          return { action: "decline" };
        },
      });
      sessions.push(s);
      const run = async (command: string, extra: Record<string, unknown> = {}) =>
        (await s.shell({ command, workdir: p.repo, login: false, timeout_ms: 30000, ...extra })).out;

      // Codex announces its sandbox: workspace-write on the repository, network off.
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, p.repo)).toEqual({});

      // Look around.
      const status = await run("git status --short; git log --oneline");
      expect(status.exit_code).toBe(0);
      expect(status.output).toContain("initial");
      expect((await run("ls")).output.split("\n")).toEqual(expect.arrayContaining(["package.json", "sum.js", "sum.test.js"]));
      expect((await run("cat sum.js")).output).toContain("return a - b;");

      // The test fails.
      const failing = await run("node --test");
      expect(failing.exit_code).not.toBe(0);
      expect(failing.output).toMatch(/fail 1/);

      // Fix it inside the sandbox (the workspace is writable), and the test passes.
      const fix = await run("sed -i 's/a - b/a + b/' sum.js");
      expect(fix.exit_code).toBe(0);
      expect(readFileSync(join(p.repo, "sum.js"), "utf8")).toContain("return a + b;");
      const passing = await run("node --test");
      expect(passing.exit_code).toBe(0);
      expect(passing.output).toMatch(/pass 1/);

      // Commit: allowed by the rules, so escalated, so it may write .git (read-only in the sandbox).
      const commit = await run("git add -A && git commit -qm 'fix sum' && echo committed");
      expect(commit.output).toContain("committed");
      expect(hostGit(p.repo, "log", "-1", "--format=%s %an")).toBe("fix sum Agent");
      expect(hostGit(p.repo, "status", "--porcelain")).toBe("");

      // Writing outside the workspace is refused by the kernel, with the errno message in the output.
      const outsideWrite = await run(`echo pwned > ${p.outside}/note.txt`);
      expect(outsideWrite.exit_code).not.toBe(0);
      expect(outsideWrite.output).toMatch(/read-only file system|permission denied/i);
      expect(existsSync(join(p.outside, "note.txt"))).toBe(false);

      // Network: off, then on after an update.
      const url = `http://127.0.0.1:${http.port}/`;
      const offline = await run(`curl -sS --max-time 3 ${url}`);
      expect(offline.exit_code).not.toBe(0);
      expect(offline.output).not.toContain("pong");
      expect(await s.sandboxState({ type: "workspace-write", network_access: true }, p.repo)).toEqual({});
      const online = await run(`curl -sS --max-time 3 ${url}`);
      expect(online.exit_code).toBe(0);
      expect(online.output).toBe("pong");

      // Push: a human is asked. Declined: nothing reaches the remote. Accepted: escalated, the remote has it.
      const declined = await run("git push origin HEAD:main");
      expect(declined.output).toContain("Execution denied: User declined execution");
      expect(Bun.spawnSync(["git", "--git-dir", p.remote, "rev-parse", "--verify", "-q", "main"]).exitCode).not.toBe(0);
      const accepted = await run("git push -q origin HEAD:main && echo pushed");
      expect(accepted.output).toContain("pushed");
      expect(pushAsks).toBe(2);
      expect(Bun.spawnSync(["git", "--git-dir", p.remote, "rev-parse", "main"]).stdout.toString().trim()).toBe(
        hostGit(p.repo, "rev-parse", "HEAD"),
      );

      // rm -rf / is forbidden: denied before it runs, nothing deleted.
      const rm = await run("rm -rf /; echo rc=$?");
      expect(rm.output).toContain("Execution denied: Execution forbidden by policy");
      expect(rm.output).toContain("rc=1");
      expect(readFileSync(join(p.outside, "canary"), "utf8")).toBe("still here");
      expect(existsSync(join(p.repo, "sum.js"))).toBe(true);
      expect(existsSync("/usr/bin/env")).toBe(true);

      // The shell's environment has no *TOKEN* variables from the server's environment.
      const env = await run("printenv");
      expect(env.exit_code).toBe(0);
      expect(env.output).not.toContain("s3cr3t-value");
      expect(env.output.split("\n").some((l) => /^[^=]*token[^=]*=/i.test(l))).toBe(false);
      expect(env.output).toContain("GIT_AUTHOR_NAME=Agent");
    }, 180_000);
  });
}
