/**
 * `shellmcp exec-server`: the command line of `codex exec-server` 0.169 (names, defaults, error texts), then start
 * the server.
 *
 * - `--listen ws://IP:PORT` (default `ws://127.0.0.1:0`, a free port): prints the URL (one line on stdout) once it
 *   listens. `--listen stdio` / `stdio://`: JSON-RPC lines on stdin/stdout, nothing else printed, ends at stdin EOF.
 * - `--ws-auth capability-token|signed-bearer-token` and its flags (../auth/bearer.ts); refused with stdio as Codex does.
 *   Unlike Codex, a websocket listener is authenticated by default: without `--ws-auth`, a capability token is
 *   generated at start and said once on stderr (never written to disk unless `--ws-token-out PATH` asks; the start-up
 *   message advises `$CODEX_HOME/exec-server.token`, which no shellmcp sandbox reads: src/sandbox/secrets.ts), and
 *   a token file is removed when the server stops;
 *   `--ws-auth none` turns authentication off knowingly. A non-loopback address needs an explicit
 *   `--ws-auth capability-token|signed-bearer-token` (or `--allow-non-loopback`): the generated default is meant
 *   for this machine's clients. `--listen stdio` needs no authentication (only its parent can speak to it).
 * - `--sandbox-backend auto|bwrap|landlock` (default auto, as `serve`'s): every sandboxed process and fs operation
 *   of this server is launched under this one choice (src/shell/backend-choice.ts), with CODEX_HOME protected from
 *   its writes (made, mode 0700, when missing: ./sandbox.ts `setSandboxBackend`).
 * - `--concurrent-requests COUNT` (≥ 1, default 1), `--linux-sandbox-pid-namespace isolate|inherit` (default
 *   isolate; sandboxed processes get a pid namespace of their own), `--exit-on-stdin-close` (also
 *   `CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE`), `-c key=value`, `--enable/--disable FEATURE` (checked against
 *   0.169's feature names), `--strict-config` ($CODEX_HOME/config.toml must parse).
 * - `--remote`, `forward` and the other registration flags (OpenAI's cloud: ChatGPT remote environments over the
 *   Noise relay) are refused as out of scope.
 *
 * Environment: `EXEC_SERVER_DETACHED_SESSION_TTL_MS` (detached-session TTL, default 30000) and
 * `EXEC_SERVER_PROCESS_RETENTION_MS` (closed-process retention, default 30000).
 */
import { existsSync, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { userHome } from "../self.ts";
import { join } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { writeStderr } from "../stderr.ts";
import type { AuthRefusal, TokenFile, WsAuthArgs, WsAuthSettings } from "../auth/bearer.ts";
import { setPidNamespaceMode, setSandboxBackend } from "./sandbox.ts";
import { addSecrets } from "../sandbox/secrets.ts";
import { DEFAULT_SERVER_OPTIONS, startExecServer, type ExecServer, type ServerOptions } from "./server.ts";

/** Options as commander parses them. */
export interface ExecServerCliOptions extends WsAuthArgs {
  listen?: string;
  /** `--sandbox-backend auto|bwrap|landlock` (as `serve`'s): the server's one backend choice. */
  sandboxBackend?: string;
  allowNonLoopback?: boolean;
  maxMessageBytes?: string;
  concurrentRequests?: string;
  linuxSandboxPidNamespace?: string;
  exitOnStdinClose?: boolean;
  config?: string[];
  enable?: string[];
  disable?: string[];
  strictConfig?: boolean;
  /** Codex's network-proxy routing flag: accepted, nothing to route (no proxy is started). */
  proxyPrivateIpsViaUpstream?: boolean;
  /** Any of Codex's remote-registration flags (refused). */
  remote?: string;
  remoteTransport?: string;
  environmentId?: string;
  name?: string;
  useAgentIdentityAuth?: boolean;
  registrationBearerStdin?: boolean;
  executorCredentialStdin?: boolean;
  chatgptTokenStdin?: boolean;
  chatgptAccountId?: string;
  awsSigv4?: boolean;
  awsProfile?: string;
  awsRegion?: string;
  awsService?: string;
}

/** The message for `--remote`, `forward` and the other registration flags. */
export const REMOTE_OUT_OF_SCOPE =
  "remote registration (`--remote`, `forward`, the Noise relay transport and their credential flags) registers this executor with OpenAI's cloud (ChatGPT remote environments); that is out of scope for shellmcp. Listen on `ws://IP:PORT` (with `--ws-auth`) or `stdio` instead";

/** Parse `ws://IP:PORT` as Codex does (an IP literal, IPv6 in brackets; no host names). Throws with Codex's text. */
export function parseListenUrl(url: string): { hostname: string; port: number } {
  if (!url.startsWith("ws://")) throw new Error(`unsupported --listen URL \`${url}\`; expected \`ws://IP:PORT\` or \`stdio\``);
  const rest = url.slice(5);
  const m = /^(?:\[([^\]]+)\]|([^:/]+)):(\d{1,5})$/.exec(rest);
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (
    m === null ||
    host === undefined ||
    isIP(host) === 0 ||
    (m[1] !== undefined && isIP(host) !== 6) ||
    (m[2] !== undefined && isIP(host) !== 4) ||
    port > 65535
  ) {
    throw new Error(`invalid websocket --listen URL \`${url}\`; expected \`ws://IP:PORT\``);
  }
  return { hostname: host, port };
}

