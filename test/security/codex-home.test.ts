/**
 * Issue 34, item 4: a writable CODEX_HOME decides the next session. Attacks from inside `shell` calls of the
 * compiled `serve` (real MCP client), judged on the host: a call writes `$CODEX_HOME/rules/*.rules` (allowing `sh`)
 * and `[shellmcp] escalation = "host"` into `config.toml`, so that the next `serve` runs `sh` on the host.
 *
 * - bubblewrap, CODEX_HOME inside a writable root below its top (HOME in the pinned workspace, in a 0.97 client's
 *   workspace, in a 0.169 profile's writable folder; through serve's direct launch and through the helper):
 *   nothing is written, existing or not (a missing CODEX_HOME cannot be created either). (`.codex` at a root's
 *   top was already protected: Codex's protected names.)
 * - Landlock, the workspace at HOME (0.97 and 0.169 clients): the call is refused with a clear message, nothing is
 *   written;
 * - a second `serve` with a CODEX_HOME a sandbox could have written (under /tmp — HOME below a writable root —, or
 *   in the pinned workspace under Landlock) refuses to load it: it says so on stderr and in every tool result, and
 *   the planted `escalation = "host"` and allow rule are never used.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, requirePrograms, serveWithPid } from "../helpers/attack.ts";
import { binaryAs } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

const CONFIG = '[shellmcp]\nescalation = "room"\n';
const EVIL_RULE = 'prefix_rule(pattern=["sh"], decision="allow")\n';

/** The attack: plant an allow rule and `escalation = "host"` in `~/.codex` (the call's HOME). */
const PLANT =
  'mkdir -p "$CODEX_HOME/rules" 2>&1; echo \'prefix_rule(pattern=["sh"], decision="allow")\' > "$CODEX_HOME/rules/evil.rules" 2>&1; ' +
  'printf \'[shellmcp]\\nescalation = "host"\\n\' >> "$CODEX_HOME/config.toml" 2>&1; echo PLANTED-DONE';

/** A HOME inside `ws` (not its top) with `.codex/config.toml`; `codexHome` is `<home>/.codex`. */
function homeIn(ws: string, withCodexHome = true): { home: string; codexHome: string } {
  const home = join(ws, "home");
  const codexHome = join(home, ".codex");
  mkdirSync(home, { recursive: true });
  if (withCodexHome) {
    mkdirSync(codexHome, { recursive: true });
    writeFileSync(join(codexHome, "config.toml"), CONFIG);
  }
  return { home, codexHome };
}

/** CODEX_HOME as the test left it: no planted rule, config.toml unchanged (or still missing). */
function untouched(codexHome: string, existed = true): void {
  expect(existsSync(join(codexHome, "rules", "evil.rules"))).toBe(false);
  if (existed) expect(readFileSync(join(codexHome, "config.toml"), "utf8")).toBe(CONFIG);
  else expect(existsSync(codexHome)).toBe(false);
}

/** One `shell` call with an optional per-call `_meta`; the result's text, parsed when it is JSON. */
async function call(
  s: Awaited<ReturnType<typeof serveWithPid>>,
  command: string,
  workdir: string,
  _meta?: Record<string, unknown>,
): Promise<{ text: string; output: string; isError: boolean }> {
  const raw = (await s.client.callTool(
    { name: "shell", arguments: { command, workdir, login: false }, ...(_meta ? { _meta } : {}) },
    undefined,
    { timeout: 60_000 },
  )) as { content: { text: string }[]; isError?: boolean };
  const text = raw.content[0]!.text;
  let output = text;
  try {
    output = (JSON.parse(text) as { output: string }).output;
  } catch {
    // a refusal: plain text
  }
  return { text, output, isError: raw.isError === true };
}

/** Codex 0.169's `_meta` for a profile that writes `root` (and reads everything), cwd `root`. */
function profileMeta(root: string, legacyLandlock: boolean): Record<string, unknown> {
  const state = {
    permissionProfile: {
      type: "managed",
      file_system: {
        type: "restricted",
        entries: [
          { path: { type: "special", value: { kind: "root" } }, access: "read" },
          { path: { type: "path", path: root }, access: "write" },
        ],
      },
      network: "restricted",
    },
    sandboxCwd: `file://${root}`,
    useLegacyLandlock: legacyLandlock,
  };
  return { "codex/sandbox-state": state };
}

