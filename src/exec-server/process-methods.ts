/**
 * The exec-server's `process/*` methods as entries of the method table (./methods.ts): `process/start` (a
 * {@link ManagedProcess}, in the sandbox the params ask for), `process/read|write|terminate|signal` on a process of
 * the gated session. Codex 0.169's shapes and messages (exec-server spec §5).
 */
import { resolve } from "node:path";
import { childEnv, decodeEnvPolicy, type EnvPolicy } from "./env-policy.ts";
import type { Method, MethodContext } from "./methods.ts";
import { ManagedProcess } from "./process.ts";
import { decodeBase64, decodePath, field, invalidParams, invalidType, paramsObject, rpcError, RPC } from "./rpc.ts";
import { decodeSandbox, type ExecSandbox } from "./sandbox.ts";
import type { Conn, Session } from "./session.ts";

/** `process/start`'s params, decoded. */
interface StartParams {
  processId: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  tty: boolean;
  pipeStdin: boolean;
  arg0: string | undefined;
  envPolicy: EnvPolicy | undefined;
  sandbox: ExecSandbox | undefined;
}

function decodeStart(params: unknown): StartParams {
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
  return { processId, argv, cwd, env, tty, pipeStdin, arg0, envPolicy, sandbox };
}

function handleStart(ctx: MethodContext, _c: Conn, s: Session, d: StartParams): unknown {
  const { processId, sandbox } = d;
  if (s.processes.has(processId)) throw rpcError(RPC.INVALID_REQUEST, `process ${processId} already exists`);
  const childEnvironment = childEnv(d.env, d.envPolicy);
  if (sandbox !== undefined && sandbox.policy.type !== "danger-full-access") {
    const net = "network_access" in sandbox.policy ? sandbox.policy.network_access : false;
    if (net !== true && net !== "enabled") childEnvironment.CODEX_SANDBOX_NETWORK_DISABLED = "1";
  }
  s.processes.set(processId, "starting");
  let p: ManagedProcess;
  try {
    p = ManagedProcess.start(
      {
        processId,
        argv: d.argv,
        cwd: d.cwd,
        env: childEnvironment,
        tty: d.tty,
        pipeStdin: d.pipeStdin,
        arg0: d.arg0,
        sandbox,
        cgroups: ctx.cgroups,
      },
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
}

/** `process/read`'s params, decoded. */
interface ReadParams {
  processId: string;
  afterSeq: number;
  maxBytes: number | undefined;
  waitMs: number;
}

const read: Method<ReadParams> = {
  gated: true,
  decode(params) {
    const o = paramsObject(params, "ReadParams");
    const processId = field.string(o, "processId");
    const afterSeq = field.optUint(o, "afterSeq") ?? 0;
    const maxBytes = field.optUint(o, "maxBytes");
    const waitMs = field.optUint(o, "waitMs") ?? 0;
    return { processId, afterSeq, maxBytes, waitMs };
  },
  async handle(_ctx, c, s, { processId, afterSeq, maxBytes, waitMs }) {
    const p = s!.processes.get(processId);
    if (p === undefined) throw rpcError(RPC.INVALID_REQUEST, `unknown process id ${processId}`);
    if (p === "starting") throw rpcError(RPC.INVALID_REQUEST, `process id ${processId} is starting`);
    const r = await p.read(afterSeq, maxBytes, waitMs, () => c.closed || s!.attachment !== c);
    if (s!.attachment !== c) throw rpcError(RPC.INVALID_REQUEST, "session has been resumed by another connection");
    return r;
  },
};

const write: Method<{ processId: string; data: Uint8Array; writeId: string | undefined }> = {
  gated: true,
  decode(params) {
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
    return { processId, data, writeId };
  },
  handle(_ctx, _c, s, { processId, data, writeId }) {
    const p = s!.processes.get(processId);
    if (p === undefined) return { status: "unknownProcess" };
    if (p === "starting") return { status: "starting" };
    return { status: p.write(data, writeId) };
  },
};

const terminate: Method<string> = {
  gated: true,
  decode: (params) => field.string(paramsObject(params, "TerminateParams"), "processId"),
  handle(_ctx, _c, s, processId) {
    const p = s!.processes.get(processId);
    return { running: p !== undefined && p !== "starting" && p.terminate() };
  },
};

const signal: Method<string> = {
  gated: true,
  decode(params) {
    const o = paramsObject(params, "SignalParams");
    const processId = field.string(o, "processId");
    const sig = field.string(o, "signal");
    if (sig !== "interrupt") throw invalidParams(`unknown variant \`${sig}\`, expected \`interrupt\``);
    return processId;
  },
  handle(_ctx, _c, s, processId) {
    const p = s!.processes.get(processId);
    if (p === undefined || p === "starting") throw rpcError(RPC.INVALID_REQUEST, `unknown process id ${processId}`);
    if (!p.exited) p.signal("SIGINT");
    return {};
  },
};

/** The `process/*` entries of the method table, by method name (all gated). */
export const PROCESS_METHODS: Readonly<Record<string, Method>> = {
  "process/start": { gated: true, decode: decodeStart, handle: (ctx, c, s, d) => handleStart(ctx, c, s!, d as StartParams) },
  "process/read": read as Method,
  "process/write": write as Method,
  "process/terminate": terminate as Method,
  "process/signal": signal as Method,
};
