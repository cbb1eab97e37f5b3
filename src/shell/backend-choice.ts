/**
 * Which sandbox backend a call of `serve` or a process of `exec-server` runs under, chosen in this one place (issue
 * 33, part A; issue 39 "one launch path": the exec-server's `process/start` and fs helper ask it too, one choice per
 * server): on macOS
 * Seatbelt; on Linux Codex's own helper when the client asks for it (`--use-codex-linux-sandbox-exe`), else our
 * helper with bubblewrap — when asked (`--sandbox-backend bwrap`, the client's `useLinuxSandboxBwrap`) or when its
 * preflight passes (`auto`) — or Landlock + seccomp with a warning (`--sandbox-backend landlock`, the client's
 * `useLegacyLandlock`, a failed preflight). The preflight waits for the first call that needs a backend. Once
 * bubblewrap is known to work, calls start it directly (no helper stage of ours). The call's sandbox is one
 * {@link CallSandbox} (../sandbox/backend.ts) that every consumer of the call asks.
 */
import { CallSandbox, NO_SANDBOX, policyIsOpen, type SandboxBackend } from "../sandbox/backend.ts";
import {
  configDirExposure,
  landlockCanEnforce,
  planPermissionProfile,
  planSandboxPolicy,
  type FilesystemPlan,
} from "../sandbox/filesystem-plan.ts";
import { HOST_PLATFORM } from "../sandbox/host-platform.ts";
import type { BwrapProbe, SandboxBackends } from "../sandbox/platform.ts";
import { ShellmcpError } from "../errors.ts";
import type { PermissionProfile } from "../sandbox/permission-profile.ts";
import type { SandboxPolicy } from "../sandbox/policy.ts";
import { writeStderr } from "../stderr.ts";

/**
 * The advice of the weaker-protection notice when bubblewrap is installed but new user namespaces are refused
 * (../sandbox/platform.ts `BwrapProbe.usernsRefused`): in a container or pod that is by design, so nothing is to
 * be installed; on a host, the host's setting is what to change.
 */
const USERNS_FIX: Record<"container" | "host", string> = {
  container:
    "bubblewrap is installed, but this container or pod refuses new user namespaces (its runtime's default seccomp profile does), so Landlock is used: that is expected in a container or Kubernetes pod, and nothing needs installing",
  host: "bubblewrap is installed, but this host refuses unprivileged user namespaces: allowing them (the server's log says how) restores kernel protection",
};

/** Our helper's choice for a call: the backend, whether /proc cannot be mounted, and the direct bubblewrap. */
interface HelperChoice {
  kind: "bwrap" | "landlock";
  noProc: boolean;
  direct?: { bwrap: string; noProc: boolean };
  landlockWhy?: string;
  /** What would restore bubblewrap's protection, when not installing it (`SandboxBackend.landlockFix`). */
  landlockFix?: string;
}

/**
 * The sandbox state a call's backend is chosen from: `serve` parses it from Codex's messages (src/mcp/sandbox-state.ts
 * `SandboxState` is this type), the exec-server builds one from `process/start`'s `sandbox`.
 */
export interface SandboxRequest {
  /** The legacy policy, or for a profile the nearest legacy policy never wider than it. */
  policy: SandboxPolicy;
  /** Codex 0.169's profile: when present, the sandbox enforces this, not `policy`. */
  profile?: PermissionProfile;
  /** Folder the roots are computed from (absolute); the workdir when absent. */
  sandboxCwd?: string;
  /** Codex's own Linux sandbox helper (used only with `--use-codex-linux-sandbox-exe`). */
  codexLinuxSandboxExe?: string;
  /** 0.97's `useLinuxSandboxBwrap`. */
  useBwrap: boolean;
  /** 0.169's `useLegacyLandlock`. */
  useLegacyLandlock: boolean;
}

/** What a call's backend depends on besides the sandbox state: the server's platform, helper and environment. */
export interface CallContext {
  platform: NodeJS.Platform;
  /** This executable as the Linux sandbox helper (src/serve.ts). */
  helperExe: string;
  /** `--use-codex-linux-sandbox-exe`: run calls under the client's `codexLinuxSandboxExe` when it names one. */
  useCodexLinuxSandboxExe?: boolean;
  /**
   * The shells' environment after `shell_environment_policy` (`serve`) or the client's `process/start` env (the
   * exec-server): every plan of the call takes `$TMPDIR` from it (a policy's root, a profile's `tmpdir` entry), never
   * from this process's. It only adds a writable root; what stays protected comes from this server's config folders.
   */
  env: Record<string, string | undefined>;
  /**
   * Whether a launch may start bubblewrap directly (fds besides 0–2: the seccomp program, this executable). Default
   * true; false for a launcher that passes only stdio (the exec-server): the helper then starts bubblewrap itself,
   * with the same backend choice.
   */
  direct?: boolean;
}

