/**
 * The limits a bubblewrap argv meets (src/sandbox/linux/exec-limits.ts), counted as the kernel and bwrap count them:
 * the kernel's total for a stack limit (fs/exec.c `bprm_stack_limits`: a quarter of it, at least 128 KiB, at most
 * 6 MiB; measured on this kernel at 131,072, 2,097,152 and 6,291,456 bytes for `ulimit -s` 256, 8192 and unlimited
 * with the same count of strings, path and pointers), MAX_ARG_STRLEN (131,072 bytes with the NUL), bubblewrap 0.8's
 * 9,000 arguments after its name (measured: 9,000 run, 9,001 stop with "Exceeded maximum number of arguments
 * 9000"), each at its boundary, and what the refusal says. The sizes of the pinned plans are in
 * golden-launch-argv.test.ts; a real oversize plan is refused through the binary in test/sandbox/bwrap-argv-limit.test.ts.
 */
import { expect, test } from "bun:test";
import {
  argvSize,
  BWRAP_MAX_ARGS,
  countMounts,
  envSize,
  execLimits,
  LAUNCH_RESERVE,
  MAX_ARG_STRLEN,
  refuseOversizeBwrap,
  refuseOversizeHelper,
} from "../../src/sandbox/linux/exec-limits.ts";
import { ShellmcpError } from "../../src/errors.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
const counts = { mounts: 3, writableRoots: 1, deniedPaths: 0 };

/** The refusal `f` throws (or undefined when it returns). */
function refusal(f: () => unknown): ShellmcpError | undefined {
  try {
    f();
    return undefined;
  } catch (e) {
    expect(e).toBeInstanceOf(ShellmcpError);
    return e as ShellmcpError;
  }
}

test("the kernel's total is a quarter of the stack limit, at least 128 KiB, at most 6 MiB", () => {
  expect(execLimits(256 * KiB).total).toBe(128 * KiB);
  expect(execLimits(64 * KiB).total).toBe(128 * KiB);
  expect(execLimits(8 * MiB).total).toBe(2 * MiB);
  expect(execLimits(16 * MiB).total).toBe(4 * MiB);
  expect(execLimits(64 * MiB).total).toBe(6 * MiB);
  expect(execLimits("unlimited").total).toBe(6 * MiB);
  expect(execLimits(8 * MiB)).toMatchObject({ argStrlen: 131072, bwrapArgs: 9000, stackLimit: 8 * MiB });
});

test("sizes count UTF-8 bytes and one NUL per string; environments as KEY=value", () => {
  expect(argvSize([])).toEqual({ strings: 0, bytes: 0, largest: 0, largestAt: -1 });
  expect(argvSize(["/usr/bin/bwrap", "é", "--bind"])).toEqual({ strings: 3, bytes: 15 + 3 + 7, largest: 15, largestAt: 0 });
  expect(envSize({ A: "1", B: undefined, LONG: "xyz" })).toEqual({ strings: 2, bytes: 4 + 9, largest: 9, largestAt: 1 });
});

test("mounts are the options but --perms", () => {
  expect(countMounts(["--ro-bind", "/", "/", "--dev", "/dev", "--perms", "000", "--tmpfs", "/x", "--remount-ro", "/x"])).toBe(4);
});

test("bubblewrap's 9,000 arguments: 9,000 after its name start, 9,001 are refused with the counts", () => {
  const argv = (n: number) => ["/usr/bin/bwrap", ...Array.from({ length: n - 2 }, () => "--unshare-ipc"), "--", "/bin/true"];
  const limits = execLimits("unlimited");
  expect(refuseOversizeBwrap(argv(BWRAP_MAX_ARGS), {}, counts, limits).strings).toBe(9001);
  const e = refusal(() => refuseOversizeBwrap(argv(BWRAP_MAX_ARGS + 1), {}, counts, limits))!;
  expect(e.code).toBe("SANDBOX_UNAVAILABLE");
  expect(e.data).toMatchObject({ limit: "bwrap MAX_ARGS", arguments: 9002, mounts: 3, writableRoots: 1, deniedPaths: 0 });
  expect(e.message).toBe(
    "the bubblewrap command for this sandbox is too large to start: its 3 mounts (1 writable roots, 0 denied paths) " +
      "make 9002 arguments of 126014 bytes, more than the 9000 arguments bubblewrap accepts after its name (it would " +
      'stop with "Exceeded maximum number of arguments"). Nothing was run: use fewer writable roots (--add-dir, ' +
      "writable_roots) or denied paths",
  );
});

