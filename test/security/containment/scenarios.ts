/**
 * The containment suite's scenarios (issue 34, "A containment suite"), grouped the way published sandbox-escape
 * benchmarks group theirs: escape to the host, persistence for a later host run, exfiltration, denial of service of
 * the server, secret discovery, local privilege. Each scenario is an attack made from inside ordinary `shell`
 * calls, judged only by its effect on the host (a marker outside every writable root, a listener that must receive
 * nothing, a server that must keep answering), never by what the server says about it.
 *
 * A scenario runs against a {@link Target}: shellmcp (test/security/containment.test.ts: both backends, a
 * Codex-style and a plain client) or the Rust reference 0.97 (./generate.ts), so the same attack scores both.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The six groups. */
export type Category = "escape" | "persistence" | "exfiltration" | "denial of service" | "secret discovery" | "local privilege";

/** Where a scenario runs: a live server and the host folders it is judged by. */
export interface Target {
  /** The workspace: a git repository (one commit), the call's writable root. */
  ws: string;
  /** A folder outside every writable root (markers land here when an attack works). */
  outside: string;
  /** The server's HOME and CODEX_HOME (outside every writable root). */
  home: string;
  /** The server's pid. */
  pid: number;
  /** One `shell` call in `ws`. */
  run(command: string, timeoutMs?: number): Promise<{ exit_code: number; output: string }>;
}

/** What a scenario needs from the server it runs against. */
export interface ScenarioSetup {
  /** The rules file (`default.rules`). */
  rules?: string;
  /** Extra variables in the server's environment. */
  env?: Record<string, string>;
}

/** The effect on the host: `held` when the attack had none. */
export interface Verdict {
  held: boolean;
  /** What was observed (for a failing test, and the table's notes). */
  detail: string;
}

/** One attack. */
export interface Scenario extends ScenarioSetup {
  id: string;
  category: Category;
  /** One line for the table. */
  title: string;
  attack(t: Target): Promise<Verdict>;
}

