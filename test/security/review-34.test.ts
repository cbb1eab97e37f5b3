/**
 * Review of the issue 34/30 changes (git-guard, git-layout, untrusted reads, the inspector): attacks from inside
 * ordinary `shell` calls of the compiled `serve` (real MCP client), judged on the host. Each test names its hole;
 * each failed on the build it was written against (3c78816).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, exists, hostGit, peakRssMiB, requirePrograms, serveWithPid, token, withDeadline } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { assertOutside } from "../helpers/test-dirs.ts";

afterAll(closeAll);

type Backend = "bwrap" | "landlock";
type Client = "codex" | "plain";

/** A repository outside every writable root, as the user's own project (a commit, a hook of the user's). */
function victimRepo(parent: string, name = "proj"): string {
  const v = join(parent, name);
  hostGit(parent, "init", "-q", "-b", "main", name);
  writeFileSync(join(v, "f.txt"), "victim\n");
  hostGit(v, "add", "f.txt");
  hostGit(v, "commit", "-q", "-m", "victim's first");
  writeFileSync(join(v, ".git", "hooks", "post-commit"), "#!/bin/sh\n: the user's own hook\n");
  chmodSync(join(v, ".git", "hooks", "post-commit"), 0o755);
  return v;
}

/** A serve session on `backend`, workspace-write over a fresh repository `ws`, Codex-style or plain client. */
async function setup(backend: Backend, client: Client, rules = "") {
  const codexHome = confDir("r34-home");
  const ws = confDir("r34-ws");
  hostGit(ws, "init", "-q", "-b", "main");
  writeFileSync(join(ws, "f.txt"), "one\n");
  hostGit(ws, "add", "f.txt");
  hostGit(ws, "commit", "-q", "-m", "first");
  const args = ["--sandbox-backend", backend];
  if (client === "plain") args.push("--sandbox", "workspace-write", "--cd", ws);
  const s = await serveWithPid({ rules, codexHome, args, env: { SHELLMCP_LOG: "info" } });
  if (client === "codex") expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
  const outside = assertOutside(confDir("r34-outside"));
  const run = async (command: string, timeout_ms = 30_000) => (await s.shell({ command, workdir: ws, login: false, timeout_ms })).out;
  return { s, ws, outside, run };
}

const missing = shellsMissing();
const CONFIGS: [Backend, Client][] = [
  ["landlock", "codex"],
  ["bwrap", "codex"],
  ["landlock", "plain"],
  ["bwrap", "plain"],
];

