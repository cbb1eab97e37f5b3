/**
 * `serve`'s HTTP flags (`--listen` and those that only matter with it: docs/remote.md), kept apart from ./serve.ts
 * so that building the command line loads nothing of the HTTP server.
 */
import { Option, type Command } from "commander";
import { ShellmcpError } from "../errors.ts";
import type { HttpAuthArgs } from "../auth/http.ts";

/** `serve`'s HTTP flags as commander gives them (see {@link addListenOptions}). */
export interface HttpListenArgs extends HttpAuthArgs {
  tlsCert?: string;
  tlsKey?: string;
  tlsTerminatedByProxy?: boolean;
  allowedOrigin?: string[];
  allowedHost?: string[];
  maxBodyBytes?: string;
  maxClients?: string;
  maxCallsPerClient?: string;
  clientIdleTimeoutMs?: string;
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** Add `serve`'s HTTP flags to `cmd` (`--listen` and those that only matter with it). */
export function addListenOptions(cmd: Command): Command {
  return cmd
    .option(
      "--listen <URL>",
      "serve MCP over streamable HTTP at http://HOST:PORT/PATH instead of stdio (remote.md); overrides shellmcp.listen",
    )
    .option(
      "--auth <MODE>",
      "with --listen: capability-token, signed-bearer-token, oauth or none (loopback only); default: a token generated at start, said on stderr",
    )
    .option("--auth-token-file <PATH>", "capability token file (mode 600)")
    .option("--auth-token-sha256 <HEX>", "hex SHA-256 of the capability token")
    .option("--auth-shared-secret-file <PATH>", "HS256 secret of signed bearer tokens (≥ 32 bytes, mode 600)")
    .option("--auth-issuer <ISSUER>", "expected `iss` (oauth: the authorization server's issuer URL)")
    .option("--auth-audience <AUDIENCE>", "expected `aud` (oauth default: this server's URL)")
    .option("--auth-jwks <FILE|URL>", "oauth: the authorization server's JSON Web Key Set")
    .option("--auth-scope <SCOPES>", "oauth: scopes every token must carry (space-separated)")
    .option("--auth-max-clock-skew-seconds <SECONDS>", "clock skew allowed for exp/nbf (default 30)")
    .option("--tls-cert <PATH>", "with an https:// --listen: the certificate chain (PEM)")
    .option("--tls-key <PATH>", "with an https:// --listen: the private key (PEM)")
    .option("--tls-terminated-by-proxy", "a non-loopback http:// --listen is reached only through a proxy that terminates TLS")
    .option("--allowed-origin <ORIGIN>", "an Origin allowed besides the server's own (repeatable)", collect)
    .option("--allowed-host <HOST>", "a Host header allowed besides the server's own, e.g. a proxy's name (repeatable)", collect)
    .option("--max-body-bytes <N>", "largest request body (default 4194304)")
    .option("--max-clients <N>", "MCP sessions open at once (default 64)")
    .option("--max-calls-per-client <N>", "requests in flight at once in one MCP session (default 16)")
    .option("--client-idle-timeout-ms <MS>", "an MCP session without a request this long is ended with its processes (default 1800000)");
}

/** The exec-server's `--ws-*` auth flags and their shared names (`serve --listen`'s), commander attribute names. */
const EXEC_SERVER_AUTH_NAMES: [flag: string, shared: string, ws: string][] = [
  ["--auth <MODE>", "auth", "wsAuth"],
  ["--auth-token-out <PATH>", "authTokenOut", "wsTokenOut"],
  ["--auth-token-file <PATH>", "authTokenFile", "wsTokenFile"],
  ["--auth-token-sha256 <HEX>", "authTokenSha256", "wsTokenSha256"],
  ["--auth-shared-secret-file <PATH>", "authSharedSecretFile", "wsSharedSecretFile"],
  ["--auth-issuer <ISSUER>", "authIssuer", "wsIssuer"],
  ["--auth-audience <AUDIENCE>", "authAudience", "wsAudience"],
  ["--auth-max-clock-skew-seconds <SECONDS>", "authMaxClockSkewSeconds", "wsMaxClockSkewSeconds"],
];

/**
 * Give `exec-server` the shared auth flag names (`--auth`, `--auth-token-file`, …: one authentication module,
 * ../auth/, one set of names) beside its Codex `--ws-*` flags, which stay. Hidden from help (Codex's names are
 * the documented ones there).
 */
export function addExecServerAuthAliases(cmd: Command): Command {
  for (const [flag] of EXEC_SERVER_AUTH_NAMES) cmd.addOption(new Option(flag, `alias of --ws-${flag.slice(7)}`).hideHelp());
  return cmd;
}

/**
 * Fold the shared names into the `--ws-*` ones of commander's options `o` (in place). Throws `USAGE` when both
 * names of one flag are given with different values.
 */
export function applyExecServerAuthAliases(o: Record<string, unknown>): void {
  for (const [flag, shared, ws] of EXEC_SERVER_AUTH_NAMES) {
    if (o[shared] === undefined) continue;
    if (o[ws] !== undefined && o[ws] !== o[shared])
      throw new ShellmcpError("USAGE", `${flag.split(" ")[0]} and --ws-${flag.slice(7).split(" ")[0]} name the same setting: give one`);
    o[ws] = o[shared];
    delete o[shared];
  }
}
