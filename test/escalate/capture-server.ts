/**
 * A raw escalation server for tests: runs a command with the client end of a datagram socketpair at fd 3
 * (`CODEX_ESCALATE_SOCKET=3`), records every request frame's payload byte for byte, and answers each with a
 * scripted reply (Run, Deny, Escalate with an exit code, or a raw payload). Used to compare the in-shell client
 * (patches/escalate-client.c) with the `codex-execve-wrapper` role on the wire.
 */
import { closeSync, writeSync } from "node:fs";
import * as libc from "../../ffi/libc.ts";
import { encodeFrame, encodeResponse, encodeResult } from "../../src/escalate/protocol/wire.ts";
import { recvFrame, sendFrame } from "../../src/escalate/protocol/socket.ts";

/** How to answer one request. */
export type Reply =
  | { kind: "Run" }
  | { kind: "Deny"; reason: string | null }
  | { kind: "Escalate"; exitCode: number; write?: string }
  | { kind: "raw"; payload: Uint8Array }
  | { kind: "hangup" };

/** One recorded exchange. */
export interface Captured {
  request: Buffer;
  /** Destination fds the client listed in its SuperExecMessage (Escalate only). */
  fds?: number[];
}

/** Result of {@link runCaptured}. */
export interface CapturedRun {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  exchanges: Captured[];
}

/** Run `argv` with `env` (+ `CODEX_ESCALATE_SOCKET=3`), answering requests with `reply(payload, index)`. */
export async function runCaptured(
  argv: string[],
  env: Record<string, string>,
  reply: (request: Buffer, index: number) => Reply,
  cwd?: string,
): Promise<CapturedRun> {
  const { AF_UNIX, SOCK_DGRAM, SOCK_CLOEXEC } = libc.SOCK;
  const [srv, cli] = libc.socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC);
  const p = Bun.spawn(argv, { env: { ...env, CODEX_ESCALATE_SOCKET: "3" }, cwd, stdio: ["ignore", "pipe", "pipe", cli] });
  libc.closeQuiet(cli);
  const out = new Response(p.stdout).arrayBuffer();
  const err = new Response(p.stderr).arrayBuffer();
  const exchanges: Captured[] = [];
  const deadline = Date.now() + 60_000;
  try {
    for (;;) {
      const exited = p.exitCode !== null || p.signalCode !== null;
      const ready = libc.poll([{ fd: srv, events: libc.POLL.IN }], exited ? 0 : 5);
      if ((ready[0]! & libc.POLL.IN) !== 0) {
        const hs = libc.recvmsg(srv, 16, 1);
        const stream = hs.fds[0];
        if (stream === undefined) continue;
        try {
          const req = Buffer.from(recvFrame(stream).payload);
          const c: Captured = { request: req };
          exchanges.push(c);
          const r = reply(req, exchanges.length - 1);
          if (r.kind === "hangup") continue;
          if (r.kind === "raw") {
            libc.sendmsg(stream, encodeFrame(r.payload));
            continue;
          }
          sendFrame(stream, encodeResponse(r.kind === "Escalate" ? { kind: "Escalate" } : r));
          if (r.kind === "Escalate") {
            const m = recvFrame(stream, 3);
            c.fds = JSON.parse(Buffer.from(m.payload).toString()).fds;
            const i = c.fds!.indexOf(1);
            if (r.write !== undefined && i >= 0) writeSync(m.fds[i]!, r.write);
            for (const fd of m.fds) closeSync(fd);
            sendFrame(stream, encodeResult({ exit_code: r.exitCode }));
          }
        } finally {
          libc.closeQuiet(stream);
        }
        continue;
      }
      if (exited) break;
      if (Date.now() > deadline) {
        p.kill(9);
        throw new Error(`timed out: ${argv.join(" ")}`);
      }
      await Bun.sleep(1);
    }
  } finally {
    libc.closeQuiet(srv);
  }
  await p.exited;
  return { exitCode: p.exitCode ?? -1, stdout: Buffer.from(await out), stderr: Buffer.from(await err), exchanges };
}
