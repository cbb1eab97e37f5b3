/**
 * Issue 31, item 5, through the compiled binary: each start-up failure tells the client what to do about it (the
 * file and line, the flag, the folder), not just "Fix it"; and the "no per-call cgroups" warning is said once
 * per user and boot (remembered in `$XDG_RUNTIME_DIR/shellmcp`), then only logged at debug level. Issue 33: once
 * idle, `serve` gives back the code pages it touched (its idle RSS).
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { startServe } from "../helpers/mcp.ts";
import { SERVER_PROC_HIDDEN } from "../helpers/attack.ts";
import { BINARY } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { shouldSayNoCgroups } from "../../src/shell/cgroup.ts";
import { IdleRelease, startupRemedy, TERMINAL_HINT, WORKER_PARK_MS, workerParkMs } from "../../src/serve.ts";
import { openPty } from "../../ffi/libc.ts";
import { ShellmcpError } from "../../src/errors.ts";
import { portableShellBases } from "../../src/carried/portable-shells.ts";
import { xdgRuntimeDir } from "../../src/sandbox/linux/bwrap-probe-cache.ts";

const skip = skipWithout("start-up frictions (binary)", shellsMissing());
const base = join(CONF_BASE, `startup-frictions-${process.pid}`);
let n = 0;
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** A fresh CODEX_HOME (with HOME the same folder) outside every writable root. */
function home(): string {
  const h = join(base, `home-${n++}`);
  mkdirSync(join(h, "rules"), { recursive: true });
  return h;
}

