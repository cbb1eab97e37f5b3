/**
 * `shellmcp serve`: its flags (the HTTP ones come from src/http/cli-options.ts) and the lazy hand-off to
 * src/serve.ts's `serveMain`.
 */
import type { Command } from "commander";
import { addListenOptions } from "../http/cli-options.ts";
import { collect, type SetExit } from "./options.ts";

/** Add the `serve` command to `program`; its action gives `serveMain`'s exit status to `setExit`. Returns the command. */
export function addServeCommand(program: Command, setExit: SetExit): Command {
  return addListenOptions(program.command("serve"))
    .description(
      "run the MCP server on stdio (or over HTTP with --listen; started by an MCP client: `shellmcp init <client>` configures one) with the tools shell, exec_command, write_stdin and list_sessions; rules from ~/.codex/rules/*.rules, settings from ~/.codex/config.toml ($CODEX_HOME/…)",
    )
    .option("--shell <SHELL>", "bash (default), zsh, or a path to a patched shell")
    .option("--bash <PATH>", "path of the patched shell (Codex's flag; overrides --shell)")
    .option("--execve <PATH>", "exec wrapper path (default: this binary as codex-execve-wrapper)")
    .option(
      "--sandbox <MODE>",
      "policy until the client sends codex/sandbox-state/update: read-only (default), workspace-write, danger-full-access",
    )
    .option("--sandbox-backend <NAME>", "auto (default: bwrap if it works, else Landlock), bwrap or landlock")
    .option("--preserve-program-paths", "match rules against the absolute program path only, not its name (Codex's flag)")
    .option("--on-prompt <WHAT>", "when a rule says prompt and the client cannot ask a human: deny (default) or run-in-sandbox")
    .option("--rules <FILE>", "an extra .rules file, loaded after the discovered ones (repeatable)", collect, [])
    .option(
      "-c, --config <key=value>",
      'override a config.toml value (TOML), e.g. shell_environment_policy.inherit="core" (repeatable)',
      collect,
      [],
    )
    .option("--max-output-bytes <N>", "output cap per call (default 1048576)")
    .option(
      "--default-timeout-ms <MS>",
      "timeout of a shell call that gives no timeout_ms (default 10000, Codex's); overrides shellmcp.default_timeout_ms",
    )
    .option("--max-sessions <N>", "exec_command sessions open at once (default 16); overrides shellmcp.max_sessions")
    .option(
      "--session-idle-timeout-ms <MS>",
      "an exec_command session without a call for this long is ended (default 1800000); overrides shellmcp.session_idle_timeout_ms",
    )
    .option("--use-codex-linux-sandbox-exe", "run commands through the client's codexLinuxSandboxExe instead of this binary's own helper")
    .option("--intercept-all", "send every exec to the escalation server, not just those a rule or the danger heuristic can name (slower)")
    .option(
      "-C, --cd <DIR>",
      "the workspace (writable under --sandbox workspace-write) until the client sends a sandbox state; default: the start folder",
    )
    .option("--add-dir <DIR>", "another writable root of that workspace (repeatable)", collect, [])
    .option("--log-file <PATH>", 'keep everything the server logs in PATH too (default $CODEX_HOME/log/shellmcp.log; "" for none)')
    .option(
      "--escalation <WHERE>",
      "where allowed programs run: room (default: an escalation sandbox) or host (Codex's meaning: unconfined); overrides shellmcp.escalation",
    )
    .option(
      "--approver [WHEN]",
      "prompts wait for `shellmcp approvals` (approvals.md in the documentation): fallback (default: for clients without elicitation) or always; overrides shellmcp.approver",
    )
    .option(
      "--approver-timeout-ms <MS>",
      "how long such a prompt waits for an answer (default 120000); overrides shellmcp.approver_timeout_ms",
    )
    .option(
      "--input-required-timeout-ms <MS>",
      "MCP 2026-07-28 clients: how long an exec parked for a human's answer (input_required) waits for the retry (default 600000); overrides shellmcp.input_required_timeout_ms",
    )
    .option(
      "--task-after-ms <MS>",
      "MCP 2026-07-28 clients with the tasks extension: after how long a call becomes a task (default 5000); overrides shellmcp.task_after_ms",
    )
    .action(async (o: import("../serve.ts").ServeOptions) => {
      const { serveMain } = await import("../serve.ts");
      setExit(await serveMain(o));
    });
}
