/**
 * Issue 34, "normal use unchanged": git through rooms in the layouts git itself makes — a linked worktree (`git
 * worktree add`) and a submodule — on both backends, with a Codex-style and a plain client. The pointer files of
 * those layouts have git's own shape (src/sandbox/git/layout.ts), so the room follows them: a commit made in the
 * linked worktree or the submodule by an allowed `git` lands, judged by `git log` run on the host.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, hostGit, oneCommitRepo, requirePrograms, serveWithPid } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

const RULES = 'prefix_rule(pattern=["git"], decision="allow")\n';

const repo = oneCommitRepo;

async function serve(backend: "bwrap" | "landlock", client: "codex" | "plain", ws: string) {
  const args = ["--sandbox-backend", backend, ...(client === "plain" ? ["--sandbox", "workspace-write", "--cd", ws] : [])];
  const s = await serveWithPid({ rules: RULES, args, env: { SHELLMCP_LOG: "info" } });
  if (client === "codex") expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
  return {
    s,
    run: async (command: string, workdir: string) => (await s.shell({ command, workdir, login: false, timeout_ms: 30_000 })).out,
  };
}

describe.skipIf(skipWithout("room layouts suite", shellsMissing()))("git layouts through rooms", () => {
  requirePrograms("git", "bwrap");
  for (const backend of ["bwrap", "landlock"] as const) {
    for (const client of ["codex", "plain"] as const) {
      test(`${backend}, ${client}: a commit in a linked worktree the user made (git worktree add)`, async () => {
        const base = confDir("layout-wt");
        const ws = repo(join(base, "ws"));
        hostGit(ws, "worktree", "add", "-q", "-b", "side", join(base, "wt"));
        writeFileSync(join(base, "wt", "g.txt"), "side\n");
        const { s, run } = await serve(backend, client, ws);
        const r = await run("git add g.txt && git commit -q -m wt-commit; echo rc=$?", join(base, "wt"));
        expect({ rc: r.output.match(/rc=\d+/)?.[0], log: hostGit(join(base, "wt"), "log", "--format=%s", "-1") }).toEqual({
          rc: "rc=0",
          log: "wt-commit",
        });
        expect(hostGit(ws, "log", "--format=%s", "-1", "side")).toBe("wt-commit");
        expect(s.stderr()).not.toContain("cannot be trusted");
      }, 60_000);

      test(`${backend}, ${client}: git worktree add through the room, then a commit in that worktree (a later call)`, async () => {
        const base = confDir("layout-add");
        const ws = repo(join(base, "ws"));
        const { s, run } = await serve(backend, client, ws);
        const add = await run("git worktree add -q -b two wt2; echo rc=$?", ws);
        expect({ rc: add.output.match(/rc=\d+/)?.[0], branch: hostGit(ws, "rev-parse", "--abbrev-ref", "two") }).toEqual({
          rc: "rc=0",
          branch: "two",
        });
        const r = await run("echo two > h.txt && git add h.txt && git commit -q -m wt2-commit; echo rc=$?", join(ws, "wt2"));
        expect({ rc: r.output.match(/rc=\d+/)?.[0], log: hostGit(ws, "log", "--format=%s", "-1", "two") }).toEqual({
          rc: "rc=0",
          log: "wt2-commit",
        });
        expect(s.stderr()).not.toContain("cannot be trusted");
      }, 60_000);

      test(`${backend}, ${client}: a commit in a submodule (git submodule add)`, async () => {
        const base = confDir("layout-sub");
        const lib = repo(join(base, "lib"));
        const ws = repo(join(base, "ws"));
        hostGit(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib");
        hostGit(ws, "commit", "-q", "-m", "submodule");
        hostGit(join(ws, "lib"), "config", "user.name", "t");
        hostGit(join(ws, "lib"), "config", "user.email", "t@example.com");
        const { s, run } = await serve(backend, client, ws);
        const r = await run("echo two > f.txt && git add f.txt && git commit -q -m sub-commit; echo rc=$?", join(ws, "lib"));
        expect({ out: r.output, log: hostGit(join(ws, "lib"), "log", "--format=%s", "-1") }).toEqual({
          out: expect.stringContaining("rc=0"),
          log: "sub-commit",
        });
        expect(s.stderr()).not.toContain("cannot be trusted");
      }, 60_000);
    }
  }
});
