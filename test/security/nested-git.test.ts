/**
 * Issue 34, item 5 (a regression of the pinned workspace): with a client that sends no sandbox state the workspace
 * is pinned, so a project under /tmp is no longer a writable root of its own, and only top-level `.git`s were kept
 * read-only: its `.git/config` and `.git/hooks/pre-commit` were writable from the sandbox (the user's next
 * `git commit` runs the hook). Under bubblewrap the kernel now stops the write at any depth that matters: the
 * `.git` of every repository below a writable root, at any depth (src/sandbox/git/discover.ts, issue 38). Judged on
 * the host; the work trees stay writable. The model the escalation boundary judges by (`CallSandbox.writable`)
 * says the same as the kernel: checked by a probe inside the call's real sandbox.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, isolatedGit, isolatedRepo, ISOLATED_GIT_ENV, requirePrograms, serveWithPid } from "../helpers/attack.ts";
import { ROOT } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { parseSandboxPolicy } from "../../src/sandbox/policy.ts";
import { landlockAbi } from "../../src/sandbox/linux/landlock.ts";
import { callFor, describe as describeOutcome, isFailure, runCall, type Backend } from "./differential/harness.ts";
import type { Probe } from "./differential/layout.ts";

const base = mkdtempSync(join("/tmp", "shellmcp-nested-"));
afterAll(async () => {
  await closeAll();
  rmSync(base, { recursive: true, force: true });
});

/** What the attack writes into the repository at `dir` (from any working folder). */
const attack = (dir: string) =>
  `touch ${dir}/work && echo TREE-WRITABLE; printf '[core]\\n\\tfsmonitor = evil\\n' >> ${dir}/.git/config 2>&1; ` +
  `mkdir -p ${dir}/.git/hooks 2>&1; printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > ${dir}/.git/hooks/pre-commit 2>&1; echo ATTACK-DONE`;

/** The repository at `dir` as the test made it: config unchanged, no pre-commit hook. */
function held(dir: string, config: string): void {
  expect(readFileSync(join(dir, ".git", "config"), "utf8")).toBe(config);
  expect(existsSync(join(dir, ".git", "hooks", "pre-commit"))).toBe(false);
}

describe.skipIf(skipWithout("nested repositories suite", shellsMissing()))(
  "issue 34 item 5: nested repositories keep a read-only .git",
  () => {
    requirePrograms("bwrap", "git");

    test("bwrap, pinned workspace: repositories 2 and 3 levels below /tmp, and one 6 levels down holding the workdir", async () => {
      const shallow = join(base, "two"); // /tmp/<base>/two: 2 levels below /tmp
      const deeper = join(base, "a", "three"); // 3 levels
      const deep = join(base, "b", "c", "d", "e", "six"); // 6 levels: found from the working folder only
      const configs = new Map([shallow, deeper, deep].map((d) => [d, isolatedRepo(d)]));
      mkdirSync(join(deep, "sub"));
      const ws = confDir("ng-ws");
      const s = await serveWithPid({ cwd: ws, args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"] });
      const call = async (command: string, workdir: string) =>
        (await s.shell({ command, workdir, login: false, timeout_ms: 30_000 })).out.output;
      for (const dir of [shallow, deeper]) {
        const out = await call(attack(dir), ws);
        expect(out).toContain("TREE-WRITABLE"); // the work tree stays writable
        expect(out).toContain("ATTACK-DONE");
        held(dir, configs.get(dir)!);
      }
      const out = await call(attack(deep), join(deep, "sub"));
      expect(out).toContain("TREE-WRITABLE");
      held(deep, configs.get(deep)!);
    }, 60_000);

    test("normal use: git status/add/commit in a repository below /tmp escalate into the room and commit (agent.rules)", async () => {
      const dir = join(base, "use", "proj");
      isolatedRepo(dir);
      isolatedGit(dir, "config", "user.name", "t");
      isolatedGit(dir, "config", "user.email", "t@example.com");
      const rules = readFileSync(join(ROOT, "examples", "rules", "agent.rules"), "utf8");
      const ws = confDir("ng-use");
      const s = await serveWithPid({ rules, cwd: ws, args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"] });
      const r = await s.shell({
        command: "echo two > f && git status --short && git add f && git commit -qm two && echo committed",
        workdir: dir,
        login: false,
      });
      expect(r.out.output).toContain("committed");
      expect(s.stderr()).toMatch(/escalated \{"file":"[^"]*git","argv":\["git","commit"/);
      const log = Bun.spawnSync(["git", "log", "--format=%s", "-1"], { cwd: dir, env: ISOLATED_GIT_ENV }).stdout.toString().trim();
      expect(log).toBe("two");
    }, 60_000);

    test("bwrap: a linked worktree's .git file below /tmp cannot be re-pointed", async () => {
      const main = confDir("ng-main");
      isolatedRepo(main);
      const linked = join(base, "wt", "linked");
      mkdirSync(join(base, "wt"), { recursive: true });
      isolatedGit(main, "worktree", "add", "-q", linked);
      const pointer = readFileSync(join(linked, ".git"), "utf8");
      const ws = confDir("ng-ws2");
      const s = await serveWithPid({ cwd: ws, args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"] });
      const r = await s.shell({ command: `echo 'gitdir: /tmp' > ${linked}/.git 2>&1; echo DONE`, workdir: ws, login: false });
      expect(r.out.output).toContain("DONE");
      expect(readFileSync(join(linked, ".git"), "utf8")).toBe(pointer);
    }, 60_000);

    test("the boundary's model says what the kernel enforces: nested .git read-only under bwrap, writable under Landlock", async () => {
      // Each answer of the model (CallSandbox.writable + canWrite, as the escalation boundary asks it) is checked
      // against a probe inside that call's real sandbox (test/security/differential/harness.ts).
      const dir = join(base, "model", "repo");
      isolatedRepo(dir);
      const deep = join(base, "m1", "m2", "m3", "m4", "repo");
      isolatedRepo(deep);
      const ws = confDir("ng-model");
      const policy = parseSandboxPolicy({ type: "workspace-write", exclude_tmpdir_env_var: true });
      const env = { PATH: "/usr/bin:/bin" };
      const probes: Probe[] = [
        { op: "create", path: join(dir, "file") },
        { op: "write", path: join(dir, ".git", "config") },
        { op: "create", path: join(dir, ".git", "hooks", "pre-commit") },
        { op: "write", path: join(deep, ".git", "config") },
      ];
      const check = async (backend: Backend, workdir: string, says: boolean[]) => {
        const site = { policy, ws, workdir, env };
        const outcomes = await runCall(callFor(site, backend, "/usr/bin/bwrap"), backend, site, probes);
        expect(outcomes.map((o) => o.model)).toEqual(says);
        expect(outcomes.filter(isFailure).map((o) => describeOutcome(o, base))).toEqual([]);
      };
      // At any depth (issue 38: the discovery has no depth limit), wherever the call starts.
      await check({ kind: "bwrap", via: "direct" }, ws, [true, false, false, false]);
      await check({ kind: "bwrap", via: "direct" }, deep, [true, false, false, false]);
      await check({ kind: "landlock", abi: landlockAbi({}) }, ws, [true, true, true, true]);
      // (Codex's own helper binds no folder above a nested .git onto itself, so its model keeps only a root's own
      // .git read-only — writable.ts `pinnedReadOnly` with `pinned` false; ./nested-git-rename.test.ts shows the
      // rename that makes the rest writable there. Codex 0.97's helper, the reference, is built without bubblewrap,
      // so that model is not run against a kernel here.)
    }, 60_000);
  },
);
