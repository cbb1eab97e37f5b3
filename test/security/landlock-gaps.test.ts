/**
 * Issue 34, item 7: Landlock gaps left from the last review, each through the compiled binary and the real kernel
 * sandbox, judged on the host.
 * - 7a: below Landlock ABI 3 there is no TRUNCATE right, so `truncate(2)` by path emptied any file the user can write,
 *   outside every writable root. The ABI is simulated as 2 (`SHELLMCP_SIMULATE_LANDLOCK_ABI`, which can only lower
 *   it); below ABI 6 the helper needs a pid namespace of its own, hence root. Through `sandbox linux` and `serve`.
 * - 7b: `sandbox linux --backend landlock` ran the command in the person's session, with their terminal as its
 *   controlling terminal: TIOCSTI pushed typed input into it. Run under a pty (the controlling terminal of the
 *   process that starts `sandbox linux`), the command must be in a new session and TIOCSTI and TIOCLINUX refused.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../helpers/binary.ts";
import { closeAll, confDir, serveWithPid } from "../helpers/attack.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

const isRoot = process.getuid?.() === 0;
const PY = "/usr/bin/python3";

/** A Python program that truncates `path` by path (truncate(2)) and prints the outcome. */
const truncateProgram = (path: string) =>
  `import os\ntry:\n    os.truncate(${JSON.stringify(path)}, 0)\n    print("TRUNCATED")\nexcept OSError as e:\n    print("REFUSED", e.errno)`;

describe.skipIf(
  skipWithout("item 7a (truncate below ABI 3; needs root for the pid namespace below ABI 6)", isRoot ? toolMissing("python3") : "not root"),
)("item 7a: truncate(2) below Landlock ABI 3", () => {
  test("sandbox linux --backend landlock, ABI 2: a file outside every writable root keeps its content", () => {
    const ws = confDir("trunc-ws");
    const outside = join(confDir("trunc-out"), "victim");
    writeFileSync(outside, "keep me\n");
    const r = Bun.spawnSync(
      [
        ensureBinary(),
        "sandbox",
        "linux",
        "--backend",
        "landlock",
        "--sandbox",
        "workspace-write",
        "--",
        PY,
        "-c",
        truncateProgram(outside),
      ],
      { cwd: ws, env: { ...process.env, SHELLMCP_SIMULATE_LANDLOCK_ABI: "2" }, stdout: "pipe", stderr: "pipe" },
    );
    expect({ out: r.stdout.toString().trim(), content: readFileSync(outside, "utf8") }).toEqual({ out: "REFUSED 1", content: "keep me\n" });
    // Inside the workspace the file can still be shortened through an fd opened for writing (ftruncate).
    const own = Bun.spawnSync(
      [
        ensureBinary(),
        "sandbox",
        "linux",
        "--backend",
        "landlock",
        "--sandbox",
        "workspace-write",
        "--",
        PY,
        "-c",
        'import os\nopen("f", "w").write("abc")\nfd = os.open("f", os.O_WRONLY)\nos.ftruncate(fd, 1)\nprint(open("f").read())',
      ],
      { cwd: ws, env: { ...process.env, SHELLMCP_SIMULATE_LANDLOCK_ABI: "2" }, stdout: "pipe", stderr: "pipe" },
    );
    expect(own.stdout.toString()).toBe("a\n");
  });

  test.skipIf(skipWithout("item 7a through serve", shellsMissing()))(
    "serve --sandbox-backend landlock, ABI 2: a call cannot truncate a file outside its writable roots",
    async () => {
      const s = await serveWithPid({ args: ["--sandbox-backend", "landlock"], env: { SHELLMCP_SIMULATE_LANDLOCK_ABI: "2" } });
      const ws = confDir("trunc-serve-ws");
      const outside = join(confDir("trunc-serve-out"), "victim");
      writeFileSync(outside, "keep me\n");
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
      const q = (x: string) => `'${x.replaceAll("'", `'\\''`)}'`;
      const r = await s.shell({ command: `${PY} -c ${q(truncateProgram(outside))}`, workdir: ws, login: false, timeout_ms: 20_000 });
      // The first line is the program's (a notice about the backend may follow it).
      expect({ out: r.out.output.split("\n")[0], content: readFileSync(outside, "utf8") }).toEqual({
        out: "REFUSED 1",
        content: "keep me\n",
      });
    },
    60_000,
  );
});

/** Runs argv (after `--`) under a new pty, as the pty's session leader; prints its output and `LEADER <pid>`. */
const UNDER_PTY = `
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        b = os.read(fd, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
print("LEADER", pid)
`;

/** Prints its session id, then whether TIOCSTI and TIOCLINUX on stdin (the pty) work. */
const TTY_PROBE = `import fcntl, os, termios
print("SID", os.getsid(0), flush=True)
for name, req in (("TIOCSTI", termios.TIOCSTI), ("TIOCLINUX", 0x541C)):
    try:
        fcntl.ioctl(0, req, b"x")
        print(name, "OK", flush=True)
    except OSError as e:
        print(name, "ERR", e.errno, flush=True)`;

describe.skipIf(skipWithout("item 7b (TIOCSTI under a pty)", toolMissing("python3")))("item 7b: sandbox linux and the terminal", () => {
  for (const abi of [undefined, "5"] as const) {
    const name = abi === undefined ? "landlock" : "landlock, ABI 5 (a pid namespace of its own)";
    test.skipIf(abi !== undefined && !isRoot)(`${name}: a new session, TIOCSTI and TIOCLINUX refused`, () => {
      const ws = confDir("tty-ws");
      const r = Bun.spawnSync(
        [PY, "-c", UNDER_PTY, ensureBinary(), "sandbox", "linux", "--backend", "landlock", "--", PY, "-c", TTY_PROBE],
        {
          cwd: ws,
          env: { ...process.env, ...(abi !== undefined ? { SHELLMCP_SIMULATE_LANDLOCK_ABI: abi } : {}) },
          stdout: "pipe",
          stderr: "pipe",
        },
      );
      const out = r.stdout.toString().replaceAll("\r", "");
      const leader = /^LEADER (\d+)$/m.exec(out)?.[1];
      const sid = /^SID (\d+)$/m.exec(out)?.[1];
      expect(leader).toBeDefined();
      expect(sid).toBeDefined();
      // The command's session is not the one of the pty's session leader (the person's shell, here).
      expect({ sameSession: sid === leader, out }).toEqual({ sameSession: false, out });
      // No character was pushed into the terminal: EPERM, and no stray "x" echoed in the output.
      expect(/^x?TIOCSTI (\w+) ?(\d*)$/m.exec(out)?.slice(1)).toEqual(["ERR", "1"]);
      expect(/^TIOCLINUX (\w+) ?(\d*)$/m.exec(out)?.slice(1)).toEqual(["ERR", "1"]);
      expect(out).not.toMatch(/^x/m);
    });
  }
});
