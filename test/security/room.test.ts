/**
 * Issue 21: an allow rule opens a bounded room, not the host. Each attack runs from inside an ordinary `shell` call
 * of the compiled `serve` (real MCP client), and is judged by its effect on the host: a marker file in a folder
 * outside every writable root (asserted), a lock left in `.git`, what a later call sees. Every item failed on the
 * build before the escalation room (the programs ran on the host with the user's full power).
 *
 * 1 options of granted programs (git --output, git grep -O, git fetch --upload-pack, find -exec, sort -o)
 * 2 program identity (a link named like the rule, a PATH entry the command wrote, argv[0], a raw request)
 * 3 terminals and editors (a pty handed to an allowed git diff; git commit without -m; locks after a timeout)
 * 4 project files behind harmless-looking rules (python3 -m json.tool, make -n, a submodule's core.fsmonitor)
 * 5 the starter policy: read-only inspection runs in the sandbox
 * and normal use: git against a remote served on 127.0.0.1 and a host Unix socket, each granted by
 * `[shellmcp.room_network]` (a room's network is the call's unless granted: issue 30, test/security/room-reach.test.ts),
 * the repository written.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, exists, hostGit, oneCommitRepo, py, requirePrograms, serveWithPid, token } from "../helpers/attack.ts";
import { homeDir, ROOT } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { assertOutside } from "../helpers/test-dirs.ts";

afterAll(closeAll);

const PY_RAW = `
import os, socket, struct, sys, json, array
ESC = int(os.environ["CODEX_ESCALATE_SOCKET"])
mine, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM, 0, os.dup(ESC))
d.sendmsg([b"\\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [give.fileno()]))])
give.close()
req = json.dumps({"file": sys.argv[1], "argv": sys.argv[2:], "workdir": os.getcwd(), "env": {"PATH": "/usr/bin:/bin"}}).encode()
os.write(mine.fileno(), struct.pack("<I", len(req)) + req)
n = struct.unpack("<I", os.read(mine.fileno(), 4))[0]
print("ANSWER", os.read(mine.fileno(), n).decode(), flush=True)
`;

/** A serve session over a repository `ws` (one commit) and an outside folder, in the given sandbox. */
async function setup(
  rules: string,
  o: {
    sandbox?: "read-only" | "workspace-write";
    onElicit?: () => { action: "accept" };
    config?: string;
    /** The user's own setup of the repository, before the first call (after it, a config edit is not trusted). */
    prepare?: (ws: string) => void;
  } = {},
) {
  const codexHome = homeDir();
  if (o.config !== undefined) writeFileSync(join(codexHome, "config.toml"), o.config);
  const s = await serveWithPid({ rules, codexHome, env: { SHELLMCP_LOG: "info" }, ...(o.onElicit ? { onElicit: o.onElicit } : {}) });
  const ws = oneCommitRepo(confDir("room-ws"));
  if (o.prepare !== undefined) {
    o.prepare(ws);
    await Bun.sleep(100); // ctimes from 20 ms before the workspace is first handed out count (src/sandbox/git/taint.ts)
  }
  const outside = assertOutside(confDir("room-outside"));
  if (o.sandbox === "workspace-write") expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
  const run = async (command: string, timeout_ms = 30_000) => (await s.shell({ command, workdir: ws, login: false, timeout_ms })).out;
  // The outside folder really is outside: the sandbox cannot write it.
  expect((await run(`: > ${outside}/direct 2>/dev/null; echo rc=$?`)).output).toContain("rc=1");
  return { s, ws, outside, home: s.codexHome, run };
}

const missing = shellsMissing();

