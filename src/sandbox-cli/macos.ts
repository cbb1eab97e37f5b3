/**
 * `shellmcp sandbox macos` / `shellmcp debug seatbelt` (Codex's `codex sandbox macos` / `codex debug seatbelt`):
 * run a command under Seatbelt, for a person.
 *
 *   shellmcp sandbox macos [--sandbox read-only|workspace-write|danger-full-access | --full-auto] [--add-dir DIR]…
 *                          [--network] [--policy JSON | --permission-profile JSON] [-C DIR] [--print-policy] -- CMD…
 *
 * `--print-policy` prints the policy, its parameters, the sandbox-exec argv and the environment markers instead of
 * running, on any OS (paths shown as macOS would see them). Running needs macOS: the platform is a parameter, not
 * read here, so the macOS-only path is unit-tested on Linux.
 */
import { constants as osConstants } from "node:os";
import { resolve } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { policyFromFlags, type SandboxCliOptions } from "./linux.ts";
import { parsePermissionProfile } from "../sandbox/permission-profile.ts";
import { planPermissionProfile, planSandboxPolicy, summarySandboxPolicy, type FilesystemPlan } from "../sandbox/filesystem-plan.ts";
import { seatbeltLaunch, type SeatbeltHost, type SeatbeltLaunch } from "../sandbox/macos/seatbelt.ts";
import type { SandboxPolicy } from "../sandbox/policy.ts";
import type { PermissionProfile } from "../sandbox/permission-profile.ts";
import { BackendChoice } from "../shell/backend-choice.ts";
import { hostGitGuard } from "../shell/git-guard.ts";
import { GitCheck } from "../sandbox/git/call-check.ts";
import { resolveCodexHome } from "../execpolicy/discovery.ts";
import { SANDBOX_FAILURE_EXIT } from "../sandbox/backend.ts";

/** Options as commander parses them. */
export interface MacosCliOptions extends SandboxCliOptions {
  permissionProfile?: string;
  printPolicy?: boolean;
}

/** What the CLI needs from its surroundings (injected by tests). */
export interface MacosCliHost {
  platform: NodeJS.Platform;
  cwd: string;
  env: Record<string, string | undefined>;
  out: (text: string) => void;
  err: (text: string) => void;
  /** Run argv with extra env; resolves to the exit status (128+N for a signal). */
  run: (argv: string[], env: Record<string, string | undefined>) => Promise<number>;
  seatbelt?: SeatbeltHost;
  /** CODEX_HOME, whose git guard records and keeps aside (default: `$CODEX_HOME`, else `~/.codex`). */
  codexHome?: string;
}

/**
 * The sandbox the flags ask for: a legacy policy, or a permission profile (with, as `policy`, the nearest legacy
 * policy never wider than it, resolved against `cwd` with `env`). Throws `USAGE` for contradictions and bad JSON.
 */
export function requestFromMacosFlags(
  o: MacosCliOptions,
  cwd: string,
  env: Record<string, string | undefined>,
): { policy: SandboxPolicy; profile?: PermissionProfile } {
  if (o.permissionProfile !== undefined) {
    if (o.policy !== undefined || o.sandbox !== undefined || o.fullAuto || o.addDir.length > 0 || o.network) {
      throw new ShellmcpError(
        "USAGE",
        "--permission-profile cannot be combined with --policy, --sandbox, --full-auto, --add-dir or --network",
      );
    }
    const profile = parsePermissionProfile(o.permissionProfile);
    return { policy: summarySandboxPolicy(planPermissionProfile(profile, cwd, env)), profile };
  }
  return { policy: policyFromFlags(o) };
}

/** The plan the flags describe, resolved against `cwd`. Throws `USAGE` for contradictions and bad JSON. */
export function planFromMacosFlags(o: MacosCliOptions, cwd: string, env: Record<string, string | undefined>): FilesystemPlan {
  const r = requestFromMacosFlags(o, cwd, env);
  return r.profile !== undefined ? planPermissionProfile(r.profile, cwd, env) : planSandboxPolicy(r.policy, cwd, env);
}

/**
 * The `--print-policy` text: the policy, then (as SBPL comments, so the whole output is still a valid policy) the
 * sandbox-exec argv one JSON string per line with the policy itself shown as `<policy above>`, and the variables
 * added to the environment.
 */
