/**
 * A pausable stopwatch for a call's timeout (escalation-mcp.md §4.6): time spent waiting for a human (an
 * elicitation) does not count. Pauses are reference-counted, so overlapping prompts (background jobs in one
 * command) keep it paused until the last one is answered.
 */

/** Stopwatch with a limit; `onExpire` fires once when running time reaches `limitMs`. */
/** Longest delay `setTimeout` can hold, ms (a signed 32-bit count). */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

export class Stopwatch {
  private elapsedMs = 0;
  private runningSince: number | undefined;
  private pauses = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private fired = false;

  constructor(
    private readonly limitMs: number,
    private readonly onExpire: () => void,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.runningSince = this.now();
    this.arm();
  }

  /** Running time so far, in ms (excludes paused periods). */
  get runningMs(): number {
    return this.elapsedMs + (this.runningSince === undefined ? 0 : this.now() - this.runningSince);
  }

  /** Whether the limit was reached. */
  get expired(): boolean {
    return this.fired;
  }

  /** Stop counting (nests). */
  pause(): void {
    if (this.fired) return;
    if (this.pauses++ === 0 && this.runningSince !== undefined) {
      this.elapsedMs += this.now() - this.runningSince;
      this.runningSince = undefined;
      this.disarm();
    }
  }

  /** Undo one `pause`; counting restarts when the last pause is undone. Extra calls are ignored. */
  resume(): void {
    if (this.fired || this.pauses === 0) return;
    if (--this.pauses === 0) {
      this.runningSince = this.now();
      this.arm();
    }
  }

  /** Run `f` with the stopwatch paused. */
  async paused<T>(f: () => Promise<T>): Promise<T> {
    this.pause();
    try {
      return await f();
    } finally {
      this.resume();
    }
  }

  /** Stop for good (no more firing). */
  dispose(): void {
    this.disarm();
    this.fired = true;
  }

  private arm(): void {
    this.disarm();
    const left = this.limitMs - this.runningMs;
    if (left <= 0) {
      this.fire();
      return;
    }
    // A timer holds at most 2^31-1 ms (longer delays fire after 1 ms, with a warning): wait in slices, so a
    // `timeout_ms` of any u64 size works (issue 11: 2^31 made the timer fire every millisecond).
    this.timer = setTimeout(() => (this.runningMs >= this.limitMs ? this.fire() : this.arm()), Math.min(left, MAX_TIMER_DELAY_MS));
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private fire(): void {
    if (this.fired) return;
    this.fired = true;
    this.disarm();
    this.onExpire();
  }
}
