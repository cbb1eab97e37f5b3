/**
 * What a call acquires before its shell starts ({@link acquire}), each resource held by the call's
 * {@link CallResources}: proxy wiring (./call-proxy.ts), the launch (mount points), the room escalated programs run in
 * ({@link roomFor}) and its grant proxies, the cgroup, the output pipe or terminal, the escalation listener.
 */
import * as libc from "../../ffi/libc.ts";
import type { EscalationBoundary } from "../escalate/decision/boundary.ts";
import type { EscalationServer } from "../escalate/server.ts";
import type { Launch } from "../sandbox/backend.ts";
import type { RoomSpec } from "../escalate/rooms/plan.ts";
import type { FilesystemPlan } from "../sandbox/filesystem-plan.ts";
import { SANDBOX_FAILURE_EXIT } from "../sandbox/backend.ts";
import { refusalReport } from "../network/proxy.ts";
import { roomGrantProxies } from "../escalate/rooms/grants.ts";
import { failIfInjected } from "../fault-injection.ts";
import { TRACE_STEPS, traceStep } from "../trace-steps.ts";
import type { CallCgroup } from "./cgroup.ts";
import { CallControl } from "./call-control.ts";
import { wireProxy, type ProxyWiring } from "./call-proxy.ts";
import type { CallResources, OwnedFd } from "./call-resources.ts";
import { notStarted, type RunCommandOptions, type RunCommandResult } from "./run-options.ts";

/**
 * The room escalated programs of this call run in: built by the backend the call's own sandbox uses (bubblewrap,
 * Landlock or Seatbelt: ../sandbox/backend.ts `SandboxBackend.room`), on the host when the call is not sandboxed or
 * `escalation = "host"`, and unavailable (they run inside the call's sandbox) when the backend cannot build one or
 * the call's plan cannot be made.
 */
export function roomFor(o: Pick<RunCommandOptions, "escalation" | "sandbox" | "networkProxy">): RoomSpec {
  const extraWritable = {
    extraWritable: o.escalation?.extraWritable ?? {},
    networkGrants: o.escalation?.roomNetwork ?? {},
    readableGrants: o.escalation?.roomReadable ?? {},
  };
  let call: FilesystemPlan;
  try {
    call = o.sandbox.plan();
  } catch (e) {
    return { backend: { kind: "unavailable", reason: (e as Error).message }, call: UNSANDBOXED, ...extraWritable };
  }
  if (o.escalation?.mode === "host" || o.sandbox.enforcement === "none") return { backend: { kind: "host" }, call, ...extraWritable };
  const allowLocalBinding = o.networkProxy?.policy.allowLocalBinding === true;
  return { backend: o.sandbox.backend.room(o.sandbox, { allowLocalBinding }), call, ...extraWritable };
}

/** Placeholder plan when the call's own plan cannot be computed (the room is then unavailable anyway). */
const UNSANDBOXED: FilesystemPlan = {
  sandboxed: false,
  fullRead: true,
  fullWrite: true,
  readableRoots: [],
  includePlatformDefaults: false,
  writableRoots: [],
  deniedPaths: [],
  network: "enabled",
  strict: false,
};

/** What the call's start-up acquired, for its run. */
export interface Acquired {
  launch: Launch;
  proxy: ProxyWiring;
  grantProxies?: Awaited<ReturnType<typeof roomGrantProxies>>;
  cgroup?: CallCgroup;
  listener: ReturnType<EscalationServer["listen"]>;
  /** Where the shell's output is read (a pipe's read end, or a copy of the terminal's master). */
  readEnd: OwnedFd;
  /** The shell's fds 1 and 2 (and 0 on a terminal). */
  writeEnd: OwnedFd;
  /** The shell runs on a session's terminal. */
  terminal: boolean;
  /** On a terminal: escalated programs' own output pipe, merged into the output. */
  escalatedRead?: OwnedFd;
  control: CallControl;
}

/**
 * Acquire what the call needs before its shell starts, each resource held by `res`: proxy wiring, the launch
 * (mount points), the rooms' grant proxies, the cgroup, the output pipe or terminal, the escalation listener.
 * Returns a result instead when the call ends here (a sandbox that cannot be built as asked, a resource that
 * cannot be had); throws what the proxy's or grants' start throws.
 */
