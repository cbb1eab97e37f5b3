/**
 * Issue 34 items 3 and 6: after every call, on every backend, git control state is as before or the user is told
 * (src/sandbox/git/guard.ts, docs/git-guard.md). Each attack runs from inside an ordinary `shell` call of the
 * compiled `serve` (real MCP client) and is judged on the host, as the human would meet it: the files in `.git`,
 * and a plain `git status`/`git commit` run by the test, which must not run what the command planted (a marker file
 * outside every writable root). Every test here failed on the build before the git guard.
 *
 * 6 under Landlock a call writes `.git/hooks/pre-commit` and `.git/config`; a FIFO planted at `.git/config`; the
 *   first call under Landlock says that protection is weaker (and none under bubblewrap)
 * 3 the nested-repository `git add` (allowed by a rule): a gitlink to a repository with `core.fsmonitor`
 * and normal use: a gitlink of a repository the sandbox cannot write (`git submodule add` on the host) stays.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, lstatSync, readFileSync, readlinkSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  closeAll,
  confDir,
  exists,
  hostGit,
  oneCommitRepo,
  requirePrograms,
  serveWithPid,
  token,
  withDeadline,
} from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { assertOutside } from "../helpers/test-dirs.ts";

afterAll(closeAll);

type Backend = "bwrap" | "landlock";

/** A serve session on `backend` over a repository `ws` (one commit, a pre-commit hook of the user's), workspace-write. */
async function setup(backend: Backend, rules = "", config?: string) {
  const codexHome = confDir("guard-home");
  if (config !== undefined) writeFileSync(join(codexHome, "config.toml"), config);
  const s = await serveWithPid({ rules, codexHome, args: ["--sandbox-backend", backend], env: { SHELLMCP_LOG: "info" } });
  const ws = oneCommitRepo(confDir("guard-ws"));
  const outside = assertOutside(confDir("guard-outside"));
  expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
  const run = async (command: string, timeout_ms = 30_000) => (await s.shell({ command, workdir: ws, login: false, timeout_ms })).out;
  return { s, ws, outside, run };
}

const missing = shellsMissing();

