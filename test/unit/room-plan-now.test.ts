/**
 * The escalation room is planned from the repository as it is now (src/escalate/rooms/plan.ts `planRoom`): no cache
 * decides which control files stay read-only and which must not appear. A repository removed and made again at the
 * same path at once (the same second, often the same inode) is planned afresh each time: its `config` read-only
 * when it exists, listed under `mustNotAppear` when it does not, its local remotes as its config names them now.
 * (Asked while hunting the golden-rooms flake, whose cause was elsewhere: another server's git guard, see
 * ./golden-rooms.test.ts.)
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { planRoom, type RoomSpec } from "../../src/escalate/rooms/plan.ts";
import { planSandboxPolicy } from "../../src/sandbox/filesystem-plan.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const base = realpathSync(mkdtempSync(join(CONF_BASE, "room-plan-now-")));
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** `git -C dir args…`; throws on failure. */
function git(dir: string, ...args: string[]): void {
  const r = Bun.spawnSync(["git", "-C", dir, ...args], { stdout: "ignore", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
}

/** The room of `/usr/bin/git` started in `repo` under a network-off workspace-write call there (bubblewrap). */
function roomIn(repo: string) {
  const call = planSandboxPolicy(
    {
      type: "workspace-write",
      writable_roots: [],
      read_only_access: { type: "full-access" },
      network_access: false,
      exclude_tmpdir_env_var: true,
      exclude_slash_tmp: true,
    },
    repo,
    {},
  );
  const spec: RoomSpec = { backend: { kind: "bwrap", bwrap: "/usr/bin/bwrap", noProc: false }, call, extraWritable: {} };
  const room = planRoom(spec, repo, "/usr/bin/git");
  const gitRoot = room.plan.writableRoots.find((w) => w.root === join(repo, ".git"));
  return {
    readOnly: gitRoot?.readOnlySubpaths ?? [],
    mustNotAppear: room.mustNotAppear,
    roots: room.plan.writableRoots.map((w) => w.root),
  };
}

test("a repository made again at the same path is planned as it is now, each time", () => {
  const repo = join(base, "repo");
  const remote = join(base, "remote.git");
  mkdirSync(remote);
  git(remote, "init", "-q", "--bare");
  const config = join(repo, ".git", "config");
  // Made, removed and made again at once; every other time without its config, or with a local remote.
  for (const shape of ["config", "no config", "config and a local remote", "no config", "config"] as const) {
    rmSync(repo, { recursive: true, force: true });
    mkdirSync(repo);
    git(repo, "init", "-q");
    if (shape === "config and a local remote") git(repo, "remote", "add", "origin", remote);
    if (shape === "no config") unlinkSync(config);
    const r = roomIn(repo);
    expect({ shape, readOnly: r.readOnly.includes(config), mustNotAppear: r.mustNotAppear.includes(config) }).toEqual({
      shape,
      readOnly: shape !== "no config",
      mustNotAppear: shape === "no config",
    });
    expect({ shape, remote: r.roots.includes(remote) }).toEqual({ shape, remote: shape === "config and a local remote" });
  }
});