test("one string of 131,072 bytes with its NUL starts, one byte more is refused (MAX_ARG_STRLEN)", () => {
  const limits = execLimits("unlimited");
  const argv = (n: number) => ["/usr/bin/bwrap", "--", "/bin/sh", "-c", "x".repeat(n)];
  expect(refuseOversizeBwrap(argv(MAX_ARG_STRLEN - 1), {}, counts, limits).largest).toBe(MAX_ARG_STRLEN);
  const e = refusal(() => refuseOversizeBwrap(argv(MAX_ARG_STRLEN), {}, counts, limits))!;
  expect(e.data.limit).toBe("MAX_ARG_STRLEN");
  expect(e.message).toContain(`one of its strings (${"x".repeat(48)}…) is 131073 bytes, more than the kernel takes in one argument`);
  expect(e.message).toEndWith("or denied paths, or a shorter command");
  // An environment string counts too.
  const big = refusal(() => refuseOversizeBwrap(argv(1), { BIG: "y".repeat(MAX_ARG_STRLEN) }, counts, limits))!;
  expect(big.message).toContain("one of its strings (an environment variable) is 131077 bytes");
});

test("the kernel's total: strings, the path once more, a pointer per string and the launch reserve, to the byte", () => {
  const limits = execLimits(256 * KiB); // 131,072 bytes
  const env = { PATH: "/usr/bin:/bin" };
  // argv of `n` 1000-byte strings after bwrap's path, then a pad string making the total exactly `total`.
  const argvOf = (total: number) => {
    const argv = ["/usr/bin/bwrap", ...Array.from({ length: 100 }, () => "m".repeat(999))];
    const strings = argv.length + 1 + 1 + LAUNCH_RESERVE.strings; // the pad, PATH=, the reserve
    const fixed = argvSize(argv).bytes + envSize(env).bytes + 15 + LAUNCH_RESERVE.bytes + 8 * strings;
    argv.push("p".repeat(total - fixed - 1));
    return argv;
  };
  expect(refuseOversizeBwrap(argvOf(128 * KiB), env, counts, limits).strings).toBe(102);
  const e = refusal(() => refuseOversizeBwrap(argvOf(128 * KiB + 1), env, counts, limits))!;
  expect(e.data.limit).toBe("ARG_MAX");
  expect(e.message).toContain(
    "which with the environment (19 bytes) and a pointer per string come to 131073 bytes, more than the kernel takes " +
      "in one execve (131072 bytes: a quarter of the stack limit of 262144 bytes, at least 128 KiB, at most 6 MiB; " +
      "execve would fail with E2BIG)",
  );
  expect(e.message).toEndWith("or denied paths, or raise the stack limit (ulimit -s)");
  // At 6 MiB a larger stack limit does not help, and is not suggested.
  const big = Array.from({ length: 7 }, () => "z".repeat(MAX_ARG_STRLEN - 1));
  const at6 = refusal(() =>
    refuseOversizeBwrap(["/usr/bin/bwrap", ...big, ...big, ...big, ...big, ...big, ...big, ...big], {}, counts, execLimits("unlimited")),
  )!;
  expect(at6.data.limit).toBe("ARG_MAX");
  expect(at6.message).toEndWith("or denied paths");
});

test("the helper's command line: the kernel's limits only, its counts asked for only when refusing", () => {
  const limits = execLimits("unlimited");
  let asked = 0;
  const countsOf = () => (asked++, { writableRoots: 2000, deniedPaths: 4 });
  // 9,500 arguments: over bwrap's count, which is not the helper's.
  const many = ["/usr/bin/shellmcp", ...Array.from({ length: 9500 }, () => "w")];
  expect(refuseOversizeHelper(many, {}, countsOf, limits).strings).toBe(9501);
  expect(asked).toBe(0);
  const json = `{"type":"workspace-write","writable_roots":[${'"/r",'.repeat(40000)}"/r"]}`;
  const e = refusal(() => refuseOversizeHelper(["/usr/bin/shellmcp", "--sandbox-policy", json, "--", "true"], {}, countsOf, limits))!;
  expect(asked).toBe(1);
  expect(e.data).toMatchObject({ limit: "MAX_ARG_STRLEN", arguments: 5, writableRoots: 2000, deniedPaths: 4 });
  expect(e.message).toStartWith(
    "the sandbox helper's command line for this sandbox is too large to start: its policy's 2000 writable roots and 4 " +
      `denied paths make 5 arguments of ${argvSize(["/usr/bin/shellmcp", "--sandbox-policy", json, "--", "true"]).bytes} bytes, ` +
      'and one of its strings ({"type":"workspace-write","writable_roots":["/r"…) is 200051 bytes',
  );
});
