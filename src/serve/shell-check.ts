/**
 * Is the shell patched? (issue 22, item 6). An unpatched shell execs programs itself, so no rule applies and no
 * escalation happens, silently: `serve --shell /bin/bash` with `rm` forbidden deleted the file. Before the first
 * call, the shell runs one probe exec under a listener of its own; the exec must reach the escalation server
 * (through the in-shell client or the exec wrapper). If it does not, the shell is refused.
 *
 * The probe runs inside a read-only, network-off sandbox (the server's own backend, as every call), like every call: the shell file may lie where a sandboxed command could have replaced it (`--shell`
 * in a project, `shells/` beside an executable in a writable folder), and must then not run outside a sandbox
 * at the next start either.
 */
import type { EscalationServer } from "../escalate/server.ts";
import type { CallSandbox } from "../sandbox/backend.ts";
import type { CgroupManager } from "../shell/cgroup.ts";
import { runCommand } from "../shell/run-command.ts";
import { withoutFaults } from "../fault-injection.ts";

/** How long the probe may take before the shell is judged unpatched, ms. */
export const SHELL_CHECK_TIMEOUT_MS = 10_000;
/** The program the probe execs (the decision is Run, so it really runs, harmlessly). */
const PROBE = "/bin/true";

/**
 * Run `shellPath -c /bin/true` with interception on and resolve with `undefined` when its exec reached `server`,
 * or with the reason it is refused. The probe is an ordinary call (issue 39, "one launch path"): `runCommand` under
 * `sandbox` (the server's backend with a read-only, network-off policy: see the module comment), so it gets what
 * every call gets — the same launch, the call's cgroup (`cgroups`) or lifeline, everything it left running killed
 * at its end.
 */
export async function checkShellIntercepts(
  server: EscalationServer,
  shellPath: string,
  wrapperPath: string,
  sandbox: CallSandbox,
  cgroups?: CgroupManager,
): Promise<string | undefined> {
  let reached = false;
  let r;
  try {
    r = await withoutFaults(() =>
      runCommand({
        command: PROBE,
        workdir: "/",
        login: false,
        timeoutMs: SHELL_CHECK_TIMEOUT_MS,
        shellPath,
        wrapperPath,
        env: { PATH: "/usr/bin:/bin" },
        sandbox,
        server,
        decide: () => {
          reached = true;
          return { kind: "Run" };
        },
        maxOutputBytes: 4096,
        cgroups,
      }),
    );
  } catch (e) {
    return `cannot run the shell ${shellPath}: ${(e as Error).message}`;
  }
  if (reached) return undefined;
  if (r.spawnError !== undefined) return `cannot run the shell ${shellPath}: ${r.spawnError}`;
  // The sandbox could not be built, or the probe did not end: that says nothing about the shell (a CI run showed
  // "not a patched shell" for a Landlock plan over sandbox-exec's rule bound): the reason, as the probe printed it.
  if (r.sandboxFailed === true || r.timedOut) {
    const why = r.timedOut ? `it did not end within ${SHELL_CHECK_TIMEOUT_MS} ms` : r.output.trim().split("\n").slice(0, 3).join("; ");
    return `cannot check the shell ${shellPath} under this server's sandbox: ${why}`;
  }
  return `the shell ${shellPath} does not hand its execs to shellmcp (it is not a patched shell), so no rule would apply: use the patched bash or zsh (scripts/build-shells-static.sh builds them into dist/shells-static/ and the executable carries them; --shell bash|zsh), or --shell PATH to another patched shell`;
}
