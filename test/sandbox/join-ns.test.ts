/**
 * The room launcher's `--join-ns USERFD NETFD -- PATH ARGV0 [ARG...]` (patches/room-launcher.c) with the server's
 * loopback network made here (src/sandbox/linux/loopback-net.ts `serverLoopback`): the program runs in that network
 * namespace, with neither fd; fds that are not those namespaces, or a usage error, run nothing (fail closed: never a
 * program in the wrong network).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeBwrap } from "../../src/sandbox/linux/bwrap.ts";
import { LOOPBACK_NETNS_FD, LOOPBACK_USERNS_FD, serverLoopback, type ServerLoopback } from "../../src/sandbox/linux/loopback-net.ts";
import { ROOT } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";

const LAUNCHER = process.env.SHELLMCP_TEST_ROOM_LAUNCHER ?? join(ROOT, "dist", "shells-static", `linux-${process.arch}`, "room-launcher");
const probe = probeBwrap(true);
const skip = skipWithout(
  "room launcher --join-ns",
  !existsSync(LAUNCHER) ? `${LAUNCHER} is not built` : !probe.ok ? "bubblewrap cannot run here" : undefined,
);
const dir = mkdtempSync(join(tmpdir(), "join-ns-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Run the launcher with `args`, `fds` placed at 9 and 10 (undefined: /dev/null there); stdout, stderr, exit code. */
function launch(args: string[], fds: [number | "ignore", number | "ignore"]): { out: string; err: string; code: number | null } {
  const stdio = ["ignore", "pipe", "pipe", "ignore", "ignore", "ignore", "ignore", "ignore", "ignore", ...fds];
  const r = Bun.spawnSync([LAUNCHER, ...args], { stdio: stdio as never });
  return { out: r.stdout.toString(), err: r.stderr.toString(), code: r.exitCode };
}

describe.skipIf(skip)("room launcher --join-ns", () => {
  let lo: ServerLoopback;
  test("the program runs in the loopback network namespace, with neither namespace fd", () => {
    const made = serverLoopback(probe.path!);
    if ("error" in made) throw new Error(made.error);
    lo = made;
    const r = launch(
      [
        "--join-ns",
        String(LOOPBACK_USERNS_FD),
        String(LOOPBACK_NETNS_FD),
        "--",
        "/bin/sh",
        "sh",
        "-c",
        "readlink /proc/self/ns/net; ls /proc/self/fd",
      ],
      [lo.userFd, lo.netFd],
    );
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    const [ns, ...fds] = r.out.trim().split("\n");
    expect(ns).toBe(`net:[${lo.netInode}]`);
    expect(ns).not.toBe(readlinkSync("/proc/self/ns/net"));
    expect(fds).not.toContain(String(LOOPBACK_USERNS_FD));
    expect(fds).not.toContain(String(LOOPBACK_NETNS_FD));
  });

  test("fds that are not the namespaces (missing, swapped, the wrong kind): nothing runs, exit 126 with the reason", () => {
    const marker = join(dir, "ran");
    const run = ["--", "/bin/sh", "sh", "-c", `touch ${marker}`];
    const cases: [string, [number | "ignore", number | "ignore"]][] = [
      ["missing", ["ignore", "ignore"]],
      ["swapped", [lo.netFd, lo.userFd]],
      ["the net namespace twice", [lo.netFd, lo.netFd]],
      ["a user namespace for the network", [lo.userFd, lo.userFd]],
    ];
    for (const [name, fds] of cases) {
      const r = launch(["--join-ns", String(LOOPBACK_USERNS_FD), String(LOOPBACK_NETNS_FD), ...run], fds);
      expect({ name, code: r.code, ran: existsSync(marker) }).toEqual({ name, code: 126, ran: false });
      expect(r.err).toMatch(/^shellmcp: cannot join this server's loopback network/);
    }
  });

  test("usage errors run nothing (exit 2)", () => {
    for (const args of [
      ["--join-ns", "9"],
      ["--join-ns", "9", "9", "--", "/bin/true", "true"],
      ["--join-ns", "9", "x", "--", "/bin/true", "true"],
      ["--join-ns", "9", "10", "/bin/true", "true"],
      ["--join-ns", "9", "10", "--", "/bin/true"],
    ]) {
      const r = launch(args, ["ignore", "ignore"]);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.err).toContain("usage: room-launcher --join-ns");
    }
  });
});
