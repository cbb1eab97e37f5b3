/**
 * `shellmcp exec-server`: Codex's websocket JSON-RPC exec-server (exec-server spec §1–§8, Codex 0.169 as observed).
 *
 * - Transport: Bun's websocket server on a loopback address; one JSON-RPC-lite message per frame (text or binary;
 *   `"jsonrpc"` never sent); requests handled strictly one at a time per connection; an `Origin` header is refused
 *   with HTTP 403 (a browser page must not drive it); frames over {@link ServerOptions.maxMessageBytes} close the
 *   connection; output pumps pause while a connection has more than {@link OUTBOUND_HIGH_WATER_BYTES} unsent.
 * - Sessions: `initialize {clientName, resumeSessionId}` → `{sessionId}`; on disconnect the session detaches and its
 *   processes keep running for the detached TTL; resuming a live session gives −32010 (the code Codex 0.169 retries).
 * - Methods: `environment/info`, `process/start|read|write|terminate|signal`, `fs/readFile|writeFile|
 *   createDirectory|getMetadata|readDirectory|remove|copy`; every other method −32601 (Codex 0.169 tolerates that
 *   for `fs/watchMissing` and `environmentConfig/read`).
 */
import type { Server, ServerWebSocket } from "bun";
import { existsSync } from "node:fs";
import { homedir, hostname, tmpdir } from "node:os";
import { basename, resolve } from "node:path";
import { VERSION } from "../version.ts";
import { log } from "../log.ts";
import { CgroupManager } from "../shell/cgroup.ts";
import { childEnv, decodeEnvPolicy } from "./env-policy.ts";
import { decodeFsOperation, FS_METHODS, type FsMethod } from "./fs-ops.ts";
import { runFsInSandbox } from "./fs-sandbox.ts";
import { ManagedProcess, type ProcessEvent } from "./process.ts";
import { decodeBase64, decodePath, field, invalidParams, invalidType, paramsObject, rpcError, RPC, toRpcError } from "./rpc.ts";
import { decodeSandbox } from "./sandbox.ts";

/** Pumps pause while a connection has more than this many bytes queued for sending. */
export const OUTBOUND_HIGH_WATER_BYTES = 4 * 1024 * 1024;

/** Inbound bytes a connection may have waiting to be handled before it is closed. */
export const MAX_QUEUED_BYTES = 256 * 1024 * 1024;

/** Server settings. */
export interface ServerOptions {
  hostname: string;
  port: number;
  /** How long a detached session (and its processes) is kept for resume, ms. */
  detachedSessionTtlMs: number;
  /** How long a closed process stays readable, ms. */
  processRetentionMs: number;
  /** Largest inbound websocket message, bytes. */
  maxMessageBytes: number;
}

/** Defaults: Codex's current 30 s TTL and retention; 128 MiB messages (a whole file in `fs/writeFile`). */
export const DEFAULT_SERVER_OPTIONS: ServerOptions = {
  hostname: "127.0.0.1",
  port: 0,
  detachedSessionTtlMs: 30_000,
  processRetentionMs: 30_000,
  maxMessageBytes: 128 * 1024 * 1024,
};

/**
 * `environmentInfo` of the `initialize` reply (also `environment/info`), in Codex 0.169's shape: the executor's
 * shell, cwd, home, OS and temp dir (paths as `file://` URIs). Every capability flag is false: shellmcp offers none
 * of those optional features (network proxy, credential masking, file streaming, `fs/watchMissing`, …).
 */
