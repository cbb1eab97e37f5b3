/**
 * Issue 22: every configuration holds. Attacks from inside a `shell` call of the compiled `serve` (real MCP client),
 * judged on the host, on both Linux backends.
 *
 * Item 1, no capability inside a sandbox: as root, under Landlock (until issue 22 the command kept every
 * capability: mknod of a /dev/kmsg node in the project, sethostname) and under bubblewrap (checked the same way);
 * and as an unprivileged user the test creates, under Landlock (nothing to gain: no_new_privs, empty sets).
 *
 * Item 2, the sandboxed tree cannot change limits, priorities or scheduling of processes outside it: from a
 * Landlock sandbox (same pid namespace as the host), prlimit on the server's RLIMIT_NOFILE used to make every later
 * call fail ("socketpair: Too many open files"); renice and taskset likewise reached any same-user process.
 * Signals are scoped by Landlock ABI ≥ 6 (kernel 6.12); below it (the ABI lowered here with
 * SHELLMCP_SIMULATE_LANDLOCK_ABI) a root server runs each command as pid 1 of its own pid namespace, and anyone
 * else is refused (test/sandbox/kernel-features.test.ts; docs/security.md, "Running as root / in containers").
 *
 * Item 4 (the part not covered by test/unit/bwrap-probe-cache.test.ts and test/e2e/self-contained.test.ts): when
 * bubblewrap fails after its preflight passed, the call says so, the cached success is forgotten, and the next
 * call probes again and falls back to Landlock (it used to fail with bwrap's raw error on every call).
 *
 * Item 5, a pinned workspace for clients that send no sandbox state (the Inspector, Claude Code, any SDK client):
 * under `serve --sandbox workspace-write` the writable root is the folder serve started in (or `--cd`), plus
 * `--add-dir`; a model's `workdir` elsewhere (until issue 22: `$HOME`, `/etc`…) runs there read-only.
 *
 * Item 6, shells are checked, not trusted: `serve --shell /bin/bash` (unpatched) with `rm` forbidden used to run
 * `rm`; now every call is refused with the fix, and the file stays.
 *
 * Item 7, failures and decisions reach the user: every decision other than a plain run is logged by default and
 * kept in `$CODEX_HOME/log/shellmcp.log` (a log file the sandbox replaced with a hard link is refused); when a prompt
 * rule wins, the denial says to change that rule (an added allow rule changes nothing). The broken-config case is
 * in test/mcp/serve.test.ts.
 *
 * Item 3, network off means no addressed send: a host Unix datagram socket (a journald/syslog stand-in) receives
 * nothing, neither from a new socket nor from `sendmsg` with a destination on the inherited escalation socket
 * (until issue 22 a datagram socketpair, which the kernel lets address any datagram socket).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, copyFileSync, existsSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, py, requirePrograms, serveWithPid } from "../helpers/attack.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { assertOutside, CONF_BASE } from "../helpers/test-dirs.ts";
import { patchedShell, shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

/** A host datagram socket at `path` that writes `marker` when anything arrives within `seconds`. */
function hostDatagramSink(path: string, marker: string, seconds: number) {
  const program = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(${seconds})
print("READY", flush=True)
try:
    data = s.recv(100)
    open(sys.argv[2], "w").write(repr(data))
except socket.timeout:
    pass
`;
  return Bun.spawn(["python3", "-c", program, path, marker], { stdout: "pipe", stderr: "ignore" });
}

const ADDRESSED_SENDS = (path: string) => `
import os, socket
esc = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM, 0, os.dup(int(os.environ["CODEX_ESCALATE_SOCKET"])))
try:
    esc.sendmsg([b"via-escalation-socket"], [], 0, ${JSON.stringify(path)}); print("sendmsg returned")
except OSError as e:
    print("sendmsg refused", e.errno)
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"via-new-socket", ${JSON.stringify(path)}); print("sendto returned")
except OSError as e:
    print("new datagram socket refused", e.errno)
