/**
 * The compiled executable is self-contained (issue 26): every role runs from a copy installed outside the checkout,
 * with the checkout hidden (an empty tmpfs over it) and HOME read-only, and opens nothing under the checkout or
 * under any `.bun` folder while it works (every file syscall traced by strace inside the outer bubblewrap).
 *
 * Before the fix, `serve` loaded its escalation worker (and through it `ffi/`) from `src/` of the checkout it was
 * built in, and wrote Bun's transpiler cache under `~/.bun/install/cache/`: with the checkout hidden, `serve`
 * failed with "the escalation worker could not start: … ModuleNotFound".
 *
 * Each case does real work that needs its role: a `shell` call with a denied and an escalated exec (serve under
 * bubblewrap, under Landlock through the `codex-linux-sandbox` stage, and with `--intercept-all` through the
 * `codex-execve-wrapper` executable), `sandbox linux`, `codex-linux-sandbox`, `codex-fs`, and `exec-server` running
 * a sandboxed process and a sandboxed file write.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { signalDescendants } from "../../src/escalate/worker/escalated-child.ts";
import { ExecClient, workspaceWrite } from "../exec-server/client.ts";
import { startServer } from "../exec-server/codex-harness.ts";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { startServe } from "../helpers/mcp.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { patchedShell, shellsMissing } from "../helpers/shells.ts";
import { assertOutside, CONF_BASE } from "../helpers/test-dirs.ts";

const ROLES = ["codex-execve-wrapper", "codex-linux-sandbox", "codex-fs"];

/** A copy of what `scripts/install.sh` builds, outside the checkout: the executable, its role links, the shells. */
function installCopy(): string {
  const dir = mkdtempSync(join(CONF_BASE, "install-"));
  copyFileSync(ensureBinary(), join(dir, "shellmcp"));
  chmodSync(join(dir, "shellmcp"), 0o755);
  mkdirSync(join(dir, "shells"));
  for (const s of ["bash", "zsh"] as const) {
    copyFileSync(patchedShell(s), join(dir, "shells", s));
    chmodSync(join(dir, "shells", s), 0o755);
  }
  for (const r of ROLES) symlinkSync("shellmcp", join(dir, r));
  return dir;
}

/** A fresh project (a git repository with a file to delete), a read-only HOME with rules, and a trace file. */
function fixture(): { ws: string; home: string; trace: string } {
  const base = mkdtempSync(join(CONF_BASE, "selfcontained-"));
  const ws = assertOutside(join(base, "ws"));
  const home = join(base, "home");
  mkdirSync(ws);
  mkdirSync(join(home, "rules"), { recursive: true });
  writeFileSync(
    join(home, "rules", "default.rules"),
    'prefix_rule(pattern=["rm"], decision="forbidden")\nprefix_rule(pattern=["touch"], decision="allow")\n',
  );
  Bun.spawnSync(["git", "init", "-q", ws]);
  writeFileSync(join(ws, "victim"), "keep me\n");
  return { ws, home, trace: join(base, "trace.txt") };
}

/**
 * argv that runs `argv` with the checkout hidden under an empty tmpfs, `home` and the real HOME read-only, and
 * every file syscall of it and its children written to `trace`.
 */
function hidden(trace: string, home: string, argv: string[]): string[] {
  const ro = [...new Set([home, homedir()])].filter((d) => existsSync(d)).flatMap((d) => ["--ro-bind", d, d]);
  return ["bwrap", "--dev-bind", "/", "/", "--tmpfs", ROOT, ...ro, "--", "strace", "-f", "-qq", "-e", "trace=%file", "-o", trace, ...argv];
}