describe.skipIf(skipWithout("git guard suite", missing))("issue 34: git control state after every call", () => {
  requirePrograms("git", "bwrap");

  test("item 6 (landlock): a call writes .git/hooks/pre-commit and .git/config; both are put back and the result says so", async () => {
    const { ws, outside, run } = await setup("landlock");
    const marker = join(outside, `hook-ran-${token()}`);
    const config = join(ws, ".git", "config");
    const configBefore = readFileSync(config);
    // The user's own hook, executable: it must come back with its content and mode.
    const userHook = join(ws, ".git", "hooks", "post-commit");
    writeFileSync(userHook, "#!/bin/sh\n: users own hook\n");
    chmodSync(userHook, 0o755);
    const r = await run(
      [
        `printf '#!/bin/sh\\ntouch ${marker}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`,
        `printf '[core]\\n\\tfsmonitor = touch ${marker}.fsmonitor; false\\n[alias]\\n\\tst = !touch ${marker}.alias\\n' >> .git/config`,
        `echo 'exec touch ${marker}.post' > .git/hooks/post-commit`,
        "echo planted",
      ].join("; "),
    );
    expect(r.output).toContain("planted");
    expect(existsSync(join(ws, ".git", "hooks", "pre-commit"))).toBe(false);
    expect(readFileSync(config)).toEqual(configBefore);
    expect(readFileSync(userHook, "utf8")).toBe("#!/bin/sh\n: users own hook\n");
    expect(lstatSync(userHook).mode & 0o777).toBe(0o755);
    expect(r.output).toContain("shellmcp: this command changed git control files");
    expect(r.output).toMatch(/undone: .*\.git\/hooks\/pre-commit: created by the command/);
    expect(r.output).toMatch(/undone: .*\.git\/config: its content was changed by the command/);
    // The human's next commit and status run nothing the command wrote.
    writeFileSync(join(ws, "f.txt"), "two\n");
    hostGit(ws, "commit", "-qam", "second");
    hostGit(ws, "status", "--short");
    for (const m of [marker, `${marker}.fsmonitor`, `${marker}.post`]) expect({ m, ran: exists(m) }).toEqual({ m, ran: false });
    // A call that changes nothing in .git says nothing about it.
    expect((await run("echo quiet")).output).toBe("quiet\n");
  }, 90_000);

  test("item 6 (landlock): hooks/ replaced by a symlink to a folder outside is put back, nothing is written through the link", async () => {
    const { ws, outside, run } = await setup("landlock");
    const marker = join(outside, `hook-ran-${token()}`);
    // The link points into the outside folder (which the test, not the sandbox, fills): a restore that followed
    // it would write the user's hooks there.
    writeFileSync(join(outside, "pre-commit"), `#!/bin/sh\ntouch ${marker}\n`);
    chmodSync(join(outside, "pre-commit"), 0o755);
    const r = await run(`mv .git/hooks .git/hooks.old && ln -s ${outside} .git/hooks && echo swapped`);
    expect(r.output).toContain("swapped");
    expect(lstatSync(join(ws, ".git", "hooks")).isDirectory()).toBe(true);
    expect(existsSync(join(ws, ".git", "hooks", "pre-commit"))).toBe(false);
    expect(existsSync(join(outside, "pre-commit.sample"))).toBe(false);
    writeFileSync(join(ws, "f.txt"), "two\n");
    hostGit(ws, "commit", "-qam", "second");
    expect(exists(marker)).toBe(false);
    expect(r.output).toMatch(/undone: .*\.git\/hooks: a folder was replaced by a symbolic link/);
  }, 90_000);

  test("item 6 (landlock): a user's hooks/ symlink to a read-only folder, swapped for a folder with a hook, comes back as the link", async () => {
    const { ws, outside, run } = await setup("landlock");
    const marker = join(outside, `hook-ran-${token()}`);
    const shared = join(outside, "shared-hooks");
    renameSync(join(ws, ".git", "hooks"), shared);
    symlinkSync(shared, join(ws, ".git", "hooks"));
    const r = await run(
      `rm .git/hooks && mkdir .git/hooks && printf '#!/bin/sh\\ntouch ${marker}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo swapped`,
    );
    expect(r.output).toContain("swapped");
    expect(readlinkSync(join(ws, ".git", "hooks"))).toBe(shared);
    writeFileSync(join(ws, "f.txt"), "two\n");
    hostGit(ws, "commit", "-qam", "second");
    expect(exists(marker)).toBe(false);
    expect(r.output).toMatch(/undone: .*\.git\/hooks: a symbolic link to .* was replaced by a folder/);
  }, 90_000);

  test("item 6 (landlock): a call that starts while another's planted hook is in place does not put that hook back", async () => {
    const { ws, outside, run } = await setup("landlock");
    const marker = join(outside, `hook-ran-${token()}`);
    const hook = join(ws, ".git", "hooks", "pre-commit");
    // A plants the hook and waits for "a-go"; B starts once the hook is there and waits for "b-go", which the test
    // creates only after A's result (A's check done) has arrived. Without a shared "before", B's snapshot holds
    // A's hook and B's check writes it back.
    const a = run(
      `printf '#!/bin/sh\\ntouch ${marker}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit; while [ ! -e a-go ]; do sleep 0.05; done; echo a-done`,
    );
    while (!existsSync(hook)) await Bun.sleep(20);
    const b = run("touch b-started; while [ ! -e b-go ]; do sleep 0.05; done; echo b-done");
    while (!existsSync(join(ws, "b-started"))) await Bun.sleep(20);
    writeFileSync(join(ws, "a-go"), "");
    expect((await a).output).toContain("a-done");
    expect(existsSync(hook)).toBe(false);
    writeFileSync(join(ws, "b-go"), "");
    expect((await b).output).toContain("b-done");
    expect(existsSync(hook)).toBe(false);
    writeFileSync(join(ws, "f.txt"), "two\n");
    hostGit(ws, "commit", "-qam", "second");
    expect(exists(marker)).toBe(false);
  }, 90_000);

  test("item 6 (landlock): a FIFO planted at .git/config does not stop the server; the config comes back", async () => {
    const { s, ws, run } = await setup("landlock");
    const configBefore = readFileSync(join(ws, ".git", "config"));
    const r = await withDeadline(run("rm .git/config && mkfifo .git/config && echo fifo"), 60_000, "the FIFO call");
    expect(r.output).toContain("fifo");
    expect(lstatSync(join(ws, ".git", "config")).isFile()).toBe(true);
    expect(readFileSync(join(ws, ".git", "config"))).toEqual(configBefore);
    // A FIFO left for the next call's snapshot: that call and the one after are answered.
    const r2 = await withDeadline(run("rm .git/config && mkfifo .git/config && echo again"), 60_000, "the second FIFO call");
    expect(r2.output).toContain("again");
    expect((await withDeadline(run("echo alive"), 60_000, "the call after")).output).toContain("alive");
    // FIFOs the next snapshot meets (a repository the command made is not put back): config, commondir, index of a
    // nested repository, a `.git` that is a FIFO, a gitlink's `.git`.
    const r3 = await withDeadline(
      run(
        "git init -q n && rm n/.git/config && mkfifo n/.git/config n/.git/commondir n/.git/index && mkdir m && mkfifo m/.git && echo planted",
      ),
      60_000,
      "the call planting FIFOs",
    );
    expect(r3.output).toContain("planted");
    expect((await withDeadline(run("echo still-alive"), 60_000, "the call after the FIFOs")).output).toContain("still-alive");
    expect(s.stderr()).not.toContain("git guard failed");
  }, 120_000);

  for (const backend of ["bwrap", "landlock"] as const) {
    test(`item 3 (${backend}): a nested repository with core.fsmonitor added by an allowed git add: the user's git status runs nothing`, async () => {
      const { ws, outside, run } = await setup(backend, 'prefix_rule(pattern=["git", "add"], decision="allow")\n');
      const marker = join(outside, `fsmonitor-ran-${token()}`);
      const r = await run(
        [
          "mkdir evil && git -C evil init -q",
          `git -C evil config core.fsmonitor 'touch ${marker}; false'`,
          "git -C evil -c user.name=t -c user.email=t@e commit -q --allow-empty -m x",
          "git add evil 2>/dev/null; echo added=$?",
        ].join(" && "),
      );
      expect(r.output).toContain("added=0");
      hostGit(ws, "status", "--short");
      hostGit(ws, "status");
      expect(exists(marker)).toBe(false);
      expect(r.output).toMatch(/recorded "evil" as a submodule \(gitlink\)/);
      expect(hostGit(ws, "ls-files", "-s")).not.toContain("160000");
      // The nested repository is disabled, so the human's `git add -A` records plain files, not a gitlink.
      expect(existsSync(join(ws, "evil", ".git.shellmcp-disabled"))).toBe(true);
      hostGit(ws, "add", "-A");
      hostGit(ws, "status");
      expect(hostGit(ws, "ls-files", "-s")).not.toContain("160000");
      expect(exists(marker)).toBe(false);
    }, 90_000);
  }

  test("normal use (bwrap, escalation = host): add, commit, git submodule add: the new gitlink (a repository the sandbox cannot write) is kept", async () => {
    const sub = confDir("guard-sub");
    hostGit(sub, "init", "-q", "-b", "main");
    hostGit(sub, "commit", "-q", "--allow-empty", "-m", "s");
    const { ws, run } = await setup(
      "bwrap",
      'prefix_rule(pattern=["git", "-c", "protocol.file.allow=always", "submodule", "add"], decision="allow")\nprefix_rule(pattern=["git", "add"], decision="allow")\nprefix_rule(pattern=["git", "commit"], decision="allow")\n',
      '[shellmcp]\nescalation = "host"\n',
    );
    const r = await run(
      `echo two > f.txt && git add f.txt && git commit -qm two && git -c protocol.file.allow=always submodule add -q ${sub} mods/sub && echo committed`,
    );
    expect(r.output).toContain("committed");
    expect(r.output).not.toContain("shellmcp: this command changed git control files");
    expect(hostGit(ws, "ls-files", "-s", "mods/sub")).toContain("160000");
    expect(hostGit(ws, "log", "--format=%s", "-1")).toBe("two");
    expect(r.output).not.toContain("Landlock");
  }, 90_000);

  test("item 6: the first call under Landlock says protection is weaker; later calls do not", async () => {
    const { run } = await setup("landlock");
    const first = await run("echo one");
    expect(first.output).toContain("shellmcp: this server runs commands under Landlock + seccomp (--sandbox-backend landlock was given)");
    expect(first.output).toContain("cannot be protected by the kernel");
    expect((await run("echo two")).output).toBe("two\n");
  }, 60_000);

  test("item 6: no such notice under bubblewrap", async () => {
    const { run } = await setup("bwrap");
    expect((await run("echo one")).output).toBe("one\n");
  }, 60_000);
});