/** The text of the first `shell` call's error result, from a server started with `args` and `env`. */
async function brokenCallText(
  codexHome: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<{ text: string; stderr: string }> {
  const s = await startServe({ codexHome, args, env });
  try {
    const r = (await s.client.callTool({ name: "shell", arguments: { command: "true", workdir: codexHome } })) as {
      isError?: boolean;
      content: { text: string }[];
    };
    expect(r.isError).toBe(true);
    return { text: r.content[0]!.text, stderr: s.stderr() };
  } finally {
    await s.close();
  }
}

describe.skipIf(skip)("a start-up failure says how to fix it", () => {
  test("config.toml that is not TOML: the file, line and column, and what to do", async () => {
    const h = home();
    writeFileSync(join(h, "config.toml"), 'model = "x"\nfeatures = [\n');
    const { text, stderr } = await brokenCallText(h);
    expect(text).toStartWith(`shellmcp cannot run commands: cannot parse ${join(h, "config.toml")}`);
    expect(text).toContain(`To fix: correct ${join(h, "config.toml")} at line `);
    expect(text).toMatch(/at line \d+, column \d+ \(it is TOML 1\.0\), or move it aside to start from the defaults\./);
    expect(text).toEndWith("Then restart the MCP server (or the client that started it).");
    expect(text).not.toContain("Fix it,");
    expect(stderr).toContain("  To fix: correct ");
  });

  test("a wrong key in config.toml: where to correct it", async () => {
    const h = home();
    writeFileSync(join(h, "config.toml"), '[shellmcp]\nescalation = "everywhere"\n');
    const { text } = await brokenCallText(h);
    expect(text).toContain('shellmcp.escalation must be "room" or "host"');
    expect(text).toContain("To fix: correct that key in $CODEX_HOME/config.toml (default ~/.codex/config.toml), or the -c override");
  });

  test("a rules file that does not parse: the file and line, and the command that re-checks it", async () => {
    const h = home();
    writeFileSync(join(h, "rules", "default.rules"), '\nprefix_rule(pattern = ["rm"], decision = "forbiden")\n');
    const { text } = await brokenCallText(h);
    expect(text).toContain(`To fix: correct ${join(h, "rules", "default.rules")} at line 2`);
    expect(text).toContain('"shellmcp execpolicy check --rules FILE -- true"');
  });

  test("a bad flag: the server's args in the client's configuration", async () => {
    const { text } = await brokenCallText(home(), ["--sandbox", "workspace-writ"]);
    expect(text).toContain("--sandbox must be read-only, workspace-write or danger-full-access (got workspace-writ)");
    expect(text).toContain(
      'To fix: correct that flag in the command line that starts the server (its `args` in your MCP client\'s configuration); "shellmcp serve --help" lists every flag.',
    );
  });

  test("a CODEX_HOME that does not exist: create it or unset it", async () => {
    const h = home();
    const missing = join(h, "nope");
    const { text } = await brokenCallText(h, [], { CODEX_HOME: missing });
    expect(text).toContain(`CODEX_HOME points to "${missing}", but that path does not exist`);
    expect(text).toContain(`To fix: create that folder (mkdir -p ${missing}), or unset CODEX_HOME to use ~/.codex.`);
  });

  test("--shell that does not exist: which flag and variable to change", async () => {
    const h = home();
    const { text } = await brokenCallText(h, ["--shell", join(h, "no-such-bash")]);
    expect(text).toContain(`shell not found: ${join(h, "no-such-bash")}`);
    expect(text).toContain("To fix: pass --shell the path of a patched bash or zsh that exists, or drop --shell and CODEX_BASH_PATH");
  });

  test("messages that already say what to do get no second remedy (CODEX_HOME where sandboxes write)", async () => {
    const h = home();
    const inTmp = join(process.env.TMPDIR ?? "/tmp", `startup-frictions-home-${process.pid}`);
    mkdirSync(inTmp, { recursive: true });
    try {
      const { text } = await brokenCallText(h, [], { CODEX_HOME: inTmp });
      expect(text).toContain("Set CODEX_HOME to a folder outside /tmp, $TMPDIR and /dev/shm");
      expect(text).not.toContain("To fix:");
      expect(text).toEndWith("Then restart the MCP server (or the client that started it).");
    } finally {
      rmSync(inTmp, { recursive: true, force: true });
    }
  });
});

test("the remedies no binary test reaches: no folder for the carried shell, an error that is not a configuration one", () => {
  const r = startupRemedy(new ShellmcpError("CONFIG", "no folder to put the portable bash in: …", { refused: ["x"] }));
  for (const base of portableShellBases()) expect(r).toContain(base);
  expect(r).toContain("SHELLMCP_SHELLS_DIR");
  expect(startupRemedy(new Error("boom"))).toContain("SHELLMCP_LOG=debug");
  expect(startupRemedy(new ShellmcpError("CONFIG", "CODEX_HOME … lies in /tmp …", { codexHome: "/tmp/x", writableBy: "/tmp" }))).toBe("");
});

describe.skipIf(skip)("the cgroup warning is said once per user and boot", () => {
  /** Start serve with no cgroups and `xdg` as XDG_RUNTIME_DIR, answer `initialize`, stop; its stderr. */
  async function start(h: string, xdg: string, log?: string): Promise<string> {
    const s = await startServe({
      codexHome: h,
      env: { SHELLMCP_NO_CGROUP: "1", XDG_RUNTIME_DIR: xdg, ...(log !== undefined ? { SHELLMCP_LOG: log } : {}) },
    });
    await s.client.listTools();
    await Bun.sleep(200); // the runtime starts beside the session
    const err = s.stderr();
    await s.close();
    return err;
  }

  test("first start says it; the next ones do not (debug level still logs it); another reason is said again", async () => {
    const h = home();
    const xdg = join(base, "xdg");
    mkdirSync(xdg, { recursive: true, mode: 0o700 });
    chmodSync(xdg, 0o700);
    const WARNING = "shellmcp: no per-call cgroups (turned off by SHELLMCP_NO_CGROUP=1)";
    expect(await start(h, xdg)).toContain(WARNING);
    expect(readFileSync(join(xdg, "shellmcp", "cgroup-warned"), "utf8")).toContain("turned off by SHELLMCP_NO_CGROUP=1");
    expect(await start(h, xdg)).not.toContain("no per-call cgroups");
    expect(await start(h, xdg, "debug")).toContain("shellmcp debug: no per-call cgroups (turned off by SHELLMCP_NO_CGROUP=1)");
    // Another reason, or another runtime folder (another boot or user): said again.
    expect(shouldSayNoCgroups("cannot create cgroups under /sys/fs/cgroup/a: EACCES", join(xdg, "shellmcp"))).toBe(true);
    expect(shouldSayNoCgroups("cannot create cgroups under /sys/fs/cgroup/b: EACCES", join(xdg, "shellmcp"))).toBe(false); // paths aside, the same reason
    const xdg2 = join(base, "xdg2");
    mkdirSync(xdg2, { mode: 0o700 });
    expect(await start(h, xdg2)).toContain(WARNING);
  });

  test("no memory where it could be forged or is not ours: said every time", async () => {
    const h = home();
    // A runtime folder others can write is no XDG_RUNTIME_DIR (root would fall back to /run/shellmcp, the
    // machine's own state, which tests leave alone: checked without the binary).
    const open = join(base, "xdg-open");
    mkdirSync(open, { recursive: true });
    chmodSync(open, 0o777);
    expect(xdgRuntimeDir(process.getuid!(), { XDG_RUNTIME_DIR: open })).toBeUndefined();
    expect(xdgRuntimeDir(process.getuid!(), { XDG_RUNTIME_DIR: "relative" })).toBeUndefined();
    expect(shouldSayNoCgroups("x", undefined)).toBe(true);
    // A memory file that is a symlink to one that says it all: not believed.
    const xdg = join(base, "xdg-link");
    mkdirSync(join(xdg, "shellmcp"), { recursive: true, mode: 0o700 });
    chmodSync(xdg, 0o700);
    chmodSync(join(xdg, "shellmcp"), 0o700);
    writeFileSync(join(base, "forged"), "turned off by SHELLMCP_NO_CGROUP=1\n");
    symlinkSync(join(base, "forged"), join(xdg, "shellmcp", "cgroup-warned"));
    expect(await start(h, xdg)).toContain("no per-call cgroups");
    // In a temporary folder (a writable root of sandboxes): never used.
    expect(shouldSayNoCgroups("x", "/tmp/anything/shellmcp")).toBe(true);
    expect(shouldSayNoCgroups("x", "/tmp/anything/shellmcp")).toBe(true);
    expect(existsSync("/tmp/anything")).toBe(false);
  });
});

describe.skipIf(skip)("serve typed in a terminal (issue 41)", () => {
  /** serve's stderr over its first second, with `stdin` as its standard input. */
  async function firstSecond(stdin: number | "pipe"): Promise<string> {
    const h = home();
    const p = Bun.spawn([BINARY, "serve"], {
      env: { PATH: process.env.PATH, HOME: h, CODEX_HOME: h, TMPDIR: process.env.TMPDIR },
      stdin,
      stdout: "ignore",
      stderr: "pipe",
    });
    const timer = setTimeout(() => p.kill(), 1000);
    const err = await new Response(p.stderr).text();
    clearTimeout(timer);
    await p.exited;
    return err;
  }

  test("a terminal on stdin gets the one-line hint on stderr; a client's pipe does not", async () => {
    const pty = openPty();
    try {
      const err = await firstSecond(pty.slave);
      expect(err).toContain(TERMINAL_HINT);
      expect(err.split("\n").filter((l) => l.includes("MCP server on stdio"))).toHaveLength(1);
    } finally {
      closeSync(pty.master);
      closeSync(pty.slave);
    }
    expect(await firstSecond("pipe")).not.toContain("MCP server on stdio");
  });
});

/**
 * Issue 41: a user without XDG_RUNTIME_DIR (`su`, `sudo -u`, a container, ssh without systemd) heard the warning on
 * every start (no folder to remember it in). Run as `nobody` (uid 65534) with no XDG_RUNTIME_DIR: the memory goes
 * to `~/.cache/shellmcp/cgroup-warned`, under this boot's id.
 */
describe.skipIf(skip || process.getuid?.() !== 0)("the cgroup warning for a user without XDG_RUNTIME_DIR", () => {
  test("said on the first start only", async () => {
    const h = join(base, "nobody");
    mkdirSync(join(h, "tmp"), { recursive: true });
    chmodSync(base, 0o755);
    chownSync(h, 65534, 65534);
    chownSync(join(h, "tmp"), 65534, 65534);
    const start = async () => {
      const p = Bun.spawn(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BINARY, "serve"], {
        cwd: h, // nobody's own folder: the checkout (this process's folder) may be closed to it
        env: { PATH: process.env.PATH, HOME: h, TMPDIR: join(h, "tmp"), SHELLMCP_NO_CGROUP: "1" },
        stdin: "ignore",
        stdout: "ignore",
        stderr: "pipe",
      });
      const err = await new Response(p.stderr).text();
      await p.exited;
      return err;
    };
    expect(await start()).toContain("no per-call cgroups (turned off by SHELLMCP_NO_CGROUP=1)");
    const memory = readFileSync(join(h, ".cache", "shellmcp", "cgroup-warned"), "utf8");
    expect(memory).toContain(readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim());
    expect(await start()).not.toContain("no per-call cgroups");
    // Another boot (its id differs): said again.
    writeFileSync(join(h, ".cache", "shellmcp", "cgroup-warned"), memory.replace(/^\S+/gm, "another-boot"));
    expect(await start()).toContain("no per-call cgroups");
  });
});