export function environmentInfo(): Record<string, unknown> {
  const uri = (p: string) => `file://${p.split("/").map(encodeURIComponent).join("/")}`;
  const shellPath = ["/bin/bash", "/usr/bin/bash"].find((p) => existsSync(p)) ?? "/bin/sh";
  const capabilities = Object.fromEntries(
    [
      "networkProxyLaunch",
      "networkProxyReviewDomains",
      "credentialMasking",
      "credentialMaskingCustomProviders",
      "capabilityDiscoverySandbox",
      "fsWatchMissing",
      "capabilityDiscoveryV2",
      "environmentConfigRead",
      "httpHeaderEnvVars",
      "sandboxedFileStreaming",
      "fileWriteStreaming",
      "shellSnapshotV2",
      "windowsMxc",
      "linuxRootWritePreservesDevices",
      "linuxApprovedRootWritePreservesRestrictions",
    ].map((k) => [k, false]),
  );
  return {
    shell: { name: basename(shellPath), path: shellPath },
    executorVersion: `shellmcp-${VERSION}`,
    providerId: `sha256:${new Bun.CryptoHasher("sha256").update(`shellmcp exec-server ${hostname()}`).digest("hex")}`,
    cwd: uri(process.cwd()),
    userHomeDir: uri(homedir()),
    platformOs: process.platform === "darwin" ? "macos" : process.platform,
    prependPathDirs: [],
    temporaryDirectories: [],
    tempDir: uri(tmpdir()),
    capabilities,
  };
}

const PROCESS_METHODS = ["process/start", "process/read", "process/write", "process/terminate", "process/signal"];

interface Conn {
  id: number;
  ws: ServerWebSocket<ConnData>;
  peer: string;
  session?: Session;
  initSent: boolean;
  initialized: boolean;
  queue: (string | Buffer)[];
  queuedBytes: number;
  busy: boolean;
  closed: boolean;
  drainWaiters: (() => void)[];
}

interface ConnData {
  peer: string;
  conn?: Conn;
}

class Session {
  readonly id = crypto.randomUUID();
  readonly processes = new Map<string, ManagedProcess | "starting">();
  attachment: Conn | undefined;
  expiry: ReturnType<typeof setTimeout> | undefined;

  notify(e: ProcessEvent, json?: string): void {
    const c = this.attachment;
    if (c !== undefined && !c.closed) c.ws.send(json ?? JSON.stringify(e));
  }

  cork(fn: () => void): void {
    const c = this.attachment;
    if (c !== undefined && !c.closed) c.ws.cork(fn);
    else fn();
  }

  backpressured(): boolean {
    const c = this.attachment;
    return c !== undefined && !c.closed && c.ws.getBufferedAmount() >= OUTBOUND_HIGH_WATER_BYTES;
  }