describe.skipIf(skipWithout("escalation room suite", missing))("issue 21: the escalation room", () => {
  requirePrograms("git", "python3", "make", "bwrap");

  describe("item 1: options of granted programs write nowhere outside the room", () => {
    test("git log/diff --output, git grep -O, git fetch --upload-pack (git allowed)", async () => {
      const { ws, outside, home, run } = await setup('prefix_rule(pattern=["git"], decision="allow")\n');
      writeFileSync(join(ws, "f.txt"), "two\n"); // a diff to show
      const r = await run(
        [
          `git log -1 --format=%B --output=${outside}/log.sh; echo log=$?`,
          `git diff HEAD --output=${home}/diff.sh; echo diff=$?`,
          `git grep -O'touch ${outside}/grep-ran' -e one; echo grep=$?`,
          `git fetch --upload-pack='touch ${outside}/upload-ran; git-upload-pack' . 2>&1 | tail -1`,
        ].join("; "),
      );
      expect(r.output).toMatch(/log=[1-9]/);
      expect(r.output).toMatch(/diff=[1-9]/);
      for (const m of [join(outside, "log.sh"), join(home, "diff.sh"), join(outside, "grep-ran"), join(outside, "upload-ran")])
        expect({ m, exists: exists(m) }).toEqual({ m, exists: false });
      // The repository itself is the room's: the same options write there.
      expect((await run("git log -1 --format=%s --output=in-repo.txt; cat in-repo.txt")).output).toContain("first");
    }, 60_000);

    test("find -exec and sort -o (allowed) reach nothing outside", async () => {
      const { ws, outside, run } = await setup(
        'prefix_rule(pattern=["find"], decision="allow")\nprefix_rule(pattern=["sort"], decision="allow")\n',
      );
      writeFileSync(join(ws, "in.txt"), "b\na\n");
      await run(
        `find . -maxdepth 0 -exec sh -c 'touch ${outside}/find-ran' \\; ; sort -o ${outside}/sorted in.txt; sort -o sorted.txt in.txt; echo done`,
      );
      expect(exists(join(outside, "find-ran"))).toBe(false);
      expect(exists(join(outside, "sorted"))).toBe(false);
      expect(readFileSync(join(ws, "sorted.txt"), "utf8")).toBe("a\nb\n"); // sort still works in the project
    }, 60_000);
  });

  describe("item 2: the program that runs is the program the rule names", () => {
    test("a link named like the rule (./id -> /bin/sh) and a PATH entry the command wrote run inside the sandbox", async () => {
      const { outside, run } = await setup('prefix_rule(pattern=["id"], decision="allow")\n', { sandbox: "workspace-write" });
      const r = await run(
        `ln -s /bin/sh id; ./id -c 'touch ${outside}/link-ran' ; mkdir -p bin && ln -s /bin/sh bin/id && PATH=$PWD/bin:$PATH id -c 'touch ${outside}/path-ran'; id -u`,
      );
      expect(exists(join(outside, "link-ran"))).toBe(false);
      expect(exists(join(outside, "path-ran"))).toBe(false);
      expect(r.output).toMatch(/Read-only file system/);
      expect(r.output).toMatch(/^\d+$/m); // the real id still runs
    }, 60_000);

    test("argv[0] is judged: exec -a git-archive git status --remote --exec does not escalate", async () => {
      const { outside, run } = await setup('prefix_rule(pattern=["git", "status"], decision="allow")\n');
      await run(`(exec -a git-archive git status --remote=. --exec='touch ${outside}/archive-ran') 2>&1; echo end`);
      expect(exists(join(outside, "archive-ran"))).toBe(false);
    }, 60_000);

    test("a request written to the escalation socket with argv[0]=git-fetch is answered Run, not Escalate", async () => {
      const { s, run } = await setup('prefix_rule(pattern=["git", "status"], decision="allow")\n');
      const raw = await run(py(PY_RAW, ["/usr/bin/git", "git-fetch", "status", "--upload-pack=touch x"]));
      expect(raw.output).toContain("ANSWER");
      expect(raw.output).not.toContain('"Escalate"');
      expect(s.stderr()).toContain('argv[0] \\"git-fetch\\"');
      // The same request with argv[0] = git is escalated (the rule still works).
      const ok = await run(py(PY_RAW, ["/usr/bin/git", "git", "status"]));
      expect(ok.output).toContain('"Escalate"');
    }, 60_000);
  });

  describe("item 3: no terminal reaches an escalated program; nothing waits for an editor", () => {
    test("a pty handed to an allowed git diff: no pager runs, keystrokes typed into it run nothing", async () => {
      const { ws, outside, run } = await setup('prefix_rule(pattern=["git", "diff"], decision="allow")\n');
      writeFileSync(join(ws, "f.txt"), "two\n");
      const program = `
import os, pty, sys, time, select
pid, m = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "-c", "git diff"])
time.sleep(1.0)
for keys in (b"!touch ${outside}/pager-ran\\n", b"q\\n"):
    try: os.write(m, keys)
    except OSError: pass
    time.sleep(0.3)
t0 = time.time()
while time.time() - t0 < 8 and not os.waitpid(pid, os.WNOHANG)[0]:
    select.select([m], [], [], 0.2)
    try: os.read(m, 65536)
    except OSError: pass
print("CHILD-DONE", flush=True)
`;
      const r = await run(`${py(program, ["$BASH"]).replace("'$BASH'", '"$BASH"')}`);
      expect(r.output).toContain("CHILD-DONE");
      expect(r.output).toContain("+two"); // the diff reached the call's output through the pipe, not the pty
      expect(exists(join(outside, "pager-ran"))).toBe(false);
    }, 60_000);

    test("git commit without -m aborts at once (no editor), leaves no lock, and the next commit works", async () => {
      const { ws, run } = await setup('prefix_rule(pattern=["git", "commit"], decision="allow")\n');
      writeFileSync(join(ws, "f.txt"), "two\n");
      const t0 = performance.now();
      const r = await run("git commit -a; echo rc=$?", 20_000);
      expect(performance.now() - t0).toBeLessThan(15_000);
      expect(r.output).toContain("Aborting commit due to empty commit message");
      expect(existsSync(join(ws, ".git", "index.lock"))).toBe(false);
      expect((await run("git commit -qam second && echo committed")).output).toContain("committed");
      expect(hostGit(ws, "log", "--format=%s", "-1")).toBe("second");
    }, 60_000);

    test("on timeout an escalated program gets SIGTERM and time to remove its lock", async () => {
      const { ws, run } = await setup('prefix_rule(pattern=["python3", "lock.py"], decision="allow")\n');
      writeFileSync(
        join(ws, "lock.py"),
        'import os, signal, sys, time\np = ".git/index.lock"\ndef bye(*_):\n    os.unlink(p)\n    sys.exit(1)\nsignal.signal(signal.SIGTERM, bye)\nopen(p, "w").close()\nprint("LOCKED", flush=True)\ntime.sleep(60)\n',
      );
      const r = await run("python3 lock.py", 5_000);
      expect(r.output).toContain("LOCKED");
      expect(existsSync(join(ws, ".git", "index.lock"))).toBe(false);
    }, 60_000);
  });

  describe("item 4: project files run, but only in the room", () => {
    test("python3 -m json.tool imports a json/ package from the project: it cannot write outside", async () => {
      const { ws, outside, run } = await setup('prefix_rule(pattern=["python3", "-m", "json.tool"], decision="allow")\n');
      mkdirSync(join(ws, "json"));
      writeFileSync(join(ws, "json", "__init__.py"), `open(${JSON.stringify(join(outside, "json-ran"))}, "w").write("x")\n`);
      await run("echo '{}' | python3 -m json.tool; echo end");
      expect(exists(join(outside, "json-ran"))).toBe(false);
    }, 60_000);

    test("make -n runs $(shell …) of the Makefile: it cannot write outside", async () => {
      const { ws, outside, run } = await setup('prefix_rule(pattern=["make", "-n"], decision="allow")\n');
      writeFileSync(join(ws, "Makefile"), `X := $(shell touch ${outside}/make-ran)\nall:\n\t@echo hi\n`);
      await run("make -n; echo end");
      expect(exists(join(outside, "make-ran"))).toBe(false);
    }, 60_000);

    test("a submodule whose .git the command replaced (core.fsmonitor): git status is not escalated", async () => {
      const sub = confDir("room-sub");
      hostGit(sub, "init", "-q", "-b", "main");
      hostGit(sub, "commit", "-q", "--allow-empty", "-m", "s");
      const { s, ws, outside, run } = await setup('prefix_rule(pattern=["git", "status"], decision="allow")\n', {
        sandbox: "workspace-write",
      });
      hostGit(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "mods/sub");
      hostGit(ws, "commit", "-q", "-m", "submodule");
      const marker = join(outside, "fsmonitor-ran");
      const r = await run(
        `mv mods/sub/.git mods/sub/.git.old && git -C mods/sub init -q && git -C mods/sub config core.fsmonitor 'touch ${marker}; false' && git status --short; echo end`,
      );
      expect(r.output).toContain("end");
      expect(exists(marker)).toBe(false);
      // Under bubblewrap the submodule's `.git` (2 levels below the workspace) is read-only since issue 34 item 5, so
      // the kernel refuses the move; where the move succeeds (Landlock), the boundary refuses the escalation.
      if (!r.output.includes("cannot move 'mods/sub/.git'")) expect(s.stderr()).toContain("submodule repository");
    }, 60_000);
  });

  describe("item 5: the starter policy escalates only what must leave the sandbox", () => {
    const rules = readFileSync(join(ROOT, "examples", "rules", "agent.rules"), "utf8");
    test("git log/diff/status, ls, cat, grep run inside the sandbox (no escalation); git add and commit escalate", async () => {
      const { s, ws, outside, run } = await setup(rules, { sandbox: "workspace-write" });
      const r = await run(
        `git status --short; git log --oneline; git log -1 --output=${outside}/x; ls; cat f.txt; grep one f.txt; echo two > f.txt; git add f.txt && git commit -qm two && echo committed`,
      );
      expect(r.output).toContain("committed");
      expect(exists(join(outside, "x"))).toBe(false);
      const escalated = [...s.stderr().matchAll(/escalated \{"file":"([^"]+)","argv":(\[[^\]]*\])/g)].map((m) => JSON.parse(m[2]!)[1]);
      expect(escalated).toEqual(["add", "commit"]);
      expect(hostGit(ws, "log", "--format=%s", "-1")).toBe("two");
    }, 60_000);
  });

  describe("normal use in the room", () => {
    test("git status/add/commit/checkout/fetch/pull/push against a git daemon on 127.0.0.1 (agent.rules, network off in the sandbox, git granted the host's network)", async () => {
      const base = confDir("room-daemon");
      const remote = join(base, "remote.git");
      hostGit(base, "init", "-q", "--bare", "-b", "main", remote);
      const port = 20000 + Math.floor(Math.random() * 20000);
      const daemon = Bun.spawn(
        [
          "git",
          "daemon",
          "--reuseaddr",
          `--base-path=${base}`,
          "--export-all",
          "--enable=receive-pack",
          "--listen=127.0.0.1",
          `--port=${port}`,
          base,
        ],
        { stdout: "ignore", stderr: "ignore" },
      );
      try {
        const rules = readFileSync(join(ROOT, "examples", "rules", "agent.rules"), "utf8");
        const url = `git://127.0.0.1:${port}/remote.git`;
        // The remote is added before the first call: a .git/config changed while the server runs, in a place its
        // sandboxes could write, is not trusted (./git-taint.test.ts), whoever changed it.
        const { ws, run } = await setup(rules, {
          sandbox: "workspace-write",
          onElicit: () => ({ action: "accept" }),
          config: '[shellmcp.room_network]\ngit = "host"\n',
          prepare: (ws) => hostGit(ws, "remote", "add", "origin", url),
        });
        for (let i = 0; i < 50 && Bun.spawnSync(["git", "ls-remote", url]).exitCode !== 0; i++) await Bun.sleep(100);
        const r1 = await run(
          "git push -q origin main && echo two > f.txt && git add f.txt && git commit -qm two && git push -q origin main && echo pushed",
        );
        expect(r1.output).toContain("pushed");
        expect(hostGit(base, "--git-dir", remote, "log", "--format=%s", "-1", "main")).toBe("two");
        // Someone else pushes; the agent fetches, pulls and switches branches.
        const other = join(base, "other");
        hostGit(base, "clone", "-q", url, other);
        writeFileSync(join(other, "g.txt"), "from elsewhere\n");
        hostGit(other, "add", "g.txt");
        hostGit(other, "-c", "user.name=o", "-c", "user.email=o@example.com", "commit", "-q", "-m", "three");
        hostGit(other, "push", "-q", "origin", "main");
        const r2 = await run(
          "git fetch -q origin && git pull -q --ff-only origin main && git checkout -q -b feature && git checkout -q main && git status --short && cat g.txt",
        );
        expect(r2.output).toContain("from elsewhere");
        expect(hostGit(ws, "branch", "--list", "feature")).toContain("feature");
      } finally {
        daemon.kill();
        await daemon.exited;
      }
    }, 90_000);

    test("an allowed client granted the host's network reaches a host Unix socket (a docker-style daemon) from a network-off call; ungranted, it does not", async () => {
      const sockDir = confDir("room-sock");
      const sock = join(sockDir, "daemon.sock");
      const server = Bun.listen({
        unix: sock,
        socket: {
          data(socket, data) {
            socket.write(`pong:${data.toString().trim()}\n`);
            socket.end();
          },
        },
      });
      try {
        const { ws, run } = await setup(
          'prefix_rule(pattern=["python3", "client.py"], decision="allow")\nprefix_rule(pattern=["perl"], decision="allow")\n',
          { sandbox: "workspace-write", config: '[shellmcp.room_network]\npython3 = "host"\n' },
        );
        writeFileSync(
          join(ws, "client.py"),
          `import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall(b"ping\\n")\nprint(s.recv(100).decode().strip())\n`,
        );
        const tag = token();
        const r = await run(
          `python3 client.py ${sock}; ${py(`import socket\ntry:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect("${sock}"); print("SANDBOX-CONNECTED ${tag}")\nexcept OSError as e:\n    print("sandbox refused", e.errno)`)}`,
        );
        expect(r.output).toContain("pong:ping");
        expect(r.output).toContain("sandbox refused"); // the call's own sandbox still has no network
        // An allowed program without the grant: its room has the call's network, none.
        const p = await run(
          `perl -e 'use Socket; socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!\\n"; connect($s, pack_sockaddr_un("${sock}")) or die "refused: $!\\n"; print $s "ping\\n"; print "PERL-CONNECTED\\n"' 2>&1`,
        );
        expect(p.output).toContain("refused");
        expect(p.output).not.toContain("PERL-CONNECTED");
      } finally {
        server.stop(true);
      }
    }, 60_000);
  });
});