/** The pid of the `serve` process started with CODEX_HOME `h`. */
function serverPid(h: string): number {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!readFileSync(`/proc/${name}/cmdline`, "utf8").includes("serve")) continue;
      if (readFileSync(`/proc/${name}/environ`, "utf8").split("\0").includes(`CODEX_HOME=${h}`)) return Number(name);
    } catch {
      // gone, or not ours
    }
  }
  throw new Error(`no serve process with CODEX_HOME=${h}`);
}

/** Resident KiB of the r-xp mappings of `pid`'s executable (its code). */
function codeKiB(pid: number): number {
  const exe = realpathSync(`/proc/${pid}/exe`);
  let kb = 0;
  for (const block of readFileSync(`/proc/${pid}/smaps`, "utf8").split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
    const head = /^[0-9a-f]+-[0-9a-f]+ r-xp \S+ \S+ \d+\s+(.*)$/m.exec(block);
    if (head?.[1] === exe) kb += Number(/^Rss:\s+(\d+) kB/m.exec(block)?.[1] ?? 0);
  }
  return kb;
}

describe("issue 33: idle, serve gives back the code pages it touched", () => {
  test("IdleRelease: once after start-up settles, never while a call runs, again after the last call", async () => {
    let n = 0;
    const idle = new IdleRelease(() => n++, 60);
    idle.settled();
    await Bun.sleep(120);
    expect(n).toBe(1);
    const call = idle.during(() => Bun.sleep(200));
    await Bun.sleep(120);
    expect(n).toBe(1); // a call runs
    await call;
    await Bun.sleep(30);
    expect(n).toBe(1); // not yet idle long enough
    await Bun.sleep(100);
    expect(n).toBe(2);
  });

  test("SHELLMCP_WORKER_PARK_MS: a whole number of ms (0: never); anything else is said on stderr and the default holds", () => {
    const said: string[] = [];
    const ms = (v: string | undefined) => workerParkMs(v === undefined ? {} : { SHELLMCP_WORKER_PARK_MS: v }, (l) => said.push(l));
    expect([ms(undefined), ms("0"), ms("1500")]).toEqual([WORKER_PARK_MS, 0, 1500]);
    expect(said).toEqual([]);
    for (const bad of ["", "-1", "1.5", "30s", "9999999999", " 30"]) expect(ms(bad)).toBe(WORKER_PARK_MS);
    expect(said).toHaveLength(6);
    expect(said[3]).toBe(
      `shellmcp serve: SHELLMCP_WORKER_PARK_MS="30s" is not a whole number of milliseconds (0: never); the worker parks after ${WORKER_PARK_MS} ms\n`,
    );
  });

  test("IdleRelease parks right after start-up's release, then parkMs after the last call, never while a call runs", async () => {
    const events: string[] = [];
    const idle = new IdleRelease(
      () => events.push("release"),
      60,
      () => events.push("park"),
      300,
    );
    idle.settled();
    await Bun.sleep(60 + IdleRelease.PARK_AFTER_START_MS + 100);
    expect(events).toEqual(["release", "park"]);
    const call = idle.during(() => Bun.sleep(400));
    await Bun.sleep(350);
    expect(events).toEqual(["release", "park"]); // a call runs
    await call;
    await Bun.sleep(150);
    expect(events).toEqual(["release", "park", "release"]); // released, not parked yet
    await Bun.sleep(250);
    expect(events).toEqual(["release", "park", "release", "park"]);
  });

  test.skipIf(skip || process.platform !== "linux" || skipWithout("the server's resident code pages (its smaps)", SERVER_PROC_HIDDEN))(
    "the executable's resident code drops once idle, calls still run, SHELLMCP_KEEP_CODE_PAGES=1 keeps it",
    async () => {
      const sample = async (keep: boolean): Promise<{ before: number; after: number }> => {
        const h = home();
        const s = await startServe({
          codexHome: h,
          args: ["--sandbox", "danger-full-access"],
          env: keep ? { SHELLMCP_KEEP_CODE_PAGES: "1" } : {},
        });
        const pid = serverPid(h);
        const r = await s.shell({ command: "echo ok", workdir: h, login: false });
        expect(r.out.output).toBe("ok\n");
        const before = codeKiB(pid);
        await Bun.sleep(4000); // 3 s after the last call
        const after = codeKiB(pid);
        const again = await s.shell({ command: "echo again", workdir: h, login: false });
        expect(again.out.output).toBe("again\n");
        await s.close();
        return { before, after };
      };
      const released = await sample(false);
      const kept = await sample(true);
      expect(released.before).toBeGreaterThan(16 * 1024);
      expect(released.after).toBeLessThan(released.before / 2);
      expect(kept.after).toBeGreaterThan(kept.before * 0.9);
    },
    30_000,
  );
});