  async waitWritable(): Promise<void> {
    for (;;) {
      const c = this.attachment;
      if (c === undefined || c.closed || c.ws.getBufferedAmount() < OUTBOUND_HIGH_WATER_BYTES) return;
      await new Promise<void>((r) => {
        c.drainWaiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  killAll(): void {
    for (const p of this.processes.values()) if (p !== "starting") p.kill();
  }
}

/** A running exec-server. */
export interface ExecServer {
  url: string;
  server: Server<ConnData>;
  /** Kill every process of every session and stop listening. */
  shutdown(): void;
}

/** Start listening. Throws when the address cannot be bound. */
export function startExecServer(opts: ServerOptions): ExecServer {
  const sessions = new Map<string, Session>();
  let nextConnId = 1;
  // One cgroup per process, so that terminate ends everything it started (see src/shell/cgroup.ts).
  const cg = CgroupManager.detect();
  const cgroups = cg instanceof CgroupManager ? cg : undefined;
  if (!(cg instanceof CgroupManager))
    log.info("exec-server: no per-process cgroups; terminate kills process groups and descendants only", { why: cg.error });

  const send = (c: Conn, msg: unknown) => {
    if (!c.closed) c.ws.send(JSON.stringify(msg));
  };
  const reply = (c: Conn, id: unknown, result: unknown) => send(c, { id, result });
  const replyError = (c: Conn, id: unknown, e: unknown) => {
    const { code, message } = toRpcError(e);
    send(c, { error: { code, message }, id });
  };
  const close = (c: Conn) => {
    if (!c.closed) c.ws.close();
    detach(c);
  };

  function detach(c: Conn): void {
    c.closed = true;
    for (const w of c.drainWaiters.splice(0)) w();
    const s = c.session;
    if (s === undefined || s.attachment !== c) return;
    s.attachment = undefined;
    s.expiry = setTimeout(() => {
      if (s.attachment !== undefined) return;
      sessions.delete(s.id);
      s.killAll();
      log.info("exec-server: detached session expired", { sessionId: s.id });
    }, opts.detachedSessionTtlMs);
  }

  function attach(c: Conn, s: Session): void {
    if (s.expiry !== undefined) clearTimeout(s.expiry);
    s.expiry = undefined;
    s.attachment = c;
    c.session = s;
  }

  function gate(c: Conn, method: string): Session {
    const what = method.startsWith("fs/") ? "filesystem" : "exec";
    if (c.session === undefined) throw rpcError(RPC.INVALID_REQUEST, `client must call initialize before using ${what} methods`);
    if (!c.initialized) throw rpcError(RPC.INVALID_REQUEST, `client must send initialized before using ${what} methods`);
    if (c.session.attachment !== c) throw rpcError(RPC.INVALID_REQUEST, "session has been resumed by another connection");
    return c.session;
  }

  function stillCurrent(c: Conn, s: Session): void {
    if (s.attachment !== c) throw rpcError(RPC.INVALID_REQUEST, "session has been resumed by another connection");
  }

  /** Decode a request's params (before the gate, as upstream) into the handler to run after it. */
  function prepare(c: Conn, method: string, params: unknown): () => Promise<unknown> | unknown {
    switch (method) {
      case "initialize": {
        const o = paramsObject(params, "InitializeParams");
        field.string(o, "clientName");
        const resumeId = field.optString(o, "resumeSessionId");
        return () => {
          if (c.initSent) throw rpcError(RPC.INVALID_REQUEST, "initialize may only be sent once per connection");
          if (resumeId !== undefined) {
            const s = sessions.get(resumeId);
            if (s === undefined) throw rpcError(RPC.INVALID_REQUEST, `unknown session id ${resumeId}`);
            if (s.attachment !== undefined && !s.attachment.closed)
              throw rpcError(RPC.ALREADY_ATTACHED, `session ${resumeId} is already attached to another connection`);
            c.initSent = true;
            attach(c, s);
            return { sessionId: s.id, environmentInfo: environmentInfo() };
          }
          c.initSent = true;
          const s = new Session();
          sessions.set(s.id, s);
          attach(c, s);
          return { sessionId: s.id, environmentInfo: environmentInfo() };
        };
      }
      case "environment/info":
        return () => {
          gate(c, method);
          return environmentInfo();
        };
      case "process/start": {
        const o = paramsObject(params, "ExecParams");
        const processId = field.string(o, "processId");
        const argv = field.stringList(o, "argv");
        if (o.cwd === undefined) throw invalidParams("missing field `cwd`");
        if (typeof o.cwd !== "string") throw invalidType(o.cwd, "a string");
        const cwd = o.cwd.startsWith("/") || /^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(o.cwd) ? decodePath(o.cwd, "cwd") : resolve(o.cwd);
        const env = field.stringMap(o, "env", true)!;
        const tty = field.bool(o, "tty");
        const pipeStdin = field.optBool(o, "pipeStdin") ?? o.stdin === "piped";
        const arg0 = field.optString(o, "arg0");
        const envPolicy = decodeEnvPolicy(o.envPolicy);
        if (argv.length === 0) throw invalidParams("argv must not be empty");
        const sandbox = decodeSandbox(o.sandbox, cwd, { fsOperation: false });
        return () => {
          const s = gate(c, method);
          if (s.processes.has(processId)) throw rpcError(RPC.INVALID_REQUEST, `process ${processId} already exists`);
          const childEnvironment = childEnv(env, envPolicy);
          if (sandbox !== undefined && sandbox.policy.type !== "danger-full-access") {
            const net = "network_access" in sandbox.policy ? sandbox.policy.network_access : false;
            if (net !== true && net !== "enabled") childEnvironment.CODEX_SANDBOX_NETWORK_DISABLED = "1";
          }
          s.processes.set(processId, "starting");
          let p: ManagedProcess;
          try {
            p = ManagedProcess.start(
              { processId, argv, cwd, env: childEnvironment, tty, pipeStdin, arg0, sandbox, cgroups },
              {
                emit: (e, json) => s.notify(e, json),
                cork: (fn) => s.cork(fn),
                waitWritable: () => s.waitWritable(),
                backpressured: () => s.backpressured(),
              },
            );
          } catch (e) {
            s.processes.delete(processId);
            throw e;
          }
          s.processes.set(processId, p);
          p.onClosed = () => {
            setTimeout(() => {
              p.releaseCgroup();
              if (s.processes.get(processId) === p) s.processes.delete(processId);
            }, opts.processRetentionMs);
          };
          return { processId, sandboxType: sandbox === undefined ? "none" : sandbox.sandboxType };
        };
      }
      case "process/read": {
        const o = paramsObject(params, "ReadParams");
        const processId = field.string(o, "processId");
        const afterSeq = field.optUint(o, "afterSeq") ?? 0;
        const maxBytes = field.optUint(o, "maxBytes");
        const waitMs = field.optUint(o, "waitMs") ?? 0;
        return async () => {
          const s = gate(c, method);
          const p = s.processes.get(processId);
          if (p === undefined) throw rpcError(RPC.INVALID_REQUEST, `unknown process id ${processId}`);
          if (p === "starting") throw rpcError(RPC.INVALID_REQUEST, `process id ${processId} is starting`);
          const r = await p.read(afterSeq, maxBytes, waitMs, () => c.closed || s.attachment !== c);
          stillCurrent(c, s);
          return r;
        };
      }
      case "process/write": {
        const o = paramsObject(params, "WriteParams");
        const processId = field.string(o, "processId");
        const chunk = field.string(o, "chunk");
        const writeId = field.optString(o, "writeId");
        let data: Uint8Array;
        try {
          data = decodeBase64(chunk);
        } catch (e) {
          throw invalidParams((e as Error).message);
        }
        return () => {
          const s = gate(c, method);
          const p = s.processes.get(processId);
          if (p === undefined) return { status: "unknownProcess" };
          if (p === "starting") return { status: "starting" };
          return { status: p.write(data, writeId) };
        };
      }
      case "process/terminate": {
        const o = paramsObject(params, "TerminateParams");
        const processId = field.string(o, "processId");
        return () => {
          const s = gate(c, method);
          const p = s.processes.get(processId);
          return { running: p !== undefined && p !== "starting" && p.terminate() };
        };
      }
      case "process/signal": {
        const o = paramsObject(params, "SignalParams");
        const processId = field.string(o, "processId");
        const sig = field.string(o, "signal");
        if (sig !== "interrupt") throw invalidParams(`unknown variant \`${sig}\`, expected \`interrupt\``);
        return () => {
          const s = gate(c, method);
          const p = s.processes.get(processId);
          if (p === undefined || p === "starting") throw rpcError(RPC.INVALID_REQUEST, `unknown process id ${processId}`);
          if (!p.exited) p.signal("SIGINT");
          return {};
        };
      }
      default: {
        const m = method as FsMethod;
        const op = decodeFsOperation(m, params);
        const o = params as Record<string, unknown>;
        const sandbox = decodeSandbox(
          o.sandbox ?? (o.sandboxPolicy === undefined ? undefined : { sandboxPolicy: o.sandboxPolicy, windowsSandboxLevel: "disabled" }),
          process.cwd(),
          { fsOperation: true },
        );
        return async () => {
          gate(c, method);
          return sandbox === undefined ? await op() : await runFsInSandbox(sandbox, m, params);
        };
      }
    }
  }

  async function handle(c: Conn, raw: string | Buffer): Promise<void> {
    let text: string;
    let msg: unknown;
    const malformed = (why: string) =>
      send(c, {
        error: {
          code: RPC.INVALID_REQUEST,
          message: `failed to parse websocket JSON-RPC message from exec-server websocket ${c.peer}: ${why}`,
        },
        id: -1,
      });
    try {
      text = typeof raw === "string" ? raw : new TextDecoder("utf-8", { fatal: true }).decode(raw);
      msg = JSON.parse(text);
    } catch (e) {
      return malformed((e as Error).message);
    }
    if (typeof msg !== "object" || msg === null || Array.isArray(msg)) return malformed("expected a JSON-RPC object");
    const m = msg as Record<string, unknown>;
    if ("id" in m) {
      if (typeof m.method === "string") {
        const id = m.id;
        if (!((typeof id === "number" && Number.isSafeInteger(id)) || typeof id === "string"))
          return malformed("data did not match any variant of untagged enum RequestId");
        return handleRequest(c, id, m.method, m.params);
      }
      if ("result" in m || "error" in m) {
        log.info("exec-server: client sent a response; closing", { peer: c.peer });
        return close(c);
      }
      return malformed("missing field `error`");
    }
    if (typeof m.method === "string") {
      if (m.method === "initialized" && c.session !== undefined && c.session.attachment === c) {
        c.initialized = true;
        return;
      }
      log.info("exec-server: unexpected notification; closing", { peer: c.peer, method: m.method });
      return close(c);
    }
    return malformed("missing field `method`");
  }

  async function handleRequest(c: Conn, id: string | number, method: string, params: unknown): Promise<void> {
    const known =
      method === "initialize" ||
      method === "environment/info" ||
      PROCESS_METHODS.includes(method) ||
      (FS_METHODS as readonly string[]).includes(method);
    if (!known) return replyError(c, id, rpcError(RPC.METHOD_NOT_FOUND, `exec-server stub does not implement \`${method}\` yet`));
    const stale = c.session !== undefined && c.session.attachment !== c;
    try {
      const run = prepare(c, method, params ?? null);
      const result = await run();
      reply(c, id, result);
    } catch (e) {
      replyError(c, id, e);
    }
    if (stale) close(c);
  }

  async function pump(c: Conn): Promise<void> {
    if (c.busy) return;
    c.busy = true;
    try {
      while (c.queue.length > 0 && !c.closed) {
        // A client that does not read its replies is not served further (its replies would pile up in memory).
        while (!c.closed && c.ws.getBufferedAmount() >= OUTBOUND_HIGH_WATER_BYTES) {
          await new Promise<void>((r) => {
            c.drainWaiters.push(r);
            setTimeout(r, 50);
          });
        }
        const raw = c.queue.shift()!;
        c.queuedBytes -= raw.length;
        await handle(c, raw);
      }
    } catch (e) {
      log.error("exec-server: handler failed", { error: String(e) });
    } finally {
      c.busy = false;
    }
  }

  const server = Bun.serve<ConnData>({
    hostname: opts.hostname,
    port: opts.port,
    fetch(req, srv) {
      if (req.headers.get("origin") !== null) return new Response("Origin header not allowed\n", { status: 403 });
      const ip = srv.requestIP(req);
      const peer = ip === null ? "unknown" : ip.family === "IPv6" ? `[${ip.address}]:${ip.port}` : `${ip.address}:${ip.port}`;
      if (srv.upgrade(req, { data: { peer } })) return undefined;
      return new Response("expected a websocket upgrade\n", { status: 400 });
    },
    websocket: {
      maxPayloadLength: opts.maxMessageBytes,
      backpressureLimit: 2 * 1024 * 1024 * 1024 - 1,
      closeOnBackpressureLimit: false,
      perMessageDeflate: false,
      sendPings: true,
      idleTimeout: 0,
      open(ws) {
        ws.data.conn = {
          id: nextConnId++,
          ws,
          peer: ws.data.peer,
          initSent: false,
          initialized: false,
          queue: [],
          queuedBytes: 0,
          busy: false,
          closed: false,
          drainWaiters: [],
        };
      },
      message(ws, raw) {
        const c = ws.data.conn!;
        if (c.closed) return;
        c.queue.push(raw);
        c.queuedBytes += raw.length;
        if (c.queuedBytes > MAX_QUEUED_BYTES) {
          log.warn("exec-server: a client queued too many unanswered requests; closing its connection", { peer: c.peer });
          close(c);
          return;
        }
        void pump(c);
      },
      drain(ws) {
        const c = ws.data.conn!;
        if (ws.getBufferedAmount() < OUTBOUND_HIGH_WATER_BYTES) for (const w of c.drainWaiters.splice(0)) w();
      },
      close(ws) {
        const c = ws.data.conn;
        if (c !== undefined) detach(c);
      },
    },
  });
  const host = opts.hostname.includes(":") ? `[${opts.hostname}]` : opts.hostname;
  return {
    url: `ws://${host}:${server.port}`,
    server,
    shutdown() {
      for (const s of sessions.values()) s.killAll();
      cgroups?.shutdown();
      server.stop(true);
    },
  };
}
