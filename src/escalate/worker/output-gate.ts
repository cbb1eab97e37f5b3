/**
 * Who closes the worker's copy of a call's output pipe (issue 40: the answer no longer waits for a message round trip
 * to the worker). The escalation worker holds a copy of the write end of each call's output pipe (../server.ts
 * `ListenOptions.outputFd`: where an escalated program's terminal output goes). The pipe reaches EOF only once
 * that copy is closed too, so it is closed as soon as the shell exits. Both threads share one fd table, so the main
 * thread may close it itself, provided the worker is not duplicating it at that moment (a closed number can be reused
 * at once by any open of either thread, and the worker would pass on someone else's fd).
 *
 * One `Int32Array` slot per listener in a `SharedArrayBuffer` both threads hold decides that, with atomic
 * operations only (no lock, no message):
 * - `FREE` (0): the fd is open and nobody uses it;
 * - `BORROWED` (1): the worker is duplicating it right now ({@link OutputGates.borrow}, synchronously, for one
 *   spawn);
 * - `RELEASED` (2): it is closed, or will be by the borrower when it gives it back.
 *
 * Whoever moves a slot from `FREE` to `RELEASED` closes the fd ({@link OutputGates.release}, on either thread); a
 * release that finds it `BORROWED` leaves the close to {@link OutputGates.giveBack}. A slot is reused only after the
 * worker has let go of its listener for good (the `unlistened` event). When every slot is taken, a listener gets
 * none and its fd is released by a message to the worker instead, as before: slower, never less safe.
 */
import * as libc from "../../../ffi/libc.ts";

const FREE = 0;
const BORROWED = 1;
const RELEASED = 2;

/** Slots one server holds: listeners open at once beyond this fall back to the message. */
export const OUTPUT_GATE_SLOTS = 4096;

/** The shared slots of one escalation server (`buffer` is what the worker gets). */
export class OutputGates {
  private readonly slots: Int32Array;
  /** Slots not held by a listener (main thread only). */
  private readonly unused: number[] = [];
  /** Slots handed out so far (main thread only): the next never-used slot. */
  private taken = 0;

  /** `buffer`: the worker's view of the main thread's gates; a new `SharedArrayBuffer` on the main thread. */
  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(OUTPUT_GATE_SLOTS * 4)) {
    this.slots = new Int32Array(buffer);
  }

  /** Main thread: a slot for a new listener's open fd (set `FREE`), or undefined when every slot is taken. */
  take(): number | undefined {
    if (this.unused.length === 0 && this.taken < this.slots.length) this.unused.push(this.taken++);
    const slot = this.unused.pop();
    if (slot !== undefined) Atomics.store(this.slots, slot, FREE);
    return slot;
  }

  /** Main thread: `slot` may be taken again (the worker has let go of its listener; both sides are done with it). */
  putBack(slot: number): void {
    this.unused.push(slot);
  }

  /** Either thread: nobody uses `fd` (slot `slot`) any more; closed now unless the worker is duplicating it. */
  release(slot: number, fd: number): void {
    if (Atomics.exchange(this.slots, slot, RELEASED) === FREE) libc.closeQuiet(fd);
  }

  /** Worker: whether `fd` (slot `slot`) is still open, now held until {@link giveBack}: use it synchronously only. */
  borrow(slot: number): boolean {
    return Atomics.compareExchange(this.slots, slot, FREE, BORROWED) === FREE;
  }

  /** Worker: done with a borrowed `fd`; closed here when it was released meanwhile. */
  giveBack(slot: number, fd: number): void {
    if (Atomics.compareExchange(this.slots, slot, BORROWED, FREE) !== BORROWED) libc.closeQuiet(fd);
  }
}
