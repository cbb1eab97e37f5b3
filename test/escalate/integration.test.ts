/**
 * The escalation protocol end to end: patched bash → compiled wrapper (`codex-execve-wrapper`) → our
 * escalation server with a scripted `decide`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync, chmodSync } from "node:fs";
import { join } from "node:path";
import * as libc from "../../ffi/libc.ts";
import type { EscalateAction as Decision } from "../../src/escalate/protocol/wire.ts";
import { EscalationServer } from "../../src/escalate/server.ts";
import { BoundaryPlacement } from "../../src/escalate/placement.ts";
import type { ResolvedRequest } from "../../src/escalate/decision/request.ts";
import { encodeFrame } from "../../src/escalate/protocol/wire.ts";
import { ensureBinary, tempDir } from "../helpers/binary.ts";
import { openBoundary, ourWrapper, runInShell } from "../helpers/escalation.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { exitedWithin, fifoMessage, fifoSend, mkfifo, readableWithin } from "../helpers/events.ts";

const skip = skipWithout("escalation integration suite", shellsMissing());
let server: EscalationServer;

beforeAll(async () => {
  ensureBinary();
  server = await EscalationServer.start(new BoundaryPlacement());
});
afterAll(async () => {
  await server?.stop();
});

const basename = (p: string) => p.slice(p.lastIndexOf("/") + 1);
/** Escalate programs named in `names`, Run everything else. */
const escalating =
  (...names: string[]) =>
  (r: ResolvedRequest): Decision =>
    names.includes(basename(r.file)) ? { kind: "Escalate" } : { kind: "Run" };