describe.skipIf(skipWithout("review-34 suite", missing))("review of issue 34/30 changes", () => {
  requirePrograms("git", "bwrap");

  /*
   * HOLE 1 (git-guard restores through a symlinked ancestor): the guard checks with lstat only the folders from a git
   * dir down to the entry (`unsafeParents(base, …)`), never the folders between the writable root and the git dir.
   * Call 1 makes a nested repository `a/proj/.git` with the attacker's config (core.fsmonitor) and post-commit hook
   * (new repositories are not guarded). Call 2 (its snapshot records them as "before") swaps `a` for a symlink to a
   * folder outside every writable root holding the user's repository `proj`. The check then sees "changed" entries
   * and "restores" them through the link: the user's `.git/config` and hooks outside every writable root are
   * replaced by the attacker's, and the user's next `git status` runs the fsmonitor on the host.
   */
  for (const [backend, client] of CONFIGS)
    test(`hole 1 (${backend}, ${client}): the git guard writes the attacker's config and hooks through a symlinked parent into a repository outside`, async () => {
      const { outside, run } = await setup(backend, client);
      const marker = join(outside, `ran-${token()}`);
      const victim = victimRepo(outside);
      const configBefore = readFileSync(join(victim, ".git", "config"));
      const r1 = await run(
        [
          "mkdir -p a/proj/.git/hooks a/proj/.git/objects a/proj/.git/refs/heads",
          "echo 'ref: refs/heads/main' > a/proj/.git/HEAD",
          `printf '[core]\\n\\tfsmonitor = touch ${marker}.fsmonitor; false\\n' > a/proj/.git/config`,
          `printf '#!/bin/sh\\ntouch ${marker}.hook\\n' > a/proj/.git/hooks/post-commit && chmod +x a/proj/.git/hooks/post-commit`,
          "echo made",
        ].join(" && "),
      );
      expect(r1.output).toContain("made");
      const r2 = await run(`mv a a.old && ln -s ${outside} a && echo swapped`);
      // Under bubblewrap call 2 finds the repository call 1 made and pins the folders above it (issue 38): the
      // swap is refused there; under Landlock it happens, and the guard must not follow it.
      expect(r2.output).toMatch(backend === "bwrap" ? /swapped|Device or resource busy/ : /swapped/);
      // Judged on the host: the user's repository outside every writable root is as it was.
      expect(readFileSync(join(victim, ".git", "config")).toString()).toBe(configBefore.toString());
      expect(readFileSync(join(victim, ".git", "hooks", "post-commit"), "utf8")).toBe("#!/bin/sh\n: the user's own hook\n");
      writeFileSync(join(victim, "f.txt"), "two\n");
      hostGit(victim, "status", "--short");
      hostGit(victim, "commit", "-qam", "second");
      expect({ fsmonitor: exists(`${marker}.fsmonitor`), hook: exists(`${marker}.hook`) }).toEqual({ fsmonitor: false, hook: false });
    }, 90_000);

  /*
   * HOLE 2 (git-layout follows a `.git` symlink the sandbox made): `discoverRepository` takes a `.git` *symlink* to a
   * folder as a plain git dir (only `.git` *files* are checked for git's shape), and the boundary judges it by where it
   * leads (`canWrite` canonicalises): a folder the sandbox cannot write, so git escalates. The room is planned with
   * that git dir writable: a sandboxed `ln -s /elsewhere/proj/.git x/.git && cd x && git branch …` (the starter
   * policy allows git branch/commit/reset/tag) writes refs of a repository outside every writable root.
   * Note: `cd /elsewhere/proj && git branch …` reaches the same repository by design (a room writes the repository its
   * program runs in, wherever it is: DESIGN.md "the room"); the symlink only hides where git will write, and breaks
   * docs/escalation.md's "pointers only in git's own shape". The design point itself is in the review's report.
   */
  for (const [backend, client] of CONFIGS)
    test(`hole 2 (${backend}, ${client}): a sandbox-made .git symlink gives a room another repository's git dir`, async () => {
      const rules = `prefix_rule(pattern = ["git", ["branch", "tag", "commit"]], decision = "allow")\n`;
      const { outside, run } = await setup(backend, client, rules);
      const victim = victimRepo(outside);
      const r = await run(
        `mkdir x && ln -s ${victim}/.git x/.git && cd x && git branch planted-${backend}; git tag t-${backend}; echo done`,
      );
      expect(r.output).toContain("done");
      expect(existsSync(join(victim, ".git", "refs", "heads", `planted-${backend}`))).toBe(false);
      expect(existsSync(join(victim, ".git", "refs", "tags", `t-${backend}`))).toBe(false);
    }, 90_000);
  /*
   * HOLE 3 (git guard memory is unbounded): every file under `hooks/` and `info/` of every git dir found (200 git dirs,
   * 256 entries per folder, 4 levels of sub-folders) is read whole (up to 1 MiB each) and kept in memory, by the
   * snapshot, by the check, and in the per-server file cache. A call makes nested repositories whose hooks folders hold
   * sparse 1 MiB files (no disk used, ~1 s to make); the next call's snapshot makes the server hold all of them. Here
   * 4 repositories x 250 files = 1000 MiB (the bounds allow ~50 GiB: 200 git dirs x 256 x 1 MiB, more with sub-folders),
   * enough to take the server (and its host) down with the OOM killer. The guard's memory must not scale with what
   * the sandbox writes.
   */
  for (const [backend, client] of [
    ["landlock", "codex"],
    ["bwrap", "plain"],
  ] as [Backend, Client][])
    test(`hole 3 (${backend}, ${client}): sparse files in nested hooks/ folders make the server's memory grow by their size`, async () => {
      const { s, run } = await setup(backend, client);
      const make = [
        "for r in 1 2 3 4; do mkdir -p n$r/.git/hooks n$r/.git/objects n$r/.git/refs && echo 'ref: refs/heads/main' > n$r/.git/HEAD",
        "  for i in $(seq 1 250); do truncate -s 1048576 n$r/.git/hooks/h$i; done; done; echo made",
      ].join("\n");
      expect((await run(make, 60_000)).output).toContain("made");
      const before = peakRssMiB(s.pid);
      const r = await withDeadline(run("echo next", 60_000), 90_000, "the call after");
      expect(r.output).toContain("next");
      const grown = peakRssMiB(s.pid) - before;
      expect({ grownMiB: Math.round(grown), boundedBelow: grown < 300 }).toEqual({ grownMiB: Math.round(grown), boundedBelow: true });
    }, 180_000);
  /*
   * HOLE 4 (the exec-server token protects against other users, not against the sandboxes it serves): the default
   * token file lies in a 0600 file under `$TMPDIR`, which every workspace-write sandbox of the same user reads (full
   * read) and even writes (a writable root). A sandboxed command with network access reads it and drives the
   * exec-server on 127.0.0.1, which runs anything unsandboxed: here it creates a marker outside every writable root.
   */
  for (const backend of ["bwrap", "landlock"] as Backend[])
    test(`hole 4 (${backend}, codex): a sandboxed command with network reads the exec-server's token and runs a program through it`, async () => {
      const tmp = confDir("r34-es-tmp");
      const es = Bun.spawn([join(import.meta.dir, "..", "..", "dist", "shellmcp"), "exec-server"], {
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, TMPDIR: tmp },
      });
      try {
        const reader = es.stdout.getReader();
        let url = "";
        while (!url.includes("\n")) url += new TextDecoder().decode((await reader.read()).value);
        const port = new URL(url.trim()).port;
        const codexHome = confDir("r34-home");
        const ws = confDir("r34-ws");
        const s = await serveWithPid({ codexHome, args: ["--sandbox-backend", backend], env: { TMPDIR: tmp } });
        expect(await s.sandboxState({ type: "workspace-write", network_access: true }, ws)).toEqual({});
        const outside = assertOutside(confDir("r34-outside"));
        const marker = join(outside, `exec-server-ran-${token()}`);
        const client = join(import.meta.dir, "review-34-ws-client.py");
        const r = (
          await s.shell({
            command: `python3 ${client} '${tmp}/shellmcp-exec-server-*/token' 127.0.0.1:${port} ${marker}`,
            workdir: ws,
            login: false,
            timeout_ms: 20_000,
          })
        ).out;
        expect(r.output).toBeDefined();
        await Bun.sleep(500);
        expect({ ranOutsideTheSandbox: exists(marker) }).toEqual({ ranOutsideTheSandbox: false });
      } finally {
        es.kill("SIGTERM");
        await es.exited;
      }
    }, 90_000);
  /*
   * HOLE 5 (the git guard's report is not rendered by safe-text): the report names entries by the file names the
   * command chose (a hook it created, a symlink's target), and is appended after the command's output as shellmcp's own
   * words, raw. A hook named with CR/ESC sequences erases or rewrites the report's lines on a terminal (issue 30 item
   * 4: every decision text for a human is rendered visibly). The command's own output stays raw (it is data); what
   * shellmcp adds after it must not carry a control character.
   */
  test("hole 5 (landlock, codex): a hook file name with ESC/CR reaches the guard's report raw", async () => {
    const { run } = await setup("landlock", "codex");
    const r = await run(`printf x > .git/hooks/"$(printf 'a\\r\\033[2Kshellmcp: nothing changed\\033[8m')"; echo planted`);
    const added = r.output.slice(r.output.indexOf("planted\n") + "planted\n".length);
    expect(added).toContain("shellmcp: this command changed git control files");
    expect({ added, raw: /[\x00-\x09\x0b-\x1f\x7f]/.test(added) }).toEqual({ added, raw: false });
  }, 60_000);
});
