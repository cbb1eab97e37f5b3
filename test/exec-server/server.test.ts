/**
 * `shellmcp exec-server` beyond the conformance vectors: safe defaults (loopback only, Origin refused, bounded
 * messages), −32010 for a live resume, terminate killing the whole tree, processes and fs writes under Codex 0.169
 * permission profiles (the real sandbox: bwrap/Landlock + seccomp), no mount-point folders left behind, output
 * retention bounds, one session's flood not stalling another, and the `codex-fs` role on its own.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { binaryAs, ensureBinary, run } from "../helpers/binary.ts";
import { ExecClient, workspaceWrite } from "./client.ts";
import { startServer, type StartedServer } from "./codex-harness.ts";

let server: StartedServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
});

function workspace(): { proj: string; outside: string } {
  const base = join(CONF_BASE, `exec-srv-${Math.random().toString(36).slice(2)}`);
  const proj = join(base, "proj");
  const outside = join(base, "outside");
  mkdirSync(join(proj, ".git"), { recursive: true });
  mkdirSync(outside, { recursive: true });
  return { proj, outside };
}

/** Bytes written so far (`/proc/PID/io` wchar) by the `yes` whose argument is `line`, or undefined while none runs. */
function writtenBy(line: string): number | undefined {
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8") !== `/usr/bin/yes\0${line}\0`) continue;
      return Number(/^wchar:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/io`, "utf8"))?.[1]);
    } catch {
      // gone
    }
  }
  return undefined;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch {
    return false;
  }
}

describe("safe defaults", () => {
  test("prints a loopback ws:// URL with a real port", () => {
    expect(server.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    expect(server.url.endsWith(":0")).toBe(false);
  });

  test("refuses non-loopback and host-name --listen addresses", () => {
    const r = run([ensureBinary(), "exec-server", "--listen", "ws://0.0.0.0:0"]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("--allow-non-loopback");
    const h = run([ensureBinary(), "exec-server", "--listen", "ws://localhost:0"]);
    expect(h.exitCode).toBe(2);
    expect(h.stderr).toContain("expected `ws://IP:PORT`");
  });

  test("a handshake with an Origin header is refused with 403 (a browser page cannot drive it)", async () => {
    const http = server.url.replace("ws://", "http://");
    const res = await fetch(http, {
      headers: {
        Origin: "http://localhost",
        Upgrade: "websocket",
        Connection: "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
      },
    });
    expect(res.status).toBe(403);
    await expect(ExecClient.connect(server.url, { Origin: "https://evil.example" })).rejects.toThrow();
    const ok = await ExecClient.connect(server.url);
    expect(await ok.init()).toMatch(/^[0-9a-f-]{36}$/);
    ok.close();
  });

  test("a message over --max-message-bytes closes that connection only", async () => {
    const small = await startServer([ensureBinary(), "exec-server", "--max-message-bytes", "4096"]);
    try {
      const a = await ExecClient.connect(small.url);
      const b = await ExecClient.connect(small.url);
      await a.init();
      a.ws.send(JSON.stringify({ id: 9, method: "fs/writeFile", params: { path: "/tmp/never", dataBase64: "A".repeat(8192) } }));
      await a.closedPromise;
      expect(a.closed).toBe(true);
      expect(await b.init()).toMatch(/^[0-9a-f-]{36}$/);
      b.close();
    } finally {
      await small.stop();
    }
  });
});

describe("sessions", () => {
  test("resuming a session that is still attached answers -32010 (the code Codex 0.169 retries on)", async () => {
    const a = await ExecClient.connect(server.url);
    const sid = await a.init();
    const b = await ExecClient.connect(server.url);
    const r = await b.request("initialize", { clientName: "thief", resumeSessionId: sid });
    expect(r.error).toEqual({ code: -32010, message: `session ${sid} is already attached to another connection` });
    a.close();
    await a.closedPromise;
    // The server detaches the session once it has seen the close: until then it still answers -32010.
    let again = await b.request("initialize", { clientName: "thief", resumeSessionId: sid });
    const stillAttached = () => (again.error as { code?: number } | undefined)?.code === -32010;
    for (const until = Date.now() + 10_000; stillAttached() && Date.now() < until;) {
      await Bun.sleep(20);
      again = await b.request("initialize", { clientName: "thief", resumeSessionId: sid });
    }
    expect((again.result as { sessionId: string }).sessionId).toBe(sid);
    b.close();
  });
});

