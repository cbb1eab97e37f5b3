/**
 * Issue 38 items 1 and 2: the git guard's repairs go through folder descriptors checked against the identity
 * recorded at the snapshot (src/sandbox/git/repair.ts), and undo only what a sandbox of this server could have
 * changed (src/sandbox/git/guard.ts, docs/git-guard.md). Each attack runs from inside ordinary `shell` and
 * `exec_command` calls of the compiled `serve` (real MCP client, no rules) and is judged on the host.
 *
 * 1 a bare repository in the workspace whose `config` and `hooks/` each call changes, and a symlink to a folder
 *   outside every writable root (a stand-in for ~/.config/git); a session, or separately a parallel `shell` call,
 *   keeps exchanging the repository's folder with the link (renameat2(RENAME_EXCHANGE)). Before the fix the
 *   guard's restore by path wrote `config` into the outside folder and deleted a file there.
 * 2 with a session open, the user edits `.git/config` and adds a hook on the host between two calls; the next
 *   `echo hi` reverted both. Now the edit is kept when the session could not have made it, and otherwise it is
 *   undone but kept aside under CODEX_HOME, where the report says.
 */
import { afterAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, oneCommitRepo, requirePrograms, serveWithPid } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { assertOutside } from "../helpers/test-dirs.ts";

afterAll(closeAll);

type Backend = "bwrap" | "landlock";

/** Every file below `dir` with its content (the host effect judged). */
function listing(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      const r = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) {
        out[`${r}/`] = "";
        walk(p, r);
      } else out[r] = e.isFile() ? readFileSync(p, "utf8") : "(other)";
    }
  };
  walk(dir, "");
  return out;
}

/** A python3 program exchanging `a` and `b` (in the working folder) for `seconds`, as fast as it can. */
function swapper(a: string, b: string, seconds: number): string {
  const prog = [
    "import ctypes,time",
    "libc=ctypes.CDLL(None,use_errno=True)",
    `end=time.time()+${seconds}`,
    "n=0",
    "while time.time()<end:",
    `  libc.renameat2(-100,b"${a}",-100,b"${b}",2); n+=1`,
    "print('swaps',n)",
  ].join("\n");
  return `python3 -c '${prog}'`;
}

async function setup(backend: Backend) {
  const codexHome = confDir("races-home");
  const s = await serveWithPid({ codexHome, args: ["--sandbox-backend", backend], env: { SHELLMCP_LOG: "info" } });
  const ws = oneCommitRepo(confDir("races-ws"));
  const outside = assertOutside(confDir("races-outside"));
  // The stand-ins: ~/.config/git/config and a file the guard would delete (~/.ssh/config).
  writeFileSync(join(outside, "config"), "[user]\n\tname = the user\n");
  mkdirSync(join(outside, "hooks"));
  writeFileSync(join(outside, "hooks", "post-update"), "the user's file\n");
  expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
  const run = async (command: string, timeout_ms = 60_000) => (await s.shell({ command, workdir: ws, login: false, timeout_ms })).out;
  const exec = async (cmd: string) => {
    const raw = (await s.client.callTool({ name: "exec_command", arguments: { cmd, workdir: ws, yield_time_ms: 500 } }, undefined, {
      timeout: 120_000,
    })) as Record<string, unknown>;
    return (raw.content as { text: string }[]).map((c) => c.text).join("\n");
  };
  return { s, ws, outside, run, exec, codexHome };
}

const CALLS = 40;
const missing = shellsMissing();