describe.skipIf(skip)("escalation end to end (patched bash, compiled wrapper, our server)", () => {
  test("Run: the program runs in place with the shell's argv", async () => {
    const seen: ResolvedRequest[] = [];
    const r = await runInShell(server, {
      script: "/bin/echo hello world; exec -a CUSTOM /bin/sh -c 'echo $0'",
      decide: (req) => (seen.push(req), { kind: "Run" }),
    });
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("hello world\nCUSTOM\n");
    expect(r.exitCode).toBe(0);
    expect(seen.map((s) => [s.file, s.argv])).toEqual([
      ["/bin/echo", ["/bin/echo", "hello", "world"]],
      ["/bin/sh", ["CUSTOM", "-c", "echo $0"]],
    ]);
    // The forwarded env has no protocol variables.
    for (const k of ["CODEX_ESCALATE_SOCKET", "EXEC_WRAPPER", "BASH_EXEC_WRAPPER"]) expect(seen[0]!.env[k]).toBeUndefined();
    expect(seen[0]!.env.LC_ALL).toBe("C");
  });

  test("Escalate: exit code, stdout and stderr pass through, and stdin too", async () => {
    const r = await runInShell(server, {
      script: 'sh -c \'read line; echo "out:$line"; echo err >&2; exit 42\'; echo "rc=$?"',
      stdin: "from-stdin\n",
      decide: escalating("sh"),
    });
    expect(r.stdout).toBe("out:from-stdin\nrc=42\n");
    expect(r.stderr).toBe("err\n");
  });

  test("Escalate runs outside the shell: the shell's starting env plus harmless changes only, no protocol vars", async () => {
    const r = await runInShell(server, {
      script: "MARK=set-in-shell LD_PRELOAD=/x.so GIT_AUTHOR_NAME=Ann LC_ALL=C.UTF-8 PATH=/tmp/evil:$PATH /usr/bin/env",
      decide: escalating("env"),
    });
    const lines = r.stdout.split("\n");
    expect(lines).toContain("GIT_AUTHOR_NAME=Ann");
    expect(lines).toContain("LC_ALL=C.UTF-8");
    expect(lines).toContain("PATH=/usr/local/bin:/usr/bin:/bin");
    expect(lines.some((l) => l.startsWith("MARK=") || l.startsWith("LD_PRELOAD="))).toBe(false);
    expect(
      lines.some((l) => l.startsWith("CODEX_ESCALATE_SOCKET=") || l.startsWith("EXEC_WRAPPER=") || l.startsWith("BASH_EXEC_WRAPPER=")),
    ).toBe(false);
  });

  test("Deny: message on stderr, status 1, program never runs", async () => {
    const dir = tempDir();
    const r = await runInShell(server, {
      script: `/usr/bin/touch ${dir}/ran; echo "rc=$?"; /bin/echo after`,
      decide: (req) => (basename(req.file) === "touch" ? { kind: "Deny", reason: "Execution forbidden by policy" } : { kind: "Run" }),
    });
    expect(r.stderr).toBe("Execution denied: Execution forbidden by policy\n");
    expect(r.stdout).toBe("rc=1\nafter\n");
    expect(existsSync(join(dir, "ran"))).toBe(false);
  });

  test("Deny with a null reason", async () => {
    const r = await runInShell(server, { script: "/bin/true", decide: () => ({ kind: "Deny", reason: null }) });
    expect(r.stderr).toBe("Execution denied\n");
    expect(r.exitCode).toBe(1);
  });

  test("a decide that throws denies (fail closed), with the reason", async () => {
    const r = await runInShell(server, {
      script: "/bin/echo should-not-print",
      decide: () => {
        throw new Error("rules exploded");
      },
    });
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe("Execution denied: escalation policy error: rules exploded\n");
    expect(r.exitCode).toBe(1);
  });

  test("a pipeline of 5 programs, mixed decisions, all concurrent", async () => {
    let n = 0;
    const r = await runInShell(server, {
      script: "/bin/echo abc | tr a-c x-z | cat | sed s/x/X/ | cat",
      decide: async (req) => {
        n++;
        await Bun.sleep(20); // slow decisions must not serialise the pipeline
        return ["tr", "sed"].includes(basename(req.file)) ? { kind: "Escalate" } : { kind: "Run" };
      },
    });
    expect(r.stdout).toBe("Xyz\n");
    expect(n).toBe(5);
  });

  test("the worker gives back its heap when asked (an idle server), and escalates as before afterwards", async () => {
    // Both resolve (the worker says when its release has run; ../../src/serve.ts releases the code pages after it).
    await Promise.all([server.releaseHeap(), server.releaseHeap()]);
    let n = 0;
    const r = await runInShell(server, {
      script: "/bin/echo after; /bin/true; echo done",
      decide: () => (n++, { kind: "Escalate" }),
    });
    expect(r.stdout).toBe("after\ndone\n");
    expect(r.exitCode).toBe(0);
    expect(n).toBe(2);
  });

  test("100 execs in a loop", async () => {
    let n = 0;
    const r = await runInShell(server, {
      script: "for i in $(seq 1 100); do /bin/true; done; echo done",
      decide: () => (n++, { kind: "Run" }),
    });
    expect(r.stdout).toBe("done\n");
    expect(n).toBe(101); // seq + 100 × true
  });

  test("the escalation socket at fd 10 (where Codex's server puts it) survives Run into a nested shell", async () => {
    let n = 0;
    const l = server.listen({ decide: () => (n++, { kind: "Run" }), boundary: openBoundary() });
    const bash = (await import("../helpers/shells.ts")).patchedShell("bash");
    const stdio: (number | "ignore" | "pipe")[] = [
      "ignore",
      "pipe",
      "pipe",
      "ignore",
      "ignore",
      "ignore",
      "ignore",
      "ignore",
      "ignore",
      "ignore",
      l.clientFd,
    ];
    const p = Bun.spawn([bash, "-c", `${bash} -c '/bin/echo inner'`], {
      env: { PATH: "/usr/bin:/bin", ...l.shellEnv(ourWrapper(), 10) },
      stdio: stdio as ["ignore", "pipe", "pipe"],
    });
    l.releaseClientFd();
    const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    await l.close();
    expect(err).toBe("");
    expect(out).toBe("inner\n");
    expect(n).toBe(2); // the nested bash and the echo inside it
  });

  test("an escalated program killed by a signal reports 128+signal", async () => {
    const r = await runInShell(server, { script: "sh -c 'kill -KILL $$'; echo \"rc=$?\"", decide: escalating("sh") });
    expect(r.stdout).toBe("rc=137\n");
  });

  test("no fd leaks into escalated programs", async () => {
    const r = await runInShell(server, { script: "ls /proc/self/fd", decide: escalating("ls") });
    // 0, 1, 2 and the directory fd ls itself opened to list /proc/self/fd.
    expect(r.stdout.trim().split("\n").map(Number).sort()).toEqual([0, 1, 2, 3]);
  });

  test("a closed stdin becomes /dev/null for the escalated program, never the server's stdin", async () => {
    const r = await runInShell(server, { script: "readlink /proc/self/fd/0 <&-", decide: escalating("readlink") });
    expect(r.stdout).toBe("/dev/null\n");
  });

  test("argv[0] starting with a dash (exec -l) and a relative program path", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "tool"), '#!/bin/sh\necho "tool $0 $*"\n');
    chmodSync(join(dir, "tool"), 0o755);
    const seen: ResolvedRequest[] = [];
    const r = await runInShell(server, {
      cwd: dir,
      script: "./tool a; (exec -l /bin/echo dash)",
      decide: (req) => (seen.push(req), basename(req.file) === "tool" ? { kind: "Escalate" } : { kind: "Run" }),
    });
    // The escalated program is exec'd by its resolved absolute path (the path the policy judged), so a
    // script's $0 is that path.
    expect(r.stdout).toBe(`tool ${join(dir, "tool")} a\ndash\n`);
    expect(seen[0]!.rawFile).toBe("./tool");
    expect(seen[0]!.file).toBe(join(dir, "tool")); // resolved against the request's workdir
    expect(seen[1]!.argv[0]).toStartWith("-");
  });

  test("Run of a shebang-less script runs it with the shell, as bash would", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "plain"), 'echo "plain:$1"\n/bin/echo nested\n');
    chmodSync(join(dir, "plain"), 0o755);
    let n = 0;
    const r = await runInShell(server, { cwd: dir, script: "./plain arg", decide: () => (n++, { kind: "Run" }) });
    expect(r.stdout).toBe("plain:arg\nnested\n");
    expect(n).toBe(2); // the script's own exec is intercepted too
  });

  test("Run of a missing target: shell-style message and 127", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "gone"), "#!/nonexistent/interpreter\n");
    chmodSync(join(dir, "gone"), 0o755);
    const r = await runInShell(server, { cwd: dir, script: './gone; echo "rc=$?"', decide: () => ({ kind: "Run" }) });
    expect(r.stdout).toBe("rc=127\n");
    expect(r.stderr).toContain("No such file or directory");
  });

  test("parallel shell runs each with their own listener", async () => {
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        runInShell(server, {
          script: `/bin/echo run-${i}; sh -c 'echo esc-${i}'`,
          decide: async (req) => (await Bun.sleep(5), basename(req.file) === "sh" ? { kind: "Escalate" } : { kind: "Run" }),
        }),
      ),
    );
    runs.forEach((r, i) => expect(r.stdout).toBe(`run-${i}\nesc-${i}\n`));
  });

  test("closing a listener kills its still-running escalated programs", async () => {
    const dir = tempDir();
    const ready = join(dir, "ready");
    mkfifo(ready);
    let listenerRef: import("../../src/escalate/server.ts").EscalationListener | undefined;
    const shell = runInShell(server, {
      // The escalated sh reports its pid through the named pipe, then becomes a long sleep.
      script: `sh -c 'echo $$ > ${ready}; exec sleep 30' & echo started`,
      decide: escalating("sh"),
      keepOpen: true,
      onSpawn: (_pid, l) => (listenerRef = l),
    });
    // The shell finishes, but the escalated `sleep` holds the output pipes: close the listener meanwhile.
    const pid = Number(await fifoMessage(ready));
    expect(() => process.kill(pid, 0)).not.toThrow();
    await listenerRef!.close();
    const r = await shell;
    expect(r.stdout).toBe("started\n");
    expect(await exitedWithin([pid])).toEqual([]);
  });

  // Regression: the worker once polled only the child's pidfd while it ran, so the wrapper's death went unseen
  // (this test then passed only because `sleep 30` ended and released the output pipes).
  test("an escalated program gets SIGTERM when its wrapper dies", async () => {
    const dir = tempDir();
    const pidFile = join(dir, "pid");
    const ready = join(dir, "ready");
    mkfifo(ready);
    const r = await runInShell(server, {
      // $! is the wrapper (it waits for the escalated sh); once the escalated sh runs (it says so through the
      // named pipe), kill the wrapper, and the escalated sh must go too.
      // The sleep does not hold the shell's output open, so the run ends at once and the wait below is real.
      script: `sh -c 'echo $$ > ${pidFile}; echo up > ${ready}; exec sleep 30 > /dev/null 2>&1' & w=$!; read _ < ${ready}; kill -9 $w; echo killed`,
      decide: escalating("sh"),
      keepOpen: true,
    });
    expect(r.stdout).toContain("killed");
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(await exitedWithin([pid], 3000)).toEqual([]); // SIGTERM ends a sleep at once: 3 s is ample
    await r.listener.close();
  });

  test("after the listener is closed, a background job's exec fails closed", async () => {
    const dir = tempDir();
    mkfifo(join(dir, "go"));
    mkfifo(join(dir, "done"));
    const r = await runInShell(server, {
      // The background job waits for "go" (sent once the shell has exited and the listener is closed), then
      // execs, then reports its status through "done".
      script: `(read _ < ${dir}/go; /usr/bin/touch ${dir}/late 2> ${dir}/late.err; echo "rc=$?" > ${dir}/done) > /dev/null 2>&1 & echo bg`,
      decide: () => ({ kind: "Run" }),
    });
    expect(r.stdout).toBe("bg\n");
    const done = fifoMessage(join(dir, "done"));
    await fifoSend(join(dir, "go"));
    expect(await done).toBe("rc=1\n");
    expect(readFileSync(join(dir, "late.err"), "utf8")).toContain("failed to send handshake datagram");
    expect(existsSync(join(dir, "late"))).toBe(false);
  });
});