export async function acquire(o: RunCommandOptions, res: CallResources, t0: number, tty?: OwnedFd): Promise<Acquired | RunCommandResult> {
  const sandboxed = o.sandbox.sandboxed;
  const proxy = await wireProxy(o, res);
  if (TRACE_STEPS) traceStep("proxy");
  let launch: Launch;
  try {
    launch = o.sandbox.launch(o, proxy.spec);
  } catch (e) {
    // A sandbox that cannot be built as asked (e.g. a protected path that is a symlink): fail closed, as the
    // helper does (status 101, the reason in the output).
    const msg = `shellmcp: ${(e as Error).message}\n`;
    return notStarted(t0, msg, true, {
      exitCode: SANDBOX_FAILURE_EXIT,
      outputBytes: msg.length,
      spawnError: undefined,
      sandboxFailed: true,
    });
  }
  res.hold(() => launch.release?.());
  if (TRACE_STEPS) traceStep("launch");
  // What an escalation may run is judged against the sandbox as it is now, when the shell starts.
  const roomSpec = proxy.room === undefined ? roomFor(o) : { ...roomFor(o), proxy: proxy.room };
  // Programs granted domains (`[shellmcp.room_network] npm = ["registry.npmjs.org"]`) get a proxy of their own.
  if (TRACE_STEPS) traceStep("room");
  const grantProxies = await roomGrantProxies(roomSpec, o.networkProxy?.policy);
  const late: string[] = [];
  if (grantProxies !== undefined)
    // As for the room bridge: ended once the worker has let go of the listener (no room can start any more).
    res.hold(async () => {
      await res.listenerClosed?.catch(() => undefined);
      const refused = await grantProxies.end();
      if (refused.length > 0) late.push(refusalReport(refused));
    });
  failIfInjected("call_grants");
  const boundary: EscalationBoundary = {
    baseEnv: o.env,
    writable: o.sandbox.writable(),
    room: grantProxies === undefined ? roomSpec : { ...roomSpec, grantProxies: grantProxies.endpoints },
  };
  const fail = (what: string, e: unknown) => notStarted(t0, `${what}: ${(e as Error).message}`, sandboxed);
  let cgroup: CallCgroup | undefined;
  try {
    const c = (cgroup = o.cgroups?.create());
    if (c !== undefined) res.hold(() => res.settling.push(c.dispose()));
    failIfInjected("call_cgroup");
  } catch (e) {
    return fail("cannot create this call's cgroup", e);
  }
  if (TRACE_STEPS) traceStep("cgroup");
  const io = openOutput(res, tty);
  if ("error" in io) return fail("cannot use the session's terminal", io.error);
  if (TRACE_STEPS) traceStep("output-pipe");
  const control = new CallControl(o, cgroup, late);
  try {
    control.listener = o.server.listen({
      decide: (r) => o.decide(r, control.stopwatch!),
      boundary,
      cgroupProcs: cgroup?.procs,
      outputFd: io.outputFd.fd,
      notice: o.notice,
    });
    io.outputFd.handOver(); // the worker's now
    const l = control.listener;
    // Stops interception for leftovers and kills this call's escalated programs. The commands reach the worker
    // synchronously inside close(); only its acknowledgement is not awaited, so the answer is not delayed by it.
    res.hold(() => res.settling.push((res.listenerClosed = l.close())));
    failIfInjected("call_listen");
  } catch (e) {
    return fail("cannot open this call's escalation listener", e);
  }
  if (TRACE_STEPS) traceStep("listener");
  return { launch, proxy, grantProxies, cgroup, listener: control.listener, terminal: tty !== undefined, ...io, control };
}

/**
 * The shell's output: a pipe (stdout and stderr share it; stdin is /dev/null), or on a session's terminal a copy of
 * the master to read and the slave as fds 0–2, escalated programs' output then going through a pipe of its own
 * (a room passes no terminal). `outputFd`: the worker's copy of where escalated programs write.
 */
function openOutput(
  res: CallResources,
  tty?: OwnedFd & { master?: number },
): { readEnd: OwnedFd; writeEnd: OwnedFd; escalatedRead?: OwnedFd; outputFd: OwnedFd } | { error: unknown } {
  if (tty !== undefined) {
    let readEnd: OwnedFd;
    try {
      readEnd = res.fd(libc.fcntl(tty.master!, libc.SOCK.F_DUPFD_CLOEXEC, 3));
    } catch (e) {
      return { error: e };
    }
    const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
    return { readEnd, writeEnd: tty, escalatedRead: res.fd(r), outputFd: res.fd(w) };
  }
  const [r, w] = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
  const writeEnd = res.fd(w);
  return { readEnd: res.fd(r), writeEnd, outputFd: res.fd(libc.fcntl(w, libc.SOCK.F_DUPFD_CLOEXEC, 3)) };
}
