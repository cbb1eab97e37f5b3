/**
 * `shellmcp sandbox linux` / `shellmcp debug landlock`: run a command under the sandbox, for a person.
 *
 *   shellmcp sandbox linux [--sandbox read-only|workspace-write|danger-full-access | --full-auto]
 *                          [--add-dir DIR]… [--network] [--backend auto|bwrap|landlock] [--policy JSON]
 *                          [--no-proc] [-C DIR] -- CMD…
 *
 * Acts as the spawner too: sets `CODEX_SANDBOX_NETWORK_DISABLED=1` when the network is off (as Codex does).
 * The exit status is the command's (141 for `yes | head -1`: SIGPIPE is reset, unlike Codex).
 */
import { resolve } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { writeStderr } from "../stderr.ts";
import { hasFullNetwork, parseSandboxPolicy, type SandboxPolicy } from "./policy.ts";

/** Options as commander parses them. */
export interface SandboxCliOptions {
  sandbox?: string;
  fullAuto?: boolean;
  addDir: string[];
  network?: boolean;
  backend?: string;
  policy?: string;
  noProc?: boolean;
  cd?: string;
}

/** Build the policy the flags describe. Throws `USAGE` for contradictions. */
export function policyFromFlags(o: SandboxCliOptions): SandboxPolicy {
  if (o.policy !== undefined) {
    if (o.sandbox !== undefined || o.fullAuto || o.addDir.length > 0 || o.network)
      throw new ShellmcpError("USAGE", "--policy cannot be combined with --sandbox, --full-auto, --add-dir or --network");
    return parseSandboxPolicy(o.policy);
  }
  const mode = o.fullAuto ? "workspace-write" : (o.sandbox ?? "read-only");
  if (o.fullAuto && o.sandbox !== undefined && o.sandbox !== "workspace-write")
    throw new ShellmcpError("USAGE", "--full-auto means --sandbox workspace-write");
  switch (mode) {
    case "read-only":
      if (o.addDir.length > 0) throw new ShellmcpError("USAGE", "--add-dir needs --sandbox workspace-write (or --full-auto)");
      return { type: "read-only", access: { type: "full-access" }, network_access: o.network ?? false };
    case "workspace-write":
      return parseSandboxPolicy({
        type: "workspace-write",
        writable_roots: o.addDir.map((d) => resolve(d)),
        network_access: o.network ?? false,
      });
    case "danger-full-access":
      return { type: "danger-full-access" };
    default:
      throw new ShellmcpError("USAGE", `--sandbox must be read-only, workspace-write or danger-full-access (got ${mode})`);
  }
}

/** Run `command` under the sandbox the flags describe; returns the exit status (or execs). */
export async function sandboxLinuxCli(
  command: string[],
  o: SandboxCliOptions,
  defaultBackend: "auto" | "landlock" = "auto",
): Promise<number> {
  if (process.platform !== "linux") {
    writeStderr("shellmcp: `sandbox linux` needs Linux; on macOS use `shellmcp sandbox macos`\n");
    return 2;
  }
  const { runSandboxed, SANDBOX_FAILURE_EXIT } = await import("./linux/run.ts");
  let policy: SandboxPolicy;
  try {
    if (command.length === 0) throw new ShellmcpError("USAGE", "no command given (usage: shellmcp sandbox linux [options] -- CMD...)");
    policy = policyFromFlags(o);
    if (o.cd !== undefined) process.chdir(o.cd);
  } catch (e) {
    writeStderr(`shellmcp: ${(e as Error).message}\n`);
    return 2;
  }
  if (!hasFullNetwork(policy)) process.env.CODEX_SANDBOX_NETWORK_DISABLED = "1";
  (await import("../escalation-socket.ts")).keepEscalationSocketAcrossExec();
  const backend = (o.backend ?? defaultBackend) as "auto" | "bwrap" | "landlock";
  if (!["auto", "bwrap", "landlock"].includes(backend)) {
    writeStderr(`shellmcp: --backend must be auto, bwrap or landlock (got ${backend})\n`);
    return 2;
  }
  try {
    return await runSandboxed({ policy, policyCwd: process.cwd(), command, backend, noProc: o.noProc });
  } catch (e) {
    writeStderr(`shellmcp: ${(e as Error).message}\n`);
    return SANDBOX_FAILURE_EXIT;
  }
}
