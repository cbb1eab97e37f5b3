/**
 * The exec-server's methods as one table (./envelope.ts dispatches through it): `method → decode, gate, handle`.
 * Each request's params are decoded first (before the session gate, as upstream: bad params are −32602 even before
 * `initialize`), then the gate checks the connection's session, then the handler runs — `initialize`,
 * `environment/info`, `process/start|read|write|terminate|signal` (./process-methods.ts) and the `fs/*` methods
 * (./fs-ops.ts, in a sandbox through ./fs-sandbox.ts when one is asked for). {@link METHODS}' names are checked
 * against the methods Codex's exec-server registers (`codex-rs/exec-server/src/server/registry.rs`) by
 * test/unit/exec-server-methods.test.ts.
 */
import { existsSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { userHome } from "../self.ts";
import { basename } from "node:path";
import { VERSION } from "../version.ts";
import type { CgroupManager } from "../shell/cgroup.ts";
import { decodeFsOperation, FS_METHODS, type FsMethod } from "./fs-ops.ts";
import { runFsInSandbox } from "./fs-sandbox.ts";
import { PROCESS_METHODS } from "./process-methods.ts";
import { field, paramsObject, rpcError, RPC } from "./rpc.ts";
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

/**
 * What the methods need from the server: its sessions, the cgroup manager for per-process cgroups (undefined when
 * there is none), and how long a closed process stays readable (ms).
 */
export interface MethodContext {
  sessions: SessionRegistry;
  cgroups: CgroupManager | undefined;
  processRetentionMs: number;
}

/**
 * One method of the table. `decode` turns the request's params into `D` (throws −32602 and the like as ./rpc.ts
 * errors), before any gate; `gated` says whether the session gate runs next ({@link gate}: initialize, then the
 * `initialized` notification, on the connection the session is attached to — only `initialize` itself is not
 * gated); `handle` runs the method on the decoded params and the gated session (undefined when not gated) and
 * throws the method's RPC errors (unknown process, session resumed elsewhere, OS errors, …).
 */
export interface Method<D = unknown> {
  decode(params: unknown): D;
  gated: boolean;
  handle(ctx: MethodContext, c: Conn, session: Session | undefined, decoded: D): Promise<unknown> | unknown;
}

/** A table entry with its decoded type checked between `decode` and `handle`, then erased for the table. */
export function defineMethod<D>(m: Method<D>): Method {
  return m as Method;
}

const initialize = defineMethod({
  gated: false,
  decode(params) {
    const o = paramsObject(params, "InitializeParams");
    field.string(o, "clientName");
    return field.optString(o, "resumeSessionId");
  },
  handle({ sessions }, c, _s, resumeId) {
    if (c.initSent) throw rpcError(RPC.INVALID_REQUEST, "initialize may only be sent once per connection");
    let s: Session;
    if (resumeId !== undefined) {
      const found = sessions.get(resumeId);
      if (found === undefined) throw rpcError(RPC.INVALID_REQUEST, `unknown session id ${resumeId}`);
      if (found.attachment !== undefined && !found.attachment.closed)
        throw rpcError(RPC.ALREADY_ATTACHED, `session ${resumeId} is already attached to another connection`);
      s = found;
    } else s = sessions.create();
    c.initSent = true;
    sessions.attach(c, s);
    return { sessionId: s.id, environmentInfo: environmentInfo() };
  },
});

/** An `fs/*` method: decoded by ./fs-ops.ts; run here, or in the sandbox the params ask for (./fs-sandbox.ts). */
function fsMethod(m: FsMethod): Method {
  return defineMethod({
    gated: true,
    decode(params) {
      const op = decodeFsOperation(m, params);
      const o = params as Record<string, unknown>;
      const sandbox = decodeSandbox(
        o.sandbox ?? (o.sandboxPolicy === undefined ? undefined : { sandboxPolicy: o.sandboxPolicy, windowsSandboxLevel: "disabled" }),
        process.cwd(),
        { fsOperation: true },
      );
      return { op, sandbox, params };
    },
    async handle(_ctx, _c, _s, { op, sandbox, params }) {
      return sandbox === undefined ? await op() : await runFsInSandbox(sandbox, m, params);
    },
  });
}

/**
 * Every method the exec-server implements, by name (every other one is answered −32601, as Codex's stub answers
 * a method it does not implement).
 */
export const METHODS: ReadonlyMap<string, Method> = new Map<string, Method>([
  ["initialize", initialize],
  ["environment/info", defineMethod({ gated: true, decode: () => undefined, handle: () => environmentInfo() })],
  ...Object.entries(PROCESS_METHODS),
  ...FS_METHODS.map((m): [string, Method] => [m, fsMethod(m)]),
]);

/** Whether `method` is one the exec-server implements (every other one is answered −32601). */
export function isKnownMethod(method: string): boolean {
  return METHODS.has(method);
}

/**
 * The session gate, in Codex's words: `initialize` first, then `initialized`, and only on the connection the
 * session is attached to (a resumed session's old connection gets −32600). Returns the session.
 */
function gate(c: Conn, method: string): Session {
  const what = method.startsWith("fs/") ? "filesystem" : "exec";
  if (c.session === undefined) throw rpcError(RPC.INVALID_REQUEST, `client must call initialize before using ${what} methods`);
  if (!c.initialized) throw rpcError(RPC.INVALID_REQUEST, `client must send initialized before using ${what} methods`);
  if (c.session.attachment !== c) throw rpcError(RPC.INVALID_REQUEST, "session has been resumed by another connection");
  return c.session;
}

/**
 * Decode a request's params (before the gate, as upstream) into the handler to run after it. `method` must be
 * known ({@link isKnownMethod}). Bad params throw here (−32602 and the like, as `rpc.ts` errors); the handler
 * throws the method's RPC errors (not initialized, session resumed elsewhere, unknown process, …).
 */
export function prepare(ctx: MethodContext, c: Conn, method: string, params: unknown): () => Promise<unknown> | unknown {
  const m = METHODS.get(method);
  if (m === undefined) throw rpcError(RPC.METHOD_NOT_FOUND, `exec-server stub does not implement \`${method}\` yet`);
  const decoded = m.decode(params);
  return () => m.handle(ctx, c, m.gated ? gate(c, method) : undefined, decoded);
}
