/**
 * Issue 30, item 3: `shellmcp exec-server` is authenticated by default. Started with no flag at all, it generates
 * a capability token and says it once on stderr, writing it to no file (a file would be readable by every
 * sandboxed command of this user); a second, unprivileged local user (created here with useradd, removed after) is refused (HTTP
 * 401) on the websocket upgrade, so no method runs for it — the same user gets in with `--ws-auth none`, so the
 * refusal is the token's doing. A client with the token runs commands; the real Codex 0.169 client presents it
 * through `auth_bearer_token`. `--ws-token-out FILE` writes it to a `0600` file. `--listen stdio` needs no token.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import type { Subprocess } from "bun";
import { ensureBinary, run } from "../helpers/binary.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { ExecClient } from "../exec-server/client.ts";
import { CODEX, runCodex, withCodexHome } from "../exec-server/codex-harness.ts";

const procs: Subprocess[] = [];
afterAll(async () => {
  for (const p of procs) {
    p.kill("SIGTERM");
    await p.exited;
  }
});

/** Start `shellmcp exec-server ARGS` as this process's user; its URL and all stderr read so far. */
async function start(args: string[]): Promise<{ proc: Subprocess<"ignore", "pipe", "pipe">; url: string; stderr: () => Promise<string> }> {
  const proc = Bun.spawn([ensureBinary(), "exec-server", ...args], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: withCodexHome(),
  });
  procs.push(proc);
  const dec = new TextDecoder();
  const out = proc.stdout.getReader();
  let buf = "";
  while (!buf.includes("\n")) {
    const { value, done } = await out.read();
    if (done) throw new Error(`exec-server exited: ${await new Response(proc.stderr).text()}`);
    buf += dec.decode(value);
  }
  const errReader = proc.stderr.getReader();
  let err = "";
  return {
    proc,
    url: buf.split("\n")[0]!.trim(),
    // The notice is written before the URL: once the URL is read, it is in the pipe.
    async stderr() {
      while (!err.includes("\n")) {
        const { value, done } = await errReader.read();
        if (done) break;
        err += dec.decode(value);
      }
      return err;
    },
  };
}

const maybeUser = skipWithout(
  "exec-server default-auth suite (second local user)",
  process.getuid?.() === 0 ? toolMissing("useradd", "userdel", "setpriv", "curl") : "needs root to add a user",
)
  ? describe.skip
  : describe;

