/**
 * A sandboxed command reaches no other process through the kernel (split from extra.test.ts, issue 42): through the
 * compiled binary as `codex-linux-sandbox`, on both backends — no abstract AF_UNIX socket bound or connected, no
 * ptrace of a sibling, and with the network off only AF_UNIX stream pairs (no datagram socket, no addressed send,
 * no AF_INET).
 */
import { describe, expect, test } from "bun:test";
import { skipWithout } from "../helpers/prereq.ts";
import { box, bwrapMissing, noPython, run, RO, WW } from "../helpers/sandbox-run.ts";

for (const backend of ["landlock", "bwrap"] as const) {
  describe.skipIf(process.platform !== "linux" || (backend === "bwrap" && skipWithout("bwrap backend tests", bwrapMissing)))(
    `no reach through the kernel (${backend})`,
    () => {
      test.skipIf(noPython())("abstract AF_UNIX sockets: bind and connect are denied", () => {
        const b = box();
        const r = run(backend, RO, b.cwd, [
          "python3",
          "-c",
          "import socket\ns=socket.socket(socket.AF_UNIX)\ntry:\n  s.bind('\\0shellmcp-test'); print('bound')\nexcept OSError as e: print('bind-err', e.errno)\ntry:\n  socket.socket(socket.AF_UNIX).connect('\\0shellmcp-test'); print('connected')\nexcept OSError as e: print('connect-err', e.errno)\n",
        ]);
        expect(r.out).toBe("bind-err 1\nconnect-err 1\n");
      });

      test.skipIf(noPython())("ptrace of a sibling process is denied", () => {
        const b = box();
        const r = run(backend, RO, b.cwd, [
          "bash",
          "-c",
          `sleep 5 & python3 -c "import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); r=l.ptrace(16, $!, 0, 0); print('attach', r, ctypes.get_errno())"; kill %1`,
        ]);
        expect(r.out).toContain("attach -1 1");
      });
    },
  );
}

for (const backend of ["landlock", "bwrap"] as const) {
  describe.skipIf(
    process.platform !== "linux" || noPython() || (backend === "bwrap" && skipWithout("network-off tests (bwrap)", bwrapMissing)),
  )(`network off (${backend})`, () => {
    test("send() on an AF_UNIX socketpair works; no datagram socket, no addressed send (sendto, sendmsg), no AF_INET", () => {
      const b = box();
      const script = [
        "import socket",
        "a, b = socket.socketpair(); a.send(b'hi'); print('send', b.recv(2).decode())",
        "s, t = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.send(b'sp'); print('seqpacket', t.recv(2).decode())",
        "for ty in (socket.SOCK_DGRAM, socket.SOCK_RAW):\n    try:\n        socket.socket(socket.AF_UNIX, ty); print('dgram allowed')\n    except OSError as e:\n        print('dgram', e.errno)",
        "try:\n    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); print('dgram pair allowed')\nexcept OSError as e:\n    print('dgram pair', e.errno)",
        "try:\n    a.sendto(b'x', '/tmp/none.sock'); print('sendto-addr allowed')\nexcept OSError as e:\n    print('sendto-addr', e.errno)",
        "try:\n    a.sendmsg([b'x'], [], 0, '/tmp/none.sock'); print('sendmsg-addr allowed')\nexcept OSError as e:\n    print('sendmsg-addr', e.errno)",
        "try:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('inet allowed')\nexcept OSError as e:\n    print('inet', e.errno)",
      ].join("\n");
      const r = run(backend, WW, b.cwd, ["python3", "-c", script]);
      // EPERM (1) from the filter; EISCONN (106) from the kernel for an address on a connected stream socket.
      expect(r.out).toBe("send hi\nseqpacket sp\ndgram 1\ndgram 1\ndgram pair 1\nsendto-addr 1\nsendmsg-addr 106\ninet 1\n");
    });
  });
}
