/** `shellmcp sandbox linux|macos` (aliases `landlock`, `seatbelt`): a command under the sandbox, for a person. */
import type { Command } from "commander";
import type { SetExit } from "./options.ts";
import { linuxOptions, macosOptions, runLinux, runMacos } from "./sandbox-options.ts";

/** Add the `sandbox` command and its `linux` and `macos` subcommands to `program`; exit statuses go to `setExit`. Returns `sandbox`. */
export function addSandboxCommand(program: Command, setExit: SetExit): Command {
  const sandbox = program.command("sandbox").description("run a command under the sandbox, for a person");
  linuxOptions(
    sandbox.command("linux").alias("landlock").description("run CMD under the Linux sandbox (bubblewrap or Landlock + seccomp)"),
  ).action(runLinux(setExit, "auto"));
  macosOptions(sandbox.command("macos").alias("seatbelt").description("run CMD under Seatbelt (macOS; --print-policy anywhere)")).action(
    runMacos(setExit),
  );
  return sandbox;
}
