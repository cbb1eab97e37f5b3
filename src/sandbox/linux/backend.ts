/**
 * The Linux {@link SandboxBackend}s of a call (../backend.ts): our own helper (`codex-linux-sandbox`, this binary)
 * with bubblewrap or Landlock + seccomp — bubblewrap started directly, with no helper process of ours, once its
 * preflight has passed and the plan needs no inner stage — and Codex's own `codex-linux-sandbox` helper. Chosen
 * by src/serve/backend.ts.
 */
import { serializePermissionProfile } from "../permission-profile.ts";
import { protectedConfigDirs } from "../protected-config.ts";
import { serializeSandboxPolicy } from "../policy.ts";
import type { RoomBackend } from "../room-backend.ts";
import { hiddenPaths, hiddenPathsFlag } from "../secrets.ts";
import {
  bareShell,
  policyIsOpen,
  type CallSandbox,
  type Launch,
  type ProxySpec,
  type SandboxBackend,
  type ShellCommand,
} from "../backend.ts";
import { openSelfExe, selfExePath } from "../../self.ts";
import { findBwrap, planBwrap } from "./bwrap.ts";
import { releaseBwrapPlan } from "./mount-points.ts";
import { joinLoopbackArgv, serverLoopback } from "./loopback-net.ts";
import { refuseOversizeHelper } from "./exec-limits.ts";
import { encodeExecPlan, planLandlockExec, sandboxExecArgv, sandboxExecBinary } from "./sandbox-exec.ts";

/** fd number of the seccomp program bwrap reads in a direct launch. */
export const SECCOMP_FD = 4;
/** fd number of the plan sandbox-exec reads (./sandbox-exec.ts), in a Landlock call that does not start the helper. */
const PLAN_FD = SECCOMP_FD;
/** fd of the genuine executable for bwrap's `--ro-bind-fd` when serve starts bwrap with our inner stage (proxy mode). */
export const SELF_EXE_FD = 6;
/** argv[0] of a sandbox helper started by path (Codex's name for the role). */
const HELPER_ARGV0 = "codex-linux-sandbox";

/**
 * argv that starts the sandbox helper `exe`: this binary's own ({@link selfExePath}, `/proc/<pid>/exe`) gets its role
 * by flag, since a trampoline that execs it (the cgroup `/bin/sh`, the room's `exec -a` bash) does not keep argv[0];
 * another helper (Codex's `codexLinuxSandboxExe`, a role link) is named as is.
 */
export function helperCommand(exe: string): string[] {
  return exe === selfExePath() ? [exe, "--codex-run-as-linux-sandbox"] : [exe];
}

/** `--protected-config-dir DIR` for each folder no sandbox may write (policy.ts `protectedConfigDirs`). */
function protectFlags(): string[] {
  return protectedConfigDirs().flatMap((d) => ["--protected-config-dir", d]);
}

/**
 * A helper's argv: `helper flags… [proxy flags] --sandbox-policy-cwd CWD --sandbox-policy JSON -- shell…`. Throws
 * `SANDBOX_UNAVAILABLE` when it could not start with the call's environment (./exec-limits.ts
 * `refuseOversizeHelper`: the policy's JSON, one string, lists every writable root).
 */
function helperArgv(helper: string[], call: CallSandbox, shell: ShellCommand, proxy?: ProxySpec): Launch {
  const launch: Launch = {
    argv: [
      ...helper,
      ...(proxy === undefined
        ? []
        : ["--network-proxy-ports", proxy.ports.join(","), ...(proxy.fd !== undefined ? ["--network-proxy-fd", String(proxy.fd)] : [])]),
      "--sandbox-policy-cwd",
      call.state.policyCwd,
      "--sandbox-policy",
      serializeSandboxPolicy(call.policy),
      "--",
      ...bareShell(shell),
    ],
    argv0: HELPER_ARGV0,
    sandboxed: true,
  };
  refuseOversizeHelper(launch.argv, call.state.env, () => helperCounts(call));
  return launch;
}

/** The writable roots and denied paths of `call`'s plan, for a refusal (the policy's own roots when it cannot be planned). */
function helperCounts(call: CallSandbox): { writableRoots: number; deniedPaths: number } {
  try {
    const plan = call.plan();
    return { writableRoots: plan.writableRoots.length, deniedPaths: plan.deniedPaths.length };
  } catch {
    const p = call.policy;
    return { writableRoots: p.type === "workspace-write" ? p.writable_roots.length : 0, deniedPaths: 0 };
  }
}

