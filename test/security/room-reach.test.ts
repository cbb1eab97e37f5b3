/**
 * Issue 30, items 1 and 2: a room reaches and reads only what is granted. Each attack runs from inside an ordinary
 * `shell` call of the compiled `serve` (a real MCP client, Codex-style — sandbox state sent by the client — and
 * plain — `--sandbox read-only --cd`), under bubblewrap and under Landlock, and is judged on the host:
 * - a listener on 127.0.0.1, a pathname Unix socket and an abstract Unix socket of the host (one python3 process
 *   that logs every connection to a file) must receive nothing from a room of a network-off call, reached by an
 *   allowed python3 or by `git rebase --exec` (git allowed); the same listener then receives a control connection
 *   from the test, so a listener that could not record would fail the test;
 * - a room reading `~/.ssh/id_rsa` (a fake key in the server's HOME) gets nothing, while the room really ran;
 * - a `host` grant in `[shellmcp.room_network]` gives exactly that program the host's network back (a docker-style
 *   socket reached only where granted).
 * Before issue 30 every room shared the host's network namespace and read everything the call's sandbox read.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, hostGit, requirePrograms, serveWithPid, token, waitFor } from "../helpers/attack.ts";
import { homeDir, ROOT } from "../helpers/binary.ts";
import { LANDLOCK_HOME_REFUSED, skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

/** The host's listeners: TCP on 127.0.0.1 (port printed), a pathname and an abstract Unix socket; logs every connection. */
const LISTENER = `
import os, select, socket, sys
log, path, abstract, ready = sys.argv[1:5]
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(16)
u = socket.socket(socket.AF_UNIX); u.bind(path); u.listen(16)
a = socket.socket(socket.AF_UNIX); a.bind("\\0" + abstract); a.listen(16)
names = {t: "tcp", u: "unix", a: "abstract"}
with open(ready + ".tmp", "w") as f: f.write(str(t.getsockname()[1]))
os.rename(ready + ".tmp", ready)
while True:
    for s in select.select(list(names), [], [])[0]:
        c, _ = s.accept()
        c.settimeout(2)
        try: data = c.recv(200).decode(errors="replace").strip()
        except OSError: data = ""
        with open(log, "a") as f: f.write(names[s] + " " + data + "\\n")
        c.close()
`;

/** What a room program tries: connect to each listener and say who it is. */
const REACH = `
import socket, sys
tag, port, path, abstract = sys.argv[1:5]
print("RAN", tag, flush=True)
for kind, fam, addr in [("tcp", socket.AF_INET, ("127.0.0.1", int(port))), ("unix", socket.AF_UNIX, path), ("abstract", socket.AF_UNIX, "\\0" + abstract)]:
    try:
        s = socket.socket(fam); s.settimeout(5); s.connect(addr); s.sendall(("ROOM " + tag + "\\n").encode()); s.close()
        print("REACHED", kind, flush=True)
    except OSError as e:
        print("refused", kind, e.errno, flush=True)
`;

interface Listener {
  port: number;
  path: string;
  abstract: string;
  log: string;
  /** What the listener logged so far. */
  seen: () => string;
  /** Connect from the test itself (outside every sandbox) to each socket: proves the listener records. */
  control: () => Promise<void>;
  stop: () => Promise<void>;
}

async function listen(): Promise<Listener> {
  const dir = confDir("reach-listen");
  const log = join(dir, "log");
  const ready = join(dir, "ready");
  const path = join(dir, "daemon.sock");
  const abstract = `shellmcp-reach-${token()}`;
  writeFileSync(log, "");
  const p = Bun.spawn(["python3", "-c", LISTENER, log, path, abstract, ready], { stdout: "ignore", stderr: "inherit" });
  if (!(await waitFor(() => existsSync(ready), 10_000))) throw new Error("the listener did not start");
  const port = Number(readFileSync(ready, "utf8"));
  return {
    port,
    path,
    abstract,
    log,
    seen: () => readFileSync(log, "utf8"),
    async control() {
      const r = Bun.spawnSync(["python3", "-c", REACH, "CONTROL", String(port), path, abstract]);
      expect(r.stdout.toString()).toContain("REACHED abstract");
      await waitFor(
        () =>
          readFileSync(log, "utf8")
            .split("\n")
            .filter((l) => l.includes("CONTROL")).length === 3,
        10_000,
      );
    },
    async stop() {
      p.kill();
      await p.exited;
    },
  };
}

