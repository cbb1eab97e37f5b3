/**
 * Frame I/O on blocking stream sockets (the wrapper side, and tests), following Codex's framing
 * (docs/escalation.md, "Framing"): the whole frame is written with `sendmsg`, continuing after partial writes, with
 * the `SCM_RIGHTS` control message on the first chunk only; the receiver's first header read collects the fds.
 */
import { recvmsg, sendmsg, MAX_FDS_PER_MESSAGE } from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { encodeFrame, FRAME_HEADER_BYTES, frameLength, MAX_FRAME_BYTES } from "./wire.ts";

/** Write `payload` as one frame on blocking stream `fd`, attaching `fds` to the first chunk. */
export function sendFrame(fd: number, payload: Uint8Array, fds: readonly number[] = []): void {
  const frame = encodeFrame(payload);
  let sent = 0;
  while (sent < frame.byteLength) {
    sent += sendmsg(fd, frame.subarray(sent), sent === 0 ? fds : []);
  }
}

/** A received frame: its payload and the fds that came with it (CLOEXEC, owned by the caller). */
export interface ReceivedFrame {
  payload: Uint8Array;
  fds: number[];
}

/**
 * Read one frame from blocking stream `fd`. Accepts up to `maxFds` fds (more are closed and rejected).
 * EOF gives Codex's messages: `socket closed while receiving frame header` / `… frame payload`.
 */
export function recvFrame(fd: number, maxFds = 0, maxBytes = MAX_FRAME_BYTES): ReceivedFrame {
  const header = new Uint8Array(FRAME_HEADER_BYTES);
  const fds: number[] = [];
  let got = 0;
  while (got < FRAME_HEADER_BYTES) {
    const r = recvmsg(fd, FRAME_HEADER_BYTES - got, Math.min(MAX_FDS_PER_MESSAGE, maxFds - fds.length));
    fds.push(...r.fds);
    if (r.bytes.byteLength === 0) throw new ShellmcpError("PROTOCOL", "socket closed while receiving frame header", { eof: true });
    header.set(r.bytes, got);
    got += r.bytes.byteLength;
  }
  const n = frameLength(header, maxBytes);
  const payload = new Uint8Array(n);
  let at = 0;
  while (at < n) {
    const r = recvmsg(fd, Math.min(n - at, 1 << 20), 0);
    if (r.bytes.byteLength === 0) throw new ShellmcpError("PROTOCOL", "socket closed while receiving frame payload", { eof: true });
    payload.set(r.bytes, at);
    at += r.bytes.byteLength;
  }
  return { payload, fds };
}
