/**
 * The call's sandbox as one object (issue 33, part A). A {@link SandboxBackend} is one way of confining a shell —
 * bubblewrap (started directly or through our helper), Landlock + seccomp (our helper), Codex's own
 * `codex-linux-sandbox`, Seatbelt on macOS, or none — chosen in one place (src/shell/backend-choice.ts). A
 * {@link CallSandbox} is that backend with one call's sandbox state (policy, permission profile, policy cwd,
 * workdir), built once per call: every consumer (the launch argv, the escalation room's backend and plan, the
 * writable view the escalation boundary and the git guard judge with, proxy mode's wiring) asks it, instead of
 * reading helper flags back and planning the policy again.
 *
 * The implementations live with their platform: ./linux/backend.ts (our helper, direct bubblewrap, Codex's helper)
 * and ./macos/backend.ts (Seatbelt); {@link NO_SANDBOX} is here.
 */
import { basename } from "node:path";
import { planPermissionProfile, planSandboxPolicy, type FilesystemPlan } from "./filesystem-plan.ts";
import type { PermissionProfile } from "./permission-profile.ts";
import { hasFullDiskWrite, hasFullNetwork, type SandboxPolicy } from "./policy.ts";
import type { RoomBackend } from "./room-backend.ts";
import { planWritableView, writableView, type WritableView, type WriteEnforcement } from "./writable.ts";

/** The shell a call starts: `shellPath -c|-lc command` in `workdir`; `wrapperPath` is the exec wrapper it runs. */
export interface ShellCommand {
  shellPath: string;
  login: boolean;
  command: string;
  wrapperPath: string;
  /**
   * The program started instead of `shellPath -c command`: the exec-server's `process/start` argv (its processes are
   * not shells), started by the same launch as a call's shell.
   */
  program?: string[];
}

/** How proxy mode reaches the sandbox: the ports TCP may reach and, under bubblewrap, the bridge fd. */
export interface ProxySpec {
  /** bubblewrap: the bridge socket's fd number in the sandbox (src/network/bridge.ts `PROXY_BRIDGE_FD`). */
  fd?: number;
  /** The ports TCP may reach: in the call's namespace (bubblewrap) or the proxy's on the host's loopback. */
  ports: number[];
  /** macOS: `allow_local_binding` (Seatbelt's local rules). */
  allowLocalBinding?: boolean;
}

/** How one shell is started: its argv, the fds it needs besides 0–3, and what to give back when it has ended. */
export interface Launch {
  argv: string[];
  /** argv[0] as the program sees it (`codex-linux-sandbox` for a helper started by path). */
  argv0?: string;
  /** Whether the shell runs inside a sandbox at all. */
  sandboxed: boolean;
  /** Variables the backend adds after the environment policy (Seatbelt: `CODEX_SANDBOX=seatbelt`, …). */
  env?: Record<string, string>;
  /**
   * bubblewrap started directly by this process: every sandboxed process is in its pid namespace, which the kernel
   * kills whole when bwrap's init exits (so the shell need not join the call's cgroup itself).
   */
  ownPidNamespace?: boolean;
  /**
   * Bytes the launcher reads from fd `fd` (a pipe): the seccomp program (BPF) for direct bubblewrap, the plan for
   * sandbox-exec (./linux/sandbox-exec.ts).
   */
  seccomp?: { fd: number; program: Uint8Array };
  /** The fd number at which the launcher expects a read-only fd of this executable (bwrap's `--ro-bind-fd`). */
  selfExeFd?: number;
  /**
   * More fds the launcher expects: `[fd number in the started process, fd of this process]` (the backend keeps them
   * open; the caller only places them). The server's loopback network's namespaces (./linux/loopback-net.ts).
   */
  fds?: readonly (readonly [number, number])[];
  /** Give back what planning made on the host (mount points, private folders), once the sandbox has ended. */
  release?: () => void;
}

/**
 * Exit status of a command whose sandbox cannot be applied, on every platform (Codex's Linux helper panics with 101;
 * shellmcp's helper, a call refused before its shell starts and `sandbox macos` report the same).
 */
export const SANDBOX_FAILURE_EXIT = 101;

