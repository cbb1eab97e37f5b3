/**
 * Method dispatch of the exec-server (./server.ts): which methods exist, how each request's params are decoded
 * (before the session gate, as upstream) and what each method does after it — `initialize`,
 * `environment/info`, `process/start|read|write|terminate|signal` and the `fs/*` methods (./fs-ops.ts, in a
 * sandbox through ./fs-sandbox.ts when one is asked for).
 */
import { existsSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { userHome } from "../self.ts";
import { basename, resolve } from "node:path";
import { VERSION } from "../version.ts";
import type { CgroupManager } from "../shell/cgroup.ts";
import { childEnv, decodeEnvPolicy } from "./env-policy.ts";
import { decodeFsOperation, FS_METHODS, type FsMethod } from "./fs-ops.ts";
import { runFsInSandbox } from "./fs-sandbox.ts";
import { ManagedProcess } from "./process.ts";
import { decodeBase64, decodePath, field, invalidParams, invalidType, paramsObject, rpcError, RPC } from "./rpc.ts";
import { decodeSandbox } from "./sandbox.ts";
import type { Conn, Session, SessionRegistry } from "./session.ts";

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
    userHomeDir: uri(userHome()),
    platformOs: process.platform === "darwin" ? "macos" : process.platform,
    prependPathDirs: [],
    temporaryDirectories: [],
    tempDir: uri(tmpdir()),
    capabilities,
  };
}

const PROCESS_METHODS = ["process/start", "process/read", "process/write", "process/terminate", "process/signal"];

/** Whether `method` is one the exec-server implements (every other one is answered −32601). */
export function isKnownMethod(method: string): boolean {
  return (
    method === "initialize" ||
    method === "environment/info" ||
    PROCESS_METHODS.includes(method) ||
    (FS_METHODS as readonly string[]).includes(method)
  );
}

/**
 * What the methods need from the server: its sessions, the cgroup manager for per-process cgroups (undefined when
 * there is none), and how long a closed process stays readable (ms).
 */
export interface MethodContext {
  sessions: SessionRegistry;
  cgroups: CgroupManager | undefined;
  processRetentionMs: number;
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

/**
 * Decode a request's params (before the gate, as upstream) into the handler to run after it. `method` must be
 * known ({@link isKnownMethod}). Bad params throw here (−32602 and the like, as `rpc.ts` errors); the handler
 * throws the method's RPC errors (not initialized, session resumed elsewhere, unknown process, …).
 */
export function prepare(ctx: MethodContext, c: Conn, method: string, params: unknown): () => Promise<unknown> | unknown {
  const { sessions, cgroups } = ctx;
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
          sessions.attach(c, s);
          return { sessionId: s.id, environmentInfo: environmentInfo() };
        }
        c.initSent = true;
        const s = sessions.create();
        sessions.attach(c, s);
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
          }, ctx.processRetentionMs);
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
