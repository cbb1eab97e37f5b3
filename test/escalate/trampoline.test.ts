/**
 * The host-side bash trampoline of escalated programs (src/escalate/worker/escalated-child.ts `trampolineArgv`, used
 * where no lifeline guard binary is available): its environment is the sandboxed requester's, so nothing in it may
 * run on the host. Run for real with `/bin/bash` and a hostile environment (`BASH_ENV`, `BASH_FUNC_echo%%` and
 * `BASH_FUNC_exec%%` overriding the builtins of its script, `SHELLOPTS=xtrace`), judged by a file those would create
 * and by the cgroup file the trampoline must still write before the program runs, which must get its environment as sent.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { trampolineArgv } from "../../src/escalate/worker/escalated-child.ts";

const dir = mkdtempSync(join(tmpdir(), "shellmcp-trampoline-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!existsSync("/bin/bash"))("escalation trampoline", () => {
  test("BASH_ENV, BASH_FUNC_* and SHELLOPTS from the requester's environment run nothing on the host", () => {
    const planted = join(dir, "planted");
    const hook = join(dir, "hook.sh");
    writeFileSync(hook, `: > ${planted}-bash-env\n`);
    const procs = join(dir, "cgroup.procs");
    writeFileSync(procs, "");
    const out = join(dir, "env-out");
    const argv = trampolineArgv(procs, { path: "/bin/sh", argv: ["sh", "-c", `env > ${out}`], env: [], cwd: dir });
    const env = {
      PATH: "/usr/bin:/bin",
      BASH_ENV: hook,
      ENV: hook,
      "BASH_FUNC_echo%%": `() { : > ${planted}-echo; }`,
      "BASH_FUNC_exec%%": `() { : > ${planted}-exec; }`,
      SHELLOPTS: "xtrace",
      KEEP: "me",
    };
    const r = Bun.spawnSync(argv, { env, cwd: dir, stderr: "pipe" });
    expect(r.exitCode).toBe(0);
    for (const what of ["bash-env", "echo", "exec"]) expect(existsSync(`${planted}-${what}`)).toBe(false);
    expect(r.stderr.toString()).not.toContain("+ "); // no xtrace
    expect(readFileSync(procs, "utf8").trim()).toMatch(/^\d+$/); // joined the cgroup first
    const seen = readFileSync(out, "utf8");
    expect(seen).toContain("KEEP=me");
    expect(seen).toContain(`BASH_ENV=${hook}`); // passed on as sent, only not acted upon
  });
});