describe("escalation server fails closed when its worker cannot start", () => {
  test("a worker that throws while loading", async () => {
    const url = new URL("./fixtures/broken-worker.ts", import.meta.url).href;
    await expect(EscalationServer.start(new BoundaryPlacement(), url)).rejects.toThrow("the escalation worker could not start");
  });

  test("a worker file that does not exist", async () => {
    await expect(EscalationServer.start(new BoundaryPlacement(), "file:///nonexistent/shellmcp-worker.ts")).rejects.toThrow(
      "the escalation worker could not start",
    );
  });
});

describe.skipIf(skip)("wrapper fails closed on a broken peer", () => {
  const WRAP_ENV = (extra: Record<string, string>) => ({ PATH: "/usr/bin:/bin", ...extra });

  test("no CODEX_ESCALATE_SOCKET, a non-number, a closed fd, a non-socket", () => {
    const wrapper = ourWrapper();
    const dir = tempDir();
    const cases: [Record<string, string>, string][] = [
      [{}, "CODEX_ESCALATE_SOCKET is not set"],
      [{ CODEX_ESCALATE_SOCKET: "abc" }, "not a valid file descriptor"],
      [{ CODEX_ESCALATE_SOCKET: "-1" }, "not a valid file descriptor"],
      [{ CODEX_ESCALATE_SOCKET: "77" }, "Bad file descriptor"],
      [{ CODEX_ESCALATE_SOCKET: "0" }, "failed to send handshake datagram"],
    ];
    for (const [env, msg] of cases) {
      const r = Bun.spawnSync([wrapper, "/usr/bin/touch", "touch", join(dir, "ran")], { env: WRAP_ENV(env), stdin: Bun.file("/dev/null") });
      expect(r.exitCode).toBe(1);
      expect(r.stderr.toString()).toContain(msg);
    }
    expect(existsSync(join(dir, "ran"))).toBe(false);
  });

  /**
   * A fake server: the test thread speaks the protocol by hand with blocking FFI calls (the wrapper is another
   * process, so blocking here is fine), misbehaves as `script` says, then waits for the wrapper to exit.
   */
  async function fakeServer(script: (stream: number) => void): Promise<{ exitCode: number; stderr: string; ran: boolean }> {
    const wrapper = ourWrapper();
    const dir = tempDir();
    const [srv, cli] = libc.socketpair(libc.SOCK.AF_UNIX, libc.SOCK.SOCK_DGRAM | libc.SOCK.SOCK_CLOEXEC);
    const p = Bun.spawn([wrapper, "/usr/bin/touch", "touch", join(dir, "ran")], {
      env: WRAP_ENV({ CODEX_ESCALATE_SOCKET: "3" }),
      stdio: ["ignore", "pipe", "pipe", cli],
    });
    libc.close(cli);
    const hs = libc.recvmsg(srv, 16, 1);
    expect(hs.fds.length).toBe(1);
    script(hs.fds[0]!);
    libc.closeQuiet(hs.fds[0]!);
    libc.close(srv);
    const [stderr, exitCode] = await Promise.all([new Response(p.stderr).text(), p.exited]);
    return { exitCode, stderr, ran: existsSync(join(dir, "ran")) };
  }

  test("server closes the stream before answering: exit 1, program not run", async () => {
    const r = await fakeServer((s) => {
      libc.recvmsg(s, 1 << 20); // the request (or part of it)
    });
    expect(r.stderr).toBe("Error: failed to receive EscalateResponse: socket closed while receiving frame header\n");
    expect(r.exitCode).toBe(1);
    expect(r.ran).toBe(false);
  });

  test("server answers garbage: exit 1, program not run", async () => {
    const r = await fakeServer((s) => {
      libc.recvmsg(s, 1 << 20);
      libc.sendmsg(s, encodeFrame(new TextEncoder().encode(`{"action":"RunAway"}`)));
    });
    expect(r.stderr).toContain("failed to receive EscalateResponse: EscalateResponse: unknown action");
    expect(r.exitCode).toBe(1);
    expect(r.ran).toBe(false);
  });

  test("server announces a giant frame: exit 1, program not run", async () => {
    const r = await fakeServer((s) => {
      libc.recvmsg(s, 1 << 20);
      libc.sendmsg(s, new Uint8Array([0xff, 0xff, 0xff, 0x7f]));
    });
    expect(r.stderr).toContain("frame too large");
    expect(r.exitCode).toBe(1);
    expect(r.ran).toBe(false);
  });
});

