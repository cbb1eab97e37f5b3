/**
 * The `shellmcp` command-line interface (commander): `serve`, `sandbox linux|macos`, `debug seatbelt|landlock`,
 * `execpolicy check`, `exec-server`. Each command's implementation is a lazy `import()`.
 */
import { Command, CommanderError, Option } from "commander";
import { DOCS_WHERE, VERSION } from "./version.ts";
import { log } from "./log.ts";
import { writeStderr } from "./stderr.ts";
import { addExecServerAuthAliases, addListenOptions, applyExecServerAuthAliases } from "./http/cli-options.ts";

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** Build the commander program. `setExit` receives each action's exit status. */
export function buildProgram(setExit: (code: number) => void): Command {
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

  addListenOptions(program.command("serve"))
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
    .action(async (o: import("./serve.ts").ServeOptions) => {
      const { serveMain } = await import("./serve.ts");
      setExit(await serveMain(o));
    });

  program
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
    .action(async (client: string | undefined, o: import("./init/init.ts").InitOptions) => {
      const { initMain } = await import("./init/init.ts");
      setExit(await initMain(client, o));
    });

  program
    .command("approvals")
    .description(
      "answer the approval requests of `serve --approver` for clients that cannot ask a person (approvals.md in the documentation)",
    )
    .option("--list", "print the requests waiting now and exit")
    .option("--json", "with --list (or alone): one JSON object per request and line")
    .option("--approve <ID>", "run request ID this once")
    .option("--always <ID>", "run request ID and add an allow rule (where the request offers it)")
    .option("--deny <ID>", "do not run request ID")
    .action(async (o: import("./approvals/cli.ts").ApprovalsOptions) => {
      const { approvalsMain } = await import("./approvals/cli.ts");
      setExit(await approvalsMain(o));
    });

  const sandboxOptions = (c: Command) =>
    c
      .option("--sandbox <MODE>", "read-only (default), workspace-write or danger-full-access")
      .option("--full-auto", "workspace-write with the network off: the cwd, /tmp and $TMPDIR are writable")
      .option("--add-dir <DIR>", "an extra writable root (repeatable; workspace-write)", collect, [])
      .option("--network", "allow network access")
      .option("--backend <NAME>", "auto (bwrap if it works, else Landlock), bwrap or landlock")
      .option("--policy <JSON>", "a full Codex SandboxPolicy JSON instead of the flags above")
      .option("--no-proc", "do not mount /proc in bwrap")
      .option("-C, --cd <DIR>", "working directory (and workspace root) for the command")
      .argument("[cmd...]", "the command and its arguments")
      .passThroughOptions();
  /** The sandbox options as commander gives them (`--no-proc` arrives as `proc: false`). */
  type SandboxOpts = Omit<import("./sandbox-cli/linux.ts").SandboxCliOptions, "noProc"> & { proc?: boolean };
  const runLinux = (defaultBackend: "auto" | "landlock") => async (cmd: string[], o: SandboxOpts) => {
    const { sandboxLinuxCli } = await import("./sandbox-cli/linux.ts");
    setExit(await sandboxLinuxCli(cmd, { ...o, noProc: o.proc === false }, defaultBackend));
  };
  const runMacos = async (cmd: string[], o: SandboxOpts & { permissionProfile?: string; printPolicy?: boolean }) => {
    const { sandboxMacosCli, processHost } = await import("./sandbox-cli/macos.ts");
    setExit(await sandboxMacosCli(cmd, o, processHost(o.cd)));
  };
  const macosOptions = (c: Command) =>
    sandboxOptions(c)
      .option("--permission-profile <JSON>", "a Codex 0.169 permission profile JSON instead of the flags above")
      .option("--print-policy", "print the Seatbelt policy and the sandbox-exec argv instead of running (any OS)");

  /** Network proxy mode for a person (docs/network.md): the config's policy plus these entries. */
  const linuxOptions = (c: Command) =>
    sandboxOptions(c)
      .option(
        "--allow-domain <HOST>",
        "network only through the proxy, which allows HOST (Codex patterns: *.x, **.x; repeatable)",
        collect,
        [],
      )
      .option("--deny-domain <HOST>", "the proxy refuses HOST (deny wins; repeatable)", collect, [])
      .option("--allow-local-binding", "the proxy allows local and private addresses without an exact entry");
  const sandbox = program.command("sandbox").description("run a command under the sandbox, for a person");
  linuxOptions(
    sandbox.command("linux").alias("landlock").description("run CMD under the Linux sandbox (bubblewrap or Landlock + seccomp)"),
  ).action(runLinux("auto"));
  macosOptions(sandbox.command("macos").alias("seatbelt").description("run CMD under Seatbelt (macOS; --print-policy anywhere)")).action(
    runMacos,
  );

  const debug = program.command("debug").description("Codex's older names for the sandbox commands");
  linuxOptions(debug.command("landlock").description("alias of `sandbox linux --backend landlock`")).action(runLinux("landlock"));
  macosOptions(debug.command("seatbelt").description("alias of `sandbox macos`")).action(runMacos);

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
    .action(async (command: string[], o: { rules: string[]; policy: string[]; pretty?: boolean; resolveHostExecutables?: boolean }) => {
      const { execpolicyCheck } = await import("./execpolicy/check.ts");
      setExit(
        await execpolicyCheck(command, {
          rules: [...o.rules, ...o.policy],
          pretty: o.pretty,
          resolveHostExecutables: o.resolveHostExecutables,
        }),
      );
    });

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
      "without --ws-auth: write the generated token here (mode 600, replaced if present, removed at exit); default: a fresh private folder under $TMPDIR, printed on stderr",
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
    .action(async (o: import("./exec-server/main.ts").ExecServerCliOptions) => {
      applyExecServerAuthAliases(o as unknown as Record<string, unknown>);
      const { execServerMain } = await import("./exec-server/main.ts");
      setExit(await execServerMain(o));
    });
  execServer
    .command("forward")
    .description("(refused) Codex's registration of an exec-server with OpenAI's cloud: out of scope for shellmcp")
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async () => {
      const { REMOTE_OUT_OF_SCOPE } = await import("./exec-server/main.ts");
      writeStderr(`shellmcp exec-server forward: ${REMOTE_OUT_OF_SCOPE}\n`);
      setExit(2);
    });

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
