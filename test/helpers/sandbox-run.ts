/**
 * Running a command under the compiled binary as `codex-linux-sandbox` (Codex's helper arg0), for the sandbox
 * suites that judge a backend by what a command can do (test/sandbox/writes-confined.test.ts, ipc-confined,
 * reads-restricted, programs-run, fd-hygiene, kernel-features, bwrap-lookup): a pair of fresh folders, the helper's
 * argv, and the prerequisites those suites share.
 */
import { mkdirSync, mkdtempSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { binaryAs } from "./binary.ts";
import { CONF_BASE } from "./cleanup.ts";
import { skipWithout, toolMissing } from "./prereq.ts";

/** Whether bubblewrap can build a sandbox here (a user and a pid namespace). */
const bwrapUsable = Bun.spawnSync(["bwrap", "--ro-bind", "/", "/", "--unshare-user", "--unshare-pid", "--", "/bin/true"]).exitCode === 0;
/** Why the bubblewrap suites cannot run here, or undefined when they can. */
export const bwrapMissing = bwrapUsable ? undefined : "bubblewrap missing or unusable here";
/** True when the python3 tests must skip (a failure under CI=true; see ./prereq.ts). */
export const noPython = () => skipWithout("sandbox tests that need python3", toolMissing("python3"));
/** True when the git tests must skip (a failure under CI=true). */
export const noGit = () => skipWithout("sandbox tests that need git", toolMissing("git"));

/** Two fresh folders outside every default writable root (CONF_BASE): `cwd`, the workspace, and `outside` it. */
export function box(): { cwd: string; outside: string } {
  mkdirSync(CONF_BASE, { recursive: true });
  const b = mkdtempSync(join(CONF_BASE, "x-"));
  const cwd = join(b, "cwd");
  const outside = join(b, "outside");
  mkdirSync(cwd);
  mkdirSync(outside);
  return { cwd, outside };
}

/**
 * Run `cmd` in `cwd` under the helper (`codex-linux-sandbox --backend <backend>`, `backend`: `landlock`, `bwrap` or
 * `auto`) with Codex's `policy` (its JSON) and policy cwd `cwd`; `env` is added to a small fixed environment, `flags`
 * go before `--backend`. Returns the exit code (-1 when killed by a signal), stdout and stderr.
 */
export function run(
  backend: string,
  policy: unknown,
  cwd: string,
  cmd: string[],
  env: Record<string, string> = {},
  flags: string[] = [],
): { code: number; out: string; err: string } {
  const argv = [
    binaryAs("codex-linux-sandbox"),
    ...flags,
    "--backend",
    backend,
    "--sandbox-policy-cwd",
    cwd,
    "--sandbox-policy",
    JSON.stringify(policy),
    "--",
    ...cmd,
  ];
  const r = Bun.spawnSync(argv, {
    cwd,
    env: { PATH: "/usr/bin:/bin", HOME: homedir(), LC_ALL: "C", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() };
}

/** Codex's `workspace-write` policy with its defaults. */
export const WW = { type: "workspace-write" };
/** Codex's `read-only` policy with its defaults. */
export const RO = { type: "read-only" };