describe.skipIf(skip)("server survives malformed sessions", () => {
  test("garbage, oversized and mistyped requests end that session only", async () => {
    const l = server.listen({ decide: () => ({ kind: "Run" }), boundary: openBoundary() });
    const send = (payload: Uint8Array) => {
      const [a, b] = libc.socketpair(libc.SOCK.AF_UNIX, libc.SOCK.SOCK_STREAM | libc.SOCK.SOCK_CLOEXEC);
      libc.sendmsg(l.clientFd, new Uint8Array([0]), [b]);
      libc.close(b);
      libc.sendmsg(a, payload);
      return a;
    };
    const bad = [
      send(encodeFrame(new TextEncoder().encode("not json"))),
      send(new Uint8Array([0xff, 0xff, 0xff, 0xff])),
      send(encodeFrame(new TextEncoder().encode(`{"file":1,"argv":[],"workdir":"/","env":{}}`))),
      send(encodeFrame(new TextEncoder().encode(`{"file":"/bin/true","argv":[],"workdir":"/","env":{}}`))),
    ];
    // Wait in a worker thread, not blocking the event loop: decisions are made on this thread.
    const readable = async (fd: number) => expect(await readableWithin([fd])).toEqual([true]);
    // Each bad session is closed by the server: reading gives EOF.
    for (const fd of bad) {
      await readable(fd);
      expect(libc.recvmsg(fd, 100).bytes.byteLength).toBe(0);
      libc.close(fd);
    }
    // A datagram without an fd is ignored.
    libc.sendmsg(l.clientFd, new Uint8Array([0]));
    // And the listener still serves a good request.
    const good = send(encodeFrame(new TextEncoder().encode(JSON.stringify({ file: "/bin/true", argv: ["true"], workdir: "/", env: {} }))));
    await readable(good);
    const resp = libc.recvmsg(good, 100).bytes;
    expect(new TextDecoder().decode(resp.subarray(4))).toBe(`{"action":"Run"}`);
    libc.close(good);
    await l.close();
  });
});
