/**
 * `shellmcp exec-server` (and its refused `forward`): Codex's flags, the shared auth names of
 * src/http/cli-options.ts, Codex's remote-registration flags hidden, and the lazy hand-off to
 * src/exec-server/main.ts's `execServerMain`.
 */
import { Option, type Command } from "commander";
import { addExecServerAuthAliases, applyExecServerAuthAliases } from "../http/cli-options.ts";
import { writeStderr } from "../stderr.ts";
import { collect, type SetExit } from "./options.ts";

/** Add the `exec-server` command and its `forward` subcommand to `program`; exit statuses go to `setExit`. Returns `exec-server`. */
export function addExecServerCommand(program: Command, setExit: SetExit): Command {
  const execServer = addExecServerAuthAliases(program.command("exec-server"))
    .description("run Codex's JSON-RPC exec server (websocket or stdio; exec-server.md in the documentation)")
    .option(
      "--listen <URL>",
      "ws://IP:PORT to listen on (default ws://127.0.0.1:0: loopback, a free port; the URL is printed on stdout), or stdio / stdio:// (JSON lines on stdin/stdout)",
    )
    .option(
      "--ws-auth <MODE>",
      "authentication for incoming websocket connections: capability-token, signed-bearer-token, or none (default: a capability token generated at start, see --ws-token-out)",
    )
    .option(
      "--ws-token-out <PATH>",
      "without --ws-auth: also write the generated token here (mode 600, replaced if present, removed at exit); by default it is only said once on stderr, never written to a file",
    )
    .option("--ws-token-file <PATH>", "file holding the capability token (mode 600: refused when group or others can read it)")
    .option("--ws-token-sha256 <HEX>", "hex SHA-256 digest of the capability token")
    .option("--ws-shared-secret-file <PATH>", "file holding the HS256 secret of signed JWT bearer tokens (≥ 32 bytes, mode 600)")
    .option("--ws-issuer <ISSUER>", "expected `iss` of signed JWT bearer tokens")
    .option("--ws-audience <AUDIENCE>", "expected `aud` of signed JWT bearer tokens")
    .option("--ws-max-clock-skew-seconds <SECONDS>", "clock skew allowed for `exp`/`nbf`/`iat` of signed JWT bearer tokens (default 30)")
    .option("--concurrent-requests <COUNT>", "requests handled at once per connection (default 1)")
    .option(
      "--sandbox-backend <KIND>",
      "auto (default: bubblewrap when its preflight passes, else Landlock + seccomp), bwrap or landlock, as serve's",
    )
    .option(
      "--linux-sandbox-pid-namespace <MODE>",
      "isolate (default: each sandboxed process gets its own pid namespace) or inherit (it can signal other processes of this user)",
    )
    .option("--exit-on-stdin-close", "exit when standard input closes (also CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE=1)")
    .option("-c, --config <key=value>", "Codex config override (accepted for compatibility; the exec-server reads no setting)", collect, [])
    .option("--enable <FEATURE>", "enable a Codex feature (accepted for compatibility; unknown names are refused)", collect, [])
    .option("--disable <FEATURE>", "disable a Codex feature (accepted for compatibility; unknown names are refused)", collect, [])
    .option("--strict-config", "fail when $CODEX_HOME/config.toml does not parse")
    .option(
      "--proxy-private-ips-via-upstream",
      "accepted for compatibility with codex exec-server (also CODEX_EXEC_SERVER_PROXY_PRIVATE_IPS_VIA_UPSTREAM); shellmcp's exec-server starts no network proxy",
    )
    .option(
      "--allow-non-loopback",
      "allow a ws:// address other than 127.0.0.1/::1 without an explicit --ws-auth capability-token|signed-bearer-token (with --ws-auth none: anyone who can connect can then run any command and read or write any file as this user)",
    )
    .option("--max-message-bytes <N>", "largest inbound websocket message (default 134217728)")
    // Codex's remote-registration flags: OpenAI's cloud, refused with a message saying so.
    .addOption(new Option("--remote <URL>").hideHelp())
    .addOption(new Option("--remote-transport <T>").hideHelp())
    .addOption(new Option("--environment-id <ID>").hideHelp())
    .addOption(new Option("--name <NAME>").hideHelp())
    .addOption(new Option("--use-agent-identity-auth").hideHelp())
    .addOption(new Option("--registration-bearer-stdin").hideHelp())
    .addOption(new Option("--executor-credential-stdin").hideHelp())
    .addOption(new Option("--chatgpt-token-stdin").hideHelp())
    .addOption(new Option("--chatgpt-account-id <ID>").hideHelp())
    .addOption(new Option("--aws-sigv4").hideHelp())
    .addOption(new Option("--aws-profile <PROFILE>").hideHelp())
    .addOption(new Option("--aws-region <REGION>").hideHelp())
    .addOption(new Option("--aws-service <SERVICE>").hideHelp())
    .action(async (o: import("../exec-server/main.ts").ExecServerCliOptions) => {
      applyExecServerAuthAliases(o as unknown as Record<string, unknown>);
      const { execServerMain } = await import("../exec-server/main.ts");
      setExit(await execServerMain(o));
    });
  execServer
    .command("forward")
    .description("(refused) Codex's registration of an exec-server with OpenAI's cloud: out of scope for shellmcp")
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async () => {
      const { REMOTE_OUT_OF_SCOPE } = await import("../exec-server/main.ts");
      writeStderr(`shellmcp exec-server forward: ${REMOTE_OUT_OF_SCOPE}\n`);
      setExit(2);
    });
  return execServer;
}
