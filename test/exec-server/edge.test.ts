/**
 * Behaviour the project's shared spec confirms for Codex 0.169 beyond the vectors (exec-server.md §13.3): pty size,
 * arg0, 8 KiB chunks and retention from seq 130, writes after terminate, a 300 KiB write, per-connection
 * serialization, fs edge cases.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { ExecClient } from "./client.ts";
import { startServer, type StartedServer } from "./codex-harness.ts";

let server: StartedServer;
let c: ExecClient;
beforeAll(async () => {
  server = await startServer();
  c = await ExecClient.connect(server.url);
  await c.init();
});
afterAll(async () => {
  c?.close();
  await server?.stop();
});

function dir(): string {
  const d = join(CONF_BASE, `exec-edge-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  return d;
}
const PATH_ENV = { PATH: "/usr/bin:/bin" };
let n = 0;
const pid = () => `edge-${n++}`;

describe("processes", () => {
  test("a pty is 24x80 and merges stderr", async () => {
    const id = pid();
    await c.call("process/start", {
      processId: id,
      argv: ["/bin/sh", "-c", "stty size; echo oops >&2"],
      cwd: "/",
      env: PATH_ENV,
      tty: true,
    });
    const r = await c.collect(id);
    expect(r.output).toContain("24 80");
    expect(r.output).toContain("oops");
    expect(
      c.notifications
        .filter((m) => m.method === "process/output" && (m.params as { processId: string }).processId === id)
        .every((m) => (m.params as { stream: string }).stream === "pty"),
    ).toBe(true);
  });

  test("arg0 replaces argv[0] and the program is looked up in the child's PATH", async () => {
    const id = pid();
    await c.call("process/start", {
      processId: id,
      argv: ["sh", "-c", 'echo "$0"'],
      arg0: "custom-name",
      cwd: "/",
      env: PATH_ENV,
      tty: false,
    });
    expect((await c.collect(id)).output).toBe("custom-name\n");
    const nopath = pid();
    await c.call("process/start", { processId: nopath, argv: ["true"], cwd: "/", env: {}, tty: false });
    expect((await c.collect(nopath)).exitCode).toBe(0);
    const r = await c.request("process/start", {
      processId: pid(),
      argv: ["definitely-not-a-program-xyz"],
      cwd: "/",
      env: PATH_ENV,
      tty: false,
    });
    expect(r.error).toEqual({ code: -32603, message: "No such file or directory (os error 2)" });
  });

  test("2 MiB + 3 bytes: chunks of at most 8 KiB, every one pushed; a read from 0 gets the last ≤ 1 MiB (from seq ≥ 130), tail intact", async () => {
    const id = pid();
    await c.call("process/start", {
      processId: id,
      argv: ["/bin/sh", "-c", "head -c 2097155 /dev/zero"],
      cwd: "/",
      env: PATH_ENV,
      tty: false,
    });
    const r = await c.collect(id);
    expect(r.output.length).toBe(2097155);
    const sizes = c.notifications
      .filter((m) => m.method === "process/output" && (m.params as { processId: string }).processId === id)
      .map((m) => Buffer.from((m.params as { chunk: string }).chunk, "base64").length);
    expect(Math.max(...sizes)).toBe(8192);
    const read = await c.call("process/read", { processId: id, afterSeq: 0 });
    const chunks = read.chunks as { seq: number; chunk: string }[];
    // Codex got exactly 130 (its 8 KiB reads came back full); our pipe reads may end mid-write, so a few more chunks.
    expect(chunks[0]!.seq).toBeGreaterThanOrEqual(130);
    const kept = chunks.reduce((t, ch) => t + Buffer.from(ch.chunk, "base64").length, 0);
    expect(kept).toBeLessThanOrEqual(1024 * 1024);
    expect(kept).toBeGreaterThan(1024 * 1024 - 8192);
    expect(chunks[chunks.length - 1]!.seq).toBe(sizes.length);
    expect(read.nextSeq).toBe(sizes.length + 1);
  });

  test("a 300 KiB write arrives whole; a write after terminate is -32603", async () => {
    const id = pid();
    await c.call("process/start", {
      processId: id,
      argv: ["/bin/sh", "-c", "head -c 307200 | wc -c"],
      cwd: "/",
      env: PATH_ENV,
      tty: false,
      pipeStdin: true,
    });
    expect(await c.call("process/write", { processId: id, chunk: Buffer.alloc(307200, 65).toString("base64"), writeId: "1" })).toEqual({
      status: "accepted",
    });
    expect((await c.collect(id)).output.trim()).toBe("307200");
    const t = pid();
    await c.call("process/start", { processId: t, argv: ["/bin/sleep", "30"], cwd: "/", env: PATH_ENV, tty: false, pipeStdin: true });
    expect(await c.call("process/terminate", { processId: t })).toEqual({ running: true });
    expect(await c.request("process/write", { processId: t, chunk: "aGkK" })).toHaveProperty("error", {
      code: -32603,
      message: "failed to write to process stdin",
    });
  });

  test("requests on one connection are served in order: a long-poll read delays the terminate behind it", async () => {
    const id = pid();
    await c.call("process/start", { processId: id, argv: ["/bin/sleep", "30"], cwd: "/", env: PATH_ENV, tty: false });
    const t0 = performance.now();
    const read = c.request("process/read", { processId: id, waitMs: 700 });
    const term = c.request("process/terminate", { processId: id });
    const first = await Promise.race([read.then(() => "read"), term.then(() => "terminate")]);
    expect(first).toBe("read");
    expect(((await term).result as { running: boolean }).running).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(650);
  });

  test("a null id is answered with id -1 and never runs", async () => {
    c.ws.send(
      JSON.stringify({ id: null, method: "process/start", params: { processId: "nullid", argv: ["true"], cwd: "/", env: {}, tty: false } }),
    );
    const r = await c.request("process/read", { processId: "nullid" });
    expect(r.error).toEqual({ code: -32600, message: "unknown process id nullid" });
  });
});

describe("fs", () => {
  test("lexical .. normalisation, trailing slash, fifo entries, EEXIST/ENOTEMPTY codes, empty writes, symlink-following writes", async () => {
    const d = dir();
    mkdirSync(join(d, "a", "sub"), { recursive: true });
    writeFileSync(join(d, "a", "f"), "top");
    symlinkSync(join(d, "a", "sub"), join(d, "a", "link"));
    Bun.spawnSync(["mkfifo", join(d, "a", "pipe")]);
    expect(await c.call("fs/readFile", { path: `${d}/a/link/../f` })).toEqual({ dataBase64: Buffer.from("top").toString("base64") });
    expect(await c.call("fs/getMetadata", { path: `${d}/a/` })).toMatchObject({ isDirectory: true, isFile: false, isSymlink: false });
    expect(await c.call("fs/getMetadata", { path: `${d}/a/pipe` })).toMatchObject({ isDirectory: false, isFile: false });
    const entries = (await c.call("fs/readDirectory", { path: `file://${d}/a` })).entries as {
      fileName: string;
      isDirectory: boolean;
      isFile: boolean;
    }[];
    expect(entries.find((e) => e.fileName === "pipe")).toEqual({ fileName: "pipe", isDirectory: false, isFile: false });
    expect((await c.request("fs/createDirectory", { path: `${d}/a`, recursive: false })).error).toEqual({
      code: -32603,
      message: "File exists (os error 17)",
    });
    expect((await c.request("fs/remove", { path: `${d}/a`, recursive: false })).error).toEqual({
      code: -32603,
      message: "Directory not empty (os error 39)",
    });
    expect((await c.request("fs/copy", { sourcePath: `${d}/a/link`, destinationPath: `${d}/a/f`, recursive: false })).error).toEqual({
      code: -32603,
      message: "File exists (os error 17)",
    });
    expect(await c.call("fs/writeFile", { path: `${d}/a/empty`, dataBase64: "" })).toEqual({});
    expect(readFileSync(join(d, "a", "empty"), "utf8")).toBe("");
    symlinkSync(join(d, "a", "f"), join(d, "flink"));
    await c.call("fs/writeFile", { path: `${d}/flink`, dataBase64: Buffer.from("via link").toString("base64") });
    expect(readFileSync(join(d, "a", "f"), "utf8")).toBe("via link");
    expect((await c.request("fs/readFile", { path: "file://remote-host/etc/passwd" })).error).toMatchObject({ code: -32602 });
  });

  test("a long fs operation in one session does not block another session", async () => {
    const d = dir();
    Bun.spawnSync(["/bin/sh", "-c", `mkdir -p ${d}/big && cd ${d}/big && seq 1 20000 | xargs touch`]);
    const other = await ExecClient.connect(server.url);
    await other.init();
    let copyDone = 0;
    const copy = c.request("fs/copy", { sourcePath: `${d}/big`, destinationPath: `${d}/big-copy`, recursive: true }).then((r) => {
      copyDone = performance.now();
      return r;
    });
    await Bun.sleep(20);
    await other.call("process/start", { processId: "quick", argv: ["/bin/echo", "ok"], cwd: "/", env: {}, tty: false });
    await other.collect("quick");
    const quickDone = performance.now();
    expect((await copy).result).toEqual({});
    expect(quickDone).toBeLessThan(copyDone);
    other.close();
  }, 60_000);
});