function isLoopback(ip: string): boolean {
  return ip === "::1" || /^127\./.test(ip);
}

function envMs(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === "") return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer (ms), got ${JSON.stringify(v)}`);
  return n;
}

/**
 * What the start-up message says about a credential file at `path`: nothing (`""`) when it lies in CODEX_HOME
 * (hidden from every shellmcp sandbox: src/sandbox/secrets.ts), else why and that sandboxed commands of other
 * programs, and `serve`'s unless `[shellmcp] secret_paths` names it, can read it.
 */
function tokenFileWarning(path: string): string {
  const home = process.env.CODEX_HOME ?? join(userHome(), ".codex");
  if (path.startsWith(home.endsWith("/") ? home : `${home}/`)) return "";
  return `it lies outside CODEX_HOME, so sandboxed commands can read it (all but this exec-server's own, and serve's when [shellmcp] secret_paths names it): keep it in $CODEX_HOME (e.g. $CODEX_HOME/exec-server.token)`;
}

/** A clap-style value error (exit status 2), as Codex prints it. */
class ValueError extends Error {}

/**
 * `--strict-config`: Codex refuses unknown fields in `$CODEX_HOME/config.toml`. shellmcp's exec-server reads no
 * setting from it, so it checks what it can without Codex's whole schema: the file must parse as TOML.
 */
async function checkStrictConfig(): Promise<void> {
  const home = process.env.CODEX_HOME ?? join(userHome(), ".codex");
  const file = join(home, "config.toml");
  if (!existsSync(file)) return;
  const { parse } = await import("smol-toml");
  try {
    parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new ShellmcpError("CONFIG", `${file}: ${(e as Error).message.split("\n")[0]}`);
  }
}

/** Validate everything, start the server, run until SIGTERM/SIGINT/SIGHUP (or stdin EOF); returns the exit status. */
export async function execServerMain(o: ExecServerCliOptions): Promise<number> {
  const cred: Credentials = { secretFiles: [] };
  let opts: ServerOptions;
  let exitOnStdinClose: boolean;
  try {
    opts = await serverOptions(o, cred);
    exitOnStdinClose = o.exitOnStdinClose === true || /^(1|true|yes|on)$/i.test(process.env.CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE ?? "");
  } catch (e) {
    cred.tokenFile?.remove();
    return reportStartError(e);
  }
  let srv: ExecServer;
  try {
    srv = startExecServer(opts);
  } catch (e) {
    cred.tokenFile?.remove();
    writeStderr(`shellmcp exec-server: cannot listen on ${opts.hostname}:${opts.port}: ${(e as Error).message}\n`);
    return 1;
  }
  announceCredentials(cred);
  // Started: the normal JIT policy for the requests (the executable starts with a raised one, ../../build.ts).
  Bun.unsafe.setJITPolicy(1);
  if (opts.transport !== "stdio") await Bun.write(Bun.stdout, `${srv.url}\n`);
  return await runUntilStopped(srv, cred.tokenFile, exitOnStdinClose && opts.transport !== "stdio");
}

/**
 * The credential of a websocket server as set up by {@link serverOptions}: `--ws-auth` as parsed (undefined with
 * stdio and no auth flag), the files holding it (`--ws-token-file`, `--ws-shared-secret-file`, `--ws-token-out`),
 * the token file this server wrote (removed when it stops, or when it fails to start), and the generated token
 * when it is written to no file (the default: said once on stderr).
 */
interface Credentials {
  authSettings?: WsAuthSettings;
  secretFiles: string[];
  tokenFile?: TokenFile;
  generatedToken?: string;
}

/** Exit status and stderr text for a refused start: 2 for clap-style value errors, Codex's statuses otherwise. */
function reportStartError(e: unknown): number {
  if (e instanceof ValueError) {
    writeStderr(`error: ${e.message}\n\nFor more information, try '--help'.\n`);
    return 2;
  }
  writeStderr(`shellmcp exec-server: ${(e as Error).message}\n`);
  // Codex exits 1 for its auth/config errors (anyhow) and 2 for argument-syntax errors (clap); our refusals of
  // an address or of remote registration say 2 (`data.exitStatus`).
  if (e instanceof ShellmcpError) return typeof e.data.exitStatus === "number" ? e.data.exitStatus : 1;
  return 2;
}

/**
 * Check the flags and build the server's options, setting up its credential into `cred` (a token file written
 * there is the caller's to remove if a later step throws). Sets the process-wide pid-namespace mode and sandbox
 * backend. Throws {@link ValueError} (clap's wording) or `ShellmcpError`/`Error` (Codex's texts).
 */
async function serverOptions(o: ExecServerCliOptions, cred: Credentials): Promise<ServerOptions> {
  const { pidNs, concurrentRequests } = await checkFlags(o);
  const listen = o.listen ?? "ws://127.0.0.1:0";
  const stdio = listen === "stdio" || listen === "stdio://";
  const wsFlags = [o.wsTokenFile, o.wsTokenSha256, o.wsSharedSecretFile, o.wsIssuer, o.wsAudience, o.wsMaxClockSkewSeconds];
  // The stdio transport loads no auth code (node:crypto): it has nothing to check.
  const auth =
    !stdio || o.wsAuth !== undefined || o.wsTokenOut !== undefined || wsFlags.some((f) => f !== undefined)
      ? await import("../auth/bearer.ts")
      : undefined;
  cred.authSettings = auth?.parseWsAuthArgs(o);
  // Its credential files are secrets no sandbox of this server reads (../sandbox/secrets.ts), wherever they are.
  cred.secretFiles = cred.authSettings === undefined ? [] : auth!.secretFilesOf(cred.authSettings);
  addSecrets(cred.secretFiles);
  if (stdio && cred.authSettings !== undefined && cred.authSettings.mode !== "none")
    throw new ShellmcpError("USAGE", "WebSocket auth requires a WebSocket listener, not stdio");
  const { hostname, port } = stdio ? { hostname: "", port: 0 } : parseListenUrl(listen);
  const explicitAuth = cred.authSettings?.mode === "capability-token" || cred.authSettings?.mode === "signed-bearer-token";
  if (!stdio && !isLoopback(hostname) && !explicitAuth && !o.allowNonLoopback) {
    throw new ShellmcpError(
      "USAGE",
      `refusing to listen on non-loopback address ${hostname} without authentication you chose (anyone who can connect could run commands as this user): pass --ws-auth capability-token|signed-bearer-token, or --allow-non-loopback to do it anyway`,
      { exitStatus: 2 },
    );
  }
  const maxMessageBytes = o.maxMessageBytes === undefined ? DEFAULT_SERVER_OPTIONS.maxMessageBytes : Number(o.maxMessageBytes);
  if (!Number.isInteger(maxMessageBytes) || maxMessageBytes < 1024) throw new Error("--max-message-bytes must be an integer ≥ 1024");
  const authorize = auth === undefined || stdio ? undefined : authorizer(auth, cred);
  setPidNamespaceMode(pidNs);
  setSandboxBackend(o.sandboxBackend ?? "auto");
  return {
    transport: stdio ? "stdio" : "websocket",
    hostname,
    port,
    authorize,
    concurrentRequests,
    detachedSessionTtlMs: envMs("EXEC_SERVER_DETACHED_SESSION_TTL_MS", DEFAULT_SERVER_OPTIONS.detachedSessionTtlMs),
    processRetentionMs: envMs("EXEC_SERVER_PROCESS_RETENTION_MS", DEFAULT_SERVER_OPTIONS.processRetentionMs),
    maxMessageBytes,
  };
}

/** The flags checked before any credential: remote registration, pid namespace, concurrency, features, config. */
async function checkFlags(o: ExecServerCliOptions): Promise<{ pidNs: "isolate" | "inherit"; concurrentRequests: number }> {
  const remoteFlags = [
    o.remote,
    o.remoteTransport,
    o.environmentId,
    o.name,
    o.useAgentIdentityAuth,
    o.registrationBearerStdin,
    o.executorCredentialStdin,
    o.chatgptTokenStdin,
    o.chatgptAccountId,
    o.awsSigv4,
    o.awsProfile,
    o.awsRegion,
    o.awsService,
  ];
  if (remoteFlags.some((f) => f !== undefined)) throw new ShellmcpError("USAGE", REMOTE_OUT_OF_SCOPE, { exitStatus: 2 });
  const pidNs = o.linuxSandboxPidNamespace ?? "isolate";
  if (pidNs !== "isolate" && pidNs !== "inherit")
    throw new ValueError(`invalid value '${pidNs}' for '--linux-sandbox-pid-namespace <MODE>': expected 'isolate' or 'inherit'`);
  let concurrentRequests = DEFAULT_SERVER_OPTIONS.concurrentRequests;
  if (o.concurrentRequests !== undefined) {
    const v = o.concurrentRequests;
    if (!/^\+?\d+$/.test(v))
      throw new ValueError(`invalid value '${v}' for '--concurrent-requests <COUNT>': invalid digit found in string`);
    concurrentRequests = Number(v.replace(/^\+/, ""));
    if (concurrentRequests === 0)
      throw new ValueError(`invalid value '${v}' for '--concurrent-requests <COUNT>': number would be zero for non-zero type`);
    if (!Number.isSafeInteger(concurrentRequests))
      throw new ValueError(`invalid value '${v}' for '--concurrent-requests <COUNT>': number too large to fit in target type`);
  }
  const features = [...(o.enable ?? []), ...(o.disable ?? [])];
  if (features.length > 0) {
    const { CODEX_FEATURES } = await import("./codex-features.ts");
    for (const f of features) if (!CODEX_FEATURES.has(f)) throw new ShellmcpError("USAGE", `Unknown feature flag: ${f}`);
  }
  if (o.strictConfig === true) await checkStrictConfig();
  return { pidNs, concurrentRequests };
}

/**
 * The websocket upgrade check for `cred.authSettings` (undefined: none). With the generated default, the token is
 * made here: written to `--ws-token-out` when asked (`cred.tokenFile`), else kept in `cred.generatedToken`.
 */
function authorizer(auth: typeof import("../auth/bearer.ts"), cred: Credentials): ServerOptions["authorize"] {
  const settings = cred.authSettings;
  if (settings === undefined) return undefined;
  let policy = auth.loadWsAuthPolicy(settings);
  if (settings.mode === "generated") {
    const token = auth.generateToken();
    // Only where the user asks: a file is readable by every sandboxed command of this user (their sandboxes
    // read the whole disk), and with the token, by any of them that reaches loopback (issue 34 review).
    if (settings.tokenOut !== undefined) cred.tokenFile = auth.writeTokenFile(token, settings.tokenOut);
    else cred.generatedToken = token;
    policy = auth.policyForToken(token);
  }
  if (policy === undefined) return undefined;
  const p = policy;
  return (authorization: string | null): AuthRefusal | undefined => auth.authorizeUpgrade(authorization, p);
}

/** Say on stderr how clients authenticate (the generated token, or where the token file is) and warn about files. */
function announceCredentials(cred: Credentials): void {
  const { generatedToken, authSettings, secretFiles, tokenFile } = cred;
  if (generatedToken !== undefined)
    writeStderr(
      `shellmcp exec-server: websocket clients must send "Authorization: Bearer ${generatedToken}" (Codex: auth_bearer_token in $CODEX_HOME/environments.toml, which no shellmcp sandbox reads). The token is written to no file: --ws-token-out $CODEX_HOME/exec-server.token writes it where no shellmcp sandbox reads it (a file elsewhere is readable by sandboxed commands); --listen stdio needs no token.\n`,
    );
  if (authSettings !== undefined && authSettings.mode !== "generated")
    for (const f of secretFiles) {
      const w = tokenFileWarning(f);
      if (w !== "") writeStderr(`shellmcp exec-server: warning: ${f}: ${w}\n`);
    }
  if (tokenFile !== undefined)
    writeStderr(
      `shellmcp exec-server: websocket clients must send "Authorization: Bearer <token>" (Codex: auth_bearer_token in $CODEX_HOME/environments.toml, which no shellmcp sandbox reads); the token is in ${tokenFile.path} (mode 0600, removed when the server stops)${tokenFileWarning(tokenFile.path) === "" ? "" : `; ${tokenFileWarning(tokenFile.path)}`}.\n`,
    );
}

/**
 * Run until SIGTERM/SIGINT/SIGHUP, the stdio transport's end, or (with `exitOnStdinClose`) stdin's close; then
 * remove the token file and shut the server down. Resolves with exit status 0.
 */
function runUntilStopped(srv: ExecServer, tokenFile: TokenFile | undefined, exitOnStdinClose: boolean): Promise<number> {
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      tokenFile?.remove();
      void srv.shutdown().then(() => resolve(0));
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    process.on("SIGHUP", stop);
    void srv.ended.then(stop);
    if (exitOnStdinClose) {
      void (async () => {
        try {
          for await (const _ of Bun.stdin.stream()) {
            // discard: only the close matters
          }
        } catch {
          // closed
        }
        stop();
      })();
    }
  });
}
