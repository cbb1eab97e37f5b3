/**
 * Issue 41, the help texts through the compiled binary: they name the files shellmcp reads (`~/.codex/rules`,
 * `config.toml`) and the documentation's URL once, never a `docs/` page (a release tarball has no `docs/`), and
 * `serve`'s help names the four tools it serves.
 */
import { expect, test } from "bun:test";
import { ensureBinary, run } from "../helpers/binary.ts";
import { DOCS_WHERE } from "../../src/version.ts";

/** The help of `args` (`[]`: the program's). */
function help(args: string[]): string {
  const r = run([ensureBinary(), ...args, "--help"]);
  expect(r.exitCode).toBe(0);
  return r.stdout.replace(/\s+/g, " ");
}

test("the program's help: the files it reads, init, and where the docs are", () => {
  const h = help([]);
  expect(h).toContain("~/.codex/rules/*.rules");
  expect(h).toContain("~/.codex/config.toml");
  expect(h).toContain("shellmcp init <client>");
  expect(h).toContain(`Documentation (the pages named in this help): ${DOCS_WHERE}`);
});

test("no help names a docs/ page; where the docs are is said once per help", () => {
  for (const c of [[], ["serve"], ["approvals"], ["init"], ["exec-server"], ["sandbox", "linux"], ["execpolicy", "check"]]) {
    const h = help(c);
    expect(h).not.toMatch(/docs\/[a-z-]+\.md/);
    expect(h.split(DOCS_WHERE).length - 1).toBe(1);
  }
});

test("serve's help names the four tools and the files it reads", () => {
  const h = help(["serve"]);
  expect(h).toContain("the tools shell, exec_command, write_stdin and list_sessions");
  expect(h).not.toContain("with the `shell` tool");
  expect(h).toContain("~/.codex/rules/*.rules");
  expect(h).toContain("~/.codex/config.toml");
});

test("exec-server's help says where the generated token goes: stderr only, a file only with --ws-token-out, never $TMPDIR", () => {
  // It used to say the token went to "a fresh private folder under $TMPDIR": no file is written by default, and the
  // temporary folder is readable by every workspace-write sandbox (no secret where a sandbox reads).
  const h = help(["exec-server"]);
  expect(h).toContain("by default it is only said once on stderr, never written to a file");
  expect(h).not.toContain("$TMPDIR");
});
