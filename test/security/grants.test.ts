/**
 * Issue 11, items 2, 3, 4 and 6 (escalated side): an allow rule grants exactly one program with exactly the
 * argv judged. Nothing the sandboxed command wrote or set (LD_PRELOAD, a program file, a `#!` interpreter, a
 * symlink target, a repository's config or hooks) may run outside the sandbox, and escalated programs never see
 * the server's secrets. Each attack runs from inside a `shell` call under workspace-write (network off); the
 * verdict is a marker file in a host directory that is not a writable root of the sandbox.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildPreload, closeAll, confDir, exists, hostGit, requirePrograms, serveWithPid, token } from "../helpers/attack.ts";

requirePrograms("cc", "git", "/usr/bin/python3");
afterAll(closeAll);

/** A serve with `rules`, workspace-write on a fresh workspace; plus a fresh "outside" directory for markers. */
async function setup(rules: string, extra: { env?: Record<string, string>; args?: string[] } = {}) {
  const s = await serveWithPid({ rules, ...extra });
  const ws = confDir("ws");
  const outside = confDir("outside");
  expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
  const run = async (command: string, timeout_ms = 30000) => (await s.shell({ command, workdir: ws, login: false, timeout_ms })).out;
  // The outside directory really is outside: the sandbox cannot write it directly.
  const probe = await run(`: > ${outside}/direct; echo rc=$?`);
  expect(probe.output).toContain("rc=1");
  expect(exists(join(outside, "direct"))).toBe(false);
  return { s, ws, outside, run };
}

describe("item 2: loader injection through an allowed program", () => {
  for (const [name, rules] of [
    ["bare allow rule", 'prefix_rule(pattern=["id"], decision="allow")\n'],
    ["allow rule + host_executable", 'host_executable(name="id", paths=["/usr/bin/id"])\nprefix_rule(pattern=["id"], decision="allow")\n'],
  ] as const) {
    test(`LD_PRELOAD / LD_LIBRARY_PATH / LD_AUDIT of a workspace .so never run outside (${name}); id still works`, async () => {
      const { ws, outside, run } = await setup(rules);
      const marker = join(outside, "preload-ran");
      buildPreload(marker, join(ws, "evil.so"));
      // As a model would: with the variable set for the allowed program, exported, and via LD_AUDIT.
      const a = await run(
        "LD_PRELOAD=$PWD/evil.so id; export LD_PRELOAD=$PWD/evil.so; id -u; unset LD_PRELOAD; LD_AUDIT=$PWD/evil.so id -g",
      );
      expect(exists(marker)).toBe(false);
      expect(a.output).toContain("uid=");
      // The same .so named by absolute path from a second workspace file (no `$PWD`).
      const b = await run(`env LD_PRELOAD=${ws}/evil.so id -un`);
      expect(exists(marker)).toBe(false);
      expect(b.output).toBe(Bun.spawnSync(["id", "-un"]).stdout.toString()); // this user's name: the allowed id ran
    }, 60_000);
  }
});

describe("item 3: a program file the sandbox could write is never escalated", () => {
  const RULES = 'prefix_rule(pattern=["id"], decision="allow")\n';
  const fake = (marker: string) => `#!/bin/sh\ntouch ${marker}\necho FAKE-ID-RAN\n`;

  test("./evil/id and PATH=./evil:$PATH id (written by the command) do not run outside", async () => {
    const { outside, run } = await setup(RULES);
    const marker = join(outside, "fake-id-ran");
    const r = await run(
      `mkdir -p evil && printf '%s' '${fake(marker)}' > evil/id && chmod +x evil/id && ./evil/id; PATH=./evil:$PATH id; PATH=$PWD/evil:$PATH id; echo end`,
    );
    expect(r.output).toContain("end");
    expect(exists(marker)).toBe(false);
  }, 60_000);

  test("a `#!` line naming an interpreter the command wrote does not run outside", async () => {
    const { ws, outside, run } = await setup(RULES);
    const marker = join(outside, "interp-ran");
    // The program file itself is on a path the sandbox cannot write; only its interpreter is writable.
    const ro = confDir("ro-bin");
    writeFileSync(join(ro, "id"), `#!${ws}/evil/interp\n`);
    chmodSync(join(ro, "id"), 0o755);
    const r = await run(
      `mkdir -p evil && printf '%s' '${fake(marker)}' > evil/interp && chmod +x evil/interp && PATH=${ro}:$PATH id; echo end`,
    );
    expect(r.output).toContain("end");
    expect(exists(marker)).toBe(false);
  }, 60_000);

  test("a symlink (on a read-only path) to a file the command wrote does not run outside", async () => {
    const { ws, outside, run } = await setup(RULES);
    const marker = join(outside, "symlink-ran");
    const ro = confDir("ro-link");
    const evilTmp = `/tmp/shellmcp-evil-${token()}`;
    symlinkSync(join(ws, "evil", "id"), join(ro, "id"));
    // And a symlink inside the project itself, to a file in /tmp (a writable root).
    const r = await run(
      `mkdir -p evil && printf '%s' '${fake(marker)}' > evil/id && chmod +x evil/id && PATH=${ro}:$PATH id; ` +
        `t=${evilTmp} && mkdir $t && printf '%s' '${fake(marker)}' > $t/real && chmod +x $t/real && mkdir -p lnk && ln -sf $t/real lnk/id && PATH=$PWD/lnk:$PATH id; echo end`,
    );
    rmSync(evilTmp, { recursive: true, force: true }); // directly under /tmp: not the run's TMPDIR
    expect(r.output).toContain("end");
    expect(exists(marker)).toBe(false);
  }, 60_000);

  test("a genuine allowed program still escalates (the rule keeps working)", async () => {
    const { ws, run } = await setup('prefix_rule(pattern=["touch"], decision="allow")\n');
    // The sandbox keeps the repository's .git read-only; the escalated touch runs in its room, which writes the
    // repository (issue 21) — and nothing outside it.
    expect(Bun.spawnSync(["git", "init", "-q", ws]).exitCode).toBe(0);
    const target = confDir("escalated-target");
    const r = await run(`touch .git/made && echo ok; touch ${target}/made 2>/dev/null || echo outside-refused`);
    expect(r.output).toContain("ok\noutside-refused");
    expect(exists(join(ws, ".git", "made"))).toBe(true);
    expect(exists(join(target, "made"))).toBe(false);
  }, 60_000);
});

