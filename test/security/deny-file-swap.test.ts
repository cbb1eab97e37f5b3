/**
 * A file a permission profile denies is hidden under bubblewrap by an empty mode-000 file bound over it. That empty
 * file was made in `$TMPDIR/shellmcp-deny-<random>/`, a folder of the server's user in a writable root of every
 * workspace-write sandbox: a sandboxed command running beside the call (a parallel call, a session) could replace
 * it with a symbolic link to the denied file itself, and bubblewrap then bound the denied file over the denied file —
 * the call read what it was denied. Judged by what the calls read: the attacker loops over `$TMPDIR` while 150
 * calls whose profile denies `key.pem` print it; none may print the secret. The empty file is now made where no
 * sandbox can write (the carried programs' folder, read-only in every bubblewrap sandbox).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { homeDir } from "../helpers/binary.ts";
import { codexProfileMeta, startServe, type Session } from "../helpers/mcp.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const skip = skipWithout("deny-file swap suite", shellsMissing() ?? (Bun.which("bwrap") === null ? "bubblewrap not installed" : undefined));

const base = mkdtempSync(join(CONF_BASE, "deny-swap-"));
const codexHome = homeDir();
const tmp = join(base, "tmp");
const proj = join(base, "p");
let s: Session | undefined;

afterAll(async () => {
  await s?.close().catch(() => {});
  rmSync(base, { recursive: true, force: true });
  rmSync(codexHome, { recursive: true, force: true });
});

/** The `_meta` of a call in `proj` whose profile writes `proj` and `tmp` and denies `proj/key.pem` (Codex 0.169's shape). */
const meta = () =>
  codexProfileMeta(proj, [
    { path: proj, access: "write" },
    { path: tmp, access: "write" },
    { path: join(proj, "key.pem"), access: "deny" },
  ]);

describe.skipIf(skip)("the empty file bound over a denied file", () => {
  test("a sandbox beside the call cannot swap it for the denied file (150 calls while it tries)", async () => {
    mkdirSync(tmp, { recursive: true });
    mkdirSync(proj, { recursive: true });
    writeFileSync(join(proj, "key.pem"), "secret-material\n");
    s = await startServe({ codexHome, env: { TMPDIR: tmp }, args: ["--sandbox-backend", "bwrap"] });
    const call = (command: string, timeout_ms = 30_000) =>
      s!.client.callTool({ name: "shell", arguments: { command, workdir: proj, login: false, timeout_ms }, _meta: meta() }, undefined, {
        timeout: 90_000,
      }) as Promise<{ content: { text: string }[] }>;
    // The attacker: every deny folder that appears in $TMPDIR gets its empty file replaced by a link to key.pem.
    const attack = `end=$(($(date +%s)+40)); while [ $(date +%s) -lt $end ] && [ ! -e ${tmp}/stop ]; do for d in ${tmp}/shellmcp-deny-*; do [ -d "$d" ] && for f in "$d"/*; do ln -sfn ${proj}/key.pem "$f.x" 2>/dev/null && mv -f "$f.x" "$f" 2>/dev/null; done; done; done; echo attacker-done`;
    const attacker = call(attack, 60_000);
    let leaked = 0;
    let denied = 0;
    let other = "";
    for (let i = 0; i < 150; i++) {
      const text = (await call(`cat ${proj}/key.pem; true`)).content.map((c) => c.text).join("");
      if (text.includes("secret-material")) leaked++;
      else if (text.includes("Permission denied"))
        denied++; // the empty mode-000 file: the denial as Codex gives it
      else other = text;
    }
    writeFileSync(join(tmp, "stop"), "");
    expect((await attacker).content.map((c) => c.text).join("")).toContain("attacker-done");
    expect({ leaked, denied, other }).toEqual({ leaked: 0, denied: 150, other: "" });
  }, 180_000);
});