describe.skipIf(skipWithout("git guard race suite", missing))("issue 38: the guard's repairs cannot be steered outside", () => {
  requirePrograms("git", "bwrap", "python3");

  for (const backend of ["landlock", "bwrap"] as const)
    for (const racer of ["session", "parallel shell call"] as const)
      test(`item 1 (${backend}, ${racer}): a bare repository exchanged with a link to outside: nothing outside changes`, async () => {
        const { s, ws, outside, run, exec } = await setup(backend);
        const before = listing(outside);
        const made = await run(`git init -q --bare bare.git && ln -s ${outside} L && echo made`);
        expect(made.output).toContain("made");
        // Seen by the guard from the next call on.
        await run("true");
        const seconds = 90;
        let parallel: Promise<unknown> | undefined;
        if (racer === "session") expect(await exec(swapper("bare.git", "L", seconds))).toContain("session ID");
        else parallel = run(swapper("bare.git", "L", seconds), (seconds + 30) * 1000);
        await Bun.sleep(300);
        let reports = 0;
        for (let i = 0; i < CALLS; i++) {
          const r = await run(
            `(printf '[core]\\n\\tfsmonitor = true\\n' >> bare.git/config; echo x > bare.git/hooks/post-update) 2>/dev/null; echo call ${i}`,
          );
          if (r.output.includes("git control files")) reports++;
          expect(listing(outside)).toEqual(before);
        }
        // The guard saw and undid the changes in most calls (the test exercised the repair) — unless the kernel
        // keeps the bare repository read-only (bubblewrap once every git dir is bound read-only, issue 38 item 3):
        // then its config never changed.
        if (backend === "bwrap" && reports === 0) {
          // The racer still exchanges the two names: read the config of whichever is the folder, through a
          // descriptor opened without following a link (retried).
          let text: string | undefined;
          for (let i = 0; i < 100 && text === undefined; i++)
            for (const n of ["bare.git", "L"]) {
              if (text !== undefined) break;
              let fd: number | undefined;
              try {
                fd = openSync(join(ws, n), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
                text = readFileSync(`/proc/self/fd/${fd}/config`, "utf8");
              } catch {
              } finally {
                if (fd !== undefined) closeSync(fd);
              }
            }
          expect(text).toBeDefined();
          expect(text).not.toContain("fsmonitor");
        } else expect(reports).toBeGreaterThan(CALLS / 4);
        void parallel?.catch(() => undefined);
        // The repairs ran in the confined child, not in the server (which logs when it has to).
        expect(s.stderr()).not.toContain("no Landlock confinement");
        expect(s.stderr()).not.toContain("confined repair helper failed");
      }, 240_000);

  /** The user's edit on the host: a remote in `.git/config` and an executable `pre-push` hook. */
  function userEdits(ws: string) {
    const config = join(ws, ".git", "config");
    const edited = readFileSync(config, "utf8") + '[remote "backup"]\n\turl = /srv/backup.git\n';
    writeFileSync(config, edited);
    const hook = join(ws, ".git", "hooks", "pre-push");
    const hookText = "#!/bin/sh\necho users own check\n";
    writeFileSync(hook, hookText);
    chmodSync(hook, 0o755);
    return { config, edited, hook, hookText };
  }

  /** The kept-aside copy the report names for `label` (a path under CODEX_HOME), or undefined. */
  function keptCopy(output: string, label: string): string | undefined {
    const line = output.split("\n").find((l) => l.includes(label) && l.includes("kept aside at"));
    return line === undefined ? undefined : /kept aside at (\/\S+)/.exec(line)?.[1];
  }

  test("item 2 (landlock, a session open): the user's edit made between two calls is not lost: kept, or kept aside where the report says", async () => {
    const { ws, run, exec, codexHome } = await setup("landlock");
    expect(await exec("sleep 600")).toContain("session ID");
    await run("true");
    const u = userEdits(ws);
    const r = await run("echo hi");
    expect(r.output).toContain("hi");
    // The session could have made these changes, so safety wins; but the user's versions are there to take back.
    for (const [path, text, label] of [
      [u.config, u.edited, ".git/config"],
      [u.hook, u.hookText, ".git/hooks/pre-push"],
    ] as const) {
      if (existsSync(path) && readFileSync(path, "utf8") === text) continue;
      const kept = keptCopy(r.output, label);
      expect(kept).toBeDefined();
      expect(kept!.startsWith(join(codexHome, "shellmcp", "git-kept") + "/")).toBe(true);
      expect(readFileSync(kept!, "utf8")).toBe(text);
      expect(statSync(kept!).mode & 0o777).toBe(0o600);
    }
  }, 120_000);

  for (const backend of ["landlock", "bwrap"] as const)
    test(`item 2 (${backend}), normal use: the user's edit between calls stays in place and is not reported`, async () => {
      const { ws, run, exec } = await setup(backend);
      // Under bubblewrap the session cannot write the top .git (read-only): the edit stays even while it runs.
      if (backend === "bwrap") expect(await exec("sleep 600")).toContain("session ID");
      await run("true");
      const u = userEdits(ws);
      const r = await run("echo hi");
      expect(r.output).toContain("hi");
      expect(r.output).not.toContain("git control files");
      expect(readFileSync(u.config, "utf8")).toBe(u.edited);
      expect(readFileSync(u.hook, "utf8")).toBe(u.hookText);
      expect(statSync(u.hook).mode & 0o777).toBe(0o755);
      // And a later call that changes the config still has its own change undone, the user's edit kept.
      const r2 = await run("printf '[alias]\\n\\tx = !true\\n' >> .git/config; echo done");
      expect(r2.output).toContain("done");
      expect(readFileSync(u.config, "utf8")).toBe(u.edited);
    }, 120_000);

  test("item 2 (landlock): while a session writes, the changed config is undone but kept aside where the report says", async () => {
    const { ws, run, exec, codexHome } = await setup("landlock");
    const config = join(ws, ".git", "config");
    const original = readFileSync(config, "utf8");
    await run("true");
    // A session that changes the config every 0.2 s: anything it did is undone, and the changed text is kept.
    expect(await exec("while true; do printf '# s\\n' >> .git/config; sleep 0.2; done")).toContain("session ID");
    await Bun.sleep(500);
    const r = await run("echo hi");
    expect(r.output).toMatch(/kept aside/);
    const m = /kept aside (?:at|in) (\/\S+?)[);,\s]/.exec(r.output);
    expect(m).not.toBeNull();
    const kept = m![1]!;
    expect(kept.startsWith(join(codexHome, "shellmcp", "git-kept"))).toBe(true);
    expect(readFileSync(kept, "utf8")).toContain("# s");
    expect(statSync(kept).mode & 0o777).toBe(0o600);
    expect(readFileSync(config, "utf8").startsWith(original)).toBe(true);
    void existsSync;
  }, 120_000);
});
