/**
 * Issue 32, the local approver (docs/approvals.md), through the compiled binary: `serve --approver` with a real MCP
 * SDK client that declares no elicitation capability, and `shellmcp approvals` run as a person would, beside it.
 *
 * - approve: the prompted program ran (judged on disk: the file it creates exists);
 * - deny: nothing ran (the file does not exist), the model reads "User declined execution";
 * - nobody answers in time: a clear Deny naming `shellmcp approvals`, nothing ran, the request is gone from the
 *   list, and once the server ends no socket is left;
 * - the attack: a command inside the call's own sandbox (network on, so its seccomp filter lets it connect; both
 *   backends) connects to the approver's socket and tries to approve its own pending prompt, with a raw client and
 *   with `shellmcp approvals --approve` itself: refused, the prompt stays pending, a person then denies it and
 *   nothing ran. Network off: the connect itself fails.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { closeAll, confDir, requirePrograms, serveWithPid, type AttackSession } from "../helpers/attack.ts";
import { agentNetworkConfig } from "../helpers/network.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const RULES = 'prefix_rule(pattern=["touch"], decision="prompt")\n';

/** `shellmcp approvals ARGS` as the person beside the client runs it (same CODEX_HOME, no XDG_RUNTIME_DIR). */
function approvals(codexHome: string, ...args: string[]): { code: number; out: string; err: string } {
  const r = Bun.spawnSync([ensureBinary(), "approvals", ...args], {
    env: { PATH: "/usr/bin:/bin", HOME: codexHome, CODEX_HOME: codexHome, ...approverEnv },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() };
}

/** More environment for `shellmcp approvals` (a test sets XDG_RUNTIME_DIR, which the server did not get). */
let approverEnv: Record<string, string> = {};

/** The requests `approvals --list --json` shows. */
function listed(codexHome: string): { id: string; message: string; always: boolean }[] {
  const r = approvals(codexHome, "--list", "--json");
  expect(r.code).toBe(0);
  return r.out
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { id: string; message: string; always: boolean });
}

/** Wait until exactly one request is listed, and return it. */
async function oneRequest(codexHome: string): Promise<{ id: string; message: string; always: boolean }> {
  const until = Date.now() + 20_000;
  for (;;) {
    const l = listed(codexHome);
    if (l.length === 1) return l[0]!;
    if (l.length > 1 || Date.now() > until) throw new Error(`expected one waiting request, got ${JSON.stringify(l)}`);
    await Bun.sleep(200);
  }
}

/** Wait until the server of `s` listens (its set-up runs after the early `initialize` answer). */
async function socketOf(s: AttackSession): Promise<string> {
  const p = join(s.codexHome, "approvals", `${s.pid}.sock`);
  const until = Date.now() + 20_000;
  while (!existsSync(p) && Date.now() < until) await Bun.sleep(50);
  expect(existsSync(p)).toBe(true);
  return p;
}

async function serve(ws: string, extra: string[] = [], config?: string, codexHome = confDir("appr-home")): Promise<AttackSession> {
  if (config !== undefined) writeFileSync(join(codexHome, "config.toml"), config);
  return serveWithPid({ codexHome, rules: RULES, args: ["--sandbox", "workspace-write", "--cd", ws, "--approver", ...extra] });
}

afterAll(closeAll);

