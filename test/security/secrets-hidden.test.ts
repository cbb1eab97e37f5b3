/**
 * Issue 39, item 4 and "secrets hidden from every sandbox": a plain `shell` call of the compiled `serve` (a real
 * MCP client) reads none of the user's credential stores (symlinked ones and their targets included) nor
 * CODEX_HOME's secrets, under bubblewrap and under Landlock, with the legacy sandbox state (workspace-write, the
 * network on) and with Codex 0.169's permission profile; it still reads the rest of HOME and of CODEX_HOME. Judged
 * by what the command prints. Before issue 39 `cat ~/.npmrc` printed the token.
 * `[shellmcp] sandbox_readable` opens one store knowingly; no setting opens a secret.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { closeAll, confDir, serveWithPid, token } from "../helpers/attack.ts";
import { BINARY } from "../helpers/binary.ts";
import { LANDLOCK_HOME_REFUSED, skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

/** Credential stores (relative to HOME) and the file read in each. */
const STORES: readonly [string, string][] = [
  [".ssh", ".ssh/id_ed25519"],
  [".npmrc", ".npmrc"],
  [".aws", ".aws/credentials"],
  [".netrc", ".netrc"],
  [".config/gh", ".config/gh/hosts.yml"],
  [".docker/config.json", ".docker/config.json"],
  [".gnupg", ".gnupg/private-keys-v1.d/key"],
  [".kube", ".kube/config"],
  [".git-credentials", ".git-credentials"],
  [".cargo/credentials.toml", ".cargo/credentials.toml"],
];

/** CODEX_HOME's secrets (relative to CODEX_HOME). */
const SECRETS = ["auth.json", "environments.toml", "exec-server.token", ".credentials.json"];

interface World {
  home: string;
  codexHome: string;
  ws: string;
  secret: string;
  /** Absolute paths the command reads, each printed as `<path> <content>` or `<path> unreadable`. */
  reads: string[];
}

/** A HOME with every store (two of them symlinks to folders outside HOME), a CODEX_HOME with its secrets. */
function world(codexOutsideHome = false): World {
  const secret = `SECRET-${token()}`;
  const base = confDir("secrets");
  const home = join(base, "home");
  const codexHome = codexOutsideHome ? join(base, "codex-home") : join(home, ".codex");
  const elsewhere = join(base, "elsewhere");
  const ws = join(base, "ws");
  for (const d of [home, codexHome, elsewhere, ws, join(codexHome, "rules")]) mkdirSync(d, { recursive: true });
  const reads: string[] = [];
  for (const [, file] of STORES) {
    const p = join(home, file);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, `${secret} ${file}\n`, { mode: 0o600 });
    reads.push(p);
  }
  // A symlinked store folder and a symlinked store file: hidden, and so are their targets.
  mkdirSync(join(elsewhere, "azure"), { recursive: true });
  writeFileSync(join(elsewhere, "azure", "token.json"), `${secret} azure\n`);
  symlinkSync(join(elsewhere, "azure"), join(home, ".azure"));
  writeFileSync(join(elsewhere, "pypirc"), `${secret} pypirc\n`);
  symlinkSync(join(elsewhere, "pypirc"), join(home, ".pypirc"));
  reads.push(join(home, ".azure", "token.json"), join(elsewhere, "azure", "token.json"), join(home, ".pypirc"), join(elsewhere, "pypirc"));
  for (const f of SECRETS) {
    writeFileSync(join(codexHome, f), `${secret} ${f}\n`, { mode: 0o600 });
    reads.push(join(codexHome, f));
  }
  // What a call still reads.
  writeFileSync(join(home, "notes.txt"), "PLAIN notes\n");
  mkdirSync(join(home, ".config", "git"), { recursive: true });
  writeFileSync(join(home, ".config", "git", "ignore"), "PLAIN gitignore\n");
  writeFileSync(join(codexHome, "config.toml"), "# PLAIN config\n");
  writeFileSync(join(codexHome, "rules", "default.rules"), "# PLAIN rules\n");
  reads.push(
    join(home, "notes.txt"),
    join(home, ".config", "git", "ignore"),
    join(codexHome, "config.toml"),
    join(codexHome, "rules", "default.rules"),
  );
  return { home, codexHome, ws, secret, reads };
}

