/**
 * Worker for test/helpers/events.ts: blocks in poll(2) on the fds it is given (pidfds or sockets) off the main
 * thread, so the tests' event loop (where escalation decisions are made) keeps running. Message in:
 * `{ fds: number[], timeoutMs: number }`; message out: `boolean[]`, whether each fd became readable.
 */
import * as libc from "../../ffi/libc.ts";

declare const self: Worker;

self.onmessage = (e: MessageEvent<{ fds: number[]; timeoutMs: number }>) => {
  const { fds, timeoutMs } = e.data;
  const ready = fds.map(() => false);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const waiting = fds.map((fd, i) => ({ fd, i })).filter((x) => !ready[x.i]);
    const left = Math.ceil(deadline - performance.now());
    if (waiting.length === 0 || left <= 0) break;
    const revents = libc.poll(
      waiting.map((x) => ({ fd: x.fd, events: libc.POLL.IN })),
      left,
    );
    revents.forEach((r, k) => {
      if (r !== 0) ready[waiting[k]!.i] = true;
    });
  }
  self.postMessage(ready);
};
