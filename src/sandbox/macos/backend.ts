/**
 * The macOS {@link SandboxBackend} of a call (../backend.ts): Seatbelt (`/usr/bin/sandbox-exec`) with the policy
 * generated from the call's filesystem plan (./seatbelt.ts); its escalation rooms are Seatbelt rooms too. Chosen by
 * src/serve/backend.ts.
 */
import type { RoomBackend } from "../room-backend.ts";
import type { CallSandbox, Launch, ProxySpec, SandboxBackend, ShellCommand } from "../backend.ts";
import type { WritableView } from "../writable.ts";
import { seatbeltLaunch, seatbeltShellLaunch, seatbeltWritableView } from "./seatbelt.ts";

/** Seatbelt, for every call of a server on macOS. */
export class SeatbeltBackend implements SandboxBackend {
  readonly kind = "seatbelt" as const;
  /**
   * Seatbelt cannot keep a path inside a writable root read-only the way bubblewrap re-binds it: the git guard and
   * the weaker-protection rules treat it as Landlock (its writable view is its own, {@link writable}).
   */
  readonly enforcement = "landlock" as const;
  readonly proxyWiring = "loopback" as const;

  /**
   * Sandboxed unless the plan is open: unsandboxed, or full write and full read with the network on and nothing
   * denied (as Codex runs such a command as is).
   */
  sandboxes(call: CallSandbox): boolean {
    const plan = call.plan();
    return !(!plan.sandboxed || (plan.fullWrite && plan.fullRead && plan.network === "enabled" && plan.deniedPaths.length === 0));
  }

  /**
   * `sandbox-exec -p POLICY -D… -- shell…` with Codex's markers in `env`; the proxy's loopback ports in proxy mode.
   * With `shell.program`: that argv instead of the shell, as `sandbox macos` runs it (./seatbelt.ts `seatbeltLaunch`).
   */
  launch(call: CallSandbox, shell: ShellCommand, proxy?: ProxySpec): Launch {
    const seatbeltProxy = proxy === undefined ? undefined : { ports: proxy.ports, allowLocalBinding: proxy.allowLocalBinding === true };
    if (shell.program !== undefined) {
      // A program rather than a shell (`sandbox macos -- CMD`): run as given, nothing else made readable.
      const l = seatbeltLaunch(call.plan(), shell.program, seatbeltProxy === undefined ? {} : { proxy: seatbeltProxy });
      return { argv: l.argv, sandboxed: l.sandboxed, env: l.env };
    }
    const l = seatbeltShellLaunch(
      call.plan(),
      { shellPath: shell.shellPath, login: shell.login, command: shell.command, exePath: shell.wrapperPath },
      undefined,
      seatbeltProxy,
    );
    return { argv: l.argv, sandboxed: l.sandboxed, env: l.env };
  }

  /** Seatbelt rooms, with the proxy's `allow_local_binding`. */
  room(_call: CallSandbox, o: { allowLocalBinding: boolean }): RoomBackend {
    return { kind: "seatbelt", allowLocalBinding: o.allowLocalBinding };
  }

  /** What Seatbelt lets the shell write (./seatbelt.ts `seatbeltWritableView`). */
  writable(call: CallSandbox): WritableView {
    return seatbeltWritableView(call.plan());
  }
}