export function formatLaunch(l: SeatbeltLaunch): string {
  const lines: string[] = [];
  if (l.policy !== undefined) lines.push(l.policy.text.trimEnd());
  else lines.push(";; not sandboxed: the command runs as is");
  lines.push(";; ---- argv ----");
  for (const a of l.argv) lines.push(`;; ${JSON.stringify(l.policy !== undefined && a === l.policy.text ? "<policy above>" : a)}`);
  lines.push(";; ---- environment added ----");
  for (const [k, v] of Object.entries(l.env)) lines.push(`;; ${k}=${v}`);
  return lines.join("\n") + "\n";
}

/**
 * Run (or print) `command` under Seatbelt; returns the exit status. `--print-policy` prints the launch on any OS.
 * Running (macOS) takes the one launch path `serve` and the exec-server take (issue 39): the call's sandbox from
 * {@link BackendChoice} (Seatbelt) and the git guard around the command (Seatbelt cannot keep a path inside a writable
 * root read-only the way bubblewrap does): a hook or config it planted in a repository it could write is undone when
 * it ends and said on stderr. 101 when the git state cannot be recorded (nothing ran), 2 for bad input.
 */
export async function sandboxMacosCli(command: string[], o: MacosCliOptions, host: MacosCliHost): Promise<number> {
  let cwd: string;
  let request: ReturnType<typeof requestFromMacosFlags>;
  try {
    if (command.length === 0) throw new ShellmcpError("USAGE", "no command given (usage: shellmcp sandbox macos [options] -- CMD...)");
    if (!o.printPolicy && host.platform !== "darwin") {
      host.err("shellmcp: `sandbox macos` runs Seatbelt, which exists only on macOS (use --print-policy to see the policy here)\n");
      return 2;
    }
    cwd = o.cd === undefined ? host.cwd : resolve(host.cwd, o.cd);
    request = requestFromMacosFlags(o, cwd, host.env);
    if (o.printPolicy) {
      host.out(formatLaunch(seatbeltLaunch(planFromMacosFlags(o, cwd, host.env), command, { host: host.seatbelt })));
      return 0;
    }
  } catch (e) {
    host.err(`shellmcp: ${(e as Error).message}\n`);
    return 2;
  }
  const call = new BackendChoice("auto").forCall({ ...request, sandboxCwd: cwd, useBwrap: false, useLegacyLandlock: false }, cwd, {
    platform: "darwin",
    helperExe: "",
    env: host.env,
  });
  if ("refused" in call) {
    host.err(`shellmcp: ${call.refused}\n`);
    return 2;
  }
  const launch = call.launch({ shellPath: "", login: false, command: "", wrapperPath: "", program: command });
  const codexHome = host.codexHome ?? resolveCodexHome();
  let git: GitCheck;
  try {
    git = GitCheck.take(hostGitGuard(codexHome, host.platform), call.writable(), call.enforcement === "landlock", "sandbox macos");
  } catch (e) {
    host.err(`shellmcp: cannot record the git control state to protect it: ${(e as Error).message}\n`);
    return SANDBOX_FAILURE_EXIT;
  }
  let code: number;
  try {
    code = await host.run(launch.argv, { ...host.env, ...launch.env });
  } finally {
    const report = git.checkNow();
    if (report !== "") host.err(report.replace(/^\n/, ""));
  }
  return code;
}

/** The real host (process, Bun.spawn with inherited stdio, the command's cwd from `-C`). */
export function processHost(cd?: string): MacosCliHost {
  const cwd = cd === undefined ? process.cwd() : resolve(cd);
  return {
    platform: process.platform,
    cwd: process.cwd(),
    env: process.env,
    out: (t) => process.stdout.write(t),
    err: (t) => process.stderr.write(t),
    run: async (argv, env) => {
      const p = Bun.spawn(argv, { cwd, env, stdio: ["inherit", "inherit", "inherit"] });
      const code = await p.exited;
      return p.signalCode ? 128 + (osConstants.signals[p.signalCode as keyof typeof osConstants.signals] ?? 0) : code;
    },
  };
}
