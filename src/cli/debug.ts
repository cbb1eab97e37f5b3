/** `shellmcp debug landlock|seatbelt`: Codex's older names of `sandbox linux --backend landlock` and `sandbox macos`. */
import type { Command } from "commander";
import type { SetExit } from "./options.ts";
import { linuxOptions, macosOptions, runLinux, runMacos } from "./sandbox-options.ts";

/** Add the `debug` command and its `landlock` and `seatbelt` subcommands to `program`; exit statuses go to `setExit`. Returns `debug`. */
export function addDebugCommand(program: Command, setExit: SetExit): Command {
  const debug = program.command("debug").description("Codex's older names for the sandbox commands");
  linuxOptions(debug.command("landlock").description("alias of `sandbox linux --backend landlock`")).action(runLinux(setExit, "landlock"));
  macosOptions(debug.command("seatbelt").description("alias of `sandbox macos`")).action(runMacos(setExit));
  return debug;
}