print("DONE")
`;

/** What a sandboxed command reports about its own privileges, and whether mknod / sethostname work. */
const PRIVILEGES =
  'for f in CapInh CapPrm CapEff CapBnd CapAmb NoNewPrivs; do grep "^$f:" /proc/self/status; done; ' +
  "mknod kmsg c 1 11 2>/dev/null && echo MKNOD-OK || echo mknod-refused; " +
  "hostname shellmcp-evil 2>/dev/null && echo HOSTNAME-OK || echo hostname-refused";

/** The capability lines of `out` as a map (`CapEff` → hex). */
function caps(out: string): Record<string, string> {
  return Object.fromEntries([...out.matchAll(/^(Cap\w+|NoNewPrivs):\s*(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

const ZERO = "0000000000000000";
const isRoot = process.getuid?.() === 0;

/** A user created for one test (`useradd`; `remove()` deletes it), the `setpriv` prefix that becomes it, and a folder it owns. */
function createdUser(prefix: string) {
  const name = `${prefix}${process.pid}`;
  expect(Bun.spawnSync(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name]).exitCode).toBe(0);
  const id = (f: string) => Number(Bun.spawnSync(["id", f, name]).stdout.toString().trim());
  const as = ["setpriv", `--reuid=${id("-u")}`, `--regid=${id("-g")}`, "--clear-groups"];
  const ws = mkdtempSync(join(CONF_BASE, `${prefix}-ws-`));
  chownSync(ws, id("-u"), id("-g"));
  return { as, ws, remove: () => Bun.spawnSync(["userdel", name]) };
}

/** `shellmcp sandbox linux --backend landlock --sandbox workspace-write -- /bin/sh -c cmd` as `user`, in its folder. */
function landlockAs(user: { as: string[]; ws: string }, cmd: string) {
  const argv = [...user.as, ensureBinary(), "sandbox", "linux", "--backend", "landlock", "--sandbox", "workspace-write"];
  return Bun.spawnSync([...argv, "--", "/bin/sh", "-c", cmd], {
    cwd: user.ws,
    env: { PATH: "/usr/bin:/bin", HOME: user.ws },
    stderr: "pipe",
  });
}

describe.skipIf(skipWithout("configuration suite", shellsMissing()))("issue 22: every configuration holds", () => {
  requirePrograms("python3", "bwrap");
  describe.skipIf(
    skipWithout("item 1 (run as root)", isRoot ? undefined : "the capability tests need root (to be root, and to create a user)"),
  )("item 1: no capability inside a sandbox", () => {
    for (const backend of ["landlock", "bwrap"] as const) {
      test(`root, ${backend}, through serve: every capability set is empty; mknod and sethostname are refused`, async () => {
        const hostname = Bun.spawnSync(["hostname"]).stdout.toString().trim();
        const s = await serveWithPid({ args: ["--sandbox-backend", backend] });
        const ws = confDir("caps-ws");
        expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
        const r = await s.shell({ command: PRIVILEGES, workdir: ws, login: false });
        expect(caps(r.out.output)).toEqual({ CapInh: ZERO, CapPrm: ZERO, CapEff: ZERO, CapBnd: ZERO, CapAmb: ZERO, NoNewPrivs: "1" });
        expect(r.out.output).toContain("mknod-refused");
        expect(r.out.output).toContain("hostname-refused");
        expect(existsSync(join(ws, "kmsg"))).toBe(false);
        expect(Bun.spawnSync(["hostname"]).stdout.toString().trim()).toBe(hostname);
      }, 60_000);
    }

    test("an unprivileged user (created here), landlock: no capability, no_new_privs, mknod refused", () => {
      const user = createdUser("smcp");
      try {
        const r = landlockAs(user, PRIVILEGES);
        const out = r.stdout.toString();
        expect({ code: r.exitCode, err: r.stderr.toString() }).toMatchObject({ code: 0 });
        // A user without CAP_SETPCAP cannot empty its bounding set; no_new_privs means nothing in it is gained.
        expect(caps(out)).toMatchObject({ CapInh: ZERO, CapPrm: ZERO, CapEff: ZERO, CapAmb: ZERO, NoNewPrivs: "1" });
        expect(out).toContain("mknod-refused");
        expect(existsSync(join(user.ws, "kmsg"))).toBe(false);
      } finally {
        user.remove();
      }
    }, 60_000);
  });
  test("item 2 (landlock): prlimit, renice and taskset of the server are refused; later calls still work; own limits still work", async () => {
    const s = await serveWithPid({ args: ["--sandbox-backend", "landlock"] });
    const ws = confDir("prlimit-ws");
    const before = require("node:fs")
      .readFileSync(`/proc/${s.pid}/limits`, "utf8")
      .match(/Max open files.*/)![0];
    const nice = () =>
      Bun.spawnSync(["ps", "-o", "ni=", "-p", String(s.pid)])
        .stdout.toString()
        .trim();
    const niceBefore = nice();
    const r = await s.shell({
      command: [
        py(
          `import resource\ntry:\n    resource.prlimit(${s.pid}, resource.RLIMIT_NOFILE, (8, 8)); print("PRLIMIT-SET")\nexcept OSError as e:\n    print("prlimit refused", e.errno)`,
        ),
        `renice -n 19 -p ${s.pid} >/dev/null 2>&1 && echo RENICED || echo renice-refused`,
        `taskset -p 1 ${s.pid} >/dev/null 2>&1 && echo TASKSET || echo taskset-refused`,
        "ulimit -n 64 && echo own-ulimit-ok",
      ].join("; "),
      workdir: ws,
      login: false,
    });
    expect(r.out.output).toBe("prlimit refused 1\nrenice-refused\ntaskset-refused\nown-ulimit-ok\n");
    expect(
      require("node:fs")
        .readFileSync(`/proc/${s.pid}/limits`, "utf8")
        .match(/Max open files.*/)![0],
    ).toBe(before);
    expect(nice()).toBe(niceBefore);
    expect((await s.shell({ command: "echo still-serving", workdir: ws, login: false })).out.output).toBe("still-serving\n");
  }, 60_000);

  test.skipIf(skipWithout("item 2 below Landlock ABI 6 (run as root)", isRoot ? undefined : "the pid namespace needs root"))(
    "item 2 (landlock, ABI lowered to 5, root): the command cannot signal the server or a host process; later calls still work",
    async () => {
      const host = Bun.spawn(["sleep", "60"]);
      try {
        const s = await serveWithPid({ args: ["--sandbox-backend", "landlock"], env: { SHELLMCP_SIMULATE_LANDLOCK_ABI: "5" } });
        const ws = confDir("pidns-ws");
        const probe = (pid: number) => `kill -0 ${pid} 2>/dev/null && echo REACHED-${pid} || echo refused`;
        const r = await s.shell({
          command: `${probe(s.pid)}; ${probe(host.pid)}; kill -STOP ${s.pid} 2>/dev/null; echo done`,
          workdir: ws,
          login: false,
        });
        expect(r.out.output).toBe("refused\nrefused\ndone\n");
        expect(require("node:fs").readFileSync(`/proc/${s.pid}/status`, "utf8")).not.toMatch(/^State:\s+T/m); // not stopped
        expect((await s.shell({ command: "echo still-serving", workdir: ws, login: false })).out.output).toBe("still-serving\n");
      } finally {
        host.kill(9);
      }
    },
    60_000,
  );

  test.skipIf(skipWithout("item 2 as an unprivileged user (run as root)", isRoot ? undefined : "needs root to create a user"))(
    "item 2 (landlock), an unprivileged user (created here): a process of the same user is out of reach (limits, priority, signals)",
    async () => {
      const user = createdUser("smcq");
      const victim = Bun.spawn([...user.as, "sleep", "60"]);
      try {
        const attack = [
          py(
            `import resource\ntry:\n    resource.prlimit(${victim.pid}, resource.RLIMIT_NOFILE, (8, 8)); print("PRLIMIT-SET")\nexcept OSError as e:\n    print("prlimit refused")`,
          ),
          `renice -n 19 -p ${victim.pid} >/dev/null 2>&1 && echo RENICED || echo renice-refused`,
          `kill -STOP ${victim.pid} 2>/dev/null && echo STOPPED || echo kill-refused`,
        ].join("; ");
        const r = landlockAs(user, attack);
        expect({ out: r.stdout.toString(), err: r.stderr.toString() }).toMatchObject({
          out: "prlimit refused\nrenice-refused\nkill-refused\n",
        });
        expect(require("node:fs").readFileSync(`/proc/${victim.pid}/limits`, "utf8")).not.toMatch(/Max open files\s+8\s/);
        expect(require("node:fs").readFileSync(`/proc/${victim.pid}/status`, "utf8")).not.toMatch(/^State:\s+T/m);
        // Control: the same user outside the sandbox does reach it.
        const control = Bun.spawnSync([...user.as, "/bin/sh", "-c", `kill -0 ${victim.pid} && echo reached`], { stderr: "pipe" });
        expect(control.stdout.toString()).toBe("reached\n");
      } finally {
        victim.kill(9);
        // userdel refuses a user whose process is still there: wait for the victim first (a user was left behind).
        await victim.exited;
        user.remove();
      }
    },
    60_000,
  );

  test("item 4: bubblewrap failing after a passed preflight is explained, then re-probed and replaced by Landlock", async () => {
    const dir = confDir("fake-bwrap");
    const broken = join(dir, "broken");
    const real = Bun.which("bwrap")!;
    require("node:fs").writeFileSync(
      join(dir, "bwrap"),
      `#!/bin/sh\nif [ -e ${broken} ]; then echo "bwrap: setting up uid map: Permission denied" >&2; exit 1; fi\nexec ${real} "$@"\n`,
      { mode: 0o755 },
    );
    const s = await serveWithPid({ env: { SHELLMCP_BWRAP: join(dir, "bwrap") } });
    const ws = confDir("fake-bwrap-ws");
    const call = async () => (await s.shell({ command: "echo ran", workdir: ws, login: false })).out.output;
    expect(await call()).toBe("ran\n");
    require("node:fs").writeFileSync(broken, "");
    expect(await call()).toContain("bubblewrap failed although its preflight had passed");
    expect(await call()).toBe("ran\n"); // probed again: Landlock now
    expect(s.stderr()).toContain("commands run under Landlock + seccomp");
  }, 60_000);

  // Item 4, the executable itself: installed where a sandboxed command can write (npx puts it under ~/.npm/_npx, and
  // HOME may be a writable root), the sandbox helper that `serve` starts for each call must still be the program
  // that started: `serve` execs itself as /proc/<pid>/exe, never by its path or a role link beside it.
  test("item 4: a command that replaces the executable and its role links beside it decides nothing outside its sandbox", async () => {
    const dir = confDir("exe-writable");
    const exe = join(dir, "shellmcp");
    copyFileSync(ensureBinary(), exe);
    chmodSync(exe, 0o755);
    for (const role of ["codex-linux-sandbox", "codex-execve-wrapper"]) symlinkSync("shellmcp", join(dir, role));
    const outside = assertOutside(confDir("exe-outside"));
    const s = await serveWithPid({ command: [exe], args: ["--sandbox-backend", "landlock", "--sandbox", "workspace-write"], cwd: dir });
    const evil = `#!/bin/sh\necho escaped > ${outside}/marker\n`;
    const replace = `printf '${evil}' > evil && chmod +x evil && mv -f evil shellmcp && echo replaced`;
    expect((await s.shell({ command: replace, workdir: dir, login: false })).out.output).toStartWith("replaced\n"); // + the first Landlock call's git guard notice
    expect(readFileSync(exe, "utf8")).toContain("escaped"); // the file at the executable's path is the command's now
    expect((await s.shell({ command: "echo second call", workdir: dir, login: false })).out.output).toBe("second call\n");
    expect(existsSync(join(outside, "marker"))).toBe(false);
  }, 60_000);

  // Item 6, the start-up check of the shell: it runs the shell once, inside a read-only sandbox like every call, so a
  // shell file a command could have replaced (here: one that writes outside, then runs the patched bash) runs
  // nowhere else either.
  test("item 6: the start-up shell check runs the shell inside a sandbox", async () => {
    const dir = confDir("probe-shell");
    const outside = assertOutside(confDir("probe-outside"));
    const fake = join(dir, "bash");
    writeFileSync(fake, `#!/bin/sh\n{ echo ran >> ${outside}/marker; } 2>/dev/null\nexec ${patchedShell("bash")} "$@"\n`, { mode: 0o755 });
    const s = await serveWithPid({ args: ["--shell", fake, "--sandbox", "workspace-write"], cwd: dir });
    expect((await s.shell({ command: "echo ok", workdir: dir, login: false })).out.output).toBe("ok\n"); // passed the check
    expect(existsSync(join(outside, "marker"))).toBe(false);
  }, 60_000);

  test("item 5: a client's MCP roots join the workspace (the workdir still does not)", async () => {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
    const { ListRootsRequestSchema } = await import("@modelcontextprotocol/sdk/types.js");
    const ws = confDir("roots-ws");
    const root = confDir("roots-root");
    const elsewhere = confDir("roots-elsewhere");
    const home = confDir("roots-home");
    const transport = new StdioClientTransport({
      command: ensureBinary(),
      args: ["serve", "--sandbox", "workspace-write"],
      cwd: ws,
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: home, CODEX_HOME: home },
      stderr: "pipe",
    });
    const client = new Client({ name: "roots-client", version: "0" }, { capabilities: { roots: { listChanged: true } } });
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: `file://${root}`, name: "project" }] }));
    await client.connect(transport);
    try {
      const touch = async (workdir: string) => {
        const r = (await client.callTool({ name: "shell", arguments: { command: "touch made && echo MADE", workdir, login: false } })) as {
          content: { text: string }[];
        };
        return (JSON.parse(r.content[0]!.text) as { output: string }).output;
      };
      expect(await touch(root)).toContain("MADE");
      expect(await touch(ws)).toContain("MADE");
      expect(await touch(elsewhere)).toContain("Read-only file system");
      expect(existsSync(join(elsewhere, "made"))).toBe(false);
    } finally {
      await client.close();
    }
  }, 60_000);

  test("item 5: without client sandbox state the workspace is the server's, not the model's workdir", async () => {
    const ws = confDir("pinned-ws");
    const extra = confDir("pinned-extra");
    const elsewhere = confDir("pinned-elsewhere"); // stands in for $HOME or /etc
    const s = await serveWithPid({ args: ["--sandbox", "workspace-write", "--add-dir", extra], cwd: ws });
    const touch = async (workdir: string) => (await s.shell({ command: "touch made && echo MADE", workdir, login: false })).out.output;
    expect(await touch(ws)).toContain("MADE");
    expect(await touch(extra)).toContain("MADE");
    expect(await touch(elsewhere)).toContain("Read-only file system");
    expect(existsSync(join(elsewhere, "made"))).toBe(false);
    // And --cd names another workspace than the start folder.
    const s2 = await serveWithPid({ args: ["--sandbox", "workspace-write", "--cd", elsewhere], cwd: ws });
    const r = await s2.shell({ command: "touch via-cd && echo MADE", workdir: elsewhere, login: false });
    expect(r.out.output).toContain("MADE");
    expect((await s2.shell({ command: "touch nope && echo MADE", workdir: ws, login: false })).out.output).not.toContain("MADE");
  }, 60_000);

  test("item 6: an unpatched shell is refused (every call fails closed, naming the fix); the patched ones pass the check", async () => {
    const ws = confDir("unpatched");
    const victim = join(ws, "victim");
    require("node:fs").writeFileSync(victim, "keep\n");
    const s = await serveWithPid({
      rules: 'prefix_rule(pattern=["rm"], decision="forbidden")\n',
      args: ["--shell", "/bin/bash", "--sandbox", "danger-full-access"],
    });
    const r = (await s.client.callTool({ name: "shell", arguments: { command: `rm ${victim}`, workdir: ws } })) as {
      isError?: boolean;
      content: { text: string }[];
    };
    expect(r.isError).toBe(true);
    expect(r.content[0]!.text).toContain("does not hand its execs to shellmcp (it is not a patched shell)");
    expect(existsSync(victim)).toBe(true);
    for (const shell of ["bash", "zsh"]) {
      const ok = await serveWithPid({
        rules: 'prefix_rule(pattern=["rm"], decision="forbidden")\n',
        args: ["--shell", shell, "--sandbox", "danger-full-access"],
      });
      expect((await ok.shell({ command: `rm ${victim}; echo rc=$?`, workdir: ws, login: false })).out.output).toContain("Execution denied");
      expect(existsSync(victim)).toBe(true);
    }
  }, 60_000);

  test("item 7: decisions are logged by default and kept in the log file; a prompt rule's denial says how to change it", async () => {
    const rules =
      'prefix_rule(pattern=["rm"], decision="forbidden")\nprefix_rule(pattern=["touch"], decision="allow")\nprefix_rule(pattern=["git", "push"], decision="prompt")\n';
    const s = await serveWithPid({ rules });
    const ws = confDir("log-ws");
    const r = await s.shell({ command: "rm nothing; touch nothing; git push", workdir: ws, login: false });
    expect(r.out.output).toContain('a prompt rule matching ["git","push"] asks for it');
    expect(r.out.output).toContain('change that rule\'s decision to "allow"');
    const logFile = join(s.codexHome, "log", "shellmcp.log");
    for (const text of [s.stderr(), require("node:fs").readFileSync(logFile, "utf8") as string]) {
      expect(text).toContain('notice: denied {"file":"/usr/bin/rm"');
      expect(text).toMatch(/notice: (escalated|not escalated)[^\n]*"\/usr\/bin\/touch"/);
      expect(text).toContain('notice: prompt not asked (the client cannot) {"file":"/usr/bin/git"');
    }
    // A log file the sandbox replaced with a hard link (to something a shell runs) is not written.
    const home = confDir("log-home");
    require("node:fs").mkdirSync(join(home, "log"));
    const bashrc = join(home, "bashrc");
    require("node:fs").writeFileSync(bashrc, "# mine\n");
    require("node:fs").linkSync(bashrc, join(home, "log", "shellmcp.log"));
    const s2 = await serveWithPid({ rules, codexHome: home });
    await s2.shell({ command: "rm nothing", workdir: ws, login: false });
    expect(require("node:fs").readFileSync(bashrc, "utf8")).toBe("# mine\n");
    expect(s2.stderr()).toContain("not logging to a file");
  }, 60_000);

  for (const backend of ["bwrap", "landlock"] as const) {
    test(`item 3 (${backend}): no addressed send reaches a host datagram socket`, async () => {
      const dir = confDir("dgram");
      const sock = join(dir, "journal.sock");
      const marker = join(dir, "received");
      const sink = hostDatagramSink(sock, marker, 6);
      const reader = sink.stdout.getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toContain("READY");
      const s = await serveWithPid({ args: ["--sandbox-backend", backend] });
      const ws = confDir("dgram-ws");
      const r = await s.shell({ command: py(ADDRESSED_SENDS(sock)), workdir: ws, login: false });
      expect(r.out.output).toContain("DONE");
      expect(r.out.output).toContain("new datagram socket refused 1");
      sink.kill();
      await sink.exited;
      expect(existsSync(marker)).toBe(false);
    }, 60_000);
  }
});