/**
 * Our helper (this binary as `codex-linux-sandbox`, `exe`) with bubblewrap or Landlock + seccomp (`kind`).
 * `flags`: its backend flags (`--backend KIND`, `--no-proc`, `--protected-config-dir DIR`…). `directBwrap`: where
 * bubblewrap is, once its preflight has passed: calls then start it directly (one fewer Bun start), unless the plan
 * needs our inner stage (restricted reads), where the helper is used after all. Under Landlock, when the launcher
 * passes fds (`passesFds`, not the exec-server's) and sandbox-exec is carried, calls start sandbox-exec with the
 * plan the helper would have applied (./sandbox-exec.ts; no Bun start), unless only the helper can run it.
 * `landlockWhy`/`landlockFix`: why Landlock, and what restores bubblewrap's protection when that is not installing
 * it (../backend.ts `SandboxBackend`).
 */
export class HelperBackend implements SandboxBackend {
  readonly enforcement: "bwrap" | "landlock";
  readonly proxyWiring: "bridge" | "loopback";

  constructor(
    readonly kind: "bwrap" | "landlock",
    readonly exe: string,
    readonly flags: readonly string[],
    readonly directBwrap?: { bwrap: string; noProc: boolean },
    readonly landlockWhy?: string,
    readonly passesFds: boolean = true,
    readonly landlockFix?: string,
  ) {
    this.enforcement = kind;
    this.proxyWiring = kind === "bwrap" ? "bridge" : "loopback";
  }

  /** Sandboxed unless the policy needs no sandbox at all. */
  sandboxes(call: CallSandbox): boolean {
    return !policyIsOpen(call.policy);
  }

  /** The helper's argv, bubblewrap's own when started directly, or sandbox-exec's with its plan (see the class). */
  launch(call: CallSandbox, shell: ShellCommand, proxy?: ProxySpec): Launch {
    if (this.kind === "landlock" && this.passesFds) {
      const direct = this.sandboxExecLaunch(call, shell, proxy);
      if (direct !== undefined) return direct;
    }
    const profile = call.profile === undefined ? [] : ["--permission-profile", serializePermissionProfile(call.profile)];
    // The helper hides exactly what this process's plans hide (../secrets.ts: `[shellmcp] sandbox_readable`, the
    // approver's folder and other secrets only this process knows).
    const viaHelper = () =>
      helperArgv([...helperCommand(this.exe), ...this.flags, ...profile, ...hiddenPathsFlag(hiddenPaths())], call, shell, proxy);
    const d = this.directBwrap;
    if (d === undefined) return viaHelper();
    const self = openSelfExe() !== undefined ? { selfFd: SELF_EXE_FD } : {};
    // Network off, no proxy: the call may run in the server's loopback network (./loopback-net.ts), made on first use.
    const lo = proxy === undefined && call.plan().network !== "enabled" ? serverLoopback(d.bwrap, d.noProc) : undefined;
    const loopback = lo !== undefined && !("error" in lo) ? lo : undefined;
    const plan = planBwrap(
      d.bwrap,
      {
        policy: call.policy,
        profile: call.profile,
        policyCwd: call.state.policyCwd,
        workdir: call.state.workdir,
        env: call.state.env,
        command: bareShell(shell),
        backend: "bwrap",
        noProc: d.noProc,
        ...(proxy !== undefined ? { networkProxy: proxy } : {}),
      },
      {
        seccompFd: SECCOMP_FD,
        ...self,
        ...(loopback !== undefined ? { loopback: true } : {}),
        // The call's own plan, made from the same inputs (a profile's is made by the caller: planned here).
        ...(call.profile === undefined ? { plan: call.plan() } : {}),
      },
    );
    if (plan.loopback === true && loopback !== undefined) {
      const joined = joinLoopbackArgv(loopback, plan.argv);
      return {
        argv: joined.argv,
        sandboxed: true,
        ownPidNamespace: true,
        ...(plan.seccomp !== undefined ? { seccomp: { fd: SECCOMP_FD, program: plan.seccomp } } : {}),
        fds: joined.fds,
        release: () => releaseBwrapPlan(plan),
      };
    }
    // Proxy mode: bwrap starts our inner stage itself (it builds the bridge), still with no helper process before it.
    if (plan.direct || proxy !== undefined)
      return {
        argv: plan.argv,
        sandboxed: true,
        ownPidNamespace: true,
        ...(plan.seccomp !== undefined ? { seccomp: { fd: SECCOMP_FD, program: plan.seccomp } } : {}),
        ...(!plan.direct ? { selfExeFd: SELF_EXE_FD } : {}),
        release: () => releaseBwrapPlan(plan),
      };
    releaseBwrapPlan(plan); // the plan needs our inner stage: let the helper build it
    return viaHelper();
  }

