/** `shellmcp approvals`: its flags and the lazy hand-off to src/approvals/cli.ts's `approvalsMain`. */
import type { Command } from "commander";
import type { SetExit } from "./options.ts";

/** Add the `approvals` command to `program`; its action gives `approvalsMain`'s exit status to `setExit`. Returns the command. */
export function addApprovalsCommand(program: Command, setExit: SetExit): Command {
  return program
    .command("approvals")
    .description(
      "answer the approval requests of `serve --approver` for clients that cannot ask a person (approvals.md in the documentation)",
    )
    .option("--list", "print the requests waiting now and exit")
    .option("--json", "with --list (or alone): one JSON object per request and line")
    .option("--approve <ID>", "run request ID this once")
    .option("--always <ID>", "run request ID and add an allow rule (where the request offers it)")
    .option("--deny <ID>", "do not run request ID")
    .action(async (o: import("../approvals/cli.ts").ApprovalsOptions) => {
      const { approvalsMain } = await import("../approvals/cli.ts");
      setExit(await approvalsMain(o));
    });
}