/** The backend choice of one server. */
export class BackendChoice {
  /** Set once the preflight has passed: where bwrap is, so calls can start it directly. */
  private bwrapDirect: { bwrap: string; noProc: boolean } | undefined;
  private probed: HelperChoice | undefined;

  /**
   * `kind`: `auto`, `bwrap` or `landlock`; throws `USAGE` for anything else. `configDirs`: folders no sandbox may
   * write (the server's CODEX_HOME), passed to the helper with every backend choice (see {@link protectFlags}).
   * `probe`: bubblewrap's preflight (the platform's, ../sandbox/platform.ts `SandboxBackends.probeBwrap`; tests
   * give a fixed answer). `backends`: the platform's backends (../sandbox/host-platform.ts).
   */
  constructor(
    private readonly kind: string = "auto",
    private readonly configDirs: readonly string[] = [],
    private readonly probe: () => BwrapProbe = () => HOST_PLATFORM.backends.probeBwrap(),
    private readonly backends: SandboxBackends = HOST_PLATFORM.backends,
  ) {
    if (kind !== "auto" && kind !== "bwrap" && kind !== "landlock")
      throw new ShellmcpError("USAGE", `--sandbox-backend must be auto, bwrap or landlock (got ${kind})`);
  }

  /**
   * `--protected-config-dir DIR` for each config folder this server protects: the helper re-binds them read-only
   * under bubblewrap and refuses a Landlock run whose writable roots contain one. Every helper argv of a call
   * carries them (the planning in this process knows them already, policy.ts `setProtectedConfigDirs`).
   */
  protectFlags(): string[] {
    return this.configDirs.flatMap((d) => ["--protected-config-dir", d]);
  }

  /**
   * Our helper's backend flags under the server's own choice (`--backend bwrap|landlock`, `--no-proc`, then
   * {@link protectFlags}), for a helper started outside a call (the start-up check of the shell); probes on first use.
   */
  flags(): string[] {
    return this.helperFlags(this.choose());
  }

  /** The server's own choice for our helper (probes bubblewrap on first use under `auto` and `bwrap`). */
  private choose(): HelperChoice {
    if (this.kind === "landlock") return { kind: "landlock", noProc: false, landlockWhy: "--sandbox-backend landlock was given" };
    if (this.kind === "bwrap") {
      // With bwrap forced, a failed preflight leaves the helper to run it and fail closed with the reason.
      const probe = this.probe();
      if (probe.ok) this.bwrapDirect = { bwrap: probe.path!, noProc: probe.noProc === true };
      return { kind: "bwrap", noProc: probe.noProc === true, direct: this.bwrapDirect };
    }
    if (this.probed !== undefined) return this.probed;
    const probe = this.probe();
    if (!probe.ok)
      writeStderr(
        `shellmcp: ${probe.reason}; commands run under Landlock + seccomp, which does not protect .git/.codex inside writable roots\n`,
      );
    if (probe.ok) this.bwrapDirect = { bwrap: probe.path!, noProc: probe.noProc === true };
    this.probed = probe.ok
      ? { kind: "bwrap", noProc: probe.noProc === true, direct: this.bwrapDirect }
      : {
          kind: "landlock",
          noProc: probe.noProc === true,
          landlockWhy: `bubblewrap unavailable: ${probe.reason}`,
          landlockFix: probe.usernsRefused === undefined ? undefined : USERNS_FIX[probe.usernsRefused],
        };
    return this.probed;
  }

  /** Our helper's flags for `c`: `--backend KIND`, `--no-proc` when /proc cannot be mounted, then {@link protectFlags}. */
  private helperFlags(c: HelperChoice): string[] {
    return ["--backend", c.kind, ...(c.noProc ? ["--no-proc"] : []), ...this.protectFlags()];
  }

  /** Our helper as the backend of `choice`, for a call of a server whose helper is `helperExe`. */
  private helper(helperExe: string, c: HelperChoice, direct = true): SandboxBackend {
    const directBwrap = c.kind === "bwrap" && direct ? c.direct : undefined;
    return this.backends.helper({
      kind: c.kind,
      exe: helperExe,
      flags: this.helperFlags(c),
      directBwrap,
      landlockWhy: c.landlockWhy,
      passesFds: direct,
      landlockFix: c.landlockFix,
    });
  }