/** Which backend confines a call. */
export type BackendKind = "bwrap" | "landlock" | "codex-helper" | "seatbelt" | "none";

/**
 * One way of confining a call's shell. Implementations: ./linux/backend.ts, ./macos/backend.ts, {@link NO_SANDBOX}.
 * Methods take the {@link CallSandbox} they serve, so one backend object can serve many calls.
 */
export interface SandboxBackend {
  readonly kind: BackendKind;
  /**
   * Which mechanism confines a sandboxed call's writes (writable.ts): `bwrap` for bubblewrap (ours or Codex's
   * `--use-bwrap-sandbox`), `landlock` for Landlock, Codex's helper without bubblewrap and Seatbelt, `none` for
   * {@link NO_SANDBOX}.
   */
  readonly enforcement: WriteEnforcement;
  /**
   * How network proxy mode reaches the command: `bridge`, a private network namespace whose listeners come over a
   * socket pair (src/network/bridge.ts); `loopback`, the proxy's ports on the host's loopback; `unsupported`, it
   * cannot be enforced (Codex's helper): such a call is refused.
   */
  readonly proxyWiring: "bridge" | "loopback" | "unsupported";
  /** Why a call runs under Landlock rather than bubblewrap (the weaker-protection notice); undefined otherwise. */
  readonly landlockWhy?: string;
  /**
   * What restores bubblewrap's protection, for the weaker-protection notice, when that is not installing bubblewrap
   * (it is installed but user namespaces are refused); undefined otherwise.
   */
  readonly landlockFix?: string;
  /** Whether `call` runs sandboxed at all under this backend (danger-full-access never does). */
  sandboxes(call: CallSandbox): boolean;
  /**
   * The argv (and fds, host resources) that start `shell` under `call`, in proxy mode when `proxy` is given.
   * Called only for a call this backend {@link sandboxes}. Throws `SANDBOX_UNAVAILABLE` when the sandbox cannot be
   * built as asked (a protected path that is a symlink); whatever it made on the host is then given back.
   */
  launch(call: CallSandbox, shell: ShellCommand, proxy?: ProxySpec): Launch;
  /** The backend of `call`'s escalation rooms (src/sandbox/room-backend.ts), for a sandboxed call that is not `host` mode. */
  room(call: CallSandbox, o: { allowLocalBinding: boolean }): RoomBackend;
  /** What `call`'s shell can write, when the backend's own model says it better than the plan (Seatbelt). */
  writable?(call: CallSandbox): WritableView;
}

/**
 * The shell's argv with no sandbox: `shellPath -c|-lc command name` (or its {@link ShellCommand.program}), where
 * `name` — the shell file's base name, `bash` or `zsh` — becomes the command's `$0`, which the shell puts before its
 * own error messages (`bash: line 1: x: Read-only file system`), instead of the carried shell's internal path
 * (issue 41). Codex passes no name, so there `$0` is the shell's path.
 */
export function bareShell(shell: Pick<ShellCommand, "shellPath" | "login" | "command" | "program">): string[] {
  if (shell.program !== undefined) return [...shell.program];
  return [shell.shellPath, shell.login ? "-lc" : "-c", shell.command, basename(shell.shellPath)];
}

/** Whether a legacy policy needs no sandbox at all: danger-full-access, or full disk write with full network. */
export function policyIsOpen(policy: SandboxPolicy): boolean {
  return policy.type === "danger-full-access" || (hasFullDiskWrite(policy) && hasFullNetwork(policy));
}

/** No sandbox: the shell runs as is (danger-full-access). Escalations run on the host. */
export const NO_SANDBOX: SandboxBackend = {
  kind: "none",
  enforcement: "none",
  proxyWiring: "unsupported",
  sandboxes: () => false,
  launch: () => {
    throw new Error("NO_SANDBOX.launch: the call is not sandboxed");
  },
  room: () => ({ kind: "host" }),
};

