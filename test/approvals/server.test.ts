/**
 * The approver's parts in this process (docs/approvals.md): the peer rules one by one on facts, the real checks on
 * real processes (this one; a child of the server, unsandboxed yet refused; a process under `sandbox linux`), the
 * folder checks, and the protocol's answers (once, always where offered, deny, unknown id, timeout).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { answerRequest, describe as describeRequest, listRequests } from "../../src/approvals/cli.ts";
import { networkAsker } from "../../src/mcp/network-approval.ts";
import { bounded } from "../../src/safe-text.ts";
import { ServerConnection } from "../../src/approvals/client.ts";
import { HIDDEN, judgePeer, processFacts, type ProcessFacts } from "../../src/approvals/peer.ts";
import { dirProblem, ensureApprovalsDir, socketPath } from "../../src/approvals/place.ts";
import { Approver } from "../../src/approvals/server.ts";
import { setLogFile } from "../../src/log.ts";
import type { ServerLine } from "../../src/approvals/protocol.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const base = mkdtempSync(join(CONF_BASE, "approver-unit-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

const SELF: ProcessFacts = {
  pid: 100,
  uid: 1000,
  ns: { user: "user:[1]", mnt: "mnt:[2]", pid: "pid:[3]", net: "net:[4]" },
  pidDepth: 1,
  noNewPrivs: 0,
  seccomp: 0,
  seccompFilters: 0,
  cgroup: "0::/user.slice/app.scope\n",
  ancestors: [50, 1],
};

describe("judgePeer: each rule refuses on its own", () => {
  const peer = (p: Partial<ProcessFacts>): ProcessFacts => ({ ...SELF, pid: 200, ancestors: [60, 1], ...p });
  test("an unsandboxed process of this user, not started by the server, is accepted", () => {
    expect(judgePeer(peer({}), SELF, 100)).toBeUndefined();
  });
  test("another uid", () => expect(judgePeer(peer({ uid: 1001 }), SELF)).toContain("uid 1001"));
  for (const k of ["user", "mnt", "pid", "net"] as const)
    test(`another ${k} namespace (bubblewrap)`, () =>
      expect(judgePeer(peer({ ns: { ...SELF.ns, [k]: `${k}:[9]` } }), SELF)).toContain(`its ${k} namespace`));
  test("namespaces hidden (a non-dumpable server judged by a client): judged by the pid namespace depth", () => {
    const hidden = { user: HIDDEN, mnt: HIDDEN, pid: HIDDEN, net: HIDDEN };
    expect(judgePeer(peer({ ns: hidden }), SELF)).toBeUndefined();
    expect(judgePeer(peer({ ns: hidden, pidDepth: 2 }), SELF)).toContain("2 nested pid namespaces");
  });
  test("no_new_privs where the judge has none (Landlock)", () =>
    expect(judgePeer(peer({ noNewPrivs: 1 }), SELF)).toContain("no_new_privs"));
  test("more seccomp filters than the judge", () => {
    expect(judgePeer(peer({ seccomp: 2, seccompFilters: 1 }), SELF)).toContain("1 seccomp filters");
    // a judge under a filter itself: a peer with as many is accepted, one more is refused
    const judge = { ...SELF, seccomp: 2, seccompFilters: 1 };
    expect(judgePeer(peer({ seccomp: 2, seccompFilters: 1 }), judge)).toBeUndefined();
    expect(judgePeer(peer({ seccomp: 2, seccompFilters: 2 }), judge)).toContain("2 seccomp filters");
  });
  test("a stricter seccomp mode where the kernel shows no filter count", () =>
    expect(judgePeer(peer({ seccomp: 2, seccompFilters: undefined }), { ...SELF, seccompFilters: undefined })).toContain("seccomp mode"));
  test("a shellmcp call's cgroup", () =>
    expect(judgePeer(peer({ cgroup: "0::/user.slice/app.scope/shellmcp-4242/call-3\n" }), SELF)).toContain("cgroup"));
  test("a descendant of the server", () =>
    expect(judgePeer(peer({ ancestors: [300, 100, 50, 1] }), SELF, 100)).toContain("started by the server"));
});

describe("processFacts on real processes", () => {
  test("this process: its own facts, judged trustworthy against itself", async () => {
    const me = await processFacts("self", process.getuid!());
    expect(me.pid).toBe(process.pid);
    expect(me.ns.user).toMatch(/^user:\[\d+\]$/);
    expect(judgePeer(me, me)).toBeUndefined();
  });
  test("a process under `shellmcp sandbox linux` (Landlock and bubblewrap) is refused", async () => {
    const me = await processFacts("self", process.getuid!());
    // Why each is refused: bubblewrap's command lives in namespaces of its own (a user namespace first); Landlock's
    // shares this process's namespaces, but runs with no_new_privs (or, where this process has it too, one more
    // seccomp filter).
    const why = { landlock: /^it runs (with no_new_privs|under \d+ seccomp filters)/, bwrap: /^its (user|pid|mnt) namespace/ } as const;
    for (const backend of ["landlock", "bwrap"] as const) {
      const secs = `5.${Math.floor(Math.random() * 1e6)}`; // names this sleep alone
      const p = Bun.spawn([ensureBinary(), "sandbox", "linux", "--backend", backend, "--", "/bin/sleep", secs], {
        stdout: "ignore",
        stderr: "ignore",
      });
      try {
        // the sandboxed sleep itself (exactly this command line), not its launcher
        let pid: number | undefined;
        const until = Date.now() + 5000;
        while (pid === undefined && Date.now() < until) {
          const out = Bun.spawnSync(["pgrep", "-x", "-f", `/bin/sleep ${secs}`])
            .stdout.toString()
            .trim();
          if (out !== "") pid = Number(out.split("\n")[0]);
          else await Bun.sleep(50);
        }
        expect(pid).toBeDefined();
        const facts = await processFacts(pid!, process.getuid!());
        expect(judgePeer(facts, me)).toMatch(why[backend]);
      } finally {
        p.kill("SIGKILL");
        await p.exited;
      }
    }
  }, 30_000);
});

describe("the approver's folder", () => {
  test("made 0700, a looser mode tightened, a link or a foreign mode refused", () => {
    const d = join(base, "a");
    ensureApprovalsDir(d);
    expect(dirProblem(d)).toBeUndefined();
    chmodSync(d, 0o755);
    expect(dirProblem(d)).toContain("mode 0755");
    ensureApprovalsDir(d);
    expect(dirProblem(d)).toBeUndefined();
    const link = join(base, "link");
    symlinkSync(d, link);
    expect(dirProblem(link)).toContain("symbolic link");
    expect(() => ensureApprovalsDir(link)).toThrow("symbolic link");
  });
  test("a missing CODEX_HOME is made (0700) with the folder", () => {
    const d = join(base, "new-home", "approvals");
    ensureApprovalsDir(d);
    expect(dirProblem(d)).toBeUndefined();
    expect(
      Bun.spawnSync(["stat", "-c", "%a", join(base, "new-home")])
        .stdout.toString()
        .trim(),
    ).toBe("700");
  });
  test("a socket nobody listens on (its server was killed): not listed, an answer says the server ended", async () => {
    const d = join(base, "stale");
    ensureApprovalsDir(d);
    const py = "import socket,sys\ns=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1]);s.close()";
    expect(Bun.spawnSync(["python3", "-c", py, join(d, "999999.sock")]).exitCode).toBe(0);
    chmodSync(join(d, "999999.sock"), 0o600);
    const problems: string[] = [];
    expect(await listRequests([d], problems)).toEqual([]);
    expect(problems).toEqual([]);
    expect(await answerRequest([d], "999999-1", "deny")).toContain("its server has ended");
  });
  test("a socket path longer than a sun_path is refused with what to do", () => {
    expect(() => socketPath("/" + "x".repeat(120), 1)).toThrow("XDG_RUNTIME_DIR");
  });
});

describe("the protocol, in this process", () => {
  const dir = join(base, "proto");
  mkdirSync(dir, { mode: 0o700 });
  const approver = Approver.start(dir, 1500);
  afterAll(() => approver.close());
  const form = (always: boolean) => ({ properties: always ? { reason: {}, always_allow: {} } : { reason: {} } });

  async function connect(): Promise<{ c: ServerConnection; first: ServerLine[] }> {
    const c = new ServerConnection(approver.path);
    expect(await c.open()).toBeUndefined();
    const first: ServerLine[] = [];
    for (;;) {
      const l = await c.next();
      expect(l).toBeDefined();
      first.push(l!);
      if (l!.type === "listed" || l!.type === "refused") return { c, first };
    }
  }
  async function result(c: ServerConnection): Promise<ServerLine> {
    for (;;) {
      const l = (await c.next())!;
      if (l.type === "result") return l;
    }
  }

  test("the socket is 0600 in the 0700 folder", () => {
    expect(Bun.spawnSync(["stat", "-c", "%a %F", approver.path]).stdout.toString().trim()).toBe("600 socket");
  });

  test("once, always (where offered), deny", async () => {
    const a = approver.elicit("Allow agent to run `x`?", form(true));
    const b = approver.elicit("Allow agent to run `y`?", form(false));
    const d = approver.elicit("Allow agent to run `z`?", form(true));
    const { c, first } = await connect();
    const ids = first.filter((l) => l.type === "pending").map((l) => (l as { id: string }).id);
    expect(ids.length).toBe(3);
    expect(first[0]).toMatchObject({ type: "hello", pid: process.pid });
    c.send({ type: "answer", id: ids[0]!, decision: "always" });
    expect(await result(c)).toMatchObject({ ok: true });
    expect(await a).toEqual({ action: "accept", content: { always_allow: true } });
    c.send({ type: "answer", id: ids[1]!, decision: "always" });
    expect(await result(c)).toMatchObject({ ok: false, error: expect.stringContaining("always is not offered") });
    c.send({ type: "answer", id: ids[1]!, decision: "once" });
    expect(await result(c)).toMatchObject({ ok: true });
    expect(await b).toEqual({ action: "accept", content: {} });
    c.send({ type: "answer", id: ids[2]!, decision: "deny" });
    expect(await result(c)).toMatchObject({ ok: true });
    expect(await d).toEqual({ action: "decline" });
    c.send({ type: "answer", id: ids[2]!, decision: "once" });
    expect(await result(c)).toMatchObject({ ok: false, error: expect.stringContaining("no request") });
    expect(approver.pending()).toEqual([]);
    c.close();
  });

  test("a network question (networkAsker through the approver): host, port, protocol apart and rendered; once, session, always, deny", async () => {
    const home = join(base, "net-home");
    mkdirSync(join(home, "rules"), { recursive: true });
    const ask = networkAsker(approver.elicit, home)!;
    const host = "evil\u001b]0;x\u0007.test";
    const scopes = ["once", "session", "always"].map((scope, i) => ({
      scope,
      p: ask({ host: `h${i}.test`, port: 443, protocol: "https_connect" }),
    }));
    const weird = ask({ host, port: 8080, protocol: "http" });
    const { c, first } = await connect();
    const pending = first.filter((l) => l.type === "pending") as Extract<ServerLine, { type: "pending" }>[];
    expect(pending.map((l) => l.network)).toEqual([
      { host: "h0.test", port: 443, protocol: "https_connect" },
      { host: "h1.test", port: 443, protocol: "https_connect" },
      { host: "h2.test", port: 443, protocol: "https_connect" },
      { host: bounded(host, 256), port: 8080, protocol: "http" },
    ]);
    expect(pending[3]!.network!.host).not.toContain("\u001b");
    expect(pending.every((l) => l.always)).toBe(true);
    const shown = describeRequest({ ...pending[3]!, server: { pid: 1, cwd: "/", socket: "s" } });
    expect(shown).toContain(`host: ${bounded(host, 256)}  port: 8080  protocol: http`);
    expect(shown).toContain("answers: once, session, always, deny");
    expect(shown).not.toContain("\u001b");
    for (const [i, { scope }] of scopes.entries()) {
      c.send({ type: "answer", id: pending[i]!.id, decision: scope as "once" | "session" | "always" });
      expect(await result(c)).toMatchObject({ ok: true });
    }
    expect(await Promise.all(scopes.map((x) => x.p))).toEqual(["once", "session", "always"]);
    expect(readFileSync(join(home, "rules", "default.rules"), "utf8")).toContain('network_rule(host="h2.test", protocol="https"');
    c.send({ type: "answer", id: pending[3]!.id, decision: "deny" });
    expect(await result(c)).toMatchObject({ ok: true });
    expect(await weird).toBeUndefined();
    // "session" is the network form's: a prompt's request refuses it.
    const exec = approver.elicit("Allow agent to run `x`?", form(true));
    const l = (await c.next()) as Extract<ServerLine, { type: "pending" }>;
    expect(l.network).toBeUndefined();
    c.send({ type: "answer", id: l.id, decision: "session" });
    expect(await result(c)).toMatchObject({ ok: false, error: expect.stringContaining("network questions only") });
    c.send({ type: "answer", id: l.id, decision: "deny" });
    expect(await result(c)).toMatchObject({ ok: true });
    expect(await exec).toEqual({ action: "decline" });
    c.close();
  });

  test("a network question nobody answers: refused (no answer), not an error", async () => {
    const ask = networkAsker(approver.elicit, join(base, "net-home"))!;
    expect(await ask({ host: "late.test", port: 80, protocol: "http" })).toBeUndefined();
  });

  test("a connected client sees new requests as they come, and gone ones", async () => {
    const { c } = await connect();
    const p = approver.elicit("Allow agent to run `late`?", form(false));
    const l = (await c.next())!;
    expect(l).toMatchObject({ type: "pending", message: "Allow agent to run `late`?" });
    await expect(p).rejects.toThrow("nobody answered within 2 s"); // 1.5 s, rounded
    expect(await c.next()).toMatchObject({ type: "gone", why: "timed out" });
    c.close();
  });

  test("an unsandboxed child of the server is refused too (a process a call left behind)", async () => {
    const py = `import socket,sys\ns=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);print(s.recv(4096).decode())`;
    // Asynchronously: the server answering it is this very process.
    const r = Bun.spawn(["python3", "-c", py, approver.path], { stdout: "pipe" });
    const out = await new Response(r.stdout).text();
    await r.exited;
    expect(out).toContain('"type":"refused"');
    expect(out).toContain("started by the server");
  });

  test("a flood of refused connections is logged a few times, not once each", async () => {
    const file = join(base, "flood.log");
    expect(setLogFile(file)).toBeUndefined();
    const py = `import socket,sys\nfor i in range(50):\n  s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);s.recv(4096);s.close()`;
    const r = Bun.spawn(["python3", "-c", py, approver.path], { stdout: "ignore" });
    expect(await r.exited).toBe(0);
    const lines = readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l.includes("a connection was refused"));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThanOrEqual(5);
  });

  test("closing removes the socket", () => {
    const d2 = join(base, "closing");
    mkdirSync(d2, { mode: 0o700 });
    const a = Approver.start(d2, 1000);
    expect(existsSync(a.path)).toBe(true);
    a.close();
    expect(existsSync(a.path)).toBe(false);
  });
});