describe.skipIf(skipWithout("local approver suite", shellsMissing()))("issue 32: the local approver", () => {
  requirePrograms("python3");

  test("approve: the prompted program runs (on disk), and the question is the elicitation's", async () => {
    const ws = confDir("appr-ws");
    const s = await serve(ws);
    const call = s.shell({ command: `touch ${ws}/approved; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
    const r = await oneRequest(s.codexHome);
    expect(r.message).toBe(`Allow agent to run \`/usr/bin/touch ${ws}/approved\` in \`${ws}\`?`);
    expect(r.always).toBe(false); // a prompt rule asks: no "always", as the elicitation's form
    expect(existsSync(join(ws, "approved"))).toBe(false);
    // The person's terminal has an XDG_RUNTIME_DIR the server was not given (MCP clients pass a reduced
    // environment): the approver looks in CODEX_HOME's folder too.
    const xdg = confDir("xdg");
    chmodSync(xdg, 0o700);
    approverEnv = { XDG_RUNTIME_DIR: xdg };
    const a = approvals(s.codexHome, "--approve", r.id);
    approverEnv = {};
    expect(a).toMatchObject({ code: 0, out: `approved once: ${r.id}\n` });
    const { out } = await call;
    expect(out.output).toContain("rc=0");
    expect(existsSync(join(ws, "approved"))).toBe(true);
    expect(listed(s.codexHome)).toEqual([]);
    // Answered once: the same request again is not taken.
    expect(approvals(s.codexHome, "--deny", r.id)).toMatchObject({ code: 1 });
  }, 60_000);

  test("deny: nothing runs, the model reads that the user declined", async () => {
    const ws = confDir("appr-ws");
    const s = await serve(ws);
    const call = s.shell({ command: `touch ${ws}/denied; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
    const r = await oneRequest(s.codexHome);
    expect(approvals(s.codexHome, "--always", r.id)).toMatchObject({ code: 1 }); // not offered for a prompt rule
    expect(approvals(s.codexHome, "--deny", r.id)).toMatchObject({ code: 0, out: `denied: ${r.id}\n` });
    const { out } = await call;
    expect(out.output).toContain("Execution denied: User declined execution");
    expect(out.output).toContain("rc=1");
    expect(existsSync(join(ws, "denied"))).toBe(false);
  }, 60_000);

  test("interactive, in a terminal, live (issue 41): a request appears, one answered elsewhere disappears, one key press answers", async () => {
    const ws = confDir("appr-ws");
    const s = await serve(ws);
    await socketOf(s);
    // `script` gives `shellmcp approvals` a terminal, as a person's; started before any request waits.
    const p = Bun.spawn(["script", "-q", "-e", "-c", `${ensureBinary()} approvals`, "/dev/null"], {
      env: { PATH: "/usr/bin:/bin", HOME: s.codexHome, CODEX_HOME: s.codexHome, TERM: "dumb" },
      stdin: "pipe",
      stdout: "pipe",
    });
    let seen = "";
    const reader = p.stdout.getReader();
    /** Read the terminal until `text` appears after offset `from`; returns where it ends. */
    const until = async (text: string, from = 0): Promise<number> => {
      const deadline = Date.now() + 20_000;
      while (!seen.slice(from).includes(text) && Date.now() < deadline) {
        const { value, done } = await Promise.race([
          reader.read(),
          Bun.sleep(Math.max(0, deadline - Date.now())).then(() => ({ value: undefined, done: true })),
        ]);
        if (done) break;
        seen += new TextDecoder().decode(value);
      }
      expect(seen.slice(from)).toContain(text);
      return seen.indexOf(text, from) + text.length;
    };
    try {
      let at = await until("no request is waiting");
      // A request appears while it watches.
      const first = s.shell({ command: `touch ${ws}/elsewhere; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
      at = await until("[o]nce, [d]eny, [s]kip, [q]uit? ", at);
      expect(seen).toContain(`Allow agent to run \`/usr/bin/touch ${ws}/elsewhere\` in \`${ws}\`?`);
      const r1 = (await oneRequest(s.codexHome)).id;
      // Answered elsewhere: it disappears from the screen, with a line saying so.
      expect(approvals(s.codexHome, "--deny", r1)).toMatchObject({ code: 0 });
      at = await until(`[${r1}] denied elsewhere`, at);
      at = await until("no request is waiting", at);
      expect((await first).out.output).toContain("User declined execution");
      // A new one, answered by one key press (no Enter).
      const second = s.shell({ command: `touch ${ws}/by-key; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
      at = await until(`touch ${ws}/by-key`, at);
      at = await until("[q]uit? ", at);
      await p.stdin.write("o");
      await p.stdin.flush();
      await until("approved: ", at);
      const { out } = await second;
      expect(out.output).toContain("rc=0");
      expect(existsSync(join(ws, "by-key"))).toBe(true);
      expect(existsSync(join(ws, "elsewhere"))).toBe(false);
    } finally {
      p.kill("SIGTERM");
      await p.exited;
    }
  }, 90_000);

  const inspector = join(ROOT, "node_modules", ".bin", "mcp-inspector");
  test.skipIf(skipWithout("approver with the MCP Inspector", existsSync(inspector) ? undefined : "MCP Inspector not installed (npm ci)"))(
    "a third-party client without elicitation, the MCP Inspector's CLI: approved through the approver, the program ran",
    async () => {
      const home = confDir("appr-insp-home");
      mkdirSync(join(home, "rules"));
      writeFileSync(join(home, "rules", "default.rules"), RULES);
      const ws = confDir("appr-ws");
      const bin = ensureBinary();
      const p = Bun.spawn(
        [
          inspector,
          "--cli",
          "-e",
          `CODEX_HOME=${home}`,
          bin,
          "serve",
          "--approver",
          "--sandbox",
          "workspace-write",
          "--cd",
          ws,
          "--method",
          "tools/call",
          "--tool-name",
          "shell",
          "--tool-arg",
          `command=touch ${ws}/by-inspector; echo rc=$?`,
          "--tool-arg",
          `workdir=${ws}`,
          "--tool-arg",
          "timeout_ms=30000",
        ],
        { stdout: "pipe", stderr: "pipe", env: { ...process.env } },
      );
      try {
        const r = await oneRequest(home);
        expect(approvals(home, "--approve", r.id)).toMatchObject({ code: 0 });
        const out = await new Response(p.stdout).text();
        expect(await p.exited).toBe(0);
        const text = (JSON.parse(out) as { content: { text: string }[] }).content[0]!.text;
        expect(JSON.parse(text)).toMatchObject({ exit_code: 0, output: "rc=0\n" });
        expect(existsSync(join(ws, "by-inspector"))).toBe(true);
      } finally {
        p.kill();
        await p.exited;
      }
    },
    60_000,
  );

  test("always (where the form offers it: a prompt of the danger heuristic): it runs, and an allow rule is added", async () => {
    const ws = confDir("appr-ws");
    writeFileSync(join(ws, "victim"), "x");
    const s = await serve(ws);
    const call = s.shell({ command: `rm -f ${ws}/victim; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
    const r = await oneRequest(s.codexHome);
    expect(r.always).toBe(true);
    expect(approvals(s.codexHome, "--always", r.id)).toMatchObject({ code: 0, out: `approved always: ${r.id}\n` });
    const { out } = await call;
    expect(out.output).toContain("rc=0");
    expect(existsSync(join(ws, "victim"))).toBe(false);
    expect(readFileSync(join(s.codexHome, "rules", "default.rules"), "utf8")).toContain('prefix_rule(pattern=["rm", "-f"');
  }, 60_000);

  test("a network question (proxy mode, unknown host): host, port and protocol listed apart; once lets it through, deny refuses it", async () => {
    const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`hello ${req.headers.get("host")}\n`) });
    try {
      const ws = confDir("appr-ws");
      const s = await serve(ws, [], agentNetworkConfig({ allowLocalBinding: true, domains: { "allowed.test": "allow" } }));
      // Through the proxy even for a local name (the proxy mode's NO_PROXY names localhost).
      const curl = `curl -sS --noproxy '' -x "$HTTP_PROXY" -w ' %{http_code}\\n' http://localhost:${upstream.port}/`;
      const first = s.shell({ command: `${curl}; ${curl}`, workdir: ws, timeout_ms: 30_000 });
      const r = await oneRequest(s.codexHome);
      expect(r).toMatchObject({
        message: `Allow network access to localhost:${upstream.port}? (the command's http request is not in the network allow list)`,
        always: true,
        network: { host: "localhost", port: upstream.port, protocol: "http" },
      });
      const shown = approvals(s.codexHome, "--list");
      expect(shown.out).toContain(`host: localhost  port: ${upstream.port}  protocol: http`);
      expect(shown.out).toContain("answers: once, session, always, deny");
      expect(approvals(s.codexHome, "--approve", r.id)).toMatchObject({ code: 0, out: `approved once: ${r.id}\n` });
      // Once: this call, both requests (asked once).
      expect((await first).out.output).toBe(`hello localhost:${upstream.port}\n 200\nhello localhost:${upstream.port}\n 200\n`);
      const second = s.shell({ command: curl, workdir: ws, timeout_ms: 30_000 });
      const r2 = await oneRequest(s.codexHome);
      expect(r2.id).not.toBe(r.id);
      expect(approvals(s.codexHome, "--deny", r2.id)).toMatchObject({ code: 0 });
      const out = (await second).out.output;
      expect(out).toContain(" 403");
      expect(out).toContain(`localhost:${upstream.port} (http): not_allowed`);
      expect(out).not.toContain("hello");
    } finally {
      await upstream.stop(true);
    }
  }, 60_000);

  test("two servers, one approver: both requests listed, each answered on its own server", async () => {
    // Prompts of the danger heuristic (`rm -f`): approved, they run inside the call's sandbox, no room involved.
    const ws = confDir("appr-ws");
    writeFileSync(join(ws, "victim-a"), "a");
    writeFileSync(join(ws, "victim-b"), "b");
    const a = await serve(ws);
    const b = await serve(ws, [], undefined, a.codexHome);
    const ca = a.shell({ command: `rm -f ${ws}/victim-a; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
    const cb = b.shell({ command: `rm -f ${ws}/victim-b; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
    const until = Date.now() + 40_000;
    let l = listed(a.codexHome);
    while (l.length < 2 && Date.now() < until) {
      await Bun.sleep(200);
      l = listed(a.codexHome);
    }
    if (l.length < 2) {
      // Say what the calls did and what the servers logged: a call that ended without asking shows here.
      const settled = async (p: Promise<unknown>) =>
        Promise.race([p.then((r) => JSON.stringify(r)), Bun.sleep(1_000).then(() => "still running")]);
      console.error("a:", await settled(ca), a.stderr().slice(-2000), "\nb:", await settled(cb), b.stderr().slice(-2000));
    }
    expect(l.map((r) => r.id).sort()).toEqual([`${a.pid}-1`, `${b.pid}-1`].sort());
    expect(approvals(a.codexHome, "--deny", `${a.pid}-1`)).toMatchObject({ code: 0 });
    expect(approvals(a.codexHome, "--approve", `${b.pid}-1`)).toMatchObject({ code: 0 });
    expect((await ca).out.output).toContain("User declined execution");
    expect((await cb).out.output).toContain("rc=0");
    expect(existsSync(join(ws, "victim-a"))).toBe(true);
    expect(existsSync(join(ws, "victim-b"))).toBe(false);
  }, 60_000);

  test("the client goes away while a request waits: the server ends, its socket with it, nothing ran", async () => {
    const ws = confDir("appr-ws");
    const s = await serve(ws);
    const call = s.shell({ command: `touch ${ws}/orphan; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
    call.catch(() => undefined); // the connection closes under it
    await oneRequest(s.codexHome);
    const sock = join(s.codexHome, "approvals", `${s.pid}.sock`);
    expect(existsSync(sock)).toBe(true);
    await s.close();
    const until = Date.now() + 10_000;
    while ((existsSync(sock) || Bun.spawnSync(["kill", "-0", String(s.pid)]).exitCode === 0) && Date.now() < until) await Bun.sleep(100);
    expect(existsSync(sock)).toBe(false);
    expect(Bun.spawnSync(["kill", "-0", String(s.pid)]).exitCode).not.toBe(0);
    expect(listed(s.codexHome)).toEqual([]);
    expect(existsSync(join(ws, "orphan"))).toBe(false);
  }, 60_000);

  test("nobody answers in time: a clear Deny, nothing ran, nothing left behind", async () => {
    const ws = confDir("appr-ws");
    const s = await serve(ws, ["--approver-timeout-ms", "4000"]);
    const dir = join(s.codexHome, "approvals");
    await socketOf(s);
    expect(readdirSync(dir)).toEqual([`${s.pid}.sock`]);
    const t0 = Date.now();
    // The call's timeout still covers the login shell's start and the escalation (3 s: ample on a loaded machine).
    const { out } = await s.shell({ command: `touch ${ws}/late; echo rc=$?`, workdir: ws, timeout_ms: 3000 });
    const took = Date.now() - t0;
    // What the model read first (a failure below then shows it), then the timing.
    expect(out.output).toContain("nobody answered within 4 s");
    // The call's own timeout (3 s) was paused while the approver waited (4 s): the command was not killed.
    expect(out.timed_out).toBe(false);
    expect(took).toBeGreaterThanOrEqual(4000);
    expect(out.output).not.toContain("escalation policy error"); // a Deny with the approver's reason, not a failure
    expect(out.output).toContain("run `shellmcp approvals`");
    expect(out.output).toContain("rc=1");
    expect(existsSync(join(ws, "late"))).toBe(false);
    expect(listed(s.codexHome)).toEqual([]);
    await s.close();
    // The server removed its socket when it ended.
    const until = Date.now() + 5000;
    while (readdirSync(dir).length > 0 && Date.now() < until) await Bun.sleep(100);
    expect(readdirSync(dir)).toEqual([]);
  }, 60_000);

  test.skipIf(process.getuid!() !== 0)(
    "a user who is not root: `serve` is not dumpable, yet `shellmcp approvals` (the same user) can judge it and approve",
    async () => {
      const name = `appr${process.pid}`;
      expect(Bun.spawnSync(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name]).exitCode).toBe(0);
      let s: AttackSession | undefined;
      try {
        const id = (f: string) => Number(Bun.spawnSync(["id", f, name]).stdout.toString().trim());
        const as = ["setpriv", `--reuid=${id("-u")}`, `--regid=${id("-g")}`, "--clear-groups"];
        const home = confDir("appr-user-home");
        const ws = confDir("appr-user-ws");
        mkdirSync(join(home, "rules"));
        writeFileSync(join(home, "rules", "default.rules"), RULES);
        for (const d of [home, ws, join(home, "rules"), join(home, "rules", "default.rules")]) chownSync(d, id("-u"), id("-g"));
        s = await serveWithPid({
          codexHome: home,
          command: [...as, ensureBinary()],
          // Started in its workspace: the checkout (this process's folder) may be closed to that user (under /root,
          // in a `mktemp -d` folder), and `serve` runs its start-up shell check where it was started.
          cwd: ws,
          args: ["--sandbox", "workspace-write", "--cd", ws, "--sandbox-backend", "landlock", "--approver"],
        });
        const call = s.shell({ command: `touch ${ws}/by-user; echo rc=$?`, workdir: ws, timeout_ms: 30_000 });
        call.catch(() => undefined); // awaited below; a failure before that must not surface between tests
        const env = { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home };
        const asUser = (...args: string[]) => {
          const r = Bun.spawnSync([...as, ensureBinary(), ...args], { cwd: ws, env, stdout: "pipe", stderr: "pipe" });
          return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
        };
        let list = asUser("approvals", "--list", "--json");
        const until = Date.now() + 20_000;
        while (list.out === "" && Date.now() < until) {
          await Bun.sleep(200);
          list = asUser("approvals", "--list", "--json");
        }
        expect(list.out, `approvals --list said nothing; its stderr: ${list.err}; the server's: ${s.stderr()}`).not.toBe("");
        const req = JSON.parse(list.out.split("\n")[0]!) as { id: string; server: { pid: number } };
        // The server's namespaces are hidden from its own user (it is not dumpable): the check used the fallback.
        const ns = Bun.spawnSync([...as, "readlink", "-v", `/proc/${req.server.pid}/ns/user`], { stderr: "pipe" });
        expect(ns.exitCode).not.toBe(0);
        expect(ns.stderr.toString()).toContain("Permission denied");
        expect(asUser("approvals", "--approve", req.id)).toMatchObject({ code: 0 });
        const { out } = await call;
        expect(out.output).toContain("rc=0");
        expect(existsSync(join(ws, "by-user"))).toBe(true);
      } finally {
        // The user goes once its server has ended (userdel refuses a user with processes).
        if (s !== undefined) {
          await s.close().catch(() => undefined);
          const until = Date.now() + 5000;
          while (Date.now() < until && Bun.spawnSync(["kill", "-0", String(s.pid)]).exitCode === 0) await Bun.sleep(50);
        }
        expect(Bun.spawnSync(["userdel", name]).exitCode).toBe(0);
      }
    },
    60_000,
  );

  /** A raw client that skips every check of `shellmcp approvals`: connect, say yes to ids 1-3, print what it got. */
  const RAW_ATTACK = `
import socket, os, json, sys, glob
found = sorted(glob.glob(sys.argv[1] + "/*.sock"))
print("FOUND", len(found))
for p in found:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(p)
    except Exception as e:
        print("CONNECT-FAILED", e); continue
    print("CONNECTED")
    pid = os.path.basename(p).split(".")[0]
    try:
        for n in range(1, 4):
            s.sendall((json.dumps({"type": "answer", "id": pid + "-" + str(n), "decision": "once"}) + "\\n").encode())
    except Exception as e:
        print("SEND-FAILED", e)
    s.settimeout(3)
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            data += b
    except Exception as e:
        print("RECV-FAILED", e)
    print("GOT", data.decode())
`;

  for (const backend of ["bwrap", "landlock"] as const)
    for (const network of ["on", "off", "proxy"] as const)
      test(`attack (${backend}, network ${network}): a command of the call cannot approve its own prompt`, async () => {
        const ws = confDir("appr-ws");
        // Proxy mode: the server's configuration gives a client without sandbox state the network through its proxy.
        const s = await serve(
          ws,
          ["--sandbox-backend", backend, "--approver-timeout-ms", "100000"],
          network === "proxy" ? agentNetworkConfig({ allowLocalBinding: false, domains: { "allowed.test": "allow" } }) : undefined,
        );
        if (network !== "proxy")
          expect(await s.sandboxState({ type: "workspace-write", network_access: network === "on" }, ws)).toEqual({});
        const dir = join(s.codexHome, "approvals");
        writeFileSync(join(ws, "attack.py"), RAW_ATTACK);
        const attacker =
          `(sleep 1; python3 ${ws}/attack.py ${dir} > ${ws}/raw.out 2>&1; ` +
          `${ensureBinary()} approvals --approve ${s.pid}-1 > ${ws}/cli.out 2>&1; ` +
          `${ensureBinary()} approvals --list --json >> ${ws}/cli.out 2>&1; echo done > ${ws}/attack.done) & `;
        const call = s.shell({
          command: `${attacker} touch ${ws}/pwned; echo rc=$?; wait; echo "active=$CODEX_NETWORK_PROXY_ACTIVE"`,
          workdir: ws,
          timeout_ms: 60_000,
        });
        const r = await oneRequest(s.codexHome);
        expect(r.id).toBe(`${s.pid}-1`);
        const until = Date.now() + 70_000;
        while (!existsSync(join(ws, "attack.done")) && Date.now() < until) await Bun.sleep(100);
        const read = (f: string) => (existsSync(join(ws, f)) ? readFileSync(join(ws, f), "utf8") : "");
        const raw = read("raw.out");
        const cli = read("cli.out");
        expect({ done: existsSync(join(ws, "attack.done")), raw, cli }).toMatchObject({ done: true });
        if (backend === "bwrap") {
          // The approver's folder is a secret hidden from every sandbox (src/sandbox/secrets.ts, issue 39): under
          // bubblewrap the command sees no socket at all; the peer checks below are the second wall (Landlock).
          expect(raw).toContain("FOUND 0");
          expect(raw).not.toContain("CONNECTED");
        } else if (network === "on") {
          // It connected (a pathname socket is reachable), and was refused before a byte of its was read.
          expect(raw).toContain("CONNECTED");
          expect(raw).toContain('"type":"refused"');
          expect(raw).not.toContain('"type":"result"');
          expect(raw).not.toContain('"type":"pending"');
        } else {
          // The network-off seccomp filter refuses the connect itself; the proxy-mode one, an AF_UNIX socket.
          expect(raw).toContain("CONNECT-FAILED");
          expect(raw).not.toContain("CONNECTED");
        }
        expect(cli).not.toContain("approved");
        expect(cli).not.toContain(r.id + '"');
        // The prompt is still waiting, for a person; the person denies it; nothing ran.
        expect(listed(s.codexHome).map((x) => x.id)).toEqual([r.id]);
        expect(existsSync(join(ws, "pwned"))).toBe(false);
        expect(approvals(s.codexHome, "--deny", r.id)).toMatchObject({ code: 0 });
        const { out } = await call;
        expect(out.output).toContain("Execution denied: User declined execution");
        expect(existsSync(join(ws, "pwned"))).toBe(false);
        if (network === "on" && backend !== "bwrap") expect(s.stderr()).toContain("local approver: a connection was refused");
        if (network === "proxy") expect(out.output).toContain("active=1");
      }, 120_000);
});