/** The sandbox state of one call, as a {@link CallSandbox} is built from it. */
export interface CallSandboxState {
  /** The legacy policy (0.97), or for a profile the nearest legacy policy never wider than it. */
  policy: SandboxPolicy;
  /** Codex 0.169's profile: when present, the sandbox enforces this, not `policy`. */
  profile?: PermissionProfile;
  /** Folder the policy's roots are computed from (absolute). */
  policyCwd: string;
  /** Folder the shell starts in (the `.git` of its repository is read-only at any depth under bubblewrap). */
  workdir: string;
  /** The shell's environment after `shell_environment_policy` (`$TMPDIR` is a writable root). */
  env: Record<string, string | undefined>;
}

/**
 * One call's sandbox: its {@link SandboxBackend} and sandbox state, with what follows from them computed once
 * (the filesystem plan, the writable view) and asked by every consumer of the call.
 */
export class CallSandbox {
  /** Whether the shell runs inside a sandbox at all. */
  readonly sandboxed: boolean;
  /** Which mechanism confines the shell's writes: the backend's, or `none` when not sandboxed. */
  readonly enforcement: WriteEnforcement;
  private planned: FilesystemPlan | undefined;
  private view: WritableView | undefined;

  /**
   * `plan`: the call's filesystem plan when the caller has it already (a permission profile's, checked before the
   * call; Seatbelt's), else planned on first use from the policy.
   */
  constructor(
    readonly backend: SandboxBackend,
    readonly state: CallSandboxState,
    plan?: FilesystemPlan,
  ) {
    this.planned = plan;
    this.sandboxed = backend.sandboxes(this);
    this.enforcement = this.sandboxed ? backend.enforcement : "none";
  }

  /** The legacy policy (for a profile, the nearest one never wider). */
  get policy(): SandboxPolicy {
    return this.state.policy;
  }

  /** The permission profile the sandbox enforces instead of {@link policy}, when the client sent one. */
  get profile(): PermissionProfile | undefined {
    return this.state.profile;
  }

  /**
   * The filesystem plan the call's sandbox enforces (planned once): the profile's, else the policy's — with the
   * nested repositories' `.git` under bubblewrap, which enforces them. Throws `SANDBOX_UNAVAILABLE`/`USAGE` when
   * the state cannot be planned.
   */
  plan(): FilesystemPlan {
    const s = this.state;
    this.planned ??=
      s.profile !== undefined
        ? planPermissionProfile(s.profile, s.policyCwd, s.env)
        : planSandboxPolicy(s.policy, s.policyCwd, s.env, this.enforcement === "bwrap" ? { workdir: s.workdir } : undefined);
    return this.planned;
  }

  /**
   * What the shell can write, as the escalation boundary and the git guard judge it (writable.ts; computed once):
   * the backend's own model (Seatbelt), the profile's plan, or the legacy policy's writable roots as the backend
   * enforces them.
   */
  writable(): WritableView {
    const s = this.state;
    // Our bubblewrap plans bind the folders above their read-only entries onto themselves (writable-model.ts `pinFolders`),
    // so those entries stay read-only by path; Codex's own helper does not.
    const pinned = this.backend.kind === "bwrap";
    this.view ??=
      this.backend.writable?.(this) ??
      (s.profile !== undefined
        ? planWritableView(this.plan(), this.enforcement, pinned)
        : writableView(s.policy, s.policyCwd, this.enforcement, s.env, s.workdir, pinned, this.plannedRoots()));
    return this.view;
  }

  /**
   * Under bubblewrap, the writable roots of the call's plan (which its launch plans anyway, from the same policy,
   * policy cwd, environment and workdir as the view): the nested-repository search runs once per call, and the view
   * describes the roots the sandbox binds. Undefined elsewhere, or when the plan cannot be made (the view is then
   * computed on its own, and the launch reports the refusal as before).
   */
  private plannedRoots(): FilesystemPlan["writableRoots"] | undefined {
    if (this.enforcement !== "bwrap") return undefined;
    try {
      return this.plan().writableRoots;
    } catch {
      return undefined;
    }
  }

  /** How `shell` starts under this sandbox (see {@link SandboxBackend.launch}); the bare shell when not sandboxed. */
  launch(shell: ShellCommand, proxy?: ProxySpec): Launch {
    return this.sandboxed ? this.backend.launch(this, shell, proxy) : { argv: bareShell(shell), sandboxed: false };
  }
}
