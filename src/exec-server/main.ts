/**
 * `shellmcp exec-server [--listen ws://IP:PORT] [--allow-non-loopback]`: start the exec-server and print its URL
 * (`ws://127.0.0.1:PORT`, one line on stdout) once it listens. Port 0 picks a free port. Only loopback addresses
 * are accepted unless `--allow-non-loopback`: the server has no authentication, so anyone who can reach it can run
 * any command and read or write any file as this user.
 *
 * Environment: `EXEC_SERVER_DETACHED_SESSION_TTL_MS` (detached-session TTL, default 30000) and
 * `EXEC_SERVER_PROCESS_RETENTION_MS` (closed-process retention, default 30000).
 */
import { isIP } from "node:net";
import { writeStderr } from "../stderr.ts";
import { DEFAULT_SERVER_OPTIONS, startExecServer, type ServerOptions } from "./server.ts";

/** Options as commander parses them. */
export interface ExecServerCliOptions {
  listen?: string;
  allowNonLoopback?: boolean;
  maxMessageBytes?: string;
}

/** Parse `ws://IP:PORT` as Codex does (an IP literal, IPv6 in brackets; no host names). Throws with Codex's text. */
export function parseListenUrl(url: string): { hostname: string; port: number } {
  if (!url.startsWith("ws://")) throw new Error(`unsupported --listen URL \`${url}\`; expected \`ws://IP:PORT\``);
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

/** Run until SIGTERM/SIGINT; returns the exit status. */
export async function execServerMain(o: ExecServerCliOptions): Promise<number> {
  let opts: ServerOptions;
  try {
    const { hostname, port } = parseListenUrl(o.listen ?? "ws://127.0.0.1:0");
    if (!isLoopback(hostname) && !o.allowNonLoopback) {
      throw new Error(
        `refusing to listen on non-loopback address ${hostname}: the exec-server has no authentication (anyone who can connect can run commands as this user); pass --allow-non-loopback to do it anyway`,
      );
    }
    const maxMessageBytes = o.maxMessageBytes === undefined ? DEFAULT_SERVER_OPTIONS.maxMessageBytes : Number(o.maxMessageBytes);
    if (!Number.isInteger(maxMessageBytes) || maxMessageBytes < 1024) throw new Error("--max-message-bytes must be an integer ≥ 1024");
    opts = {
      hostname,
      port,
      detachedSessionTtlMs: envMs("EXEC_SERVER_DETACHED_SESSION_TTL_MS", DEFAULT_SERVER_OPTIONS.detachedSessionTtlMs),
      processRetentionMs: envMs("EXEC_SERVER_PROCESS_RETENTION_MS", DEFAULT_SERVER_OPTIONS.processRetentionMs),
      maxMessageBytes,
    };
  } catch (e) {
    writeStderr(`shellmcp exec-server: ${(e as Error).message}\n`);
    return 2;
  }
  let srv;
  try {
    srv = startExecServer(opts);
  } catch (e) {
    writeStderr(`shellmcp exec-server: cannot listen on ${opts.hostname}:${opts.port}: ${(e as Error).message}\n`);
    return 1;
  }
  await Bun.write(Bun.stdout, `${srv.url}\n`);
  return await new Promise<number>((resolve) => {
    const stop = () => {
      void srv.shutdown().then(() => resolve(0));
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    process.on("SIGHUP", stop);
  });
}
