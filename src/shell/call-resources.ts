/**
 * What one call owns, and how it lets go: {@link OwnedFd} (an fd closed exactly once) and {@link CallResources} (one
 * `AsyncDisposableStack` that releases everything the call acquired, last acquired first, whatever way it ends).
 * ./call-acquire.ts fills it before the shell starts; ./run-command.ts `runCommand` disposes of it.
 */
import * as libc from "../../ffi/libc.ts";
import type { GitCheck } from "../sandbox/git/call-check.ts";
import { log } from "../log.ts";

/** An fd a call owns: closed exactly once, at the end of the call or earlier, unless handed over to a new owner. */
export class OwnedFd {
  constructor(private current: number) {}
  /** The fd number (-1 once closed or handed over). */
  get fd(): number {
    return this.current;
  }
  /** Close it now (a no-op when already closed or handed over). */
  close(): void {
    if (this.current >= 0) libc.closeQuiet(this.current);
    this.current = -1;
  }
  /** Give it to a new owner, which closes it: the call no longer does. */
  handOver(): number {
    const fd = this.current;
    this.current = -1;
    return fd;
  }
}

/**
 * Everything one call acquires — bridges, mount points, grant proxies, its cgroup, pipes, the terminal's slave, the
 * escalation listener, the stopwatch, timers — released by one `AsyncDisposableStack`, last acquired first, whatever
 * way the call ends (a refusal, an error, a timeout already over, a failed spawn, the shell's end). Releases that
 * finish later (the worker's acknowledgement that the listener is closed, the cgroup emptied) go to
 * {@link settling}: awaited before an early exit returns, handed to the result as `settled` after a run.
 */
export class CallResources implements AsyncDisposable {
  private readonly stack = new AsyncDisposableStack();
  /** Releases still finishing after the stack was disposed. */
  readonly settling: Promise<unknown>[] = [];
  /** Set once the shell started: the result then carries {@link settling} instead of waiting for it. */
  started = false;
  /**
   * The worker's acknowledgement that the call's escalation listener is closed (its rooms killed): what the rooms
   * use (their bridge's child end, the grant proxies) is released after it.
   */
  listenerClosed: Promise<void> | undefined;

  /** Run `release` when the call ends; a failure is logged, never thrown (the other releases still run). */
  hold(release: () => unknown): void {
    this.stack.defer(async () => {
      try {
        await release();
      } catch (e) {
        log.warn("releasing what a call acquired failed", { error: (e as Error).message });
      }
    });
  }

  /**
   * Hold the call's git check (../sandbox/git/call-check.ts): released last (it is held first), it waits for every
   * late release before it (the worker's acknowledgement, the emptied cgroup: every process of the call has ended),
   * then checks; the check is itself a late release, so the result's `settled` includes it.
   */
  holdGitCheck(check: GitCheck): void {
    this.hold(() => {
      const ended = Promise.all(this.settling.map((p) => p.catch(() => undefined)));
      this.settling.push(check.settle(ended));
    });
  }

  /** Own `fd` until the call ends (see {@link OwnedFd}). */
  fd(fd: number): OwnedFd {
    const owned = new OwnedFd(fd);
    this.hold(() => owned.close());
    return owned;
  }

  /** Release everything (once); before the shell started, wait for the late releases too. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stack.disposeAsync();
    if (!this.started) await Promise.all(this.settling.map((p) => p.catch(() => undefined)));
  }
}
