/**
 * The `shellmcp` command-line interface (commander): the program, its top-level help, and the commands in help
 * order, each wired by its own module under src/cli/ (`serve`, `init`, `approvals`, `sandbox linux|macos`,
 * `debug landlock|seatbelt`, `execpolicy check`, `exec-server`). Each command's implementation is a lazy `import()`.
 */
import { Command, CommanderError } from "commander";
import { DOCS_WHERE, VERSION } from "./version.ts";
import { log } from "./log.ts";
import type { SetExit } from "./cli/options.ts";
import { addServeCommand } from "./cli/serve.ts";
import { addInitCommand } from "./cli/init.ts";
import { addApprovalsCommand } from "./cli/approvals.ts";
import { addSandboxCommand } from "./cli/sandbox.ts";
import { addDebugCommand } from "./cli/debug.ts";
import { addExecpolicyCommand } from "./cli/execpolicy.ts";
import { addExecServerCommand } from "./cli/exec-server.ts";

/**
 * Build the commander program: every command, in the order `shellmcp --help` lists them. `setExit` receives each
 * action's exit status. Parse errors and `--help`/`--version` throw `CommanderError` (exitOverride) with the status.
 */
export function buildProgram(setExit: SetExit): Command {
  const program = new Command("shellmcp")
    .description(
      "A sandboxed shell for AI agents: MCP server, exec wrapper, Linux sandbox, exec policy.\n" +
        "Reads its rules from ~/.codex/rules/*.rules and its settings from ~/.codex/config.toml ($CODEX_HOME instead of ~/.codex when set).\n" +
        "Set a client up with `shellmcp init <client>`.",
    )
    .version(VERSION, "-V, --version", "print the version")
    .showHelpAfterError()
    .enablePositionalOptions()
    .exitOverride()
    .addHelpText("afterAll", `\nDocumentation (the pages named in this help): ${DOCS_WHERE}`);
  for (const add of [
    addServeCommand,
    addInitCommand,
    addApprovalsCommand,
    addSandboxCommand,
    addDebugCommand,
    addExecpolicyCommand,
    addExecServerCommand,
  ])
    add(program, setExit);
  return program;
}

/** Run the CLI with `args` (argv after the program); returns the exit status. */
export async function cliMain(args: string[]): Promise<number> {
  log.debug("cli start", { args, version: VERSION });
  let code = 0;
  const program = buildProgram((c) => (code = c));
  try {
    await program.parseAsync(args, { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode;
    throw e;
  }
  return code;
}