/** Lines of a trace that name a path under the checkout, or a file under a `.bun` folder. */
function forbiddenOpens(trace: string): string[] {
  const text = readFileSync(trace, "utf8");
  expect(text.length).toBeGreaterThan(0);
  // A `.bun` folder only listed (O_DIRECTORY) is the bubblewrap plan's bounded search for nested repositories under
  // writable roots such as /tmp (docs/sandbox.md); the folder itself stat'ed or opened O_PATH is the Landlock stage
  // granting reads beside a hidden credential store in HOME (src/sandbox/secrets.ts: a rule per sibling, no byte
  // read). Loading code from one would open a file in it.
  const touchesOnly = (l: string) => l.includes("O_DIRECTORY") || (/\/\.bun"/.test(l) && (l.includes("O_PATH") || l.includes("statx(")));
  return text.split("\n").filter((l) => l.includes(`"${ROOT}/`) || l.includes(`"${ROOT}"`) || (/\/\.bun(\/|")/.test(l) && !touchesOnly(l)));
}

const missing = toolMissing("bwrap", "strace", "git") ?? shellsMissing();

describe.skipIf(skipWithout("self-contained executable", missing))("the executable runs without its checkout", () => {
  const install = missing === undefined ? installCopy() : "";
  const env = { PATH: "/usr/local/bin:/usr/bin:/bin", LC_ALL: "C" };
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of closers) await c();
  });

  for (const [name, args] of [
    ["serve (bubblewrap)", []],
    ["serve --sandbox-backend landlock (codex-linux-sandbox stage)", ["--sandbox-backend", "landlock"]],
    ["serve --intercept-all (codex-execve-wrapper executable)", ["--intercept-all"]],
  ] as const) {
    test(`${name}: a denied and an escalated exec, nothing read from the checkout or ~/.bun`, async () => {
      const { ws, home, trace } = fixture();
      const s = await startServe({
        command: hidden(trace, home, [join(install, "shellmcp")]),
        args: [...args],
        codexHome: home,
        cwd: ws,
        env,
      });
      closers.push(() => s.close());
      const { out, isError } = await s.shell({ command: "rm -f victim; touch escalated; echo done", workdir: ws });
      // The rule's refusal makes the result a tool error (docs/blocked-actions.md, "isError"), and says so.
      expect({ isError, out: out.output }).toMatchObject({ isError: true, out: expect.stringContaining("done") });
      expect(out.output).toContain("shellmcp: blocked (rule) rm -f victim");
      // rm is forbidden: the file is still there, and the call says why.
      expect(out.output).toContain("forbidden");
      expect(readFileSync(join(ws, "victim"), "utf8")).toBe("keep me\n");
      // touch is allowed: it ran outside the read-only sandbox and created the file.
      expect(existsSync(join(ws, "escalated"))).toBe(true);
      await s.close();
      expect(forbiddenOpens(trace)).toEqual([]);
    });
  }

  test("sandbox linux, codex-linux-sandbox and codex-fs: nothing read from the checkout or ~/.bun", () => {
    const { ws, home, trace } = fixture();
    const runs: [string[], string | undefined, (stdout: string) => void][] = [
      [
        [
          join(install, "shellmcp"),
          "sandbox",
          "linux",
          "--sandbox",
          "workspace-write",
          "--",
          "/bin/sh",
          "-c",
          "echo sandboxed > made; cat made",
        ],
        undefined,
        (o) => expect(o).toBe("sandboxed\n"),
      ],
      [
        [
          join(install, "codex-linux-sandbox"),
          "--sandbox-policy-cwd",
          ws,
          "--sandbox-policy",
          '{"type":"read-only"}',
          "--",
          "/bin/sh",
          "-c",
          "echo ro; touch x 2>/dev/null || echo refused",
        ],
        undefined,
        (o) => expect(o).toBe("ro\nrefused\n"),
      ],
      [
        [join(install, "codex-fs")],
        JSON.stringify({ operation: "fs/readFile", params: { path: join(ws, "victim") } }),
        (o) =>
          expect(JSON.parse(o)).toMatchObject({
            status: "ok",
            payload: { response: { dataBase64: Buffer.from("keep me\n").toString("base64") } },
          }),
      ],
    ];
    for (const [argv, stdin, check] of runs) {
      const r = Bun.spawnSync(hidden(trace, home, argv), {
        cwd: ws,
        env: { ...env, HOME: home },
        stdin: stdin === undefined ? "ignore" : Buffer.from(stdin),
        stderr: "pipe",
      });
      expect({ argv: argv.slice(0, 2), code: r.exitCode, err: r.stderr.toString() }).toMatchObject({ code: 0 });
      check(r.stdout.toString());
      expect(forbiddenOpens(trace)).toEqual([]);
    }
  });

  test("exec-server: a sandboxed process and a sandboxed write (codex-fs), nothing read from the checkout or ~/.bun", async () => {
    const { ws, home, trace } = fixture();
    const server = await startServer(hidden(trace, home, [join(install, "shellmcp"), "exec-server"]), { ...env, HOME: home }, ws);
    closers.push(async () => {
      signalDescendants(server.proc.pid, 15);
      await server.stop();
    });
    const c = await ExecClient.connect(server.url);
    await c.init();
    await c.call("process/start", {
      processId: "p",
      argv: ["/bin/sh", "-c", "echo hello > out.txt; cat out.txt"],
      cwd: ws,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: workspaceWrite(ws),
    });
    expect((await c.collect("p")).output).toBe("hello\n");
    const data = Buffer.from("written\n").toString("base64");
    expect(await c.request("fs/writeFile", { path: join(ws, "w.txt"), dataBase64: data, sandbox: workspaceWrite(ws) })).toHaveProperty(
      "result",
      {},
    );
    expect(readFileSync(join(ws, "w.txt"), "utf8")).toBe("written\n");
    c.close();
    // Stop the server itself: SIGTERM to bwrap alone would leave strace and the traced server running.
    signalDescendants(server.proc.pid, 15);
    await server.stop();
    expect(forbiddenOpens(trace)).toEqual([]);
  });
});