/** A shell script printing each path's content, or that it is unreadable (or empty). */
function readAll(paths: readonly string[]): string {
  // A hidden file cannot be opened (bubblewrap: /dev/null on a nodev mount; Landlock: no rule); empty counts too.
  return paths.map((p) => `c=$(cat '${p}' 2>/dev/null); if [ -n "$c" ]; then echo "${p} $c"; else echo '${p} unreadable'; fi`).join("; ");
}

/** Codex 0.169's `_meta`: a profile that reads everything and writes `root`, with the network on. */
function profileMeta(root: string, legacyLandlock: boolean): Record<string, unknown> {
  return {
    "codex/sandbox-state": {
      permissionProfile: {
        type: "managed",
        file_system: {
          type: "restricted",
          entries: [
            { path: { type: "special", value: { kind: "root" } }, access: "read" },
            { path: { type: "path", path: root }, access: "write" },
          ],
        },
        network: "enabled",
      },
      sandboxCwd: `file://${root}`,
      useLegacyLandlock: legacyLandlock,
    },
  };
}

async function serve(w: World, backend: "bwrap" | "landlock", config = "", o: { rules?: string; env?: Record<string, string> } = {}) {
  if (config !== "") writeFileSync(join(w.codexHome, "config.toml"), `# PLAIN config\n${config}`);
  return serveWithPid({
    args: ["--sandbox-backend", backend],
    codexHome: w.codexHome,
    env: { HOME: w.home, SHELLMCP_LOG: "info", ...o.env },
    ...(o.rules !== undefined ? { rules: o.rules } : {}),
  });
}

async function output(s: Awaited<ReturnType<typeof serve>>, command: string, ws: string, meta?: Record<string, unknown>) {
  const raw = (await s.client.callTool(
    { name: "shell", arguments: { command, workdir: ws, login: false, timeout_ms: 30_000 }, ...(meta ? { _meta: meta } : {}) },
    undefined,
    { timeout: 60_000 },
  )) as { content: { text: string }[] };
  const text = raw.content[0]!.text;
  try {
    return (JSON.parse(text) as { output: string }).output;
  } catch {
    return text;
  }
}

function expectHidden(w: World, out: string): void {
  const leaked = out.split("\n").filter((l) => l.includes(w.secret));
  expect({ leaked, out }).toEqual({ leaked: [], out });
  for (const p of w.reads.filter((r) => !/notes|ignore|config\.toml|default\.rules/.test(r))) expect(out).toContain(`${p} unreadable`);
  for (const plain of ["PLAIN notes", "PLAIN gitignore", "# PLAIN config", "# PLAIN rules"]) expect(out).toContain(plain);
}

