/**
 * `serve` on macOS, with the platform injected: the shell's launch goes through `/usr/bin/sandbox-exec` with the
 * policy generated from the call's plan, and Codex's markers are added to its environment.
 */
import { describe, expect, test } from "bun:test";
import { planSandboxPolicy } from "../../../src/sandbox/filesystem-plan.ts";
import { parseSandboxPolicy } from "../../../src/sandbox/policy.ts";
import { CallSandbox } from "../../../src/sandbox/backend.ts";
import { SeatbeltBackend } from "../../../src/sandbox/macos/backend.ts";
import { tempDir } from "../../helpers/binary.ts";

describe("serve's launch on macOS", () => {
  test("workspace-write: sandbox-exec with the policy, CODEX_SANDBOX=seatbelt, network marker", () => {
    const cwd = tempDir("sb-serve-");
    const policy = parseSandboxPolicy({ type: "workspace-write" });
    const plan = planSandboxPolicy(policy, cwd, {});
    const call = new CallSandbox(new SeatbeltBackend(), { policy, policyCwd: cwd, workdir: cwd, env: {} }, plan);
    const l = call.launch({
      shellPath: "/opt/shells/bash",
      login: true,
      command: "echo hi",
      wrapperPath: "/opt/shellmcp/codex-execve-wrapper",
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
    const call = new CallSandbox(new SeatbeltBackend(), { policy, policyCwd: "/", workdir: "/", env: {} }, plan);
    const l = call.launch({ shellPath: "/opt/shells/bash", login: false, command: "true", wrapperPath: "/x" });
    expect(l.sandboxed).toBe(false);
    // `bash -c CMD bash`: error lines name `bash`, not the carried shell's path (docs/blocked-actions.md).
    expect(l.argv).toEqual(["/opt/shells/bash", "-c", "true", "bash"]);
  });
});