  /**
   * sandbox-exec with the plan of `call` at {@link PLAN_FD}, or undefined when the helper must run it (no
   * sandbox-exec, or a plan only the helper can run: ./sandbox-exec.ts `planLandlockExec`).
   */
  private sandboxExecLaunch(call: CallSandbox, shell: ShellCommand, proxy?: ProxySpec): Launch | undefined {
    const bin = sandboxExecBinary();
    if ("error" in bin) return undefined;
    const plan = planLandlockExec({
      policy: call.policy,
      ...(call.profile !== undefined ? { profile: call.profile } : {}),
      policyCwd: call.state.policyCwd,
      env: call.state.env,
      ...(proxy !== undefined ? { proxyPorts: proxy.ports } : {}),
    });
    if ("helper" in plan) return undefined;
    return {
      argv: sandboxExecArgv(bin.path, PLAN_FD, bareShell(shell)),
      sandboxed: true,
      seccomp: { fd: PLAN_FD, program: encodeExecPlan(plan) },
    };
  }

  /** bubblewrap rooms (where bwrap is found), or Landlock rooms built by the helper. */
  room(): RoomBackend {
    if (this.kind === "bwrap")
      return bwrapRoom(this.directBwrap?.bwrap, this.directBwrap?.noProc === true || this.flags.includes("--no-proc"));
    // The room's helper refuses a Landlock room whose writable roots contain CODEX_HOME (it cannot carve it out).
    return { kind: "landlock", helper: [...helperCommand(this.exe), ...protectFlags()] };
  }
}

/** A bubblewrap room with `bwrap` (else the one found), or unavailable without one. */
function bwrapRoom(bwrap: string | undefined, noProc: boolean): RoomBackend {
  const path = bwrap ?? findBwrap().path;
  if (path === undefined) return { kind: "unavailable", reason: "bubblewrap is not installed" };
  return { kind: "bwrap", bwrap: path, noProc };
}

/**
 * Codex's own helper (`--use-codex-linux-sandbox-exe` with the client's `codexLinuxSandboxExe`), with bubblewrap
 * when the client asks (`useLinuxSandboxBwrap`: `--use-bwrap-sandbox`), else Landlock. Proxy mode cannot be enforced
 * by it. Its Landlock rooms are built by it too.
 */
export class CodexHelperBackend implements SandboxBackend {
  readonly kind = "codex-helper" as const;
  readonly enforcement: "bwrap" | "landlock";
  readonly proxyWiring = "unsupported" as const;
  readonly landlockWhy: string | undefined;

  constructor(
    readonly exe: string,
    readonly useBwrap: boolean,
  ) {
    this.enforcement = useBwrap ? "bwrap" : "landlock";
    this.landlockWhy = useBwrap ? undefined : "Codex's own sandbox helper without bubblewrap";
  }

  /** Sandboxed unless the policy needs no sandbox at all. */
  sandboxes(call: CallSandbox): boolean {
    return !policyIsOpen(call.policy);
  }

  /** `exe [--use-bwrap-sandbox] --sandbox-policy-cwd CWD --sandbox-policy JSON -- shell…`. */
  launch(call: CallSandbox, shell: ShellCommand, proxy?: ProxySpec): Launch {
    return helperArgv([...helperCommand(this.exe), ...(this.useBwrap ? ["--use-bwrap-sandbox"] : [])], call, shell, proxy);
  }

  /** bubblewrap rooms (where bwrap is found), or Landlock rooms built by Codex's helper. */
  room(): RoomBackend {
    if (this.useBwrap) return bwrapRoom(undefined, false);
    return { kind: "landlock", helper: [...helperCommand(this.exe), ...protectFlags()] };
  }
}
