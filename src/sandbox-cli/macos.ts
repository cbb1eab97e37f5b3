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
import { planPermissionProfile, planSandboxPolicy, type FilesystemPlan } from "../sandbox/filesystem-plan.ts";
import { seatbeltLaunch, type SeatbeltHost, type SeatbeltLaunch } from "../sandbox/macos/seatbelt.ts";

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
}

/** The plan the flags describe, resolved against `cwd`. Throws `USAGE` for contradictions and bad JSON. */
export function planFromMacosFlags(o: MacosCliOptions, cwd: string, env: Record<string, string | undefined>): FilesystemPlan {
  if (o.permissionProfile !== undefined) {
    if (o.policy !== undefined || o.sandbox !== undefined || o.fullAuto || o.addDir.length > 0 || o.network) {
      throw new ShellmcpError(
        "USAGE",
        "--permission-profile cannot be combined with --policy, --sandbox, --full-auto, --add-dir or --network",
      );
    }
    return planPermissionProfile(parsePermissionProfile(o.permissionProfile), cwd, env);
  }
  return planSandboxPolicy(policyFromFlags(o), cwd, env);
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

/** Run (or print) `command` under Seatbelt; returns the exit status. */
export async function sandboxMacosCli(command: string[], o: MacosCliOptions, host: MacosCliHost): Promise<number> {
  let launch: SeatbeltLaunch;
  try {
    if (command.length === 0) throw new ShellmcpError("USAGE", "no command given (usage: shellmcp sandbox macos [options] -- CMD...)");
    if (!o.printPolicy && host.platform !== "darwin") {
      host.err("shellmcp: `sandbox macos` runs Seatbelt, which exists only on macOS (use --print-policy to see the policy here)\n");
      return 2;
    }
    const cwd = o.cd === undefined ? host.cwd : resolve(host.cwd, o.cd);
    const plan = planFromMacosFlags(o, cwd, host.env);
    launch = seatbeltLaunch(plan, command, { host: host.seatbelt });
  } catch (e) {
    host.err(`shellmcp: ${(e as Error).message}\n`);
    return 2;
  }
  if (o.printPolicy) {
    host.out(formatLaunch(launch));
    return 0;
  }
  return host.run(launch.argv, { ...host.env, ...launch.env });
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
