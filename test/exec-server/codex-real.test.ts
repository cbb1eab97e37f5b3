/**
 * The real Codex 0.169 (`codex exec`) runs whole turns through the compiled `shellmcp exec-server`
 * (`CODEX_EXEC_SERVER_URL`), with a stand-in model (./responses-mock.ts, model slug `gpt-5.5` so that Codex offers
 * `apply_patch`) and a logging websocket proxy in between. Every scenario is judged by what the model received and
 * by the files on disk (Codex exits 0 even when every tool failed). Scenarios follow the project's shared spec
 * (exec-server-codex-0.169/README.md, the recorded real turns).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CODEX, runCodex, startServer, WsProxy, type StartedServer } from "./codex-harness.ts";
import { processesWith } from "../helpers/marked.ts";
import { skipWithout } from "../helpers/prereq.ts";

const maybe = skipWithout(
  "real Codex exec-server suite",
  CODEX === undefined ? "@openai/codex (0.169, linux build) is not installed: npm ci" : undefined,
)
  ? describe.skip
  : describe;

let server: StartedServer;
let proxy: WsProxy;
beforeAll(async () => {
  server = await startServer(undefined, { ...process.env, XSRV_MARK: "xsrv-mark-4242" });
  proxy = new WsProxy(server.url);
});
afterAll(async () => {
  proxy?.stop();
  await server?.stop();
});

/** No empty mount-point folders left in the project. */
function expectNoMountPointLeftovers(proj: string): void {
  for (const n of [".codex", ".agents", ".aws"]) expect(existsSync(join(proj, n))).toBe(false);
}

const sessionId = (prev: string) => Number(/session ID (\d+)/.exec(prev)?.[1] ?? -1);

