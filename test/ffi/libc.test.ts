import { describe, expect, test } from "bun:test";
import { readFileSync, readSync, writeSync } from "node:fs";
import { join } from "node:path";
import * as c from "../../ffi/libc.ts";
import { ShellmcpError } from "../../src/errors.ts";
import { BUN, ROOT, run } from "../helpers/binary.ts";

const { AF_UNIX, SOCK_DGRAM, SOCK_STREAM, SOCK_CLOEXEC, SOCK_NONBLOCK } = c.SOCK;

function catchErr(f: () => unknown): ShellmcpError {
  try {
    f();
  } catch (e) {
    if (e instanceof ShellmcpError) return e;
    throw e;
  }
  throw new Error("expected a ShellmcpError");
}

describe.skipIf(process.platform !== "linux")("libc bindings (Linux)", () => {
  test("recvmsg into a scratch buffer returns a copy of what arrived (fds too); the next read does not change it", () => {
    const [a, b] = c.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    const [p, q] = c.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    const scratch = new Uint8Array(256 * 1024);
    try {
      c.sendmsg(a, new TextEncoder().encode("first"), [p]);
      const one = c.recvmsg(b, scratch.byteLength, 1, 0, scratch);
      c.sendmsg(a, new TextEncoder().encode("SECOND"));
      const two = c.recvmsg(b, scratch.byteLength, 0, 0, scratch);
      expect([new TextDecoder().decode(one.bytes), new TextDecoder().decode(two.bytes)]).toEqual(["first", "SECOND"]);
      // A copy of its own, not a view of the scratch (which the second read overwrote) or of a new 256 KiB chunk.
      expect([one.bytes.buffer === scratch.buffer, one.bytes.buffer.byteLength]).toEqual([false, 5]);
      expect(one.fds.length).toBe(1);
      one.fds.forEach(c.closeQuiet);
      // Too small a scratch for the read asked: a new buffer, as without one.
      c.sendmsg(a, new TextEncoder().encode("third"));
      expect(new TextDecoder().decode(c.recvmsg(b, 64, 0, 0, new Uint8Array(8)).bytes)).toBe("third");
    } finally {
      [a, b, p, q].forEach(c.closeQuiet);
    }
  });

  test("an fd passed over a datagram socketpair arrives CLOEXEC and is usable", () => {
    const [a, b] = c.socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC);
    const [p, q] = c.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    try {
      expect(c.sendmsg(a, new Uint8Array([0]), [p])).toBe(1);
      const got = c.recvmsg(b, 8192, 16);
      expect(Array.from(got.bytes)).toEqual([0]);
      expect(got.fds.length).toBe(1);
      const passed = got.fds[0]!;
      expect(passed).not.toBe(p);
      expect(c.getCloexec(passed)).toBe(true);
      writeSync(passed, "through the passed fd");
      const buf = Buffer.alloc(64);
      const n = readSync(q, buf);
      expect(buf.subarray(0, n).toString()).toBe("through the passed fd");
      c.close(passed);
    } finally {
      [a, b, p, q].forEach(c.closeQuiet);
    }
  });

  test("1 MiB payload in chunks over a stream socket, fds only on the first chunk", () => {
    const [s, r] = c.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK);
    const [x, y] = c.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    try {
      const payload = new Uint8Array(1 << 20);
      for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
      const received: Uint8Array[] = [];
      const receivedFds: number[][] = [];
      let sent = 0;
      let got = 0;
      let chunks = 0;
      while (got < payload.length) {
        if (sent < payload.length) {
          try {
            sent += c.sendmsg(s, payload.subarray(sent), sent === 0 ? [x] : []);
            chunks++;
          } catch (e) {
            if (!(e instanceof ShellmcpError && e.data.errname === "EAGAIN")) throw e;
          }
        }
        try {
          const m = c.recvmsg(r, 64 * 1024, 1);
          received.push(m.bytes.slice());
          receivedFds.push(m.fds);
          got += m.bytes.length;
        } catch (e) {
          if (!(e instanceof ShellmcpError && e.data.errname === "EAGAIN")) throw e;
        }
      }
      expect(chunks).toBeGreaterThan(1); // really chunked: larger than the socket buffer
      expect(Buffer.concat(received).equals(Buffer.from(payload))).toBe(true);
      const allFds = receivedFds.flat();
      expect(allFds.length).toBe(1);
      expect(receivedFds[0]!.length).toBe(1); // with the first bytes
      allFds.forEach(c.close);
    } finally {
      [s, r, x, y].forEach(c.closeQuiet);
    }
  });

  test("more than 16 fds in one message is refused before sending", () => {
    const [a, b] = c.socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC);
    try {
      const e = catchErr(() => c.sendmsg(a, new Uint8Array([0]), new Array(17).fill(a)));
      expect(e.code).toBe("PROTOCOL");
      expect(e.message).toBe("too many fds: 17");
    } finally {
      [a, b].forEach(c.closeQuiet);
    }
  });

  test("fds a receiver did not ask for are closed, not leaked", () => {
    const [a, b] = c.socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC);
    try {
      c.sendmsg(a, new Uint8Array([1]), [a, a]);
      const e = catchErr(() => c.recvmsg(b, 16, 0));
      expect(e.code).toBe("PROTOCOL");
      expect(e.message).toBe("unexpected fds in receive: 2");
    } finally {
      [a, b].forEach(c.closeQuiet);
    }
  });

  // glibc < 2.34 (Debian bullseye) has no posix_spawn_file_actions_addclosefrom_np: spawn closes each open fd instead.
  for (const closeFrom of [true, false]) {
    test(`spawn closes every fd but the mapped ones (${closeFrom ? "addclosefrom_np" : "per-fd close, glibc < 2.34"})`, async () => {
      const [r, w] = c.pipe2(0); // not close-on-exec: would leak without the close actions
      const [leak] = c.pipe2(0);
      c.setSpawnCloseFromForTest(closeFrom ? undefined : false);
      try {
        const pid = c.spawn({
          path: "/bin/sh",
          argv: ["sh", "-c", "ls /proc/self/fd >&3"],
          env: [],
          fdMap: [[w, 3]],
          closeFrom: 4,
          devNullStdio: true,
        });
        c.close(w);
        let st: c.WaitStatus | undefined;
        while ((st = c.waitpidNoHang(pid)) === undefined) await Bun.sleep(5);
        expect(st).toEqual({ code: 0 });
        const buf = Buffer.alloc(256);
        const n = readSync(r, buf);
        // 0-2 (/dev/null), 3 (the pipe), and the fd `ls` opens for /proc/self/fd (4): nothing of ours (leak, r),
        // nor any other fd this process holds without close-on-exec.
        const fds = buf.subarray(0, n).toString().trim().split("\n").map(Number);
        expect(fds).toEqual([0, 1, 2, 3, 4]);
        expect([leak, r].every((fd) => fd > 4)).toBe(true);
      } finally {
        c.setSpawnCloseFromForTest(undefined);
        [r, leak].forEach(c.closeQuiet);
      }
    });
  }

  test("errno and strerror: close of a bad fd", () => {
    const e = catchErr(() => c.close(987654));
    expect(e.code).toBe("SYSCALL");
    expect(e.data).toMatchObject({ errno: 9, errname: "EBADF" });
    expect(e.message).toBe("close(987654): Bad file descriptor (os error 9)");
    expect(c.strerror(2)).toBe("No such file or directory");
  });

  test("poll reports readiness", () => {
    const [a, b] = c.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
    try {
      expect(c.poll([{ fd: b, events: c.POLL.IN }], 0)).toEqual([0]);
      c.sendmsg(a, new Uint8Array([42]));
      expect(c.poll([{ fd: b, events: c.POLL.IN }], 1000)[0]! & c.POLL.IN).toBe(c.POLL.IN);
      c.close(a);
      expect(c.poll([{ fd: b, events: c.POLL.IN }], 1000)[0]! & c.POLL.HUP).toBe(c.POLL.HUP);
    } finally {
      c.closeQuiet(b);
    }
  });

  test("fcntl: CLOEXEC and NONBLOCK toggles; dup2", () => {
    const [a, b] = c.socketpair(AF_UNIX, SOCK_STREAM);
    try {
      expect(c.getCloexec(a)).toBe(false);
      c.setCloexec(a, true);
      expect(c.getCloexec(a)).toBe(true);
      c.setNonblock(a, true);
      expect(c.fcntl(a, c.SOCK.F_GETFL) & c.SOCK.O_NONBLOCK).toBe(c.SOCK.O_NONBLOCK);
      const target = 200;
      expect(c.dup2(b, target)).toBe(target);
      expect(c.getCloexec(target)).toBe(false); // dup2 never copies CLOEXEC
      c.close(target);
    } finally {
      [a, b].forEach(c.closeQuiet);
    }
  });

  test("execve failure throws with errno, and a NUL byte is refused", () => {
    const e = catchErr(() => c.execve("/nonexistent/prog", ["prog"], {}));
    expect(e.data).toMatchObject({ errno: 2, errname: "ENOENT" });
    expect(catchErr(() => c.execve("/bin/true", ["a\0b"], {})).code).toBe("USAGE");
  });

  test("Bun ignores SIGPIPE and it survives execve unless resetSignals runs first", () => {
    const SIGPIPE_BIT = 1n << 12n; // signal 13
    const child = join(ROOT, "test", "fixtures", "exec-child.ts");
    const parse = (out: string) => BigInt("0x" + /SigIgn:\s*([0-9a-f]+)/.exec(out)![1]);
    const blocked = (out: string) => BigInt("0x" + /SigBlk:\s*([0-9a-f]+)/.exec(out)![1]);
    const without = run([BUN, child, "noreset"]);
    expect(without.exitCode).toBe(0);
    expect(parse(without.stdout) & SIGPIPE_BIT).toBe(SIGPIPE_BIT);
    const withReset = run([BUN, child, "reset"]);
    expect(withReset.exitCode).toBe(0);
    expect(parse(withReset.stdout)).toBe(0n);
    expect(blocked(withReset.stdout)).toBe(0n);
  });

  test("prctl(PR_SET_NO_NEW_PRIVS) and raw syscall(gettid) in a child", () => {
    const r = run([BUN, join(ROOT, "test", "fixtures", "prctl-child.ts")]);
    expect(r.exitCode).toBe(0);
    // `before` is whatever this process inherited (a container or bwrap may have set it already): the flag the
    // child reads back must equal the one this test process reads from the kernel for itself.
    const mine = Number(readFileSync("/proc/self/status", "utf8").match(/^NoNewPrivs:\s*(\d)/m)?.[1]);
    expect(JSON.parse(r.stdout)).toEqual({ before: mine, after: 1, tidIsPid: true });
  });
});