/** A repository with one commit and the reach program, in a folder outside every writable root. */
function workspace(): string {
  const ws = confDir("reach-ws");
  hostGit(ws, "init", "-q", "-b", "main");
  hostGit(ws, "config", "user.name", "t");
  hostGit(ws, "config", "user.email", "t@example.com");
  writeFileSync(join(ws, "reach.py"), REACH);
  hostGit(ws, "add", "reach.py");
  hostGit(ws, "commit", "-q", "-m", "first");
  return ws;
}

/**
 * A serve session; `config` is written to its CODEX_HOME's config.toml. HOME (`home`) is a folder of its own, as
 * a user's is (a HOME that is CODEX_HOME would make every cache in it a protected path).
 */
async function session(o: { backend: "bwrap" | "landlock"; client: "codex" | "plain"; rules: string; ws: string; config?: string }) {
  const codexHome = homeDir();
  const home = homeDir("shellmcp-user-home-");
  if (o.config !== undefined) writeFileSync(join(codexHome, "config.toml"), o.config);
  const args = ["--sandbox-backend", o.backend, ...(o.client === "plain" ? ["--sandbox", "read-only", "--cd", o.ws] : [])];
  const s = await serveWithPid({ rules: o.rules, args, codexHome, env: { SHELLMCP_LOG: "info", HOME: home } });
  if (o.client === "codex") expect(await s.sandboxState({ type: "read-only" }, o.ws)).toEqual({});
  const run = async (command: string) => (await s.shell({ command, workdir: o.ws, login: false, timeout_ms: 30_000 })).out.output;
  const escalated = () => [...s.stderr().matchAll(/escalated \{"file":"([^"]+)"/g)].map((m) => m[1]!);
  return { s, home, run, escalated };
}

const COLUMNS = [
  ["bwrap", "codex"],
  ["bwrap", "plain"],
  ["landlock", "codex"],
  ["landlock", "plain"],
] as const;

describe.skipIf(skipWithout("room reach suite", shellsMissing()))("issue 30: a room reaches and reads only what is granted", () => {
  requirePrograms("git", "python3", "bwrap");

  describe("item 1: a room of a network-off call reaches no host listener", () => {
    for (const [backend, client] of COLUMNS) {
      test(`${backend}/${client}: an allowed python3 reaches neither 127.0.0.1, a pathname nor an abstract Unix socket`, async () => {
        const l = await listen();
        try {
          const ws = workspace();
          const { run, escalated } = await session({ backend, client, ws, rules: 'prefix_rule(pattern=["python3"], decision="allow")\n' });
          const tag = token();
          const out = await run(`python3 reach.py ${tag} ${l.port} ${l.path} ${l.abstract}`);
          expect(out).toContain(`RAN ${tag}`);
          expect(escalated().some((f) => f.endsWith("python3") || /python3/.test(f))).toBe(true);
          expect(out).not.toContain("ran inside the sandbox");
          expect({ out, seen: l.seen() }).toEqual({ out, seen: "" });
          await l.control();
          expect(l.seen()).toContain("CONTROL");
        } finally {
          await l.stop();
        }
      }, 60_000);
    }

    test("bwrap/codex: git rebase --exec (git allowed) runs its command in a room that reaches nothing", async () => {
      const l = await listen();
      try {
        const ws = workspace();
        const { run, escalated } = await session({
          backend: "bwrap",
          client: "codex",
          ws,
          rules: 'prefix_rule(pattern=["git", "rebase"], decision="allow")\n',
        });
        const tag = token();
        const out = await run(`git rebase --exec "python3 reach.py ${tag} ${l.port} ${l.path} ${l.abstract}" --root 2>&1`);
        expect(out).toContain(`RAN ${tag}`);
        expect(escalated().some((f) => f.endsWith("/git"))).toBe(true);
        expect({ out, seen: l.seen() }).toEqual({ out, seen: "" });
        await l.control();
      } finally {
        await l.stop();
      }
    }, 60_000);

    for (const backend of ["bwrap", "landlock"] as const)
      test(`${backend}: a "host" grant in [shellmcp.room_network] reaches the host's sockets, for that program only`, async () => {
        const l = await listen();
        try {
          const ws = workspace();
          writeFileSync(join(ws, "reach.sh"), `#!/bin/sh\nexec python3 "$@"\n`, { mode: 0o755 });
          hostGit(ws, "add", "reach.sh");
          hostGit(ws, "commit", "-q", "-m", "sh");
          const { run } = await session({
            backend,
            client: "codex",
            ws,
            rules: 'prefix_rule(pattern=["python3"], decision="allow")\nprefix_rule(pattern=["perl"], decision="allow")\n',
            config: '[shellmcp.room_network]\npython3 = "host"\n',
          });
          const tag = token();
          const out = await run(`python3 reach.py ${tag} ${l.port} ${l.path} ${l.abstract}`);
          expect(out).toContain("REACHED unix");
          expect(out).toContain("REACHED tcp");
          expect(l.seen()).toContain(`unix ROOM ${tag}`);
          // Another allowed program of the same call has no grant: nothing.
          const other = token();
          const perl = await run(
            `perl -e 'use Socket; socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!\\n"; connect($s, pack_sockaddr_un("${l.path}")) or die "refused: $!\\n"; print $s "ROOM ${other}\\n"; print "REACHED\\n"' 2>&1`,
          );
          expect(perl).not.toContain("REACHED");
          expect(l.seen()).not.toContain(other);
        } finally {
          await l.stop();
        }
      }, 60_000);
  });

  describe("item 1: a domain grant reaches its domains through a proxy, and no host listener", () => {
    for (const backend of ["bwrap", "landlock"] as const)
      test(`${backend}: python3 granted ["example.com", "127.0.0.1:OTHER"] reaches neither the listener's port, a pathname nor an abstract socket`, async () => {
        const l = await listen();
        try {
          const ws = workspace();
          const { run } = await session({
            backend,
            client: "codex",
            ws,
            rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
            // Loopback granted, but another port only: the listener's port stays out of reach, via the proxy too.
            config: `[shellmcp.room_network]\npython3 = ["example.com", "127.0.0.1:${l.port === 65535 ? 1 : l.port + 1}"]\n`,
          });
          const tag = token();
          const out = await run(`python3 reach.py ${tag} ${l.port} ${l.path} ${l.abstract}; echo "proxy=$HTTP_PROXY"`);
          expect(out).toContain(`RAN ${tag}`);
          expect(out).toContain("proxy=\n"); // the command's shell is in the sandbox, without a proxy…
          expect({ out, seen: l.seen() }).toEqual({ out, seen: "" });
          // …but the program's own room has its grant's proxy, which refuses the listener's port on 127.0.0.1.
          const viaProxy = await run(
            `python3 -c 'import os, urllib.request\nprint("P", os.environ.get("HTTP_PROXY"))\ntry:\n    urllib.request.urlopen("http://127.0.0.1:${l.port}/", timeout=10)\nexcept Exception as e:\n    print("refused", e)'`,
          );
          expect(viaProxy).toMatch(/P http:\/\/127\.0\.0\.1:\d+/);
          expect(viaProxy).toContain("refused");
          expect(l.seen()).toBe("");
          await l.control();
        } finally {
          await l.stop();
        }
      }, 60_000);
  });

  describe("item 2: a room does not read the user's credential stores", () => {
    for (const [backend, client] of COLUMNS) {
      test(`${backend}/${client}: an allowed python3 reading ~/.ssh/id_rsa, ~/.netrc and ~/.aws gets nothing`, async () => {
        const ws = workspace();
        const secret = `FAKE-KEY-${token()}`;
        const { run, home, escalated } = await session({
          backend,
          client,
          ws,
          rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
        });
        mkdirSync(join(home, ".ssh"), { recursive: true, mode: 0o700 });
        writeFileSync(join(home, ".ssh", "id_rsa"), `${secret} ssh\n`, { mode: 0o600 });
        writeFileSync(join(home, ".netrc"), `machine example.com password ${secret}-netrc\n`, { mode: 0o600 });
        mkdirSync(join(home, ".aws"), { recursive: true });
        writeFileSync(join(home, ".aws", "credentials"), `${secret}-aws\n`);
        writeFileSync(join(home, "notes.txt"), "not a secret\n");
        writeFileSync(
          join(ws, "read.py"),
          `import os, sys\nh = os.path.expanduser("~")\nfor p in ["notes.txt", ".ssh/id_rsa", ".netrc", ".aws/credentials"]:\n    try:\n        print(p, open(os.path.join(h, p)).read().strip())\n    except OSError as e:\n        print(p, "unreadable", e.errno)\n`,
        );
        const out = await run("python3 read.py");
        expect(out).toContain("notes.txt not a secret"); // the room reads HOME…
        expect(escalated().length).toBeGreaterThan(0);
        expect(out).not.toContain("ran inside the sandbox");
        expect({ out, leaked: out.includes(secret) }).toEqual({ out, leaked: false }); // …but none of its secrets
        // Nor does the call's own sandbox (issue 39).
        expect(await run(`cat ~/.ssh/id_rsa`)).not.toContain(secret);
      }, 60_000);
    }

    test.skipIf(skipWithout("landlock: a store in a room's writable HOME", LANDLOCK_HOME_REFUSED))(
      "landlock: a store inside a folder the room writes cannot be hidden: the room is refused, the program runs in the sandbox, and the result says why",
      async () => {
        const ws = workspace();
        const codexHome = homeDir();
        const home = join(ws, "home"); // HOME inside the workspace the call writes
        mkdirSync(join(home, ".ssh"), { recursive: true });
        writeFileSync(join(home, ".ssh", "id_rsa"), "FAKE\n");
        const s = await serveWithPid({
          rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
          args: ["--sandbox-backend", "landlock"],
          codexHome,
          env: { SHELLMCP_LOG: "info", HOME: home },
        });
        expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
        const out = (await s.shell({ command: "python3 -c 'print(\"ran\")'", workdir: ws, login: false })).out.output;
        expect(out).toContain("ran");
        expect(out).toContain("ran inside the sandbox, not escalated");
        expect(out).toContain("credential store");
        expect(s.stderr()).not.toMatch(/escalated \{"file":"[^"]*python3/);
      },
      60_000,
    );

    test('bwrap: [shellmcp.room_readable] python3 = ["~/.ssh"] gives that program ~/.ssh back, and only that store', async () => {
      const ws = workspace();
      const secret = `FAKE-KEY-${token()}`;
      const { run, home } = await session({
        backend: "bwrap",
        client: "codex",
        ws,
        rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
        config: '[shellmcp.room_readable]\npython3 = ["~/.ssh"]\n',
      });
      mkdirSync(join(home, ".ssh"), { recursive: true, mode: 0o700 });
      writeFileSync(join(home, ".ssh", "id_rsa"), `${secret}\n`, { mode: 0o600 });
      writeFileSync(join(home, ".netrc"), `${secret}-netrc\n`, { mode: 0o600 });
      const out = await run(
        `python3 -c 'import os\nfor p in ["~/.ssh/id_rsa", "~/.netrc"]:\n    try: print(open(os.path.expanduser(p)).read().strip())\n    except OSError as e: print(p, "unreadable")'`,
      );
      expect(out).toContain(secret);
      expect(out).not.toContain(`${secret}-netrc`);
    }, 60_000);
  });

  describe("the starter policy (examples/rules/agent.rules) is safe and works", () => {
    const rules = readFileSync(join(ROOT, "examples", "rules", "agent.rules"), "utf8");

    test("git rebase --exec, git -c core.sshCommand=…, git fetch --upload-pack=… are not escalated (a client without elicitation)", async () => {
      const l = await listen();
      try {
        const ws = workspace();
        const { run, escalated, s } = await session({
          backend: "bwrap",
          client: "codex",
          ws,
          rules,
          config: '[shellmcp.room_network]\ngit = "host"\n',
        });
        const reach = (tag: string) => `python3 ${ws}/reach.py ${tag} ${l.port} ${l.path} ${l.abstract}`;
        const out = await run(
          [
            `git rebase --exec "${reach("rebase")}" --root 2>&1; echo rebase=$?`,
            `git -c core.sshCommand="${reach("sshcommand")}" fetch ssh://example.invalid/x.git 2>&1; echo c=$?`,
            `git fetch --upload-pack="${reach("uploadpack")}; git-upload-pack" . 2>&1; echo fetch=$?`,
            `echo more >> reach.py; git add reach.py && echo added`,
          ].join("; "),
        );
        expect(out).toContain("added");
        // git add (allowed) escalated; none of the three did.
        expect(escalated().length).toBe(1);
        expect(s.stderr()).toMatch(/escalated \{"file":"[^"]*git","argv":\["git","add"/);
        expect({ out, seen: l.seen() }).toEqual({ out, seen: "" });
        await l.control();
      } finally {
        await l.stop();
      }
    }, 60_000);

    for (const backend of ["bwrap", "landlock"] as const)
      test(`${backend}: npm install of a package from a registry on 127.0.0.1 works where npm is granted the network, and not where it is not`, async () => {
        const tarDir = confDir("npm-pkg");
        mkdirSync(join(tarDir, "package"));
        writeFileSync(join(tarDir, "package", "package.json"), JSON.stringify({ name: "tiny-pkg", version: "1.0.0", main: "index.js" }));
        writeFileSync(join(tarDir, "package", "index.js"), "module.exports = 'tiny';\n");
        expect(Bun.spawnSync(["tar", "czf", "tiny-pkg-1.0.0.tgz", "package"], { cwd: tarDir }).exitCode).toBe(0);
        const tgz = readFileSync(join(tarDir, "tiny-pkg-1.0.0.tgz"));
        const sha1 = new Bun.CryptoHasher("sha1").update(tgz).digest("hex");
        const integrity = `sha512-${new Bun.CryptoHasher("sha512").update(tgz).digest("base64")}`;
        const requests: string[] = [];
        const registry: Bun.Server<undefined> = Bun.serve({
          hostname: "127.0.0.1",
          port: 0,
          fetch(req): Response {
            const path = new URL(req.url).pathname;
            requests.push(path);
            if (path === "/tiny-pkg")
              return Response.json({
                name: "tiny-pkg",
                "dist-tags": { latest: "1.0.0" },
                versions: {
                  "1.0.0": {
                    name: "tiny-pkg",
                    version: "1.0.0",
                    main: "index.js",
                    dist: { tarball: `http://127.0.0.1:${registry.port}/tiny-pkg/-/tiny-pkg-1.0.0.tgz`, shasum: sha1, integrity },
                  },
                },
              });
            if (path === "/tiny-pkg/-/tiny-pkg-1.0.0.tgz")
              return new Response(tgz, { headers: { "content-type": "application/octet-stream" } });
            return new Response("not found", { status: 404 });
          },
        });
        try {
          const project = (ws: string) => {
            writeFileSync(
              join(ws, "package.json"),
              JSON.stringify({ name: "proj", version: "1.0.0", dependencies: { "tiny-pkg": "1.0.0" } }),
            );
            writeFileSync(
              join(ws, ".npmrc"),
              `registry=http://127.0.0.1:${registry.port}/\naudit=false\nfund=false\nupdate-notifier=false\nfetch-retries=0\n`,
            );
          };
          // Granted: the network and the cache.
          const ws = workspace();
          project(ws);
          const granted = await session({
            backend,
            client: "codex",
            ws,
            rules,
            config: `[shellmcp.room_network]\nnpm = ["127.0.0.1:${registry.port}"]\n[shellmcp.room_writable]\nnpm = ["~/.npm"]\n`,
          });
          mkdirSync(join(granted.home, ".npm"), { recursive: true });
          const out = await granted.run("npm install --no-audit --no-fund 2>&1; echo npm=$?");
          expect(out).toContain("npm=0");
          expect(readFileSync(join(ws, "node_modules", "tiny-pkg", "index.js"), "utf8")).toContain("tiny");
          expect(requests).toContain("/tiny-pkg/-/tiny-pkg-1.0.0.tgz");
          // Not granted: the room has the call's network (none), the install fails and nothing is fetched.
          const before = requests.length;
          const ws2 = workspace();
          project(ws2);
          const plain = await session({ backend, client: "codex", ws: ws2, rules, config: '[shellmcp.room_writable]\nnpm = ["~/.npm"]\n' });
          mkdirSync(join(plain.home, ".npm"), { recursive: true });
          const out2 = await plain.run("npm install --no-audit --no-fund 2>&1; echo npm=$?");
          expect(out2).not.toContain("npm=0");
          expect(existsSync(join(ws2, "node_modules", "tiny-pkg"))).toBe(false);
          expect(requests.length).toBe(before);
          // Granted another domain: its proxy refuses the loopback registry, and the tool result says so.
          const ws3 = workspace();
          project(ws3);
          const other = await session({
            backend,
            client: "codex",
            ws: ws3,
            rules,
            config: '[shellmcp.room_network]\nnpm = ["registry.npmjs.org"]\n[shellmcp.room_writable]\nnpm = ["~/.npm"]\n',
          });
          mkdirSync(join(other.home, ".npm"), { recursive: true });
          const out3 = await other.run("npm install --no-audit --no-fund 2>&1; echo npm=$?");
          expect(out3).not.toContain("npm=0");
          expect(out3).toContain("shellmcp: network access refused: 127.0.0.1:");
          expect(existsSync(join(ws3, "node_modules", "tiny-pkg"))).toBe(false);
          expect(requests.length).toBe(before);
        } finally {
          await registry.stop(true);
        }
      }, 90_000);
  });
});