describe("item 4: git config and hooks of a repository the sandbox can write", () => {
  test("core.fsmonitor set by the command does not run outside with `git status` allowed", async () => {
    const { outside, run } = await setup('prefix_rule(pattern=["git", "status"], decision="allow")\n');
    const marker = join(outside, "fsmonitor-ran");
    const r = await run(`mkdir r && cd r && git init -q && git config core.fsmonitor "touch ${marker}; false" && git status; echo end`);
    expect(r.output).toContain("end");
    expect(exists(marker)).toBe(false);
  }, 60_000);

  test("a hook written by the command does not run outside with `git commit` allowed", async () => {
    const { outside, run } = await setup('prefix_rule(pattern=["git", "commit"], decision="allow")\n');
    const marker = join(outside, "hook-ran");
    const r = await run(
      `git init -q r && cd r && git config user.name a && git config user.email a@b && ` +
        `printf '#!/bin/sh\\ntouch ${marker}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && git commit --allow-empty -qm x; echo end`,
    );
    expect(r.output).toContain("end");
    expect(exists(marker)).toBe(false);
  }, 60_000);

  test("GIT_CONFIG_* / GIT_DIR set by the command never make an escalated git obey a writable config", async () => {
    const { ws, outside, run } = await setup('prefix_rule(pattern=["git", "status"], decision="allow")\n');
    const marker = join(outside, "gitenv-ran");
    const repo = confDir("ro-repo"); // a repository the sandbox cannot write: `git status` there escalates
    hostGit(repo, "init", "-q");
    const r = await run(
      `git init -q ${ws}/evil && git -C ${ws}/evil config core.fsmonitor "touch ${marker}; false"; cd ${repo} && ` +
        `GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0="touch ${marker}; false" git status >/dev/null; ` +
        `GIT_CONFIG_PARAMETERS="'core.fsmonitor=touch ${marker}; false'" git status >/dev/null; ` +
        `GIT_DIR=${ws}/evil/.git GIT_WORK_TREE=. git status >/dev/null; echo end`,
    );
    expect(r.output).toContain("end");
    expect(exists(marker)).toBe(false);
  }, 60_000);

  test("normal use: git add/status/commit escalate in a project whose .git is read-only (bwrap); the commit lands", async () => {
    const s = await serveWithPid({
      rules:
        [
          'prefix_rule(pattern=["git", "add"], decision="allow")',
          'prefix_rule(pattern=["git", "status"], decision="allow")',
          'prefix_rule(pattern=["git", "commit"], decision="allow")',
        ].join("\n") + "\n",
      args: ["--sandbox-backend", "bwrap"],
      // HOME outside the writable roots (as a user's real HOME is): a writable ~/.gitconfig would rightly keep git
      // inside the sandbox.
      env: {
        HOME: confDir("home"),
        GIT_AUTHOR_NAME: "Agent",
        GIT_AUTHOR_EMAIL: "agent@example.com",
        GIT_COMMITTER_NAME: "Agent",
        GIT_COMMITTER_EMAIL: "agent@example.com",
      },
    });
    const repo = confDir("proj");
    writeFileSync(join(repo, "a.txt"), "one\n");
    hostGit(repo, "init", "-q", "-b", "main");
    hostGit(repo, "add", "-A");
    hostGit(repo, "commit", "-qm", "initial");
    expect(await s.sandboxState({ type: "workspace-write", network_access: false }, repo)).toEqual({});
    const run = async (command: string) => (await s.shell({ command, workdir: repo, login: false, timeout_ms: 30000 })).out;
    expect((await run("echo x >> .git/config; echo rc=$?")).output).toContain("rc=1"); // .git is read-only inside
    expect((await run("echo two >> a.txt && git status --short")).output).toContain("M a.txt");
    const c = await run("git add a.txt && git commit -qm 'second' && echo committed");
    expect(c.output).toContain("committed");
    expect(hostGit(repo, "log", "-1", "--format=%s %an")).toBe("second Agent");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("one\ntwo\n");
  }, 60_000);
});

describe("item 6 (escalated): secrets stay with the server", () => {
  test("an allowed cat/env/printenv does not print the server's OPENAI_API_KEY", async () => {
    const secret = `sk-secret-marker-${token()}`;
    const { run } = await setup(
      [
        'prefix_rule(pattern=["cat"], decision="allow")',
        'prefix_rule(pattern=["env"], decision="allow")',
        'prefix_rule(pattern=["printenv"], decision="allow")',
      ].join("\n") + "\n",
      {
        env: { OPENAI_API_KEY: secret, MY_SERVICE_TOKEN: `${secret}-token` },
      },
    );
    const r = await run("cat /proc/self/environ | tr '\\0' '\\n'; env; printenv OPENAI_API_KEY; echo end");
    expect(r.output).toContain("end");
    expect(r.output).toContain("PATH="); // the programs ran and printed an environment
    expect(r.output).not.toContain(secret);
  }, 60_000);
});