describe.skipIf(skipWithout("secrets suite", shellsMissing()))("issue 39: no sandbox reads a credential store or a secret", () => {
  for (const backend of ["bwrap", "landlock"] as const) {
    test(`${backend}: \`sandbox linux\` (the helper with no list given) hides this user's stores and CODEX_HOME's secrets`, () => {
      const w = world();
      const r = Bun.spawnSync([BINARY, "sandbox", "linux", "--backend", backend, "--full-auto", "--", "/bin/sh", "-c", readAll(w.reads)], {
        cwd: w.ws,
        env: { PATH: "/usr/bin:/bin", HOME: w.home, CODEX_HOME: w.codexHome },
        stdout: "pipe",
        stderr: "pipe",
      });
      expectHidden(w, r.stdout.toString());
    }, 60_000);

    test(`${backend}, legacy workspace-write with the network on: every store, symlinked store and target, every CODEX_HOME secret hidden; the rest readable`, async () => {
      const w = world();
      const s = await serve(w, backend);
      expect(await s.sandboxState({ type: "workspace-write", network_access: true }, w.ws)).toEqual({});
      const out = await output(s, readAll(w.reads), w.ws);
      expectHidden(w, out);
    }, 60_000);

    test(`${backend}, exec_command (a session) with the network on: the same`, async () => {
      const w = world();
      const s = await serve(w, backend);
      expect(await s.sandboxState({ type: "workspace-write", network_access: true }, w.ws)).toEqual({});
      const raw = (await s.client.callTool(
        { name: "exec_command", arguments: { cmd: readAll(w.reads), workdir: w.ws, yield_time_ms: 10_000 } },
        undefined,
        { timeout: 60_000 },
      )) as { content: { text: string }[] };
      expectHidden(w, raw.content.map((c) => c.text).join("\n"));
    }, 60_000);

    test(`${backend}, Codex 0.169 permission profile with the network on: the same`, async () => {
      const w = world();
      const s = await serve(w, backend);
      const out = await output(s, readAll(w.reads), w.ws, profileMeta(w.ws, backend === "landlock"));
      expectHidden(w, out);
    }, 60_000);

    test.skipIf(backend === "landlock" && skipWithout("landlock: HOME as the writable workspace", LANDLOCK_HOME_REFUSED))(
      `${backend}: HOME as the writable workspace still hides its stores (hidden, not refused)`,
      async () => {
        // CODEX_HOME outside HOME: a Landlock call whose writable folder holds CODEX_HOME is refused (issue 34).
        const w = world(true);
        const s = await serve(w, backend);
        expect(await s.sandboxState({ type: "workspace-write", network_access: false }, w.home)).toEqual({});
        const out = await output(
          s,
          `${readAll(w.reads)}; echo made > '${join(w.home, "project-file")}' && cat '${join(w.home, "project-file")}'`,
          w.home,
        );
        expectHidden(w, out);
      },
      60_000,
    );

    test(`${backend}: [shellmcp] sandbox_readable opens one store knowingly; secret_paths and CODEX_HOME's secrets stay hidden whatever it says`, async () => {
      const w = world();
      const extra = join(w.home, "my-token.txt");
      writeFileSync(extra, `${w.secret} extra\n`);
      const s = await serve(
        w,
        backend,
        `[shellmcp]\nsandbox_readable = ["~/.npmrc", "~/.codex", "~/.codex/auth.json"]\nsecret_paths = ["~/my-token.txt"]\n`,
      );
      expect(await s.sandboxState({ type: "workspace-write", network_access: true }, w.ws)).toEqual({});
      const out = await output(s, readAll([...w.reads, extra]), w.ws);
      expect(out).toContain(`${w.secret} .npmrc`);
      expect(out.split("\n").filter((l) => l.includes(w.secret) && !l.includes(".npmrc"))).toEqual([]);
      expect(out).toContain(`${extra} unreadable`);
      expect(out).toContain(`${join(w.codexHome, "auth.json")} unreadable`);
    }, 60_000);

    test(`${backend}: a secret inside a hidden store, and a store linked into another store: all hidden, the call still runs`, async () => {
      const w = world();
      writeFileSync(join(w.home, ".ssh", "deploy.key"), `${w.secret} nested\n`);
      symlinkSync(join(w.home, ".aws", "credentials"), join(w.home, ".vault-token"));
      const s = await serve(w, backend, `[shellmcp]\nsecret_paths = ["~/.ssh/deploy.key"]\n`);
      expect(await s.sandboxState({ type: "workspace-write", network_access: true }, w.ws)).toEqual({});
      const out = await output(
        s,
        `${readAll([...w.reads, join(w.home, ".ssh", "deploy.key"), join(w.home, ".vault-token")])}; echo ran`,
        w.ws,
      );
      expect(out).toContain("ran");
      expectHidden(w, out);
      expect(out).toContain(`${join(w.home, ".ssh", "deploy.key")} unreadable`);
    }, 60_000);

    test(`${backend}: a profile with restricted reads that reads HOME: its stores hidden, HOME listed, nothing outside the profile's reads listed`, async () => {
      const w = world(true);
      const outside = join(dirname(w.home), "unlisted");
      mkdirSync(join(outside, "inner"), { recursive: true });
      const s = await serve(w, backend);
      const meta = {
        "codex/sandbox-state": {
          permissionProfile: {
            type: "managed",
            file_system: {
              type: "restricted",
              entries: [
                { path: { type: "special", value: { kind: "minimal" } }, access: "read" },
                { path: { type: "path", path: w.home }, access: "read" },
                { path: { type: "path", path: w.ws }, access: "write" },
              ],
            },
            network: "restricted",
          },
          sandboxCwd: `file://${w.ws}`,
          useLegacyLandlock: backend === "landlock",
        },
      };
      const homeReads = w.reads.filter((r) => r.startsWith(w.home + "/") && !r.includes("azure"));
      const out = await output(
        s,
        `${readAll(homeReads)}; echo LISTED-$(ls -a '${w.home}' | grep -c notes.txt); ls '${outside}' 2>&1 | head -1`,
        w.ws,
        meta,
      );
      expect({ out, leaked: out.includes(w.secret) }).toEqual({ out, leaked: false });
      expect(out).toContain("PLAIN notes");
      expect(out).toContain(`${join(w.home, ".npmrc")} unreadable`);
      expect(out).toContain("LISTED-1"); // HOME can be listed…
      expect(out).not.toContain("inner"); // …the folder outside the profile's reads cannot
    }, 60_000);

    test(`${backend}: a call whose workspace lies in a store (~/.password-store, a git repository) works there; the other stores stay hidden`, async () => {
      const w = world(true);
      const store = join(w.home, ".password-store");
      mkdirSync(join(store, "web"), { recursive: true });
      writeFileSync(join(store, "web", "site.gpg"), "PLAIN encrypted\n");
      const s = await serve(w, backend);
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, store)).toEqual({});
      const out = await output(s, `cat web/site.gpg && echo new > web/other.gpg && cat web/other.gpg; ${readAll(w.reads)}`, store);
      expect(out).toContain("PLAIN encrypted");
      expect(out).toContain("new");
      expectHidden(w, out);
    }, 60_000);

    test(`${backend}: an escalated program's room reads a store its [shellmcp.room_readable] grant opens, never a secret even when the grant names CODEX_HOME`, async () => {
      const w = world(true); // CODEX_HOME outside HOME: the grant of ~ below must not reach it either way
      const s = await serve(w, backend, `[shellmcp.room_readable]\npython3 = ["~/.ssh", "${w.codexHome}"]\n`, {
        rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
      });
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, w.ws)).toEqual({});
      const files = [
        join(w.home, ".ssh", "id_ed25519"),
        join(w.home, ".npmrc"),
        ...SECRETS.map((f) => join(w.codexHome, f)),
        join(w.home, "notes.txt"),
      ];
      writeFileSync(
        join(w.ws, "read.py"),
        `import sys\nfor p in sys.argv[1:]:\n    try:\n        t = open(p).read().strip()\n    except OSError:\n        t = ""\n    print(p, t if t else "unreadable")\n`,
      );
      const out = await output(s, `python3 read.py ${files.join(" ")}`, w.ws);
      expect(s.stderr()).toMatch(/escalated \{"file":"[^"]*python3/); // it ran in its room, not in the call's sandbox
      expect(out).not.toContain("ran inside the sandbox");
      // …the grant opens ~/.ssh for python3's room (the server's log said when it did not: CI showed only the client's end)
      if (!out.includes(`${w.secret} .ssh/id_ed25519`)) console.error(`server stderr:\n${s.stderr()}`);
      expect(out).toContain(`${w.secret} .ssh/id_ed25519`);
      expect(out).toContain("PLAIN notes");
      // …and nothing else: no other store, no secret.
      const leaked = out.split("\n").filter((l) => l.includes(w.secret) && !l.includes(".ssh/id_ed25519"));
      expect({ leaked, out }).toEqual({ leaked: [], out });
      // The call's own sandbox still does not read ~/.ssh (the grant is python3's room's only).
      expect(await output(s, readAll([join(w.home, ".ssh", "id_ed25519")]), w.ws)).toContain("unreadable");
    }, 60_000);

    test(`${backend}: a HOME of 5,000 entries beside its stores: calls and the granted room still start and still hide every other store`, async () => {
      // CI: a full run's shared folders held enough entries beside the stores that a Landlock room's rules, carried
      // in its helper's argv, passed the kernel's 128 KiB per string: the room's start failed with E2BIG; and a
      // call's plan passed sandbox-exec's bound of 4,096 path rules: every call, the shell check first, failed.
      const w = world(true);
      for (let i = 0; i < 5000; i++) writeFileSync(join(w.home, `note-with-a-long-name-${i.toString().padStart(5, "0")}.txt`), "x\n");
      const s = await serve(w, backend, `[shellmcp.room_readable]\npython3 = ["~/.ssh"]\n`, {
        rules: 'prefix_rule(pattern=["python3"], decision="allow")\n',
      });
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, w.ws)).toEqual({});
      const files = [join(w.home, ".ssh", "id_ed25519"), join(w.home, ".npmrc"), join(w.home, "notes.txt")];
      writeFileSync(
        join(w.ws, "read.py"),
        `import sys\nfor p in sys.argv[1:]:\n    try:\n        t = open(p).read().strip()\n    except OSError:\n        t = ""\n    print(p, t if t else "unreadable")\n`,
      );
      const out = await output(s, `python3 read.py ${files.join(" ")}`, w.ws);
      if (!out.includes(`${w.secret} .ssh/id_ed25519`)) console.error(`server stderr:\n${s.stderr()}`);
      expect(out).toContain(`${w.secret} .ssh/id_ed25519`);
      expect(out).toContain("PLAIN notes");
      const leaked = out.split("\n").filter((l) => l.includes(w.secret) && !l.includes(".ssh/id_ed25519"));
      expect({ leaked, out }).toEqual({ leaked: [], out });
    }, 60_000);

    // Landlock only: its plan (sandbox-exec's rules over a pipe) is what grows with HOME; bubblewrap hides the stores
    // by mounts and has no such plan.
    for (const [n, over] of backend === "landlock"
      ? ([
          [20_000, "a pipe's 1 MiB"],
          [70_000, "sandbox-exec's 65,536 rules"],
        ] as const)
      : [])
      test(`${backend}: a HOME of ${n} entries (its plan over ${over}): the call runs through the helper and still hides the stores`, async () => {
        const w = world(true);
        for (let i = 0; i < n; i++) writeFileSync(join(w.home, `n${i}`), "");
        const s = await serve(w, backend, "");
        expect(await s.sandboxState({ type: "workspace-write", network_access: false }, w.ws)).toEqual({});
        const out = await output(s, readAll([join(w.home, ".ssh", "id_ed25519"), join(w.home, "notes.txt")]), w.ws);
        expect(out).toContain("PLAIN notes");
        expect(out).not.toContain(w.secret);
      }, 120_000);

    test(`${backend}: the approver's folder ($XDG_RUNTIME_DIR/shellmcp) is hidden from the call`, async () => {
      const w = world();
      const xdg = join(dirname(w.home), "run");
      mkdirSync(join(xdg, "shellmcp"), { recursive: true, mode: 0o700 });
      chmodSync(xdg, 0o700);
      writeFileSync(join(xdg, "shellmcp", "note"), `${w.secret} approver\n`);
      writeFileSync(join(xdg, "beside"), "PLAIN beside\n");
      const s = await serve(w, backend, "", { env: { XDG_RUNTIME_DIR: xdg } });
      expect(await s.sandboxState({ type: "workspace-write", network_access: true }, w.ws)).toEqual({});
      const out = await output(
        s,
        `${readAll([join(xdg, "shellmcp", "note"), join(xdg, "beside")])}; ls '${join(xdg, "shellmcp")}' 2>&1`,
        w.ws,
      );
      expect({ out, leaked: out.includes(w.secret) }).toEqual({ out, leaked: false });
      expect(out).toContain(`${join(xdg, "shellmcp", "note")} unreadable`);
      expect(out).toContain("PLAIN beside");
    }, 60_000);
  }
});
