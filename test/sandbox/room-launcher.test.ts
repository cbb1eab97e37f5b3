/**
 * The room launcher (patches/room-launcher.c, built by scripts/build-room-launcher.sh) on its own, spoken to as the
 * escalation worker does (src/sandbox/linux/room-launcher.ts encodes the frames): argv[0], environment and working
 * folder exactly as sent, the sent fds on their numbers (a swap included) and nothing else open, /dev/null for a
 * missing stdin, exit statuses and signals, a malformed frame ends it, and closing its socket kills what runs.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as libc from "../../ffi/libc.ts";
import { exitCodeOf, killFrame, LauncherRecordReader, spawnFrame, type LauncherRecord } from "../../src/sandbox/linux/room-launcher.ts";
import { ROOT } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

/** The launcher under test: the built one, or another build of it (the sanitized one: scripts/build-sanitized.sh). */
export const LAUNCHER =
  process.env.SHELLMCP_TEST_ROOM_LAUNCHER ?? join(ROOT, "dist", "shells-static", `linux-${process.arch}`, "room-launcher");
const started: { proc: ReturnType<typeof Bun.spawn>; fd: number }[] = [];
const scratch = mkdtempSync(join(tmpdir(), "shellmcp-launcher-test-"));

afterAll(() => {
  for (const s of started) {
    libc.closeQuiet(s.fd);
    s.proc.kill(9);
  }
  rmSync(scratch, { recursive: true, force: true });
});

/** A launcher with our end of its socket; `records()` waits for the next records. `prefix`: argv run before it. */
function launcher(args: string[] = [], prefix: string[] = []) {
  const [mine, theirs] = libc.socketpair(libc.SOCK.AF_UNIX, libc.SOCK.SOCK_STREAM | libc.SOCK.SOCK_CLOEXEC);
  const proc = Bun.spawn([...prefix, LAUNCHER, ...args], { stdio: ["ignore", "ignore", "pipe", theirs] });
  libc.close(theirs);
  started.push({ proc, fd: mine });
  const reader = new LauncherRecordReader();
  const pending: LauncherRecord[] = [];
  return {
    proc,
    fd: mine,
    send(frame: Uint8Array, fds: number[] = []) {
      let off = 0;
      while (off < frame.byteLength) off += libc.sendmsg(mine, frame.subarray(off), off === 0 ? fds : []);
    },
    /** The next record for `id` of `kind` (blocking reads, 5 s at most). */
    async next(id: number, kind: LauncherRecord["kind"]): Promise<LauncherRecord> {
      const deadline = Date.now() + 5000;
      for (;;) {
        const i = pending.findIndex((r) => r.id === id && r.kind === kind);
        if (i >= 0) return pending.splice(i, 1)[0]!;
        if (Date.now() > deadline) throw new Error(`no ${kind} record for ${id}`);
        const ready = libc.poll([{ fd: mine, events: libc.POLL.IN }], 50);
        if (ready[0] === 0) {
          await Bun.sleep(1);
          continue;
        }
        const r = libc.recvmsg(mine, 4096);
        if (r.bytes.byteLength === 0) throw new Error("launcher closed its socket");
        pending.push(...reader.push(r.bytes));
      }
    },
  };
}

/** A pipe whose read end is drained into a string by `text()` once every write end is closed. */
function pipe() {
  const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
  return {
    w,
    async text(): Promise<string> {
      libc.closeQuiet(w);
      const chunks: Buffer[] = [];
      const buf = Buffer.alloc(65536);
      const { readSync } = await import("node:fs");
      for (;;) {
        const n = readSync(r, buf);
        if (n === 0) break;
        chunks.push(Buffer.from(buf.subarray(0, n)));
      }
      libc.closeQuiet(r);
      return Buffer.concat(chunks).toString();
    },
  };
}

