/**
 * Is the shell patched? (issue 22, item 6). An unpatched shell execs programs itself, so no rule applies and no
 * escalation happens, silently: `serve --shell /bin/bash` with `rm` forbidden deleted the file. Before the first
 * call, the shell runs one probe exec under a listener of its own; the exec must reach the escalation server
 * (through the in-shell client or the exec wrapper). If it does not, the shell is refused.
 *
 * The probe runs inside a read-only, network-off sandbox (the caller's `sandbox` prefix: this binary's sandbox helper
 * on Linux), like every call: the shell file may lie where a sandboxed command could have replaced it (`--shell`
 * in a project, `shells/` beside an executable in a writable folder), and must then not run outside a sandbox
 * at the next start either.
 */
import type { EscalationServer } from "../escalate/server.ts";
import { INTERCEPT_ENV_VAR } from "../escalate/protocol/wire.ts";

/** How long the probe may take before the shell is judged unpatched, ms. */
export const SHELL_CHECK_TIMEOUT_MS = 10_000;
/** The program the probe execs (the decision is Run, so it really runs, harmlessly). */
const PROBE = "/bin/true";

/**
 * Run `shellPath -c /bin/true` with interception on and resolve with `undefined` when its exec reached `server`,
 * or with the reason it is refused. `sandbox`: argv prefix (and argv[0]) that runs the shell inside a sandbox,
 * e.g. `codex-linux-sandbox … --sandbox-policy <read-only> --`; without it the shell runs as is (macOS).
 */
export async function checkShellIntercepts(
  server: EscalationServer,
  shellPath: string,
  wrapperPath: string,
  sandbox?: { prefix: string[]; argv0: string },
): Promise<string | undefined> {
  let reached = false;
  const l = server.listen({
    decide: () => {
      reached = true;
      return { kind: "Run" };
    },
    boundary: { baseEnv: {}, writable: { full: false, roots: [], readOnly: [] } },
  });
  try {
    const env = { PATH: "/usr/bin:/bin", ...l.shellEnv(wrapperPath, 3), [INTERCEPT_ENV_VAR]: "*" };
    const p = Bun.spawn([...(sandbox?.prefix ?? []), shellPath, "-c", PROBE], {
      env,
      stdio: ["ignore", "ignore", "ignore", l.clientFd],
      detached: true, // its own process group: whatever the shell left running is killed with it below
      ...(sandbox !== undefined ? { argv0: sandbox.argv0 } : {}),
    });
    l.releaseClientFd();
    const timer = setTimeout(() => p.kill(9), SHELL_CHECK_TIMEOUT_MS);
    await p.exited;
    clearTimeout(timer);
    try {
      process.kill(-p.pid, "SIGKILL"); // a planted shell's background job must not outlive the check
    } catch {
      // the group is gone
    }
  } catch (e) {
    return `cannot run the shell ${shellPath}: ${(e as Error).message}`;
  } finally {
    await l.close();
  }
  if (reached) return undefined;
  return `the shell ${shellPath} does not hand its execs to shellmcp (it is not a patched shell), so no rule would apply: use the patched bash or zsh (scripts/build-shells-static.sh builds them into dist/shells-static/ and the executable carries them; --shell bash|zsh), or --shell PATH to another patched shell`;
}
