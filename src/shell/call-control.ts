/**
 * A running call's kill switches ({@link CallControl}): timeout and cancellation end the sandboxed shell's process
 * group at once and give escalated programs {@link ESCALATED_GRACE_MS} before everything left of the call is killed.
 */
import * as libc from "../../ffi/libc.ts";
import type { EscalationServer } from "../escalate/server.ts";
import { HOST_PLATFORM } from "../sandbox/host-platform.ts";
import type { CallCgroup } from "./cgroup.ts";
import type { CallResources } from "./call-resources.ts";
import type { RunCommandOptions } from "./run-options.ts";
import { Stopwatch } from "./stopwatch.ts";

/** How long escalated programs get between SIGTERM and SIGKILL when their call times out or is cancelled, ms. */
export const ESCALATED_GRACE_MS = 2000;

/**
 * A running call's kill switches: timeout or cancel kill the sandboxed shell's process group at once; escalated
 * programs get SIGTERM and {@link ESCALATED_GRACE_MS} to end (git removes its index.lock), then everything left of the
 * call is killed.
 */
export class CallControl {
  listener!: ReturnType<EscalationServer["listen"]>;
  stopwatch: Stopwatch | undefined;
  proc: ReturnType<typeof Bun.spawn> | undefined;
  /** The shell runs under a lifeline guard (which kills everything below it on SIGUSR1). */
  guarded = false;
  killed: "timeout" | "cancel" | undefined;
  graceOver: Promise<void> | undefined;
  /** `late`: text for the end of the output, known only once released (the grant proxies' refusals). */
  constructor(
    private readonly o: Pick<RunCommandOptions, "timeoutMs">,
    private readonly cgroup: CallCgroup | undefined,
    readonly late: string[],
  ) {}

  /** Whether the shell has exited (and been reaped). */
  get exited(): boolean {
    return this.proc !== undefined && (this.proc.exitCode !== null || this.proc.signalCode !== null);
  }

  /**
   * The shell's process group, while the shell is unreaped (so its pid, the group's id, cannot have been reused):
   * under a lifeline guard, SIGUSR1 to the guard, which kills everything below it (setsid'd and double-forked
   * processes too, cgroup or not) and then dies of SIGKILL; else SIGKILL to the group.
   */
  killShell(): void {
    const pid = this.proc?.pid ?? 0;
    if (pid <= 0 || this.exited) return;
    if (this.guarded) libc.kill(pid, HOST_PLATFORM.lifeline.endSignal);
    else libc.kill(-pid, 9);
  }

  /** Everything of the call, at once. */
  killAll(): void {
    this.cgroup?.kill();
    this.killShell();
    this.listener.signalChildren(9);
  }

  /** End the call for `why`: the shell now, escalated programs after their grace. */
  stop(why: "timeout" | "cancel"): void {
    this.killed ??= why;
    if (this.graceOver !== undefined) return;
    this.listener.signalChildren(15);
    this.killShell();
    this.graceOver = Bun.sleep(ESCALATED_GRACE_MS).then(() => this.killAll());
  }

  /** The call's stopwatch (a prompt pauses it), held by `res`. */
  startStopwatch(res: CallResources): Stopwatch {
    const sw = (this.stopwatch = new Stopwatch(this.o.timeoutMs, () => this.stop("timeout")));
    res.hold(() => sw.dispose());
    return sw;
  }
}
