/**
 * The escalation socket as a process inherits it: the variable that names its fd, and keeping it open across exec.
 * Base layer (no imports from escalate/ or sandbox/): the exec wrapper, the sandbox helper and `sandbox linux` all
 * need it, and sandbox/ must not depend on escalate/.
 *
 * Bun marks every inherited fd ≥ 4 close-on-exec before any JavaScript runs (`close_range(4, ~0,
 * CLOSE_RANGE_CLOEXEC)` at start-up). The escalation socket must survive our execs (the wrapper's Run, the
 * sandbox helper's exec of the shell) so that nested patched shells keep working, and Codex's own server puts it
 * at fd 10. This clears FD_CLOEXEC again on the fd `CODEX_ESCALATE_SOCKET` names, if it is open.
 * Other inherited fds ≥ 4 cannot be told apart from Bun's own and are not kept.
 */
import { setCloexec } from "../ffi/libc.ts";

/** Variable naming the escalation socket's fd in an intercepted shell (Codex's name). */
export const ESCALATE_SOCKET_ENV_VAR = "CODEX_ESCALATE_SOCKET";

/** Keep the escalation socket open across exec. Silent when the variable is absent, malformed or closed. */
export function keepEscalationSocketAcrossExec(env: Record<string, string | undefined> = process.env): void {
  const v = env[ESCALATE_SOCKET_ENV_VAR];
  if (v === undefined || !/^\d{1,9}$/.test(v)) return;
  try {
    setCloexec(Number(v), false);
  } catch {
    // not open: the wrapper inside will report it
  }
}