maybeUser("exec-server with no auth flag: a second local user is refused", () => {
  test("refused without the token, cannot read it; the token opens it; --ws-auth none would not refuse", async () => {
    const user = `smh4${process.pid % 100000}`;
    expect(run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", user]).exitCode).toBe(0);
    try {
      const uid = Number(run(["id", "-u", user]).stdout.trim());
      const gid = Number(run(["id", "-g", user]).stdout.trim());
      const asUser = (argv: string[]) => run(["setpriv", `--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--", ...argv]);
      expect(asUser(["id", "-u"]).stdout.trim()).toBe(String(uid));
      /** HTTP status of a websocket upgrade sent by that user (extra: curl arguments, e.g. headers). */
      const upgradeAs = (url: string, extra: string[] = []) =>
        asUser([
          ...["curl", "-s", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}"],
          ...["-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 13"],
          ...["-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", ...extra, url.replace(/^ws:/, "http:") + "/"],
        ]).stdout;

      const s = await start([]);
      expect(upgradeAs(s.url)).toBe("401");
      expect(upgradeAs(s.url, ["-H", "Authorization: Bearer guessed"])).toBe("401");

      // The token is said once on stderr (only the starter sees it) and written to no file: any sandboxed command
      // of this user could read a file (issue 34 review, test/security/exec-server-from-sandbox.test.ts).
      const notice = await s.stderr();
      const token = /Authorization: Bearer ([A-Za-z0-9_-]+)"/.exec(notice)?.[1];
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(notice).toContain("written to no file");

      // With the token: the same user's upgrade is accepted, and a client runs a command.
      expect(upgradeAs(s.url, ["-H", `Authorization: Bearer ${token}`])).toBe("101");
      await expect(ExecClient.connect(s.url)).rejects.toThrow();
      const c = await ExecClient.connect(s.url, { authorization: `Bearer ${token}` });
      await c.init();
      await c.call("process/start", { processId: "p", argv: ["/bin/echo", "with-token"], cwd: "/", env: {}, tty: false });
      expect((await c.collect("p")).output).toBe("with-token\n");
      c.close();

      // The real Codex 0.169 as that user, without the token: no execution environment, nothing ran.
      if (CODEX !== undefined) {
        const steps = ({ proj }: { proj: string }) => [
          { tool: "exec_command" as const, args: { cmd: "echo ran-as-uid=$(id -u)", workdir: proj } },
        ];
        const shut = await runCodex({
          serverUrl: s.url,
          sandbox: "danger-full-access",
          steps,
          environmentsToml: () => `default = "box"\ninclude_local = false\n\n[[environments]]\nid = "box"\nurl = "${s.url}"\n`,
          asUser: { uid, gid },
        });
        expect(shut.mock.output(0)).not.toContain("ran-as-uid=");
        expect(shut.mock.output(0)).toContain("No usable execution environment");
        const ok = await runCodex({
          serverUrl: s.url,
          sandbox: "danger-full-access",
          steps,
          environmentsToml: () =>
            `default = "box"\ninclude_local = false\n\n[[environments]]\nid = "box"\nurl = "${s.url}"\nauth_bearer_token = "${token}"\n`,
        });
        expect(ok.mock.output(0)).toContain(`ran-as-uid=${process.getuid?.()}`);
      }

      s.proc.kill("SIGTERM");
      await s.proc.exited;

      // Authentication turned off knowingly: the same user gets in.
      const open = await start(["--ws-auth", "none"]);
      expect(upgradeAs(open.url)).toBe("101");
    } finally {
      run(["userdel", user]);
    }
  }, 120_000);
});

describe("exec-server auth flags", () => {
  test("--ws-auth none with a token flag, --ws-token-out with --ws-auth, an unknown mode: refused", () => {
    const bin = ensureBinary();
    expect(run([bin, "exec-server", "--ws-auth", "none", "--ws-token-sha256", "a".repeat(64)]).stderr).toContain(
      "`--ws-auth none` takes no other websocket auth flag",
    );
    expect(run([bin, "exec-server", "--ws-auth", "none", "--ws-token-out", "/nonexistent/t"]).stderr).toContain(
      "`--ws-token-out` names where the generated token is written",
    );
    expect(run([bin, "exec-server", "--ws-auth", "open"]).stderr).toContain("expected 'capability-token', 'signed-bearer-token' or 'none'");
    // A non-loopback address needs authentication the user chose (the generated token is for this machine).
    const r = run([bin, "exec-server", "--listen", "ws://0.0.0.0:0", "--ws-auth", "none"]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("without authentication you chose");
  });

  test("--ws-token-out PATH: a link there is replaced, not followed; the file is 0600 and removed at exit", async () => {
    const dir = mkdtempSync(join(CONF_BASE, "h4-token-out-"));
    const victim = join(dir, "victim");
    writeFileSync(victim, "untouched\n");
    const out = join(dir, "token");
    symlinkSync(victim, out);
    const s = await start(["--ws-token-out", out]);
    expect(await s.stderr()).toContain(`the token is in ${out} (mode 0600`);
    expect(lstatSync(out).isFile()).toBe(true);
    expect(lstatSync(out).mode & 0o777).toBe(0o600);
    expect(readFileSync(victim, "utf8")).toBe("untouched\n");
    const token = readFileSync(out, "utf8").trim();
    const c = await ExecClient.connect(s.url, { authorization: `Bearer ${token}` });
    await c.init();
    c.close();
    s.proc.kill("SIGTERM");
    await s.proc.exited;
    expect(existsSync(out)).toBe(false);
    rmSync(dir, { recursive: true, force: true });
  });

  test("--listen stdio needs no token (only its parent speaks to it)", async () => {
    const p = Bun.spawn([ensureBinary(), "exec-server", "--listen", "stdio"], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      env: withCodexHome(),
    });
    await p.stdin.write(`${JSON.stringify({ id: 1, method: "initialize", params: { clientName: "t", resumeSessionId: null } })}\n`);
    await p.stdin.flush();
    const reader = p.stdout.getReader();
    const { value } = await reader.read();
    expect(JSON.parse(new TextDecoder().decode(value).split("\n")[0]!)).toMatchObject({ id: 1, result: { sessionId: expect.any(String) } });
    await p.stdin.end();
    await p.exited;
    expect(await new Response(p.stderr).text()).not.toContain("token");
  });
});
