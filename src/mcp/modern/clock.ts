/**
 * The time the modern era reads and the timers it sets, as one injected object: the server uses the system's
 * ({@link systemClock}); the fast tier drives the parking table and tasks with a fake one that jumps (no timers
 * standing in for waits).
 */

/** A timer set by {@link Clock.setTimer}: `cancel()` stops it (a no-op once it fired or was cancelled). */
export interface TimerHandle {
  cancel(): void;
}

/** Time and timers. */
export interface Clock {
  /** Milliseconds since the epoch (request-state expiry, task timestamps). */
  now(): number;
  /**
   * Call `fn` once, `ms` milliseconds from now. `unref`: the timer alone does not keep the process alive (a task's
   * retention, which must not hold a finished server open).
   */
  setTimer(fn: () => void, ms: number, unref?: boolean): TimerHandle;
}

/** The system's clock: `Date.now()` and `setTimeout`. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, ms, unref) {
    const t = setTimeout(fn, ms);
    if (unref === true) t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};

/** One macrotask turn: approvals asked at the same moment (`a & b`) are gathered before they are sent. */
export function nextTurn(): Promise<void> {
  return new Promise((r) => setTimeout(r, 0));
}