/** `serve --sandbox workspace-write` under bubblewrap, started in `ws` (the workspace it pins) with `env`. */
function serveInPinnedWorkspace(ws: string, codexHome: string, env: Record<string, string>) {
  return serveWithPid({ codexHome, cwd: ws, env, args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"] });
}

describe.skipIf(skipWithout("CODEX_HOME suite", shellsMissing()))("issue 34 item 4: CODEX_HOME is never writable", () => {
  requirePrograms("bwrap");

  test("bwrap, HOME inside the pinned workspace: rules and config.toml cannot be written", async () => {
    const ws = confDir("ch-ws");
    const { home, codexHome } = homeIn(ws);
    const s = await serveInPinnedWorkspace(ws, codexHome, { HOME: home });
    const r = await call(s, `touch ${ws}/ok && echo WS-WRITABLE; ${PLANT}`, ws);
    expect(r.output).toContain("WS-WRITABLE"); // the workspace itself stays writable
    expect(r.output).toContain("Read-only file system");
    untouched(codexHome);
  }, 60_000);

  test("bwrap, HOME inside the pinned workspace: HOME cannot be moved aside and another CODEX_HOME made in its place", async () => {
    const ws = confDir("ch-mv");
    const { home, codexHome } = homeIn(ws);
    const s = await serveInPinnedWorkspace(ws, codexHome, { HOME: home });
    // A bind mount (the read-only CODEX_HOME) moves with its parent folder: HOME is bound onto itself, so it cannot.
    const r = await call(s, `mv ${home} ${home}.moved 2>&1; mkdir -p ${codexHome} 2>&1; ${PLANT}`, ws);
    expect(r.output).toContain("PLANTED-DONE");
    expect(existsSync(`${home}.moved`)).toBe(false);
    untouched(codexHome);
  }, 60_000);

  test("bwrap, an escalated program's room (python3 allowed) cannot write CODEX_HOME either", async () => {
    const ws = confDir("ch-room");
    const { home, codexHome } = homeIn(ws);
    mkdirSync(join(codexHome, "rules"));
    writeFileSync(join(codexHome, "rules", "default.rules"), 'prefix_rule(pattern=["python3"], decision="allow")\n');
    const s = await serveInPinnedWorkspace(ws, codexHome, { HOME: home, SHELLMCP_LOG: "info" });
    const program = `
import os
h = os.environ["CODEX_HOME"]
for path, text in [(h + "/rules/evil.rules", ${JSON.stringify(EVIL_RULE)}), (h + "/config.toml", '[shellmcp]\\nescalation = "host"\\n')]:
    try:
        open(path, "a").write(text); print("WROTE", path)
    except OSError as e:
        print("REFUSED", e.strerror)
open(${JSON.stringify(join(ws, "room-ran"))}, "w").write("x")
`;
    const r = await call(s, `/usr/bin/python3 -c '${program.replaceAll("'", "'\\''")}'`, ws);
    expect(s.stderr()).toContain('"room":"bwrap"'); // it really ran in a room
    expect(existsSync(join(ws, "room-ran"))).toBe(true); // which writes the workspace
    expect(r.output).toContain("REFUSED Read-only file system");
    expect(r.output).not.toContain("WROTE");
    expect(existsSync(join(codexHome, "rules", "evil.rules"))).toBe(false);
    expect(readFileSync(join(codexHome, "config.toml"), "utf8")).toBe(CONFIG);
  }, 60_000);

  test("bwrap, ~/.codex a symlink inside the pinned workspace: the call is refused (the link could be re-pointed)", async () => {
    const ws = confDir("ch-link");
    const home = join(ws, "home");
    mkdirSync(home);
    const real = confDir("ch-link-real");
    writeFileSync(join(real, "config.toml"), CONFIG);
    symlinkSync(real, join(home, ".codex"));
    const decoy = join(ws, "decoy");
    const s = await serveInPinnedWorkspace(ws, home, { HOME: home, CODEX_HOME: "" });
    const r = await call(s, `mkdir -p ${decoy}/rules && rm ${home}/.codex && ln -s ${decoy} ${home}/.codex && echo REPOINTED`, ws);
    expect(r.output).toContain(`crosses writable symlink ${join(home, ".codex")}`);
    expect(r.output).not.toContain("REPOINTED");
    expect(readlinkSync(join(home, ".codex"))).toBe(real);
  }, 60_000);

  test("bwrap, a missing ~/.codex inside the pinned workspace cannot be created", async () => {
    const ws = confDir("ch-missing");
    const { home, codexHome } = homeIn(ws, false);
    // CODEX_HOME unset: serve uses ~/.codex, which does not exist yet.
    const s = await serveInPinnedWorkspace(ws, home, { HOME: home, CODEX_HOME: "", SHELLMCP_LOG_FILE: "" }); // no log file: nothing makes ~/.codex
    const r = await call(s, `CODEX_HOME=${codexHome}; ${PLANT}`, ws);
    expect(r.output).toContain("PLANTED-DONE");
    expect(r.output).toContain("Read-only file system");
    untouched(codexHome, false); // neither created for the call (its mount point is given back) nor by it
  }, 60_000);

  test("bwrap, a 0.97 client's workspace and a 0.169 profile's writable folder holding HOME: nothing written", async () => {
    const ws = confDir("ch-097");
    const { home, codexHome } = homeIn(ws);
    const s = await serveWithPid({ codexHome, env: { HOME: home }, args: ["--sandbox-backend", "bwrap"] });
    expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
    const r = await call(s, `touch ${home}/ok && echo HOME-WRITABLE; ${PLANT}`, home);
    expect(r.output).toContain("HOME-WRITABLE");
    untouched(codexHome);
    const p = await call(s, `touch ${home}/ok2 && echo HOME-WRITABLE; ${PLANT}`, home, profileMeta(ws, false));
    expect(p.output).toContain("HOME-WRITABLE");
    untouched(codexHome);
  }, 60_000);

  test("bwrap through the helper (restricted reads need its inner stage): CODEX_HOME stays read-only", async () => {
    const ws = confDir("ch-helper");
    const { home, codexHome } = homeIn(ws);
    const s = await serveWithPid({ codexHome, env: { HOME: home }, args: ["--sandbox-backend", "bwrap"] });
    const restricted = { type: "restricted", include_platform_defaults: true, readable_roots: [] };
    const policy = { type: "workspace-write", read_only_access: restricted, network_access: false };
    expect(await s.sandboxState(policy, ws)).toEqual({});
    const r = await call(s, `touch ${home}/ok && echo HOME-WRITABLE; ${PLANT}`, home);
    expect(r.output).toContain("HOME-WRITABLE");
    expect(r.output).toContain("Read-only file system");
    untouched(codexHome);
  }, 60_000);

  test("the helper role: --protected-config-dir is re-bound read-only under bwrap, and refused under Landlock", () => {
    const ws = confDir("ch-role");
    const { codexHome } = homeIn(ws);
    const helper = binaryAs("codex-linux-sandbox");
    const run = (backend: string) =>
      Bun.spawnSync(
        [
          helper,
          "--backend",
          backend,
          "--protected-config-dir",
          codexHome,
          "--sandbox-policy-cwd",
          ws,
          "--sandbox-policy",
          '{"type":"workspace-write"}',
          "--",
          "/bin/sh",
          "-c",
          `CODEX_HOME=${codexHome}; ${PLANT}`,
        ],
        { cwd: ws, env: { PATH: "/usr/bin:/bin" }, stdout: "pipe", stderr: "pipe" },
      );
    const b = run("bwrap");
    expect(b.stdout.toString()).toContain("Read-only file system");
    untouched(codexHome);
    const l = run("landlock");
    expect(l.exitCode).toBe(101);
    expect(l.stderr.toString()).toContain(`contains ${codexHome}`);
    expect(l.stdout.toString()).not.toContain("PLANTED-DONE");
    untouched(codexHome);
  });

  test("Landlock, the workspace at HOME (0.97 and 0.169 clients): the call is refused with the reason, nothing written", async () => {
    const home = confDir("ch-ll");
    const codexHome = join(home, ".codex");
    mkdirSync(codexHome);
    writeFileSync(join(codexHome, "config.toml"), CONFIG);
    const s = await serveWithPid({ codexHome, cwd: home, env: { HOME: home }, args: ["--sandbox-backend", "landlock"] });
    expect(await s.sandboxState({ type: "workspace-write", network_access: false }, home)).toEqual({});
    const r = await call(s, PLANT, home);
    expect(r.isError).toBe(true);
    expect(r.text).toContain(`contains ${codexHome}`);
    expect(r.text).toContain("Landlock cannot keep");
    untouched(codexHome);
    const p = await call(s, PLANT, home, profileMeta(home, true));
    expect(p.isError).toBe(true);
    expect(p.text).toContain(`contains ${codexHome}`);
    untouched(codexHome);
  }, 60_000);

  test("Landlock room: a repository whose work tree holds CODEX_HOME is not made writable for an escalated program", async () => {
    const proj = confDir("ch-llroom");
    const codexHome = join(proj, "codex-home");
    mkdirSync(join(codexHome, "rules"), { recursive: true });
    writeFileSync(join(codexHome, "config.toml"), CONFIG);
    writeFileSync(join(codexHome, "rules", "default.rules"), 'prefix_rule(pattern=["python3"], decision="allow")\n');
    const sub = join(proj, "sub");
    mkdirSync(sub);
    Bun.spawnSync(["git", "init", "-q"], { cwd: proj });
    const s = await serveWithPid({
      codexHome,
      cwd: sub,
      env: { SHELLMCP_LOG: "info", HOME: confDir("ch-llroom-home") }, // HOME elsewhere: the room then adds the work tree
      args: ["--sandbox", "workspace-write", "--sandbox-backend", "landlock"],
    });
    const program = `open(${JSON.stringify(join(codexHome, "config.toml"))}, "a").write("escalation = 1"); print("WROTE")`;
    const r = await call(s, `/usr/bin/python3 -c '${program}' 2>&1; echo END`, sub);
    expect(s.stderr()).toContain('"room":"landlock"'); // it was escalated into a room
    expect(r.output).toContain("END");
    // The room's helper refuses (exit 101: Landlock cannot keep CODEX_HOME read-only inside the work tree), so the
    // program never runs. Its reason reaches the log only, not the tool result (the room's stderr is not the
    // call's output): see the report of issue 34, item 4.
    expect(r.output).not.toContain("WROTE");
    expect(s.stderr()).toContain("the escalation room ended (status 101)");
    expect(readFileSync(join(codexHome, "config.toml"), "utf8")).toBe(CONFIG);
  }, 60_000);

  test("a second serve with a CODEX_HOME under /tmp (HOME below a writable root) refuses to load it, in every result", async () => {
    const home = mkdtempSync(join("/tmp", "shellmcp-ch-"));
    try {
      const codexHome = join(home, ".codex");
      mkdirSync(join(codexHome, "rules"), { recursive: true });
      // What an earlier sandboxed call could have written there.
      writeFileSync(join(codexHome, "rules", "evil.rules"), EVIL_RULE);
      writeFileSync(join(codexHome, "config.toml"), '[shellmcp]\nescalation = "host"\n');
      // And a FIFO where serve keeps its log: opening it used to block the server before it served anything.
      mkdirSync(join(codexHome, "log"));
      expect(Bun.spawnSync(["mkfifo", join(codexHome, "log", "shellmcp.log")]).exitCode).toBe(0);
      const marker = join(confDir("ch-marker"), "ran-on-host");
      const s = await serveWithPid({ codexHome, env: { HOME: home }, args: ["--sandbox", "workspace-write"] });
      for (let i = 0; i < 2; i++) {
        const r = await call(s, `sh -c 'touch ${marker}'`, home);
        expect(r.isError).toBe(true);
        expect(r.text).toContain(`CODEX_HOME (${codexHome}) lies in /tmp`);
        expect(r.text).toContain("does not load rules or config.toml");
      }
      expect(s.stderr()).toContain(`CODEX_HOME (${codexHome}) lies in /tmp`);
      expect(existsSync(marker)).toBe(false);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);

  test("a FIFO as config.toml: serve answers every call with the error, never blocks", async () => {
    // (FIFOs among rules files are skipped by discovery already: only regular files are rules.)
    const home2 = confDir("ch-fifo-config");
    expect(Bun.spawnSync(["mkfifo", join(home2, "config.toml")]).exitCode).toBe(0);
    const s2 = await serveWithPid({ codexHome: home2 });
    const r2 = await call(s2, "echo hi", home2);
    expect(r2.isError).toBe(true);
    expect(r2.text).toContain(`cannot read ${join(home2, "config.toml")}`);
  }, 60_000);

  test("a CODEX_HOME reached through a symlink under /tmp (its target elsewhere) is refused too: the link could be re-pointed", async () => {
    const real = confDir("ch-tmplink");
    mkdirSync(join(real, ".codex"));
    writeFileSync(join(real, ".codex", "config.toml"), CONFIG);
    const dir = mkdtempSync(join("/tmp", "shellmcp-chl-"));
    try {
      const link = join(dir, "home");
      symlinkSync(real, link);
      const s = await serveWithPid({ codexHome: join(link, ".codex"), env: { HOME: link } });
      const r = await call(s, "echo hi", real);
      expect(r.isError).toBe(true);
      expect(r.text).toContain(`lies in /tmp (through the symlink ${link})`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test("a second serve, Landlock, started in HOME with workspace-write: refuses to load ~/.codex", async () => {
    const home = confDir("ch-ll2");
    const codexHome = join(home, ".codex");
    mkdirSync(join(codexHome, "rules"), { recursive: true });
    writeFileSync(join(codexHome, "rules", "evil.rules"), EVIL_RULE);
    writeFileSync(join(codexHome, "config.toml"), '[shellmcp]\nescalation = "host"\n');
    const s = await serveWithPid({
      codexHome,
      cwd: home,
      env: { HOME: home },
      args: ["--sandbox", "workspace-write", "--sandbox-backend", "landlock"],
    });
    const r = await call(s, "echo hi", home);
    expect(r.isError).toBe(true);
    expect(r.text).toContain(`CODEX_HOME (${codexHome}) lies in the workspace ${home}`);
    expect(s.stderr()).toContain("does not load rules or config.toml");
  }, 60_000);
});