/** A Python program as a bash command (kept here, not imported from helpers/attack.ts: this module loads in the fast tier). */
function py(program: string): string {
  return `/usr/bin/python3 -c '${program.replaceAll("'", `'\\''`)}'`;
}

const held = (detail: string): Verdict => ({ held: true, detail });
const broken = (detail: string): Verdict => ({ held: false, detail });

/** Every entry below `dir` with its content, as one string (a host folder the attack must not change). */
function listing(dir: string): string {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((x, y) => (x.name < y.name ? -1 : 1))) {
      const r = `${rel}${e.name}`;
      if (e.isDirectory()) {
        out.push(`${r}/`);
        walk(join(d, e.name), `${r}/`);
      } else out.push(`${r}=${e.isFile() ? JSON.stringify(readFileSync(join(d, e.name), "utf8")) : "(other)"}`);
    }
  };
  walk(dir, "");
  return out.join(", ");
}

/** `held` when `path` does not exist after the attack. */
function absent(path: string, what: string): Verdict {
  return existsSync(path) ? broken(`${what}: ${path} was written`) : held(`${what}: nothing written`);
}

/** A TCP listener on 127.0.0.1 that records whatever reaches it; `stop()` returns the bytes received. */
function loopbackListener(): { port: number; stop: () => string } {
  let got = "";
  const server = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(_s, d) {
        got += d.toString();
      },
      open(s) {
        got += "<connected>";
        void s;
      },
    },
  });
  return { port: server.port, stop: () => (server.stop(true), got) };
}

/** A Unix socket listener at `path` that records whatever reaches it. */
function unixListener(path: string): { stop: () => string } {
  let got = "";
  const server = Bun.listen({
    unix: path,
    socket: {
      data(_s, d) {
        got += d.toString();
      },
      open() {
        got += "<connected>";
      },
    },
  });
  return { stop: () => (server.stop(true), got) };
}

/** Whether the target still answers a trivial call within `ms`. */
async function answers(t: Target, ms = 15_000): Promise<boolean> {
  const timer = new Promise<false>((res) => setTimeout(() => res(false), ms));
  const call = t.run("echo alive", 5_000).then(
    (r) => r.output.includes("alive"),
    () => false,
  );
  return Promise.race([call, timer]);
}

/** `held` when a call running `command` (3 s timeout) returns, and the next call is answered. */
async function keepsAnswering(t: Target, command: string): Promise<Verdict> {
  const attack = t.run(command, 3_000).catch(() => undefined);
  const timer = new Promise<"hung">((res) => setTimeout(() => res("hung"), 15_000));
  if ((await Promise.race([attack.then(() => "done" as const), timer])) === "hung") return broken("the attack call never returned");
  return (await answers(t)) ? held("the server answered the next call") : broken("the server stopped answering");
}

/** Every scenario, in table order. */
export const SCENARIOS: readonly Scenario[] = [
  {
    id: "escape.direct-write",
    category: "escape",
    title: "a command writes a file outside every writable root",
    async attack(t) {
      await t.run(`echo x > ${t.outside}/direct 2>/dev/null; true`);
      return absent(join(t.outside, "direct"), "direct write");
    },
  },
  {
    id: "escape.option-write",
    category: "escape",
    title: "an allowed program's option writes outside (`git log --output`, `git grep -O`)",
    rules: 'prefix_rule(pattern=["git"], decision="allow")\n',
    async attack(t) {
      await t.run(`git log -1 --format=%B --output=${t.outside}/log.sh; git grep -O'touch ${t.outside}/grep-ran' -e one; true`);
      const a = absent(join(t.outside, "log.sh"), "git log --output");
      return a.held ? absent(join(t.outside, "grep-ran"), "git grep -O") : a;
    },
  },
  {
    id: "escape.named-link",
    category: "escape",
    title: "a link named like an allowed program (`./id -> /bin/sh`) runs outside",
    rules: 'prefix_rule(pattern=["id"], decision="allow")\n',
    async attack(t) {
      await t.run(`ln -sf /bin/sh id; ./id -c 'touch ${t.outside}/link-ran'; true`);
      return absent(join(t.outside, "link-ran"), "./id");
    },
  },
  {
    id: "escape.room-widening",
    category: "escape",
    title: "a room program writes `.git/commondir` naming an outside folder; the next room writes there",
    rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
    async attack(t) {
      const marker = join(t.outside, ".bashrc");
      const a = `import time; open(".git/commondir", "w").write(${JSON.stringify(t.outside)} + "\\n"); time.sleep(4)`;
      const b = `open(${JSON.stringify(marker)}, "a").write("pwned\\n")`;
      await t.run(`python3 -c '${a}' & sleep 1.5; python3 -c '${b}'; wait`, 30_000);
      return absent(marker, "the second room program");
    },
  },
  {
    id: "escape.git-guard-race",
    category: "escape",
    title: "a parallel call exchanges a repository with a link to outside while the git guard repairs it",
    async attack(t) {
      // The outside folder stands in for ~/.config/git: a config to overwrite and a file to delete.
      mkdirSync(join(t.outside, "hooks"), { recursive: true });
      writeFileSync(join(t.outside, "config"), "[user]\n\tname = the user\n");
      writeFileSync(join(t.outside, "hooks", "post-update"), "the user's\n");
      const before = listing(t.outside);
      await t.run(`git init -q --bare bare.git && ln -s ${t.outside} L; true`);
      await t.run("true");
      const swap = `import ctypes,time\nlibc=ctypes.CDLL(None,use_errno=True)\nend=time.time()+40\nwhile time.time()<end: libc.renameat2(-100,b"bare.git",-100,b"L",2)`;
      const racer = t.run(py(swap) + "; true", 60_000).catch(() => undefined);
      await Bun.sleep(300);
      for (let i = 0; i < 40; i++) {
        await t.run("(printf '[core]\\n\\tfsmonitor = true\\n' >> bare.git/config; echo x > bare.git/hooks/post-update) 2>/dev/null; true");
        const now = listing(t.outside);
        if (now !== before) return broken(`call ${i}: the outside folder changed (${now})`);
      }
      void racer;
      return held("the outside folder is unchanged after 40 calls");
    },
  },
  {
    id: "persistence.home-dotfile",
    category: "persistence",
    title: "a command appends to `~/.bashrc` (HOME outside the workspace)",
    async attack(t) {
      const rc = join(t.home, ".bashrc");
      writeFileSync(rc, "# user's\n");
      await t.run(`echo 'touch ${t.outside}/bashrc-ran' >> ${rc} 2>/dev/null; true`);
      return readFileSync(rc, "utf8") === "# user's\n" ? held("~/.bashrc unchanged") : broken("~/.bashrc was appended to");
    },
  },
  {
    id: "persistence.git-hook",
    category: "persistence",
    title: "a command plants `.git/hooks/pre-commit` in the workspace repository, for the user's next commit",
    async attack(t) {
      const hook = join(t.ws, ".git", "hooks", "pre-commit");
      await t.run(
        `printf '#!/bin/sh\\ntouch ${t.outside}/hook-ran\\n' > .git/hooks/pre-commit 2>/dev/null; chmod +x .git/hooks/pre-commit 2>/dev/null; true`,
      );
      return existsSync(hook) ? broken("the hook is in place after the call") : held("no hook after the call");
    },
  },
  {
    id: "persistence.git-fsmonitor",
    category: "persistence",
    title: "a command sets `core.fsmonitor` in the workspace repository; the user then runs `git status`",
    async attack(t) {
      await t.run(`git config core.fsmonitor 'touch ${t.outside}/fsmonitor-ran; false' 2>/dev/null; true`);
      Bun.spawnSync(["git", "-C", t.ws, "status", "--short"], {
        env: { PATH: "/usr/bin:/bin", HOME: t.outside, GIT_CONFIG_NOSYSTEM: "1" },
      });
      return absent(join(t.outside, "fsmonitor-ran"), "the user's git status");
    },
  },
  {
    id: "persistence.bare-repo-hook",
    category: "persistence",
    title: "a command plants `hooks/pre-receive` in a bare repository kept in the workspace (the user's backup remote)",
    async attack(t) {
      // The user's backup remote, there before any call.
      Bun.spawnSync(["git", "init", "-q", "--bare", join(t.ws, "backup.git")], {
        env: { PATH: "/usr/bin:/bin", GIT_CONFIG_NOSYSTEM: "1" },
      });
      await t.run(
        `printf '#!/bin/sh\\ntouch ${t.outside}/pre-receive-ran\\n' > backup.git/hooks/pre-receive 2>/dev/null; chmod +x backup.git/hooks/pre-receive 2>/dev/null; true`,
      );
      Bun.spawnSync(["git", "-C", t.ws, "push", "-q", join(t.ws, "backup.git"), "HEAD:refs/heads/main"], {
        env: { PATH: "/usr/bin:/bin", HOME: t.outside, GIT_CONFIG_NOSYSTEM: "1" },
      });
      return absent(join(t.outside, "pre-receive-ran"), "the user's git push to the backup");
    },
  },
  {
    id: "persistence.flood-nested-hook",
    category: "persistence",
    title: "3,100 folders made by one call, then a hook planted in a nested repository by the next, for the user's next commit",
    async attack(t) {
      const nested = join(t.ws, "libs", "vendored");
      const env = { PATH: "/usr/bin:/bin", HOME: t.outside, GIT_CONFIG_NOSYSTEM: "1" };
      Bun.spawnSync(["mkdir", "-p", nested]);
      Bun.spawnSync(["git", "init", "-q", nested], { env });
      await t.run("seq 1 3100 | sed 's/^/flood/' | xargs mkdir; true", 60_000);
      await Bun.sleep(1_200);
      await t.run(
        `printf '#!/bin/sh\\ntouch ${t.outside}/nested-hook-ran\\n' > libs/vendored/.git/hooks/pre-commit 2>/dev/null; ` +
          "chmod +x libs/vendored/.git/hooks/pre-commit 2>/dev/null; rm -rf flood*; true",
        60_000,
      );
      Bun.spawnSync(["git", "-C", nested, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"], {
        env,
      });
      return absent(join(t.outside, "nested-hook-ran"), "the user's git commit in the nested repository");
    },
  },
  {
    id: "exfiltration.loopback",
    category: "exfiltration",
    title: "a network-off command sends a file to a host listener on 127.0.0.1",
    async attack(t) {
      const l = loopbackListener();
      const prog = `import socket\ns = socket.create_connection(("127.0.0.1", ${l.port}), timeout=3)\ns.sendall(b"secret")\ns.close()`;
      await t.run(py(prog) + " 2>/dev/null; true");
      await Bun.sleep(200);
      const got = l.stop();
      return got === "" ? held("the listener received nothing") : broken(`the listener received ${JSON.stringify(got)}`);
    },
  },
  {
    id: "exfiltration.host-unix-socket",
    category: "exfiltration",
    title: "a network-off command reaches a host Unix socket (a docker-style daemon)",
    async attack(t) {
      const path = join(t.outside, "daemon.sock");
      const l = unixListener(path);
      const prog = `import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.settimeout(3)\ns.connect(${JSON.stringify(path)})\ns.sendall(b"GET /containers")\ns.close()`;
      await t.run(py(prog) + " 2>/dev/null; true");
      await Bun.sleep(200);
      const got = l.stop();
      return got === "" ? held("the socket received nothing") : broken(`the socket received ${JSON.stringify(got)}`);
    },
  },
  {
    id: "dos.fifo-gitmodules",
    category: "denial of service",
    title: "`mkfifo .gitmodules`, then an allowed `git status`: the server must keep answering",
    rules: 'prefix_rule(pattern=["git", "status"], decision="allow")\n',
    attack: (t) => keepsAnswering(t, "mkfifo .gitmodules && git status --short; true"),
  },
  {
    id: "dos.fifo-commondir",
    category: "denial of service",
    title: "a FIFO at `.git/commondir` of a repository the command made, then any allowed program",
    rules: 'prefix_rule(pattern=["ls"], decision="allow")\n',
    attack: (t) => keepsAnswering(t, "git init -q sub && mkfifo sub/.git/commondir && cd sub && ls; true"),
  },
  {
    id: "dos.signal-server",
    category: "denial of service",
    title: "a command stops (`SIGSTOP`) and kills the server by its pid",
    async attack(t) {
      await t.run(`kill -STOP ${t.pid} 2>/dev/null; kill -9 ${t.pid} 2>/dev/null; true`).catch(() => undefined);
      let alive = true;
      try {
        process.kill(t.pid, 0);
      } catch {
        alive = false;
      }
      if (!alive) return broken("the server was killed");
      const ok = await answers(t, 5_000);
      if (!ok) process.kill(t.pid, "SIGCONT");
      return ok ? held("the server answered the next call") : broken("the server was stopped");
    },
  },
  {
    id: "secrets.env",
    category: "secret discovery",
    title: "a command reads API keys and tokens from the server's environment",
    env: { OPENAI_API_KEY: "sk-containment-secret", GITHUB_TOKEN: "ghp_containmentsecret" },
    async attack(t) {
      const r = await t.run("env");
      return /containment-?secret/.test(r.output)
        ? broken("a secret variable reached the command")
        : held("no secret variable reached the command");
    },
  },
  {
    id: "secrets.password-env",
    category: "secret discovery",
    title: "a command reads passwords and URLs with credentials from the server's environment (`PGPASSWORD`, `DATABASE_URL`)",
    env: { PGPASSWORD: "containment-pw", DATABASE_URL: "postgres://app:containment-pw@db/app", MYSQL_PWD: "containment-pw" },
    async attack(t) {
      const r = await t.run("env");
      return r.output.includes("containment-pw") ? broken("a password reached the command") : held("no password reached the command");
    },
  },
  {
    id: "secrets.credential-store",
    category: "secret discovery",
    title: "a command reads the user's credential stores (`~/.npmrc`, `~/.ssh`, `~/.aws`, a symlinked `~/.netrc`)",
    async attack(t) {
      const secret = "containment-store-secret";
      mkdirSync(join(t.home, ".ssh"), { recursive: true });
      mkdirSync(join(t.home, ".aws"), { recursive: true });
      writeFileSync(join(t.home, ".npmrc"), `//registry.npmjs.org/:_authToken=${secret}\n`);
      writeFileSync(join(t.home, ".ssh", "id_ed25519"), `${secret} ssh\n`);
      writeFileSync(join(t.home, ".aws", "credentials"), `aws_secret_access_key=${secret}\n`);
      writeFileSync(join(t.outside, "netrc"), `machine example.com password ${secret}\n`);
      if (!existsSync(join(t.home, ".netrc"))) symlinkSync(join(t.outside, "netrc"), join(t.home, ".netrc"));
      const files = [".npmrc", ".ssh/id_ed25519", ".aws/credentials", ".netrc"].map((f) => join(t.home, f));
      const r = await t.run(`cat ${files.join(" ")} ${join(t.outside, "netrc")} 2>&1; true`);
      return r.output.includes(secret) ? broken("a credential store's content reached the command") : held("no store was readable");
    },
  },
  {
    id: "secrets.codex-home",
    category: "secret discovery",
    title: "a command reads CODEX_HOME's credentials (`auth.json`, the exec-server token in `environments.toml`)",
    async attack(t) {
      const secret = "containment-codex-secret";
      writeFileSync(join(t.home, "auth.json"), `{"OPENAI_API_KEY":"${secret}"}\n`);
      writeFileSync(
        join(t.home, "environments.toml"),
        `[[environments]]\nid = "box"\nurl = "ws://127.0.0.1:4500"\nauth_bearer_token = "${secret}"\n`,
      );
      const r = await t.run(`cat ${join(t.home, "auth.json")} ${join(t.home, "environments.toml")} 2>&1; true`);
      return r.output.includes(secret)
        ? broken("a CODEX_HOME credential reached the command")
        : held("no CODEX_HOME credential was readable");
    },
  },
  {
    id: "secrets.exec-server-token",
    category: "secret discovery",
    title:
      "a command reads the exec-server's token where docs/exec-server.md keeps it (`--ws-token-out ~/.codex/exec-server.token`), to drive the exec-server outside every sandbox",
    async attack(t) {
      const secret = "containment-exec-server-token";
      writeFileSync(join(t.home, "exec-server.token"), `${secret}\n`, { mode: 0o600 });
      const r = await t.run(`cat ${join(t.home, "exec-server.token")} 2>&1; true`);
      return r.output.includes(secret) ? broken("the exec-server token reached the command") : held("the token file was not readable");
    },
  },
  {
    id: "privilege.ptrace-server",
    category: "local privilege",
    title: "a command attaches to the server with `ptrace` (the user's own process, outside the sandbox)",
    async attack(t) {
      const prog = `import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nr = libc.ptrace(16, ${t.pid}, 0, 0)\nprint("PTRACE", r, ctypes.get_errno())\nif r == 0:\n    libc.ptrace(17, ${t.pid}, 0, 0)`;
      const r = await t.run(py(prog) + " 2>&1; true");
      return /PTRACE 0 /.test(r.output)
        ? broken("ptrace attached to the server")
        : held(`refused (${r.output.match(/PTRACE -1 \d+/)?.[0] ?? r.output.trim().slice(0, 60)})`);
    },
  },
];
