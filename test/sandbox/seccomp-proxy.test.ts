/**
 * The seccomp filter's `proxy` mode (src/sandbox/linux/seccomp.ts, issue 24): it assembles on both architectures,
 * and, applied to a real process here (x86_64 or aarch64), refuses new AF_UNIX, UDP and raw sockets, `sendto` with
 * an address and `sendmsg` with MSG_FASTOPEN, while TCP sockets, AF_UNIX socketpairs and plain `send` work.
 */
import { describe, expect, test } from "bun:test";
import { buildFilter } from "../../src/sandbox/linux/seccomp.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { ensureBinary } from "../helpers/binary.ts";

describe("seccomp proxy mode", () => {
  test("assembles for x86_64 and aarch64, differs from the other modes", () => {
    for (const arch of ["linux-x64", "linux-arm64"] as const) {
      const p = buildFilter("proxy", arch);
      expect(p.byteLength % 8).toBe(0);
      expect(p.byteLength / 8).toBeLessThan(255);
      expect(Buffer.from(p).equals(Buffer.from(buildFilter("restricted", arch)))).toBe(false);
      expect(Buffer.from(p).equals(Buffer.from(buildFilter("vsock", arch)))).toBe(false);
    }
  });

  const skip = skipWithout("seccomp proxy mode, applied", toolMissing("perl") ?? (process.platform === "linux" ? undefined : "Linux only"));
  test.skipIf(skip)("applied by the helper (Landlock backend, proxy ports): the socket calls it allows and refuses", () => {
    const perl = `
use Socket;
sub try { my ($name, $ok) = @_; print "$name: ", ($ok ? "ok" : "refused ($!)"), "\\n"; }
try("tcp", socket(my $t, AF_INET, SOCK_STREAM, 0));
try("tcp6", socket(my $t6, AF_INET6, SOCK_STREAM, 0));
try("udp", socket(my $u, AF_INET, SOCK_DGRAM, 0));
try("raw", socket(my $r, AF_INET, SOCK_RAW, 1));
try("unix", socket(my $x, AF_UNIX, SOCK_STREAM, 0));
try("netlink", socket(my $n, 16, SOCK_RAW, 0));
try("pair", socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0));
try("send", defined send($a, "x", 0));
try("sendto-address", defined send($a, "x", 0, pack_sockaddr_in(9, inet_aton("127.0.0.1"))));
try("dgram-pair", socketpair(my $c, my $d, AF_UNIX, SOCK_DGRAM, 0));
`;
    const p = Bun.spawnSync(
      [
        ensureBinary(),
        "--codex-run-as-linux-sandbox",
        "--backend",
        "landlock",
        "--network-proxy-ports",
        "3128",
        "--sandbox-policy-cwd",
        "/",
        "--sandbox-policy",
        '{"type":"read-only","network_access":true}',
        "--",
        "perl",
        "-e",
        perl,
      ],
      { stdout: "pipe", stderr: "pipe" },
    );
    expect(p.stderr.toString()).toBe("");
    expect(p.stdout.toString()).toBe(
      [
        "tcp: ok",
        "tcp6: ok",
        "udp: refused (Operation not permitted)",
        "raw: refused (Operation not permitted)",
        "unix: refused (Operation not permitted)",
        "netlink: refused (Operation not permitted)",
        "pair: ok",
        "send: ok",
        "sendto-address: refused (Operation not permitted)",
        "dgram-pair: refused (Operation not permitted)",
        "",
      ].join("\n"),
    );
  });
});
