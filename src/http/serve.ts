/**
 * `shellmcp serve --listen URL`: the start-up of MCP over streamable HTTP (docs/remote.md): the flags checked
 * against the safe defaults (loopback unless `--auth` other than `none` and TLS, or `--tls-terminated-by-proxy`),
 * authentication loaded (../auth/http.ts; the generated token said once on stderr, never written to a file), the
 * credential files hidden from every sandbox (../sandbox/secrets.ts), the listener started (./server.ts) and its
 * URL printed on stdout; SIGTERM (the runtime's shutdown) drains it: no new request, every session and its
 * processes ended.
 */
import { resolve } from "node:path";
import { loadHttpAuth } from "../auth/http.ts";
import { ShellmcpError } from "../errors.ts";
import { parsePositive } from "../config/config.ts";
import { log } from "../log.ts";
import { addSecrets } from "../sandbox/secrets.ts";
import type { ServeOptions, ServeSetup } from "../serve/setup.ts";
import { writeStderr } from "../stderr.ts";
import type { HttpListenArgs } from "./cli-options.ts";
import { isLoopbackHost, parseListenUrl, startHttpServer, type HttpClient } from "./server.ts";

/**
 * Serve over HTTP until the runtime shuts down (a signal): `newClient` builds one client's runtime (its own exec
 * sessions and state). Throws `USAGE` for a flag combination the safe defaults refuse. Returns the exit status.
 */
export async function serveHttp(
  o: ServeOptions,
  setup: ServeSetup,
  rt: { onShutdown: (hook: () => Promise<void>) => void; shutdown: () => Promise<void> },
  newClient: () => HttpClient,
): Promise<number> {
  const a = o as ServeOptions & HttpListenArgs;
  try {
    const url = parseListenUrl(setup.listen!);
    const tls =
      a.tlsCert !== undefined || a.tlsKey !== undefined ? { cert: resolve(a.tlsCert ?? ""), key: resolve(a.tlsKey ?? "") } : undefined;
    if (tls !== undefined && (a.tlsCert === undefined || a.tlsKey === undefined)) throw usage("--tls-cert and --tls-key go together");
    if (url.protocol === "https:" && tls === undefined) throw usage(`--listen ${url.href}: https needs --tls-cert and --tls-key`);
    if (url.protocol === "http:" && tls !== undefined) throw usage(`--tls-cert/--tls-key need an https:// --listen URL`);
    const loopback = isLoopbackHost(url.hostname);
    if (!loopback) {
      if (a.auth === undefined || a.auth === "none")
        throw usage(
          `refusing to listen on ${url.hostname}, which is not loopback, without authentication you chose: pass --auth capability-token|signed-bearer-token|oauth (anyone who can reach it could run commands as this user)`,
        );
      if (tls === undefined && !a.tlsTerminatedByProxy)
        throw usage(
          `refusing to listen on ${url.hostname} without TLS: use an https:// URL with --tls-cert/--tls-key, or --tls-terminated-by-proxy when a proxy in front terminates TLS`,
        );
    } else if (a.auth === "none") {
      writeStderr(`shellmcp serve: --auth none: every local user and process that reaches ${url.host} can run commands as this user\n`);
    }
    let canonical = url.href; // with port 0: the real port once listening
    const auth = loadHttpAuth(a, () => canonical);
    addSecrets([...auth.secretFiles, ...(tls === undefined ? [] : [tls.key])]);
    const server = startHttpServer({
      url,
      auth,
      tls,
      newClient: auth.mode === "none" ? () => sayingNoAuth(newClient(), () => new URL(canonical).host) : newClient,
      allowedOrigins: a.allowedOrigin,
      allowedHosts: a.allowedHost?.map((h) => h.toLowerCase()),
      maxBodyBytes: a.maxBodyBytes === undefined ? undefined : parsePositive(a.maxBodyBytes, "--max-body-bytes", 1 << 30),
      maxClients: a.maxClients === undefined ? undefined : parsePositive(a.maxClients, "--max-clients", 100_000),
      maxCallsPerClient:
        a.maxCallsPerClient === undefined ? undefined : parsePositive(a.maxCallsPerClient, "--max-calls-per-client", 10_000),
      idleTimeoutMs:
        a.clientIdleTimeoutMs === undefined
          ? undefined
          : parsePositive(a.clientIdleTimeoutMs, "--client-idle-timeout-ms", 7 * 24 * 3600 * 1000),
    });
    // SIGTERM/SIGINT/SIGHUP: the runtime's shutdown stops the listener first (no new request, every session and its
    // processes ended), then ends the rest and exits with the signal's status.
    canonical = server.url.href;
    rt.onShutdown(() => server.stop());
    process.stdout.write(`${server.url.href}\n`);
    if (auth.generatedToken !== undefined)
      writeStderr(
        `shellmcp serve: MCP clients must send "Authorization: Bearer ${auth.generatedToken}" to ${server.url.href} (generated at start, written to no file; --auth capability-token --auth-token-file $CODEX_HOME/serve.token keeps one across restarts where no sandbox reads it)\n`,
      );
    log.info("serving MCP over HTTP", { url: server.url.href, auth: auth.mode });
    return await new Promise<number>(() => {}); // the shutdown exits the process
  } catch (e) {
    if (!(e instanceof ShellmcpError)) throw e;
    writeStderr(`shellmcp serve: ${e.message}\n`);
    await rt.shutdown();
    return 2;
  }
}

const usage = (m: string) => new ShellmcpError("USAGE", m);

/**
 * With `--auth none`, the first tool result of each client carries one more text item (after the result's own
 * content, which is unchanged) saying that anyone who reaches `host()` (the bound host:port) can run commands as this user.
 */
function sayingNoAuth(client: HttpClient, host: () => string): HttpClient {
  let said = false;
  const callTool = client.options.callTool;
  return {
    ...client,
    options: {
      ...client.options,
      callTool: async (name, args, ctx) => {
        const r = await callTool(name, args, ctx);
        if (said) return r;
        said = true;
        return {
          ...r,
          content: [
            ...r.content,
            {
              type: "text",
              text: `Note: this shellmcp server takes MCP requests over HTTP without authentication (--auth none): any local user or process that reaches ${host()} can run commands as this user.`,
            },
          ],
        };
      },
    },
  };
}
