/** `shellmcp execpolicy check`: its flags and the lazy hand-off to src/execpolicy/check.ts's `execpolicyCheck`. */
import type { Command } from "commander";
import { collect, type SetExit } from "./options.ts";

/** `execpolicy check`'s options as commander gives them (`--policy` is Codex's old name of `--rules`). */
interface CheckOpts {
  rules: string[];
  policy: string[];
  pretty?: boolean;
  resolveHostExecutables?: boolean;
}

/** Add the `execpolicy` command and its `check` subcommand to `program`; the exit status goes to `setExit`. Returns `execpolicy`. */
export function addExecpolicyCommand(program: Command, setExit: SetExit): Command {
  const execpolicy = program.command("execpolicy").description("exec policy tools");
  execpolicy
    .command("check")
    .description("check a command against .rules files (e.g. ~/.codex/rules/agent.rules); prints the same JSON as `codex execpolicy check`")
    .option("-r, --rules <PATH>", "a .rules file (repeatable; loaded in order)", collect, [])
    .option("-p, --policy <PATH>", "alias of --rules (Codex's old flag)", collect, [])
    .option("--pretty", "pretty-print the JSON")
    .option("--resolve-host-executables", "let absolute program paths match rules for their basename (host_executable allowlists apply)")
    .argument("[command...]", "the command to check (everything after it is part of it)")
    .passThroughOptions()
    .action(async (command: string[], o: CheckOpts) => {
      const { execpolicyCheck } = await import("../execpolicy/check.ts");
      setExit(
        await execpolicyCheck(command, {
          rules: [...o.rules, ...o.policy],
          pretty: o.pretty,
          resolveHostExecutables: o.resolveHostExecutables,
        }),
      );
    });
  return execpolicy;
}
