/**
 * The seccomp filter's modes (src/sandbox/linux/seccomp.ts, issue 24): each assembles on both architectures; applied
 * to a real process here (x86_64 or aarch64: the host's), the three modes refuse different socket calls; `proxy` mode
 * refuses new AF_UNIX, UDP and raw sockets, `sendto` with
 * an address and `sendmsg` with MSG_FASTOPEN, while TCP sockets, AF_UNIX socketpairs and plain `send` work.
 */
import { describe, expect, test } from "bun:test";
import { buildFilter } from "../../src/sandbox/linux/seccomp.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { ensureBinary } from "../helpers/binary.ts";

/** A perl probe: which of these socket calls the filter it runs under lets through (`name: ok` or `name: refused (…)`). */
const MODES_PROBE = `
use Socket;
sub try { my ($name, $ok) = @_; print "$name: ", ($ok ? "ok" : "refused ($!)"), "\\n"; }
try("tcp", socket(my $t, AF_INET, SOCK_STREAM, 0));
try("udp", socket(my $u, AF_INET, SOCK_DGRAM, 0));
try("unix", socket(my $x, AF_UNIX, SOCK_STREAM, 0));
try("vsock", socket(my $v, 40, SOCK_STREAM, 0));
try("pair", socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0));
try("dgram-pair", socketpair(my $c, my $d, AF_UNIX, SOCK_DGRAM, 0));
`;

/** `perl -e program` under the helper (Landlock backend) with `policy`, and extra helper flags: stdout, stderr. */
function underHelper(policy: unknown, program: string, flags: string[] = []): { out: string; err: string } {
  const p = Bun.spawnSync(
    [
      ensureBinary(),
      "--codex-run-as-linux-sandbox",
      "--backend",
      "landlock",
      ...flags,
      "--sandbox-policy-cwd",
      "/",
      "--sandbox-policy",
      JSON.stringify(policy),
      "--",
      "perl",
      "-e",
      program,
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  return { out: p.stdout.toString(), err: p.stderr.toString() };
}

describe("seccomp filter modes", () => {
  test("assembles for x86_64 and aarch64, each within classic BPF's jump range", () => {
    // Only the host's architecture can run under this kernel (the next test); the other one is checked as a program.
    for (const arch of ["linux-x64", "linux-arm64"] as const)
      for (const mode of ["restricted", "vsock", "proxy"] as const) {
        const p = buildFilter(mode, arch);
        expect(p.byteLength % 8).toBe(0);
        expect(p.byteLength / 8).toBeLessThan(255);
      }
  });

  const skipModes = skipWithout("seccomp modes, applied", toolMissing("perl") ?? (process.platform === "linux" ? undefined : "Linux only"));
  test.skipIf(skipModes)("the three modes, applied to a real process here, differ by what they refuse", () => {
    const refused = "refused (Operation not permitted)";
    const run = (policy: unknown, flags: string[] = []) => {
      const r = underHelper(policy, MODES_PROBE, flags);
      expect(r.err).toBe("");
      return Object.fromEntries(
        r.out
          .trim()
          .split("\n")
          .map((l) => l.split(": ") as [string, string]),
      );
    };
    // restricted (network off): no socket but AF_UNIX streams, no datagram pair.
    expect(run({ type: "read-only", network_access: false })).toEqual({
      tcp: refused,
      udp: refused,
      unix: "ok",
      vsock: refused,
      pair: "ok",
      "dgram-pair": refused,
    });
    // vsock (network on, filesystem restricted): everything but AF_VSOCK.
    expect(run({ type: "read-only", network_access: true })).toEqual({
      tcp: "ok",
      udp: "ok",
      unix: "ok",
      vsock: refused,
      pair: "ok",
      "dgram-pair": "ok",
    });
    // proxy (network through the call's proxy): TCP and AF_UNIX stream pairs only.
    expect(run({ type: "read-only", network_access: true }, ["--network-proxy-ports", "3128"])).toEqual({
      tcp: "ok",
      udp: refused,
      unix: refused,
      vsock: refused,
      pair: "ok",
      "dgram-pair": refused,
    });
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
    const p = underHelper({ type: "read-only", network_access: true }, perl, ["--network-proxy-ports", "3128"]);
    expect(p.err).toBe("");
    expect(p.out).toBe(
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