  /**
   * The sandbox of one call under `snap` (`workdir`: the folder the shell starts in, and the policy cwd when
   * `snap` has none), or why it is refused (what cannot be enforced is never run with less): a profile or policy
   * that cannot be planned, a profile Landlock cannot enforce, CODEX_HOME inside a writable root of a backend that
   * cannot keep it read-only.
   */
  forCall(snap: SandboxRequest, workdir: string, ctx: CallContext): CallSandbox | { refused: string } {
    const state = { policy: snap.policy, profile: snap.profile, policyCwd: snap.sandboxCwd ?? workdir, workdir, env: ctx.env };
    const cwd = state.policyCwd;
    if (ctx.platform === "darwin") {
      // macOS: Seatbelt, from the profile or the legacy policy.
      let plan: FilesystemPlan;
      try {
        plan =
          snap.profile !== undefined ? planPermissionProfile(snap.profile, cwd, ctx.env) : planSandboxPolicy(snap.policy, cwd, ctx.env);
      } catch (e) {
        return { refused: (e as Error).message };
      }
      return new CallSandbox(this.backends.seatbelt(), state, plan);
    }
    if (snap.profile !== undefined) {
      // Codex's own helper takes profiles with a different argv (no --sandbox-policy): ours always runs them.
      const choice: HelperChoice = snap.useLegacyLandlock
        ? { kind: "landlock", noProc: false, landlockWhy: "the client asked for Codex's legacy Landlock sandbox" }
        : this.choose();
      let plan: FilesystemPlan;
      try {
        plan = planPermissionProfile(snap.profile, cwd, ctx.env);
      } catch (e) {
        return { refused: (e as Error).message };
      }
      const why = choice.kind === "landlock" ? landlockCanEnforce(plan) : undefined;
      if (why !== undefined) return { refused: why };
      return this.sandbox(this.helper(ctx.helperExe, choice, ctx.direct), state, plan);
    }
    const codexHelper = ctx.useCodexLinuxSandboxExe === true && snap.codexLinuxSandboxExe !== undefined;
    // The client's useLinuxSandboxBwrap: bubblewrap through the helper (directly once a preflight has passed).
    const choice: HelperChoice | undefined = codexHelper
      ? undefined
      : snap.useBwrap
        ? { kind: "bwrap", noProc: false, direct: this.bwrapDirect }
        : this.choose();
    // CODEX_HOME inside a writable root: only bubblewrap of ours can keep it read-only (issue 34, item 4).
    const exposed = codexHelper || choice?.kind === "landlock" ? configDirExposure(snap.policy, cwd, ctx.env) : undefined;
    if (exposed !== undefined)
      return {
        refused: codexHelper
          ? `Codex's own sandbox helper (--use-codex-linux-sandbox-exe) cannot keep ${exposed.dir} read-only inside the writable ${exposed.root}`
          : exposed.why,
      };
    const backend = codexHelper
      ? this.backends.codexHelper(snap.codexLinuxSandboxExe!, snap.useBwrap)
      : this.helper(ctx.helperExe, choice!, ctx.direct);
    return this.sandbox(backend, state);
  }

  /** The call's sandbox; with no sandbox at all when its policy needs none. */
  private sandbox(backend: SandboxBackend, state: CallSandbox["state"], plan?: FilesystemPlan): CallSandbox {
    return new CallSandbox(policyIsOpen(state.policy) ? NO_SANDBOX : backend, state, plan);
  }

  /**
   * Whether a call's result is bubblewrap itself failing before the command ran (its `bwrap: …` message, status
   * 1) after the preflight had passed; if so, forget the preflight (here and in the cache) so that the next call
   * probes again, and return the explanation to append.
   */
  bwrapFailed(r: { exitCode: number; output: string }, call: CallSandbox): string | undefined {
    const direct = this.backends.directBwrap(call.backend);
    if (direct === undefined || r.exitCode !== 1 || !r.output.startsWith("bwrap: ")) return undefined;
    this.backends.forgetBwrapProbe(direct.bwrap);
    this.bwrapDirect = undefined;
    this.probed = undefined;
    return `shellmcp: bubblewrap failed although its preflight had passed (${r.output.split("\n")[0]}); the next call probes it again and runs under Landlock if it still fails`;
  }
}
