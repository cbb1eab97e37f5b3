/**
 * Entry point of the single `shellmcp` executable. Dispatches on the basename of argv[0] before anything
 * heavy is loaded, because the same binary is exec'd by the patched shell for every program as
 * `codex-execve-wrapper`, the sandbox helper starts every Landlock call, and those start-ups are the project's
 * hottest paths. Each role is an entrypoint of its own in the compiled executable (build.ts): a role loads only
 * its own bundle (the helper's is 65 KB, the CLI's with the MCP SDK 0.9 MB), never the others' — Bun parses a
 * whole bundle at start, lazy `import()`s included, which cost every helper start ~5 ms.
 *
 * | argv[0] basename       | role                                   |
 * |------------------------|----------------------------------------|
 * | `codex-execve-wrapper` | exec wrapper (escalation client)       |
 * | `codex-linux-sandbox`  | Linux sandbox helper (Landlock+seccomp or bubblewrap) |
 * | `codex-fs`             | filesystem helper                      |
 * | anything else          | the `shellmcp` command-line interface  |
 */

import { writeStderr } from "./stderr.ts";

/** Role names, as the arg0 basenames that select them. */
export const ROLES = {
  WRAPPER: "codex-execve-wrapper",
  LINUX_SANDBOX: "codex-linux-sandbox",
  FS_HELPER: "codex-fs",
} as const;

/** How long `serve` waits for the client's first line before loading everything else, ms. */
const EARLY_INITIALIZE_WAIT_MS = 100;

/**
 * The module of a role, by its path under `src/` without extension: the bundle build.ts embedded for it
 * (`/$bunfs/root/<path>.js`) in the compiled executable, the source file otherwise. A computed specifier, so that
 * the bundler leaves the role out of this entry's bundle.
 */
function role(srcRelative: string): string {
  return Bun.main.startsWith("/$bunfs/root/") ? `/$bunfs/root/${srcRelative}.js` : new URL(`./${srcRelative}.ts`, import.meta.url).href;
}

/** Basename of a path (no `node:path` import: keeps the wrapper's import graph empty). */
function basename(p: string): string {
  const i = p.lastIndexOf("/");
  return i < 0 ? p : p.slice(i + 1);
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  switch (basename(process.argv0)) {
    case ROLES.WRAPPER:
      return ((await import(role("escalate/protocol/wrapper"))) as typeof import("./escalate/protocol/wrapper.ts")).wrapperMain(args);
    case ROLES.LINUX_SANDBOX:
      // Named both ways (argv[0] and the flag, as `serve` starts its helper through trampolines that may drop argv[0]).
      return ((await import(role("sandbox/linux/helper"))) as typeof import("./sandbox/linux/helper.ts")).linuxSandboxMain(
        args[0] === "--codex-run-as-linux-sandbox" ? args.slice(1) : args,
      );
    case ROLES.FS_HELPER:
      return ((await import(role("fs-helper/main"))) as typeof import("./fs-helper/main.ts")).fsHelperMain(args);
    default:
      // Codex's convention for reaching a role without arg0 (our bwrap inner stage uses it).
      if (args[0] === "--codex-run-as-fs-helper")
        return ((await import(role("fs-helper/main"))) as typeof import("./fs-helper/main.ts")).fsHelperMain(args.slice(1));
      // The git guard's confined repairs (src/sandbox/linux/git-repair-child.ts): started by `serve` only.
      if (args[0] === "--shellmcp-git-repair")
        return (
          (await import(role("sandbox/linux/git-repair-child"))) as typeof import("./sandbox/linux/git-repair-child.ts")
        ).gitRepairMain();
      if (args[0] === "--codex-run-as-linux-sandbox")
        return ((await import(role("sandbox/linux/helper"))) as typeof import("./sandbox/linux/helper.ts")).linuxSandboxMain(args.slice(1));
      // `serve`: answer MCP initialize before the CLI parser and the MCP SDK load (see mcp/early-initialize.ts).
      // Clients send it at once; a client that does not gets its answer from the SDK once loaded, ≤ 100 ms later.
      if (args[0] === "serve") {
        const first = (await import("./mcp/early-initialize.ts")).startEarlyInitialize();
        await Promise.race([first, new Promise((r) => setTimeout(r, EARLY_INITIALIZE_WAIT_MS))]);
      }
      return ((await import(role("cli"))) as typeof import("./cli.ts")).cliMain(args);
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    const msg = e instanceof Error ? e.message : String(e);
    writeStderr(`shellmcp: ${msg}\n`);
    process.exit(1);
  },
);
