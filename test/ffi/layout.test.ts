import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { alignUp, archLayout, cmsgLen, cmsgSpace, layoutStruct } from "../../ffi/layout.ts";
import { tempDir } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";

describe("layoutStruct", () => {
  test("C rules: fields aligned, struct padded to its alignment", () => {
    const l = layoutStruct([
      { name: "a", size: 1, align: 1 },
      { name: "b", size: 8, align: 8 },
      { name: "c", size: 2, align: 2 },
    ]);
    expect(l.offsets).toEqual({ a: 0, b: 8, c: 16 });
    expect(l.size).toBe(24);
    expect(alignUp(20, 8)).toBe(24);
  });
});

// What gcc says on x86_64 glibc (checked live below when gcc is present); aarch64 glibc is LP64 with the
// same natural alignment for every field involved, so its table must equal this one.
const LP64_GLIBC = {
  msghdr: {
    size: 56,
    offsets: { msg_name: 0, msg_namelen: 8, msg_iov: 16, msg_iovlen: 24, msg_control: 32, msg_controllen: 40, msg_flags: 48 },
  },
  iovec: { size: 16, offsets: { iov_base: 0, iov_len: 8 } },
  cmsghdr: { size: 16, offsets: { cmsg_len: 0, cmsg_level: 8, cmsg_type: 12 } },
  pollfd: { size: 8, offsets: { fd: 0, events: 4, revents: 6 } },
  sigaction: { size: 152, offsets: { sa_handler: 0, sa_mask: 8, sa_flags: 136, sa_restorer: 144 } },
};

describe("per-arch tables", () => {
  for (const arch of ["linux-x64", "linux-arm64"] as const) {
    test(`${arch}: LP64 glibc layouts`, () => {
      const l = archLayout(arch);
      for (const [name, want] of Object.entries(LP64_GLIBC)) {
        const got = l[name as keyof typeof LP64_GLIBC];
        expect({ size: got.size, offsets: got.offsets }).toEqual(want);
      }
      // One fd: cmsg_len 20, controllen 24 (observed on the wire by strace, docs/escalation.md, "Handshake").
      expect(cmsgLen(l, 4)).toBe(20);
      expect(cmsgSpace(l, 4)).toBe(24);
      expect(cmsgSpace(l, 12)).toBe(32);
    });
  }

  test("syscall numbers differ where the ABIs differ", () => {
    expect(archLayout("linux-x64").sys.seccomp).toBe(317);
    expect(archLayout("linux-arm64").sys.seccomp).toBe(277);
    expect(archLayout("linux-x64").sys.landlock_create_ruleset).toBe(444);
    expect(archLayout("linux-arm64").sys.landlock_create_ruleset).toBe(444);
    expect(archLayout("linux-x64").auditArch).toBe(0xc000003e);
    expect(archLayout("linux-arm64").auditArch).toBe(0xc00000b7);
  });

  test("darwin: 4-byte socklen_t fields and 4-byte cmsg alignment", () => {
    const l = archLayout("darwin-arm64");
    expect(l.msghdr.offsets).toEqual({
      msg_name: 0,
      msg_namelen: 8,
      msg_iov: 16,
      msg_iovlen: 24,
      msg_control: 32,
      msg_controllen: 40,
      msg_flags: 44,
    });
    expect(l.msghdr.size).toBe(48);
    expect(l.cmsghdr.size).toBe(12);
    expect(cmsgLen(l, 4)).toBe(16);
    expect(cmsgSpace(l, 4)).toBe(16);
  });
});

const gcc = Bun.which("gcc") ?? Bun.which("cc");
const hostArch = `${process.platform}-${process.arch}`;