describe("room launcher", () => {
  test("it is built (scripts/build-room-launcher.sh, run by install.sh)", () => {
    expect(readFileSync(LAUNCHER).byteLength).toBeGreaterThan(1000);
  });

  test("argv[0], environment and folder exactly as sent; the sent fds (a swap included) on their numbers, nothing else; stdin /dev/null", async () => {
    const l = launcher();
    const out = pipe();
    const a = pipe();
    const b = pipe();
    // Once received, the launcher's copies are its lowest free numbers (5 and 6 after its socket and signalfd):
    // sent to 6 and 5, a swap the launcher must not get wrong.
    const script = [
      'printf "%s|%s|%s|%s\\n" "$0" "$FOO" "$(pwd)" "$(env | sort | tr "\\n" ,)"',
      // The shell's own fds, listed by a child while the shell holds nothing else open.
      "echo FDS; ls /proc/$$/fd; echo END",
      'read -r line; echo stdin=$? "[$line]"',
      "echo to-a >&6; echo to-b >&5",
    ].join("; ");
    l.send(spawnFrame(1, [1, 6, 5], "/bin/sh", CONF_BASE, ["custom-zero", "-c", script], ["FOO=bar baz", "ONLY=this"]), [out.w, a.w, b.w]);
    for (const fd of [a.w, b.w]) libc.closeQuiet(fd);
    expect((await l.next(1, "spawned")).value).toBeGreaterThan(0);
    expect(exitCodeOf((await l.next(1, "exited")).value)).toBe(0);
    const lines = (await out.text()).split("\n");
    expect(lines[0]).toBe(`custom-zero|bar baz|${CONF_BASE}|FOO=bar baz,ONLY=this,PWD=${CONF_BASE},`);
    expect(lines.slice(lines.indexOf("FDS") + 1, lines.indexOf("END")).sort()).toEqual(["0", "1", "2", "5", "6"]);
    expect(lines[lines.indexOf("END") + 1]).toBe("stdin=1 []");
    expect(await a.text()).toBe("to-a\n");
    expect(await b.text()).toBe("to-b\n");
  });

  test("exit codes, a failed exec (127), and a kill frame (128 + signal)", async () => {
    const l = launcher();
    l.send(spawnFrame(7, [], "/bin/sh", "/", ["sh", "-c", "exit 3"], []));
    expect(exitCodeOf((await l.next(7, "exited")).value)).toBe(3);
    l.send(spawnFrame(8, [], "/nonexistent/program", "/", ["x"], []));
    expect(exitCodeOf((await l.next(8, "exited")).value)).toBe(127);
    l.send(spawnFrame(9, [], "/bin/sleep", "/", ["sleep", "30"], []));
    await l.next(9, "spawned");
    l.send(killFrame(9, 15));
    expect(exitCodeOf((await l.next(9, "exited")).value)).toBe(128 + 15);
  });

  test('a program may move files between folders (its nested Landlock domain handles "refer": git\'s object store needs it)', async () => {
    const l = launcher();
    const out = pipe();
    const dir = join(CONF_BASE, `refer-${Math.random().toString(36).slice(2, 8)}`);
    const script = `mkdir -p "$0/a" "$0/b" && : > "$0/a/f" && mv "$0/a/f" "$0/b/f" && ln "$0/b/f" "$0/a/g" && echo moved`;
    l.send(spawnFrame(1, [1, 2], "/bin/sh", "/", ["sh", "-c", script.replaceAll("$0", dir)], ["PATH=/usr/bin:/bin"]), [out.w, out.w]);
    expect(exitCodeOf((await l.next(1, "exited")).value)).toBe(0);
    expect(await out.text()).toBe("moved\n");
  });

  test("closing its socket kills every program and ends it", async () => {
    const l = launcher();
    const marker = `${4400000 + Math.floor(Math.random() * 99999)}`;
    l.send(spawnFrame(1, [], "/bin/sleep", "/", ["sleep", marker], []));
    await l.next(1, "spawned");
    const alive = () => Bun.spawnSync(["pgrep", "-f", `sleep ${marker}`]).exitCode === 0;
    // "spawned" comes after the fork, before the exec: under load the program's argv may not be sleep's yet.
    for (let i = 0; i < 200 && !alive(); i++) await Bun.sleep(25);
    expect(alive()).toBe(true);
    libc.close(l.fd);
    expect(await l.proc.exited).toBe(0);
    for (let i = 0; i < 40 && alive(); i++) await Bun.sleep(25);
    expect(alive()).toBe(false);
  });

  test("a malformed frame ends it with status 2 and says why", async () => {
    const l = launcher();
    l.send(new Uint8Array([5, 0, 0, 0, "Z".charCodeAt(0), 1, 2, 3, 4]));
    expect(await l.proc.exited).toBe(2);
    expect(await new Response(l.proc.stderr as ReadableStream).text()).toContain("unknown frame");
  });

  test("bytes after a frame's last field, or a stream that ends inside a frame: refused (exit 2), nothing run", async () => {
    const marker = join(scratch, "trailing-ran");
    const good = spawnFrame(1, [], "/bin/sh", "/", ["sh", "-c", `: > ${marker}`], []);
    const longer = new Uint8Array(good.byteLength + 1);
    longer.set(good);
    new DataView(longer.buffer).setUint32(0, good.byteLength - 4 + 1, true);
    const l = launcher();
    l.send(longer);
    expect(await l.proc.exited).toBe(2);
    expect(await new Response(l.proc.stderr as ReadableStream).text()).toContain("bytes after its last string");
    const t = launcher();
    t.send(good.subarray(0, good.byteLength - 3));
    libc.close(t.fd);
    expect(await t.proc.exited).toBe(2);
    expect(await new Response(t.proc.stderr as ReadableStream).text()).toContain("truncated frame");
    expect(existsSync(marker)).toBe(false);
  });

  test("a Landlock nest the kernel refuses stops the program: exit 126 with the reason, nothing run", async () => {
    // landlock_restrict_self (446 on every architecture) made to fail with EPERM by a seccomp filter around the launcher.
    const helper = join(scratch, "deny-syscall");
    const cc = Bun.spawnSync(["gcc", "-O1", "-o", helper, join(ROOT, "test", "fixtures", "deny-syscall.c")]);
    expect(cc.exitCode).toBe(0);
    const abi = Number(Bun.spawnSync([helper, "--landlock-abi"]).stdout.toString().trim());
    expect(abi).toBeGreaterThanOrEqual(2); // the nest exists only from ABI 2: without it this test proves nothing
    const l = launcher([], [helper, "446"]);
    const out = pipe();
    const marker = join(scratch, "unnested-ran");
    l.send(spawnFrame(1, [1, 2], "/bin/sh", "/", ["sh", "-c", `echo ran > ${marker}`], []), [out.w, out.w]);
    expect(exitCodeOf((await l.next(1, "exited")).value)).toBe(126);
    expect(await out.text()).toContain("cannot nest its Landlock domain (landlock_restrict_self: Operation not permitted)");
    expect(existsSync(marker)).toBe(false);
  });

  test("destinations up to fd 1023 under a soft descriptor limit of 1024: placed (hard limit higher), else refused clearly", async () => {
    const l = launcher([], ["prlimit", "--nofile=1024:4096", "--"]);
    const out = pipe();
    const far = pipe();
    l.send(spawnFrame(1, [1, 1023], "/bin/bash", "/", ["bash", "-c", "echo far >&1023; ulimit -n"], []), [out.w, far.w]);
    libc.closeQuiet(far.w);
    expect(exitCodeOf((await l.next(1, "exited")).value)).toBe(0);
    expect(await far.text()).toBe("far\n");
    expect(await out.text()).toBe("1024\n"); // the program runs with the limit it was given
    const h = launcher([], ["prlimit", "--nofile=1024:1024", "--"]);
    const err = pipe();
    const marker = join(scratch, "fd-limit-ran");
    h.send(spawnFrame(2, [2, 1023], "/bin/sh", "/", ["sh", "-c", `: > ${marker}`], []), [err.w, err.w]);
    expect(exitCodeOf((await h.next(2, "exited")).value)).toBe(126);
    expect(await err.text()).toContain("needs a descriptor limit of");
    expect(existsSync(marker)).toBe(false);
  });

  test("frames are refused before they reach it: a NUL in a string, too many fds", () => {
    expect(() => spawnFrame(1, [], "/bin/true", "/", ["a\0b"], [])).toThrow(RangeError);
    expect(() => spawnFrame(1, new Array(65).fill(1), "/bin/true", "/", ["true"], [])).toThrow(RangeError);
  });
});