maybe("real Codex 0.169 through shellmcp exec-server", () => {
  test("a command with output and a non-zero exit; AGENTS.md is read through fs/*; workspace-write confines writes", async () => {
    const r = await runCodex({
      serverUrl: proxy.url,
      sandbox: "workspace-write",
      steps: ({ proj, outside }) => [
        {
          tool: "exec_command",
          args: {
            cmd: `echo hi; echo mark=$XSRV_MARK; echo err >&2; echo in > inside.txt; echo in_rc=$?; echo out > ${outside}/outside.txt; echo out_rc=$?; touch .git/x; echo git_rc=$?; exit 3`,
            workdir: proj,
          },
        },
      ],
    });
    const out = r.mock.output(0) ?? "";
    expect(out).toContain("Process exited with code 3");
    expect(out).toContain("hi\n");
    expect(out).toContain("mark=xsrv-mark-4242"); // envPolicy inherit: all → the server's environment
    expect(out).toContain("err\n");
    expect(out).toContain("in_rc=0");
    expect(out).toContain("out_rc=1");
    expect(out).toContain("Read-only file system");
    expect(out).toContain("git_rc=1");
    expect(readFileSync(join(r.proj, "inside.txt"), "utf8")).toBe("in\n");
    expect(existsSync(join(r.outside, "outside.txt"))).toBe(false);
    expect(existsSync(join(r.proj, ".git", "x"))).toBe(false);
    expect(JSON.stringify(r.mock.requests[0]?.input)).toContain("PELICAN");
    // initialize's environmentInfo reaches the model's environment context
    expect(JSON.stringify(r.mock.requests[0]?.input)).toContain("<shell>bash</shell>");
    expectNoMountPointLeftovers(r.proj);
  }, 120_000);

  test("output is streamed while the process runs; a command that yields is polled to completion with write_stdin", async () => {
    const r = await runCodex({
      serverUrl: proxy.url,
      sandbox: "workspace-write",
      steps: ({ proj }) => [
        {
          tool: "exec_command",
          args: { cmd: "for i in a b c d; do echo item-$i; sleep 0.6; done; exit 4", workdir: proj, yield_time_ms: 1000 },
        },
        { tool: "write_stdin", args: (prev) => ({ session_id: sessionId(prev), chars: "", yield_time_ms: 5000 }) },
      ],
    });
    const first = r.mock.output(0) ?? "";
    const second = r.mock.output(1) ?? "";
    expect(first).toContain("Process running with session ID");
    expect(second).toContain("Process exited with code 4");
    expect(first + second).toMatch(/item-a\n[^]*item-b\n[^]*item-c\n[^]*item-d\n/);
    // streamed: item-a and item-d reached the client as separate pushes at least 1.5 s apart
    const at = (text: string) =>
      proxy.frames.find(
        (f) =>
          f.msg.method === "process/output" &&
          Buffer.from(String((f.msg.params as { chunk: string }).chunk), "base64")
            .toString()
            .includes(text),
      )?.at;
    const a = at("item-a");
    const d = at("item-d");
    expect(a).toBeDefined();
    expect(d! - a!).toBeGreaterThan(1500);
  }, 120_000);

  test("a tty command fed by write_stdin", async () => {
    const r = await runCodex({
      serverUrl: proxy.url,
      sandbox: "workspace-write",
      steps: ({ proj }) => [
        { tool: "exec_command", args: { cmd: "read x; echo got:$x; read y; echo got2:$y", workdir: proj, tty: true, yield_time_ms: 500 } },
        { tool: "write_stdin", args: (prev) => ({ session_id: sessionId(prev), chars: "hello\n", yield_time_ms: 1500 }) },
        { tool: "write_stdin", args: (prev) => ({ session_id: sessionId(prev), chars: "world\n", yield_time_ms: 10000 }) },
      ],
    });
    expect(r.mock.output(0)).toContain("Process running with session ID");
    expect(r.mock.output(1)).toContain("Process running with session ID");
    const all = `${r.mock.output(0)}${r.mock.output(1)}${r.mock.output(2)}`;
    expect(all).toContain("got:hello");
    expect(all).toContain("got2:world");
    expect(r.mock.output(2)).toContain("Process exited with code 0");
  }, 120_000);

  test("apply_patch adds (creating the parent), updates, moves and deletes files", async () => {
    const r = await runCodex({
      serverUrl: proxy.url,
      sandbox: "workspace-write",
      steps: () => [
        { tool: "apply_patch", input: "*** Begin Patch\n*** Add File: sub/new.txt\n+line one\n+line two\n*** End Patch\n" },
        {
          tool: "apply_patch",
          input: "*** Begin Patch\n*** Update File: sub/new.txt\n@@\n line one\n-line two\n+line 2 changed\n+line three\n*** End Patch\n",
        },
        {
          tool: "apply_patch",
          input:
            "*** Begin Patch\n*** Update File: sub/new.txt\n*** Move to: moved/renamed.txt\n@@\n line 2 changed\n-line three\n+line 3\n*** Delete File: victim.txt\n*** End Patch\n",
        },
      ],
    });
    expect(r.mock.output(0)).toContain("A sub/new.txt");
    expect(r.mock.output(1)).toContain("M sub/new.txt");
    expect(r.mock.output(2)).toContain("D victim.txt");
    expect(existsSync(join(r.proj, "sub", "new.txt"))).toBe(false);
    expect(readFileSync(join(r.proj, "moved", "renamed.txt"), "utf8")).toBe("line one\nline 2 changed\nline 3\n");
    expect(existsSync(join(r.proj, "victim.txt"))).toBe(false);
    expectNoMountPointLeftovers(r.proj);
  }, 120_000);

  test("view_image reads the image through fs/*", async () => {
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg==";
    const r = await runCodex({
      serverUrl: proxy.url,
      sandbox: "workspace-write",
      steps: ({ proj }) => {
        writeFileSync(join(proj, "red.png"), Buffer.from(png, "base64"));
        return [{ tool: "view_image", args: { path: join(proj, "red.png") } }];
      },
    });
    expect(r.mock.output(0)).toContain(`data:image/png;base64,${png}`);
  }, 120_000);

  test("a command left running at turn end is killed, with nothing left behind", async () => {
    const marker = `sleep ${3000 + Math.floor(Math.random() * 900)}`;
    const r = await runCodex({
      serverUrl: proxy.url,
      sandbox: "workspace-write",
      steps: ({ proj }) => [
        { tool: "exec_command", args: { cmd: `echo started; (${marker}) & ${marker}`, workdir: proj, yield_time_ms: 3000 } },
      ],
    });
    expect(r.mock.output(0)).toContain("started");
    expect(r.mock.output(0)).toContain("Process running with session ID");
    let left = processesWith(marker);
    for (let i = 0; i < 50 && left.length > 0; i++) {
      await Bun.sleep(100);
      left = processesWith(marker);
    }
    expect(left).toEqual([]);
    // The killed helper's mount points go with the sweep after the process closed: wait for it, then check.
    for (let i = 0; i < 50 && [".codex", ".agents", ".aws"].some((n) => existsSync(join(r.proj, n))); i++) await Bun.sleep(100);
    expectNoMountPointLeftovers(r.proj);
  }, 120_000);

  test("a connection dropped mid-command is resumed and the output is complete", async () => {
    const before = proxy.connections;
    const r = await runCodex({
      serverUrl: proxy.url,
      sandbox: "workspace-write",
      steps: ({ proj }) => [{ tool: "exec_command", args: { cmd: "for i in 1 2 3 4; do echo tick$i; sleep 0.4; done", workdir: proj } }],
      during: async () => {
        // cut once the first tick has been pushed
        for (let i = 0; i < 300; i++) {
          if (
            proxy.frames.some(
              (f) =>
                f.msg.method === "process/output" &&
                Buffer.from(String((f.msg.params as { chunk: string }).chunk), "base64")
                  .toString()
                  .includes("tick1"),
            )
          )
            break;
          await Bun.sleep(20);
        }
        proxy.cut();
      },
    });
    const out = r.mock.output(0) ?? "";
    expect(out).toContain("Process exited with code 0");
    expect(out).toContain("tick1\ntick2\ntick3\ntick4\n");
    expect(proxy.connections - before).toBeGreaterThanOrEqual(2);
    expect(
      proxy.frames.some(
        (f) =>
          f.dir === "c2s" &&
          f.msg.method === "initialize" &&
          typeof (f.msg.params as { resumeSessionId?: unknown }).resumeSessionId === "string",
      ),
    ).toBe(true);
  }, 120_000);

  test("a resume refused with -32010 while the old connection lingers is retried until it succeeds", async () => {
    const r = await runCodex({
      serverUrl: proxy.url,
      sandbox: "workspace-write",
      steps: ({ proj }) => [{ tool: "exec_command", args: { cmd: "for i in 1 2 3 4; do echo beat$i; sleep 0.4; done", workdir: proj } }],
      during: async () => {
        for (let i = 0; i < 300; i++) {
          if (
            proxy.frames.some(
              (f) =>
                f.msg.method === "process/output" &&
                Buffer.from(String((f.msg.params as { chunk: string }).chunk), "base64")
                  .toString()
                  .includes("beat1"),
            )
          )
            break;
          await Bun.sleep(20);
        }
        proxy.cut(600);
      },
    });
    const out = r.mock.output(0) ?? "";
    expect(out).toContain("Process exited with code 0");
    expect(out).toContain("beat1\nbeat2\nbeat3\nbeat4\n");
    expect(proxy.frames.some((f) => f.dir === "s2c" && (f.msg.error as { code?: number } | undefined)?.code === -32010)).toBe(true);
  }, 120_000);

  test("read-only: the project is not writable; danger-full-access: no sandbox at all", async () => {
    const ro = await runCodex({
      serverUrl: proxy.url,
      sandbox: "read-only",
      steps: ({ proj }) => [{ tool: "exec_command", args: { cmd: "touch ro.txt; echo rc=$?", workdir: proj } }],
    });
    expect(ro.mock.output(0)).toContain("Read-only file system");
    expect(existsSync(join(ro.proj, "ro.txt"))).toBe(false);
    const full = await runCodex({
      serverUrl: proxy.url,
      sandbox: "danger-full-access",
      steps: ({ proj, outside }) => [{ tool: "exec_command", args: { cmd: `echo x > ${outside}/free.txt; echo rc=$?`, workdir: proj } }],
    });
    expect(full.mock.output(0)).toContain("rc=0");
    expect(readFileSync(join(full.outside, "free.txt"), "utf8")).toBe("x\n");
    expectNoMountPointLeftovers(full.proj);
    expectNoMountPointLeftovers(ro.proj);
  }, 120_000);
});
