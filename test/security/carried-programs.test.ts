/**
 * The programs the executable carries and runs outside every sandbox — the lifeline guard (the room launcher, which
 * starts every call, bubblewrap included), sandbox-exec (which applies the Landlock sandbox), the role links — are
 * copied to a folder (src/carried/portable-shells.ts): `/run/shellmcp` for root, `/run/user/<uid>/shellmcp` for
 * another user, else `~/.cache/shellmcp`. The last one lies inside a call's writable root whenever the workspace holds
 * HOME while CODEX_HOME is elsewhere. A command that replaced a program there ran unsandboxed at the next call (seen
 * as a non-root user without /run/user/<uid>: both backends). The folder is now protected like CODEX_HOME: read-only
 * inside every writable root under bubblewrap, a refusal under Landlock, which cannot keep it read-only.
 *
 * Through the compiled `serve` as the user running the tests. As root the folder is /run/shellmcp, shared by every
 * server on the machine and under no HOME: not made writable here (said, skipped).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const asRoot = process.getuid?.() === 0;
if (asRoot) console.warn("SKIP carried programs in HOME: as root they live in /run/shellmcp, not under HOME");
const runtimeDir = existsSync(`/run/user/${process.getuid?.()}`);
if (!asRoot && runtimeDir) console.warn(`SKIP carried programs in HOME: this user's are in /run/user/${process.getuid?.()}/shellmcp`);
const skip = skipWithout("carried programs suite", shellsMissing()) || asRoot || runtimeDir;

const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
});

describe.skipIf(skip)("the carried programs' folder inside a writable root", () => {
  for (const backend of ["bwrap", "landlock"] as const)
    test(`${backend}: a command cannot replace what the next call runs outside the sandbox`, async () => {
      const ws = join(CONF_BASE, `carried-ws-${backend}`);
      const home = join(ws, "home");
      const codexHome = join(CONF_BASE, `carried-codex-${backend}`);
      const outside = join(CONF_BASE, `carried-outside-${backend}`);
      for (const d of [home, codexHome, outside]) mkdirSync(d, { recursive: true });
      const s = await startServe({ codexHome, env: { HOME: home }, args: ["--sandbox-backend", backend] });
      sessions.push(s);
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
      const call = async (command: string) => {
        const raw = (await s.client.callTool({ name: "shell", arguments: { command, workdir: ws, login: false } })) as {
          content: { text: string }[];
          isError?: boolean;
        };
        return { text: raw.content[0]!.text, isError: raw.isError === true };
      };
      // Every carried program (and role link) is swapped for a script that marks `outside`, then runs the original.
      const swap =
        `for f in "$HOME"/.cache/shellmcp/*/*; do case "$f" in *.real) continue;; esac; ` +
        `cp -P "$f" "$f.real" 2>/dev/null && printf '#!/bin/sh\\ntouch ${outside}/ran-$(basename "$0")\\nexec "$0.real" "$@"\\n' > "$f.new" ` +
        `&& chmod 755 "$f.new" && mv -f "$f.new" "$f" && echo "replaced $f"; done; echo swapped`;
      const first = await call(swap);
      const second = await call("echo second");
      expect(existsSync(join(home, ".cache", "shellmcp"))).toBe(true); // the folder the attack is about
      expect(first.text).not.toContain("replaced ");
      if (backend === "landlock") {
        expect(first.isError).toBe(true);
        expect(first.text).toContain(`contains ${join(home, ".cache", "shellmcp")}`);
      } else expect(second.text).toContain("second");
      expect(readdirSync(outside)).toEqual([]);
    });
});
