/**
 * What a launch needs from the platform it runs on (issue 42, "seams in the wrong place"): one {@link LaunchPlatform}
 * object — the lifeline guard, the sandbox backends and their bubblewrap preflight, the git guard's confined repairs —
 * so that the one command run (src/shell/) is written against these types only and never names a platform's modules.
 * The object is assembled once, in src/sandbox/host-platform.ts (the only module that names ./linux/ and ./macos/
 * for src/shell/); its parts live with their platform. Types only.
 */
import type { SandboxBackend } from "./backend.ts";
import type { RepairOp, RepairResult } from "./git/repair.ts";

/** Result of probing bubblewrap (./linux/bwrap.ts `probeBwrap`). */
export interface BwrapProbe {
  ok: boolean;
  path?: string;
  /** `/proc` cannot be mounted (e.g. nested in a container): run with --no-proc. */
  noProc?: boolean;
  /** Why bwrap cannot be used, with the fix. */
  reason?: string;
  /**
   * bwrap is there but new user namespaces are refused: `container` when this process runs under a seccomp filter
   * (a container runtime's default profile, a Kubernetes pod's `RuntimeDefault`: expected, nothing to install),
   * `host` otherwise (sysctl, AppArmor). Absent when bwrap is missing or failed for another reason.
   */
  usernsRefused?: "container" | "host";
}

/**
 * The lifeline guard (./linux/lifeline.ts): every process the server starts runs below a guard that kills it when
 * the server dies. Where there is no guard binary (not Linux, a build that carries none), {@link problem} says why
 * and processes start directly.
 */
export interface Lifeline {
  /** The fd number the lifeline's read end has in a guard started by `Bun.spawn` (after the call's fds 0–6). */
  readonly fd: number;
  /** The fd number of the executable a guard execs (`--exec-fd`), when it is this one. */
  readonly execFd: number;
  /** argv[0] of every guard (how it shows in `ps`). */
  readonly argv0: string;
  /** The signal that asks a guard, from its parent only, to kill everything below it and end (a number, SIGUSR1). */
  readonly endSignal: number;
  /** Why processes cannot be guarded here; undefined when they can. */
  problem(): string | undefined;
  /** The read end of this thread's lifeline pipe (created on first use). Throws when it cannot be created. */
  readFd(): number;
  /**
   * A read-only fd of this executable for `--exec-fd` when `path` is this executable (undefined otherwise). Throws
   * `SANDBOX_UNAVAILABLE` when it cannot be opened.
   */
  selfExecFd(path: string): number | undefined;
  /**
   * `path` (absolute) run with `argv` (argv[0] exactly) through the guard, which finds the lifeline at fd `fd` of
   * its own: the program to start instead and its argv; undefined when there is no guard. `opts` as
   * ./linux/lifeline.ts `guardedArgv` documents (exec fd, cgroup to join, status fd, controlling terminal).
   */
  guardedArgv(
    path: string,
    argv: readonly string[],
    fd: number,
    opts?: { execFd?: number; joinCgroup?: string; statusFd?: number; ctty?: number },
  ): { path: string; argv: string[] } | undefined;
}

/** Our Linux helper as a call's backend: what src/shell/backend-choice.ts decided for it. */
export interface HelperBackendSpec {
  kind: "bwrap" | "landlock";
  /** The helper executable (this one, `/proc/<pid>/exe`; "" for a helper started outside a call). */
  exe: string;
  /** Its backend flags (`--backend KIND`, `--no-proc`, `--protected-config-dir DIR`…). */
  flags: readonly string[];
  /** Where bubblewrap is once its preflight passed: calls then start it directly. */
  directBwrap?: { bwrap: string; noProc: boolean };
  /** Why Landlock rather than bubblewrap (the weaker-protection notice). */
  landlockWhy?: string;
  /** Whether the launcher passes fds besides 0–2 (false: the exec-server). */
  passesFds: boolean;
  /** What restores bubblewrap's protection when that is not installing it. */
  landlockFix?: string;
}

/** The sandbox backends a platform builds (./linux/backend.ts, ./macos/backend.ts) and bubblewrap's preflight. */
export interface SandboxBackends {
  /** bubblewrap's preflight for a network-restricted sandbox (cached across processes; ./linux/bwrap.ts). */
  probeBwrap(): BwrapProbe;
  /** Forget the preflight of the bubblewrap at `path` (here and in the cache), so the next call probes again. */
  forgetBwrapProbe(path: string): void;
  /** Our helper (bubblewrap, direct or through it, or Landlock + seccomp) as {@link HelperBackendSpec} says. */
  helper(spec: HelperBackendSpec): SandboxBackend;
  /** Codex's own `codex-linux-sandbox` at `exe` (`useBwrap`: its `--use-bwrap-sandbox`). */
  codexHelper(exe: string, useBwrap: boolean): SandboxBackend;
  /** Seatbelt (macOS). */
  seatbelt(): SandboxBackend;
  /** The bubblewrap a backend of {@link helper} starts directly; undefined for any other backend. */
  directBwrap(backend: SandboxBackend): { bwrap: string; noProc: boolean } | undefined;
}

/** Everything a launch asks of the platform. */
export interface LaunchPlatform {
  readonly lifeline: Lifeline;
  readonly backends: SandboxBackends;
  /**
   * How the git guard carries out a batch of repairs on `platform`, one result per op, never throwing: on Linux in
   * a child of this executable confined by Landlock to the batch's folders; undefined elsewhere (the guard then
   * repairs in this process, through checked folder descriptors).
   */
  gitRepair(platform: NodeJS.Platform): ((ops: readonly RepairOp[]) => RepairResult[]) | undefined;
}