const onKnownArch = hostArch === "linux-x64" || hostArch === "linux-arm64";
describe.skipIf(!onKnownArch || skipWithout("layout check against the C compiler", gcc === null ? "gcc not installed" : undefined))(
  "layouts agree with the host C compiler",
  () => {
    test("offsetof/sizeof from gcc equal our table", () => {
      const dir = tempDir();
      const src = join(dir, "layout.c");
      writeFileSync(
        src,
        `#define _GNU_SOURCE
#include <stdio.h>
#include <stddef.h>
#include <signal.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#define F(s, f) printf("%s.%s=%zu\\n", #s, #f, offsetof(struct s, f))
#define S(s) printf("%s.size=%zu\\n", #s, sizeof(struct s))
int main(void) {
  F(msghdr, msg_name); F(msghdr, msg_namelen); F(msghdr, msg_iov); F(msghdr, msg_iovlen);
  F(msghdr, msg_control); F(msghdr, msg_controllen); F(msghdr, msg_flags); S(msghdr);
  F(iovec, iov_base); F(iovec, iov_len); S(iovec);
  F(cmsghdr, cmsg_len); F(cmsghdr, cmsg_level); F(cmsghdr, cmsg_type); S(cmsghdr);
  F(pollfd, fd); F(pollfd, events); F(pollfd, revents); S(pollfd);
  F(sigaction, sa_handler); F(sigaction, sa_mask); F(sigaction, sa_flags); F(sigaction, sa_restorer); S(sigaction);
  printf("cmsg.len1=%zu\\ncmsg.space1=%zu\\nsigset.size=%zu\\n", (size_t)CMSG_LEN(4), (size_t)CMSG_SPACE(4), sizeof(sigset_t));
  return 0;
}
`,
      );
      const exe = join(dir, "layout");
      const cc = Bun.spawnSync([gcc!, "-o", exe, src]);
      expect(cc.exitCode).toBe(0);
      const out = Bun.spawnSync([exe]).stdout.toString();
      const facts = Object.fromEntries(
        out
          .trim()
          .split("\n")
          .map((l) => l.split("=") as [string, string]),
      );
      const l = archLayout(hostArch as "linux-x64");
      for (const s of ["msghdr", "iovec", "cmsghdr", "pollfd", "sigaction"] as const) {
        expect(Number(facts[`${s}.size`])).toBe(l[s].size);
        for (const [f, off] of Object.entries(l[s].offsets)) expect(Number(facts[`${s}.${f}`])).toBe(off);
      }
      expect(Number(facts["cmsg.len1"])).toBe(cmsgLen(l, 4));
      expect(Number(facts["cmsg.space1"])).toBe(cmsgSpace(l, 4));
      expect(Number(facts["sigset.size"])).toBe(l.sigsetBytes);
    });

    test("every syscall number and socket/fcntl constant equals the host's headers", () => {
      const l = archLayout(hostArch as "linux-x64");
      const dir = tempDir();
      const src = join(dir, "sys.c");
      const sys = Object.keys(l.sys)
        .map((n) => `  printf("sys.${n}=%ld\\n", (long)SYS_${n});`)
        .join("\n");
      const sock = Object.keys(l.sock)
        .map((n) => `  printf("sock.${n}=%ld\\n", (long)${n});`)
        .join("\n");
      writeFileSync(
        src,
        `#define _GNU_SOURCE\n#include <stdio.h>\n#include <fcntl.h>\n#include <sys/socket.h>\n#include <sys/syscall.h>\nint main(void) {\n${sys}\n${sock}\n  return 0;\n}\n`,
      );
      const exe = join(dir, "sys");
      const cc = Bun.spawnSync([gcc!, "-o", exe, src], { stderr: "pipe" });
      expect(cc.stderr.toString()).toBe("");
      expect(cc.exitCode).toBe(0);
      const facts = Object.fromEntries(
        Bun.spawnSync([exe])
          .stdout.toString()
          .trim()
          .split("\n")
          .map((x) => x.split("=") as [string, string]),
      );
      for (const [n, nr] of Object.entries(l.sys)) expect(`${n}=${facts[`sys.${n}`]}`).toBe(`${n}=${nr}`);
      for (const [n, v] of Object.entries(l.sock)) expect(`${n}=${facts[`sock.${n}`]}`).toBe(`${n}=${v}`);
    });
  },
);