describe("processes", () => {
  test("terminate kills the whole tree, including a grandchild in its own session; exit code 137", async () => {
    const c = await ExecClient.connect(server.url);
    await c.init();
    const { proj } = workspace();
    await c.call("process/start", {
      processId: "tree",
      argv: ["/bin/sh", "-c", "setsid sleep 300 & echo $!; sleep 300 & echo $!; wait"],
      cwd: proj,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
    });
    await c.waitFor(
      (m) =>
        m.method === "process/output" &&
        Buffer.from((m.params as { chunk: string }).chunk, "base64")
          .toString()
          .split("\n")
          .filter(Boolean).length >= 1,
    );
    let pids: number[] = [];
    for (let i = 0; i < 50 && pids.length < 2; i++) {
      pids = c.notifications
        .filter((m) => m.method === "process/output")
        .flatMap((m) =>
          Buffer.from((m.params as { chunk: string }).chunk, "base64")
            .toString()
            .split("\n")
            .filter(Boolean)
            .map(Number),
        );
      await Bun.sleep(20);
    }
    expect(pids.length).toBe(2);
    expect(pids.every(alive)).toBe(true);
    expect(await c.call("process/terminate", { processId: "tree" })).toEqual({ running: true });
    const done = await c.collect("tree");
    expect(done.exitCode).toBe(137);
    for (let i = 0; i < 50 && pids.some(alive); i++) await Bun.sleep(20);
    expect(pids.filter(alive)).toEqual([]);
    c.close();
  });

  test("terminate also kills a double-forked daemon that left the process group and its parent (per-process cgroups)", async () => {
    const c = await ExecClient.connect(server.url);
    await c.init();
    const { proj } = workspace();
    await c.call("process/start", {
      processId: "daemon",
      argv: ["/bin/sh", "-c", "(setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &); sleep 300"],
      cwd: proj,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
    });
    let pid = 0;
    for (let i = 0; i < 250 && pid === 0; i++) {
      await Bun.sleep(20);
      if (existsSync(join(proj, "daemon.pid"))) pid = Number(readFileSync(join(proj, "daemon.pid"), "utf8").trim());
    }
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(true);
    expect(await c.call("process/terminate", { processId: "daemon" })).toEqual({ running: true });
    await c.collect("daemon");
    for (let i = 0; i < 50 && alive(pid); i++) await Bun.sleep(20);
    expect(alive(pid)).toBe(false);
    c.close();
  });

  test("retained output is bounded at 1 MiB while every chunk is still pushed", async () => {
    const c = await ExecClient.connect(server.url);
    await c.init();
    await c.call("process/start", {
      processId: "big",
      argv: ["/bin/sh", "-c", "head -c 3145728 /dev/zero"],
      cwd: "/",
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
    });
    const { output } = await c.collect("big");
    expect(output.length).toBe(3145728);
    const r = await c.call("process/read", { processId: "big", afterSeq: 0 });
    const bytes = (r.chunks as { chunk: string }[]).reduce((n, ch) => n + Buffer.from(ch.chunk, "base64").length, 0);
    expect(bytes).toBeLessThanOrEqual(1024 * 1024);
    expect(bytes).toBeGreaterThan(0);
    expect((r.chunks as { seq: number }[])[0]!.seq).toBeGreaterThan(1);
    c.close();
  });

  for (const tty of [false, true]) {
    test(`a session whose client stops reading its socket does not stall another session (tty: ${tty})`, async () => {
      // Client A: a raw websocket that never reads after starting a flood of output.
      const url = new URL(server.url);
      const sock = connect(Number(url.port), url.hostname);
      await new Promise<void>((r) => sock.once("connect", () => r()));
      sock.write(
        `GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${server.token}\r\n\r\n`,
      );
      const frame = (obj: unknown) => {
        const payload = Buffer.from(JSON.stringify(obj));
        const mask = Buffer.from([1, 2, 3, 4]);
        const head =
          payload.length < 126
            ? Buffer.from([0x81, 0x80 | payload.length])
            : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255]);
        const body = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
        return Buffer.concat([head, mask, body]);
      };
      const floodLine = `flood-${process.pid}-${tty}-${"y".repeat(1000)}`; // names this test's `yes` on the host
      sock.write(frame({ id: 1, method: "initialize", params: { clientName: "flood" } }));
      sock.write(frame({ method: "initialized", params: {} }));
      sock.write(
        frame({
          id: 2,
          method: "process/start",
          params: { processId: "flood", argv: ["/usr/bin/yes", floodLine], cwd: "/", env: { PATH: "/usr/bin:/bin" }, tty },
        }),
      );
      sock.pause(); // never read again
      // The flood is throttled (pipes: the pumps stop reading, so `yes` blocks in write; pty: the tree is stopped),
      // not buffered without bound: waited for until `yes` writes nothing more across four looks 250 ms apart. Two
      // looks were not enough on a loaded machine: `yes` blocked on a full pty for 250 ms while the server, not
      // scheduled, had not yet read up to its bound (seen beside two busy loops: 553,792 then 667,808 bytes).
      const written = () => writtenBy(floodLine);
      let last = -1;
      let same = 0;
      for (const until = Date.now() + 20_000; Date.now() < until && same < 3;) {
        const now = written();
        same = now !== undefined && now === last ? same + 1 : 0;
        last = now ?? -1;
        if (same < 3) await Bun.sleep(250);
      }
      expect(last, "the flood never started, or was never throttled").toBeGreaterThan(0);
      expect(written()).toBe(last);
      // Client B is served normally meanwhile.
      const b = await ExecClient.connect(server.url);
      await b.init();
      await b.call("process/start", { processId: "quick", argv: ["/bin/echo", "served"], cwd: "/", env: {}, tty: false });
      expect((await b.collect("quick")).output).toBe("served\n");
      // Still throttled: nothing of the flood was read while B was served; the server holds a bounded amount.
      expect(written()).toBe(last);
      const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.proc.pid}/status`, "utf8"))?.[1]) / 1024;
      expect(rss).toBeLessThan(500);
      sock.destroy();
      b.close();
    }, 30_000);
  }

  test("terminate kills a tty process tree", async () => {
    const c = await ExecClient.connect(server.url);
    await c.init();
    await c.call("process/start", {
      processId: "ttytree",
      argv: ["/bin/sh", "-c", "sleep 300 & echo PID=$!; wait"],
      cwd: "/",
      env: { PATH: "/usr/bin:/bin" },
      tty: true,
    });
    const m = await c.waitFor(
      (n) =>
        n.method === "process/output" &&
        Buffer.from((n.params as { chunk: string }).chunk, "base64")
          .toString()
          .includes("PID="),
    );
    const pid = Number(/PID=(\d+)/.exec(Buffer.from((m.params as { chunk: string }).chunk, "base64").toString())![1]);
    expect(alive(pid)).toBe(true);
    expect(await c.call("process/terminate", { processId: "ttytree" })).toEqual({ running: true });
    await c.collect("ttytree");
    for (let i = 0; i < 50 && alive(pid); i++) await Bun.sleep(20);
    expect(alive(pid)).toBe(false);
    c.close();
  });
});

describe("sandboxing (Codex 0.169 permission profiles)", () => {
  // bwrap's inner stage (which installs the seccomp filter) is this executable, found by its path inside the sandbox.
  // An unsandboxed process replaced the file at that path; a later sandboxed process whose plan needs the inner
  // stage (a command by bare name) gets the genuine file bound over the path from an fd of the running one, or, as
  // here where the running file's path was replaced (bwrap binds by the fd's path), is refused with what to do.
  test("a file put at the executable's path never runs as bubblewrap's inner stage", async () => {
    const dir = join(CONF_BASE, `exe-copy-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const exe = join(dir, "shellmcp");
    writeFileSync(exe, readFileSync(ensureBinary()), { mode: 0o755 });
    const own = await startServer([exe, "exec-server"]);
    try {
      const c = await ExecClient.connect(own.url);
      await c.init();
      const evil = `#!/bin/sh\necho EVIL-INNER-STAGE\nexit 0\n`;
      // Keep the genuine file linked (an upgrade in place would too), then put another file at its path.
      await c.call("process/start", {
        processId: "replace",
        argv: ["/bin/sh", "-c", `ln ${exe} ${exe}.kept && printf '${evil}' > ${exe}.new && chmod +x ${exe}.new && mv -f ${exe}.new ${exe}`],
        cwd: dir,
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        sandbox: null,
      });
      expect((await c.collect("replace")).exitCode).toBe(0);
      expect(readFileSync(exe, "utf8")).toContain("EVIL-INNER-STAGE");
      const { proj } = workspace();
      await c.call("process/start", {
        processId: "inner",
        argv: ["sh", "-c", "echo inner-ok"],
        cwd: `file://${proj}`,
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        sandbox: workspaceWrite(proj),
      });
      const done = await c.collect("inner");
      expect(done.output).not.toContain("EVIL-INNER-STAGE");
      expect(done.output).toContain("was replaced or removed after this process started"); // closed, with the fix
      expect(done.exitCode).not.toBe(0);
      c.close();
    } finally {
      await own.stop();
    }
  }, 60_000);

  // The sandbox helper is this executable; BUN_BE_BUN in the client's env would make it the bun CLI, which loads a
  // bunfig.toml preload from its working folder (the project) outside every sandbox. The helper never gets it.
  test("a client's BUN_BE_BUN and a project bunfig.toml preload run nothing outside the sandbox", async () => {
    const c = await ExecClient.connect(server.url);
    await c.init();
    const { proj, outside } = workspace();
    writeFileSync(join(proj, "evil.ts"), `require("node:fs").writeFileSync(${JSON.stringify(join(outside, "preloaded"))}, "x");\n`);
    writeFileSync(join(proj, "bunfig.toml"), 'preload = ["./evil.ts"]\n');
    await c.call("process/start", {
      processId: "bun-be-bun",
      argv: ["/bin/sh", "-c", "echo ran; echo ${BUN_BE_BUN:-unset}"],
      cwd: `file://${proj}`,
      env: { PATH: "/usr/bin:/bin", BUN_BE_BUN: "1", BUN_OPTIONS: "--preload ./evil.ts" },
      tty: false,
      sandbox: workspaceWrite(proj),
    });
    const done = await c.collect("bun-be-bun");
    expect(done.output).toBe("ran\nunset\n");
    expect(existsSync(join(outside, "preloaded"))).toBe(false);
    c.close();
  });

  test("a workspace-write process writes the project, not outside it and not .git; no mount points are left after a kill", async () => {
    const c = await ExecClient.connect(server.url);
    await c.init();
    const { proj, outside } = workspace();
    const r = await c.call("process/start", {
      processId: "sb",
      argv: [
        "/bin/sh",
        "-c",
        `echo in > inside.txt; echo in=$?; echo out > ${outside}/o.txt 2>/dev/null; echo out=$?; touch .git/x 2>/dev/null; echo git=$?; mkdir .aws 2>/dev/null; echo aws=$?`,
      ],
      cwd: `file://${proj}`,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: workspaceWrite(proj),
    });
    expect(r.sandboxType).toBe("linuxSeccomp");
    const done = await c.collect("sb");
    expect(done.output).toContain("in=0");
    expect(done.output).not.toContain("out=0");
    expect(done.output).toContain("Read-only file system");
    expect(done.output).toContain("git=1");
    // .aws: a read-only carve-out only Codex 0.169's profile names (kept from being created).
    expect(done.output).toContain("aws=1");
    expect(existsSync(join(proj, "inside.txt"))).toBe(true);
    const exited = c.notifications.find((m) => m.method === "process/exited" && (m.params as { processId: string }).processId === "sb");
    expect(exited?.params).toMatchObject({ exitCode: 0, sandboxDenied: false });
    await c.call("process/start", {
      processId: "sb-denied",
      argv: ["/bin/sh", "-c", `echo x > ${outside}/o.txt`],
      cwd: proj,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: workspaceWrite(proj),
    });
    await c.collect("sb-denied");
    const denied = c.notifications.find(
      (m) => m.method === "process/exited" && (m.params as { processId: string }).processId === "sb-denied",
    );
    expect(denied?.params).toMatchObject({ sandboxDenied: true });
    expect((denied?.params as { exitCode: number }).exitCode).not.toBe(0);
    expect(existsSync(join(outside, "o.txt"))).toBe(false);

    await c.call("process/start", {
      processId: "sb-kill",
      argv: ["/bin/sh", "-c", "echo up; sleep 300"],
      cwd: proj,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: workspaceWrite(proj),
    });
    await c.waitFor((m) => m.method === "process/output" && (m.params as { processId: string }).processId === "sb-kill");
    expect(await c.call("process/terminate", { processId: "sb-kill" })).toEqual({ running: true });
    await c.collect("sb-kill");
    for (const n of [".codex", ".agents", ".aws"]) expect(existsSync(join(proj, n))).toBe(false);
    c.close();
  });

  test("fs writes with a sandbox run in the codex-fs helper under it; sandbox: null runs directly", async () => {
    const c = await ExecClient.connect(server.url);
    await c.init();
    const { proj, outside } = workspace();
    const data = Buffer.from("patched\n").toString("base64");
    expect(
      await c.request("fs/writeFile", { path: `file://${proj}/a.txt`, dataBase64: data, sandbox: workspaceWrite(proj) }),
    ).toHaveProperty("result", {});
    expect(readFileSync(join(proj, "a.txt"), "utf8")).toBe("patched\n");
    const denied = await c.request("fs/writeFile", { path: `${outside}/b.txt`, dataBase64: data, sandbox: workspaceWrite(proj) });
    expect((denied.error as { code: number }).code).toBeOneOf([-32603, -32600]);
    expect(existsSync(join(outside, "b.txt"))).toBe(false);
    const git = await c.request("fs/createDirectory", { path: `${proj}/.git/hooks-evil`, sandbox: workspaceWrite(proj) });
    expect(git.error).toBeDefined();
    expect(existsSync(join(proj, ".git", "hooks-evil"))).toBe(false);
    const missing = await c.request("fs/writeFile", { path: `${proj}/no/such/dir.txt`, dataBase64: data, sandbox: workspaceWrite(proj) });
    expect((missing.error as { code: number }).code).toBe(-32004);
    expect(await c.request("fs/writeFile", { path: `${outside}/direct.txt`, dataBase64: data, sandbox: null })).toHaveProperty(
      "result",
      {},
    );
    expect(readFileSync(join(outside, "direct.txt"), "utf8")).toBe("patched\n");
    c.close();
  });

  test("a profile that cannot be enforced fails closed", async () => {
    const c = await ExecClient.connect(server.url);
    await c.init();
    const { proj } = workspace();
    const sandbox = {
      ...workspaceWrite(proj),
      permissions: {
        type: "managed",
        file_system: { type: "restricted", entries: [{ path: { type: "glob_pattern", pattern: "**/*.env" }, access: "deny" }] },
        network: "restricted",
      },
    };
    const r = await c.request("process/start", { processId: "x", argv: ["/bin/true"], cwd: proj, env: {}, tty: false, sandbox });
    expect((r.error as { code: number }).code).toBeOneOf([-32600, -32602]);
    c.close();
  });
});

describe("the codex-fs role", () => {
  test("answers one request on stdin (by arg0 and by --codex-run-as-fs-helper)", () => {
    const { proj } = workspace();
    writeFileSync(join(proj, "f"), "hi");
    const req = JSON.stringify({ operation: "fs/readFile", params: { path: join(proj, "f") } });
    for (const argv of [[binaryAs("codex-fs")], [ensureBinary(), "--codex-run-as-fs-helper"]]) {
      const r = run(argv, { stdin: req });
      expect(r.exitCode).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({ status: "ok", payload: { operation: "fs/readFile", response: { dataBase64: "aGk=" } } });
    }
    const miss = run([binaryAs("codex-fs")], {
      stdin: JSON.stringify({ operation: "fs/getMetadata", params: { path: join(proj, "nope") } }),
    });
    expect(JSON.parse(miss.stdout)).toEqual({
      status: "error",
      payload: { code: -32004, message: "No such file or directory (os error 2)" },
    });
    expect(run([binaryAs("codex-fs")], { stdin: "{}" }).exitCode).toBe(2);
  });
});
