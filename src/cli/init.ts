/** `shellmcp init [client]`: its flags and the lazy hand-off to src/init/init.ts's `initMain`. */
import type { Command } from "commander";
import type { SetExit } from "./options.ts";

/** Add the `init` command to `program`; its action gives `initMain`'s exit status to `setExit`. Returns the command. */
export function addInitCommand(program: Command, setExit: SetExit): Command {
  return program
    .command("init")
    .description(
      "set a client up: the starter rules and settings in CODEX_HOME (~/.codex/rules/agent.rules, ~/.codex/config.toml) and the client's MCP configuration, merged (nothing overwritten); prints how to undo it",
    )
    .argument(
      "[client]",
      "claude (.mcp.json), gemini (~/.gemini/settings.json), codex (~/.codex/config.toml), vscode (.vscode/mcp.json), cursor (.cursor/mcp.json); none: the starter policy only",
    )
    .option("-y, --yes", "write without asking (needed when stdin is not a terminal)")
    .option("--dry-run", "print what it would write, write nothing")
    .option("--name <NAME>", "the server's name in the client (default shell)")
    .option("--project <DIR>", "the project of .mcp.json, .vscode/ and .cursor/ (default: the current folder)")
    .option("--no-starter", "the client's configuration only, no starter rules or settings")
    .action(async (client: string | undefined, o: import("../init/init.ts").InitOptions) => {
      const { initMain } = await import("../init/init.ts");
      setExit(await initMain(client, o));
    });
}
