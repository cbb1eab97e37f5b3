/**
 * src/sandbox/git/repair.ts and repair-child.ts (issue 38 item 1): the guard's writes go through folder descriptors
 * reached without links and checked against the recorded identity, and the confined child can write nothing but
 * beneath the folders of its batch. The child is the compiled binary's `--shellmcp-git-repair` role.
 */
import { afterAll, describe, expect, test } from "bun:test";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { identOfFd, openDirNoFollow, runRepairs, setOpenat2MissingForTest, type RepairOp } from "../../src/sandbox/git/repair.ts";
import { repairBatch } from "../../src/sandbox/linux/git-repair-child.ts";
import { landlockAbi } from "../../src/sandbox/linux/landlock.ts";
import { closeQuiet } from "../../ffi/libc.ts";
import { ensureBinary } from "../helpers/binary.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function root(): string {
  const r = realpathSync(mkdtempSync(join(tmpdir(), "git-repair-")));
  dirs.push(r);
  return r;
}

function identOf(dir: string): string {
  const fd = openDirNoFollow(dir);
  try {
    return identOfFd(fd);
  } finally {
    closeQuiet(fd);
  }
}

const linux = process.platform === "linux";

describe.skipIf(!linux)("git repair through folder descriptors", () => {
  for (const where of ["in process", "confined child"] as const) {
    const run = (ops: RepairOp[]) => (where === "in process" ? runRepairs(ops) : repairBatch(ops, [ensureBinary()]));

    test(`${where}: write, mkdir, symlink, remove and rename land where recorded`, () => {
      const r = root();
      const g = join(r, "repo.git");
      mkdirSync(join(g, "hooks"), { recursive: true });
      writeFileSync(join(g, "hooks", "planted"), "x");
      mkdirSync(join(g, "info", "deep"), { recursive: true });
      writeFileSync(join(g, "info", "deep", "f"), "x");
      symlinkSync("/etc", join(g, "modules"));
      writeFileSync(join(g, "index"), "i");
      const ident = identOf(g);
      const res = run([
        { dir: g, ident, kind: "write", name: "config", data: Buffer.from("[core]\n"), mode: 0o644 },
        { dir: join(g, "hooks"), ident: identOf(join(g, "hooks")), kind: "remove", name: "planted" },
        { dir: g, ident, kind: "remove", name: "info" },
        { dir: g, ident, kind: "mkdir", name: "modules", mode: 0o755 },
        { dir: join(g, "modules"), kind: "write", name: "inside", data: Buffer.from("y"), mode: 0o600 },
        { dir: g, ident, kind: "symlink", name: "link", target: "elsewhere" },
        { dir: g, ident, kind: "rename", name: "index", to: "index.aside" },
      ]);
      expect(res).toEqual([undefined, undefined, undefined, undefined, undefined, undefined, undefined]);
      expect(readFileSync(join(g, "config"), "utf8")).toBe("[core]\n");
      expect(lstatSync(join(g, "config")).mode & 0o777).toBe(0o644);
      expect(existsSync(join(g, "hooks", "planted"))).toBe(false);
      expect(existsSync(join(g, "info"))).toBe(false);
      expect(lstatSync(join(g, "modules")).isDirectory()).toBe(true);
      expect(readFileSync(join(g, "modules", "inside"), "utf8")).toBe("y");
      expect(readlinkSync(join(g, "link"))).toBe("elsewhere");
      expect(readFileSync(join(g, "index.aside"), "utf8")).toBe("i");
      // Nothing left beside the entries (no temporary names).
      expect(readdirSync(g).sort()).toEqual(["config", "hooks", "index.aside", "link", "modules"]);
    });

    test(`${where}: a folder exchanged with a link, or replaced by another folder, is refused; nothing outside is touched`, () => {
      const r = root();
      const outside = root();
      writeFileSync(join(outside, "config"), "the user's\n");
      writeFileSync(join(outside, "keep"), "k");
      const g = join(r, "bare.git");
      mkdirSync(g);
      const ident = identOf(g);
      // The folder moved away and a link to outside in its place.
      renameSync(g, join(r, "moved"));
      symlinkSync(outside, g);
      const res = run([
        { dir: g, ident, kind: "write", name: "config", data: Buffer.from("planted"), mode: 0o644 },
        { dir: g, ident, kind: "remove", name: "keep" },
        { dir: join(g, "sub"), kind: "remove", name: "keep" },
      ]);
      for (const x of res) expect(x).toMatch(/it was replaced by a symbolic link/);
      expect(readFileSync(join(outside, "config"), "utf8")).toBe("the user's\n");
      expect(existsSync(join(outside, "keep"))).toBe(true);
      // Another real folder in its place: its identity differs.
      rmSync(g);
      mkdirSync(g);
      const res2 = run([{ dir: g, ident, kind: "write", name: "config", data: Buffer.from("x"), mode: 0o644 }]);
      expect(res2[0]).toMatch(/replaced by another folder/);
      expect(existsSync(join(g, "config"))).toBe(false);
    });
  }

  test("without openat2 (Linux < 5.6), the component walk refuses a link on the way just the same", () => {
    setOpenat2MissingForTest(true);
    try {
      const r = root();
      const outside = root();
      const g = join(r, "a", "bare.git");
      mkdirSync(g, { recursive: true });
      const ident = identOf(g);
      expect(runRepairs([{ dir: g, ident, kind: "write", name: "config", data: Buffer.from("ok"), mode: 0o644 }])).toEqual([undefined]);
      expect(readFileSync(join(g, "config"), "utf8")).toBe("ok");
      renameSync(join(r, "a"), join(r, "moved"));
      symlinkSync(outside, join(r, "a"));
      mkdirSync(join(outside, "bare.git"));
      const res = runRepairs([{ dir: g, ident, kind: "write", name: "config", data: Buffer.from("planted"), mode: 0o644 }]);
      expect(res[0]).toMatch(/it was replaced by a symbolic link/);
      expect(readdirSync(join(outside, "bare.git"))).toEqual([]);
    } finally {
      setOpenat2MissingForTest(false);
    }
  });

  test.skipIf(landlockAbi() < 1)("the child is confined: its Landlock ruleset lets it write beneath the batch's folders only", () => {
    const r = root();
    const inside = join(r, "in");
    const outside = join(r, "out");
    mkdirSync(inside);
    mkdirSync(outside);
    // A program that confines itself as the child does, then tries both folders.
    const prog = `
      import { confineToFolders } from ${JSON.stringify(join(import.meta.dir, "../../src/sandbox/linux/git-repair-child.ts"))};
      import { openDirNoFollow } from ${JSON.stringify(join(import.meta.dir, "../../src/sandbox/git/repair.ts"))};
      import { writeFileSync } from "node:fs";
      confineToFolders([openDirNoFollow(${JSON.stringify(inside)})]);
      const out = [];
      for (const d of [${JSON.stringify(inside)}, ${JSON.stringify(outside)}]) {
        try { writeFileSync(d + "/f", "x"); out.push("ok"); } catch (e) { out.push(e.code); }
      }
      console.log(out.join(","));
    `;
    const file = join(r, "confine.ts");
    writeFileSync(file, prog);
    const p = Bun.spawnSync([process.execPath, file], { stderr: "pipe" });
    expect(p.stderr.toString()).toBe("");
    expect(p.stdout.toString().trim()).toBe("ok,EACCES");
    expect(existsSync(join(outside, "f"))).toBe(false);
  });
});
