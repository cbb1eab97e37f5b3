/**
 * Issue 39, "one launch path": `shellmcp sandbox linux` with a sandbox that writes runs as `serve`'s calls and the
 * exec-server's processes do — one backend choice, the helper, and the git guard around it. Attack: under Landlock
 * (which cannot keep `.git` read-only), `sandbox linux --full-auto` runs a command that plants an executable
 * `.git/hooks/pre-commit` in the project's repository. Judged by the host: the hook is gone after the command, a
 * host `git commit` runs nothing, the command's own status is kept and the person is told on stderr.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { hostGit } from "../helpers/attack.ts";

const base = mkdtempSync(join(CONF_BASE, "cli-launch-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

test("sandbox linux --backend landlock --full-auto cannot leave a git hook the user's next commit runs", () => {
  const home = join(base, "home");
  const proj = join(base, "proj");
  const ran = join(base, "hook-ran");
  mkdirSync(home, { recursive: true });
  mkdirSync(proj, { recursive: true });
  hostGit(proj, "init", "-q");
  writeFileSync(join(proj, "a.txt"), "a\n");
  const plant = `mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch ${ran}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo planted; exit 3`;
  const r = Bun.spawnSync([BINARY, "sandbox", "linux", "--backend", "landlock", "--full-auto", "--", "sh", "-c", plant], {
    cwd: proj,
    env: { PATH: "/usr/bin:/bin", HOME: home },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(r.stdout.toString()).toContain("planted"); // Landlock let it write there
  expect(r.exitCode).toBe(3);
  expect(r.stderr.toString()).toContain("pre-commit");
  expect(existsSync(join(proj, ".git", "hooks", "pre-commit"))).toBe(false);
  hostGit(proj, "add", "a.txt");
  hostGit(proj, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x");
  expect(existsSync(ran)).toBe(false);
});
