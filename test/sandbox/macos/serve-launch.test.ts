/**
 * `serve` on macOS, with the platform injected: the shell's launch goes through `/usr/bin/sandbox-exec` with the
 * policy generated from the call's plan, and Codex's markers are added to its environment.
 */
import { describe, expect, test } from "bun:test";
import { planSandboxPolicy } from "../../../src/sandbox/filesystem-plan.ts";
import { parseSandboxPolicy } from "../../../src/sandbox/policy.ts";
import { planLaunch } from "../../../src/shell/run-command.ts";
import { tempDir } from "../../helpers/binary.ts";

describe("serve's launch on macOS", () => {
  test("workspace-write: sandbox-exec with the policy, CODEX_SANDBOX=seatbelt, network marker", () => {
    const cwd = tempDir("sb-serve-");
    const policy = parseSandboxPolicy({ type: "workspace-write" });
    const plan = planSandboxPolicy(policy, cwd, {});
    const l = planLaunch({
      shellPath: "/opt/shells/bash",
      login: true,
      command: "echo hi",
      policy,
      sandboxCwd: cwd,
      wrapperPath: "/opt/shellmcp/codex-execve-wrapper",
      launcher: { exe: "unused", flags: [], seatbelt: { plan } },
    });
    expect(l.sandboxed).toBe(true);
    expect(l.argv[0]).toBe("/usr/bin/sandbox-exec");
    expect(l.argv[1]).toBe("-p");
    expect(l.argv.slice(-4)).toEqual(["--", "/opt/shells/bash", "-lc", "echo hi"]);
    expect(l.env).toMatchObject({ CODEX_SANDBOX: "seatbelt", CODEX_SANDBOX_NETWORK_DISABLED: "1" });
  });

  test("danger-full-access: the shell runs as is", () => {
    const policy = parseSandboxPolicy({ type: "danger-full-access" });
    const plan = planSandboxPolicy(policy, "/", {});
    const l = planLaunch({
      shellPath: "/opt/shells/bash",
      login: false,
      command: "true",
      policy,
      sandboxCwd: "/",
      wrapperPath: "/x",
      launcher: { exe: "unused", flags: [], seatbelt: { plan } },
    });
    expect(l.sandboxed).toBe(false);
    expect(l.argv).toEqual(["/opt/shells/bash", "-c", "true"]);
  });
});
