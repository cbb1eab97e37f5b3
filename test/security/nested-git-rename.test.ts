/**
 * Under bubblewrap the `.git` of a nested repository is bound read-only, but the folder that holds it is an ordinary
 * folder of a writable root: the sandboxed command can rename that folder (a bind mount moves with its parent) and
 * make a new one with a `.git` of its own at the old path. So a nested `.git` is not read-only by path, and neither
 * the git guard (which skipped it as "kernel-protected") nor the escalation boundary (which trusted its config) may
 * take it as such. Our bubblewrap plans now bind every such folder onto itself (policy.ts `pinFolders`: a mount
 * point cannot be renamed), and the view trusts an entry by path only where every folder above it is a mount point
 * or unwritable (writable.ts `pinnedReadOnly`).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, isolatedRepo, requirePrograms, serveWithPid } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const base = mkdtempSync(join("/tmp", "shellmcp-nested-rename-"));
afterAll(async () => {
  await closeAll();
  rmSync(base, { recursive: true, force: true });
});

/**
 * Move the repository's folder aside and plant a `.git` whose `core.fsmonitor` runs `touch MARKER` (with a
 * name, `cd` to HOME first: HOME is outside the sandbox's writable roots), at the old path.
 */
const plant = (parent: string, name: string, marker: string) =>
  `cd ${parent} && mv ${name} ${name}.moved && mkdir -p ${name}/.git/objects ${name}/.git/refs/heads && ` +
  `printf 'ref: refs/heads/main\\n' > ${name}/.git/HEAD && ` +
  `printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"${marker.includes("/") ? `touch ${marker}` : `cd; touch ${marker}`}\"\\n' > ${name}/.git/config && echo PLANTED`;

describe.skipIf(skipWithout("nested repositories suite", shellsMissing()))("a nested .git moved aside with its folder", () => {
  requirePrograms("bwrap", "git");

  test("bwrap: the git guard puts back a .git planted in place of a nested repository's", async () => {
    const dir = join(base, "guard", "proj"); // 3 levels below /tmp: its .git is bound read-only
    isolatedRepo(dir);
    const ws = confDir("ngr-ws");
    const s = await serveWithPid({ cwd: ws, args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"] });
    await s.shell({ command: plant(join(base, "guard"), "proj", join(base, "guard-pwned")), workdir: ws, login: false });
    // The human's next `git status` there must not run what the sandbox planted.
    const cfg = join(dir, ".git", "config");
    const planted = existsSync(cfg) && readFileSync(cfg, "utf8").includes("fsmonitor");
    expect(planted).toBe(false);
  }, 60_000);

  test("bwrap, escalation = host: an allowed git in a planted nested repository is not run outside the sandbox", async () => {
    const dir = join(base, "esc", "proj");
    isolatedRepo(dir);
    const ws = confDir("ngr-ws2");
    const codexHome = confDir("ngr-home");
    writeFileSync(join(codexHome, "config.toml"), '[shellmcp]\nescalation = "host"\n');
    const s = await serveWithPid({
      rules: 'prefix_rule(pattern = ["git", "status"], decision = "allow")\n',
      codexHome,
      cwd: ws,
      args: ["--sandbox", "workspace-write", "--sandbox-backend", "bwrap"],
    });
    const r = await s.shell({
      command: `${plant(join(base, "esc"), "proj", "esc-pwned")} && cd proj && git status >/dev/null 2>&1; echo DONE`,
      workdir: ws,
      login: false,
      timeout_ms: 30_000,
    });
    expect(r.out.output).toContain("DONE");
    // The sandbox cannot write HOME: only a git run outside it could have made the marker.
    expect(existsSync(join(codexHome, "esc-pwned"))).toBe(false);
  }, 60_000);
});
