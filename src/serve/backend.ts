/**
 * Which Linux sandbox backend `serve` runs calls under (`--sandbox-backend`): bubblewrap when asked or when its
 * preflight passes (`auto`), else Landlock + seccomp with a warning. The preflight waits for the first call that
 * needs a backend. Once bubblewrap is known to work, calls start it directly (no helper stage of ours).
 */
import type { PermissionProfile } from "../sandbox/permission-profile.ts";
import { forgetBwrapProbe } from "../sandbox/linux/bwrap.ts";
import { probeBwrap, type BwrapProbe } from "../sandbox/linux/bwrap.ts";
import type { SandboxLauncher } from "../shell/run-command.ts";
import { ShellmcpError } from "../errors.ts";
import { writeStderr } from "../stderr.ts";

/** The backend choice of one server. */
export class BackendChoice {
  /** Set once the preflight has passed: where bwrap is, so calls can start it directly. */
  private bwrapDirect: { bwrap: string; noProc: boolean } | undefined;
  private probed: string[] | undefined;
  /** Why calls run under Landlock rather than bubblewrap (the flag, or the failed preflight); undefined otherwise. */
  private landlockWhy: string | undefined;

  /**
   * `kind`: `auto`, `bwrap` or `landlock`; throws `USAGE` for anything else. `configDirs`: folders no sandbox may
   * write (the server's CODEX_HOME), passed to the helper with every backend choice (see {@link protectFlags}).
   * `probe`: bubblewrap's preflight (the real {@link probeBwrap}; tests give a fixed answer).
   */
  constructor(
    private readonly kind: string = "auto",
    private readonly configDirs: readonly string[] = [],
    private readonly probe: () => BwrapProbe = () => probeBwrap(true),
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
   * The helper's backend flags for a call (`--backend bwrap|landlock`, `--no-proc`, then {@link protectFlags});
   * probes on first use.
   */
  flags(): string[] {
    return [...this.backendFlags(), ...this.protectFlags()];
  }

  private backendFlags(): string[] {
    if (this.kind === "landlock") {
      this.landlockWhy = "--sandbox-backend landlock was given";
      return ["--backend", "landlock"];
    }
    if (this.kind === "bwrap") {
      // With bwrap forced, a failed preflight leaves the helper to run it and fail closed with the reason.
      const probe = this.probe();
      if (probe.ok) this.bwrapDirect = { bwrap: probe.path!, noProc: probe.noProc === true };
      return ["--backend", "bwrap", ...(probe.noProc ? ["--no-proc"] : [])];
    }
    if (this.probed !== undefined) return this.probed;
    const probe = this.probe();
    if (!probe.ok)
      writeStderr(
        `shellmcp: ${probe.reason}; commands run under Landlock + seccomp, which does not protect .git/.codex inside writable roots\n`,
      );
    this.probed = ["--backend", probe.ok ? "bwrap" : "landlock", ...(probe.noProc ? ["--no-proc"] : [])];
    this.landlockWhy = probe.ok ? undefined : `bubblewrap unavailable: ${probe.reason}`;
    if (probe.ok) this.bwrapDirect = { bwrap: probe.path!, noProc: probe.noProc === true };
    return this.probed;
  }

  /** Why calls run under Landlock + seccomp instead of bubblewrap, once {@link flags} chose it; else undefined. */
  whyLandlock(): string | undefined {
    return this.landlockWhy;
  }

  /**
   * Whether a call's result is bubblewrap itself failing before the command ran (its `bwrap: …` message, status
   * 1) after the preflight had passed; if so, forget the preflight (here and in the cache) so that the next call
   * probes again, and return the explanation to append.
   */
  bwrapFailed(r: { exitCode: number; output: string }, launcher: SandboxLauncher): string | undefined {
    if (launcher.direct === undefined || r.exitCode !== 1 || !r.output.startsWith("bwrap: ")) return undefined;
    forgetBwrapProbe(launcher.direct.bwrap);
    this.bwrapDirect = undefined;
    this.probed = undefined;
    return `shellmcp: bubblewrap failed although its preflight had passed (${r.output.split("\n")[0]}); the next call probes it again and runs under Landlock if it still fails`;
  }

  /** The direct bwrap launch for `flags` (undefined unless they select bwrap and its preflight passed). */
  direct(flags: string[], profile?: PermissionProfile): SandboxLauncher["direct"] {
    return flags[0] === "--backend" && flags[1] === "bwrap" && this.bwrapDirect !== undefined
      ? { ...this.bwrapDirect, profile }
      : undefined;
  }
}
