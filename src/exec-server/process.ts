/**
 * One process started by `process/start` (exec-server spec §3): spawn (pipes or a 24×80 pseudo-terminal), one seq
 * counter shared by output chunks, the exit and the close event (contiguous from 1), at most
 * {@link MAX_RETAINED_BYTES} of retained output, long-poll reads, writes, and terminate killing the whole tree.
 *
 * Events go to a {@link ProcessSink} (the session routes them to its attached connection, or drops them while
 * detached; they stay readable through {@link ManagedProcess.read}). While the client is behind, the pipe pumps stop
 * reading and a pty tree is stopped (SIGSTOP) until it catches up: a client that stops reading its socket stalls
 * only its own processes (backpressure, never drops). Output is split into chunks of at most 8 KiB, as Codex reads.
 */
import { constants as osConstants } from "node:os";
import { log } from "../log.ts";
import type { CallCgroup, CgroupManager } from "../shell/cgroup.ts";
import { envForSelf, isSelfExe } from "../self.ts";
import { errnoOf, osErrorText } from "./fs-ops.ts";
import { encodeBase64, rpcError, RPC } from "./rpc.ts";
import { GitCheck } from "../sandbox/git/call-check.ts";
import { sweepMountMarkers } from "../sandbox/linux/mount-markers.ts";
import { GUARD_ARGV0, lifelineProblem } from "../sandbox/linux/lifeline.ts";
import { cgroupTrampoline, checkCwd, directArgv, readWaitStatus, STATUS_FD } from "./launch.ts";
import { guardedStart } from "../shell/spawn-plan.ts";
import { OwnTerminal } from "./terminal.ts";
import { descendants, foregroundGroup, killQuiet } from "./tree.ts";
import * as libc from "../../ffi/libc.ts";
import {
  execGitGuard,
  helperLeftovers,
  placeFds,
  execLaunchFor,
  removeLeftoverMountPoints,
  type ExecLaunch,
  type ExecSandbox,
} from "./sandbox.ts";

/** Output retained per process for `process/read`, bytes (Codex: 1 MiB). Older chunks are dropped. */
export const MAX_RETAINED_BYTES = 1024 * 1024;

/** Largest chunk, bytes: Codex reads pipes 8 KiB at a time, so larger reads are split (same seq numbering). */
export const MAX_CHUNK_BYTES = 8192;

/** Output that makes a failed sandboxed process `sandboxDenied` (Codex's keywords). */
export const SANDBOX_DENIAL =
  /operation not permitted|permission denied|read-only file system|seccomp|sandbox|landlock|failed to write file/i;

/** `stream` of a chunk. */
export type StreamName = "stdout" | "stderr" | "pty";

/** One retained chunk. */
export interface Chunk {
  seq: number;
  stream: StreamName;
  data: Uint8Array;
}

/** What `process/start` asks for, decoded. */
export interface StartSpec {
  processId: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  tty: boolean;
  pipeStdin: boolean;
  arg0?: string;
  sandbox?: ExecSandbox;
  /** Per-process cgroups (the whole tree ends with terminate, however it detached); undefined where there are none. */
  cgroups?: CgroupManager;
}

/** A server→client event of one process. */
export type ProcessEvent =
  | { method: "process/output"; params: { processId: string; seq: number; stream: StreamName; chunk: string } }
  | { method: "process/exited"; params: { processId: string; seq: number; exitCode: number; sandboxDenied: boolean } }
  | { method: "process/closed"; params: { processId: string; seq: number } };

/** Where a process's events go (its session): see the top of this file. */
export interface ProcessSink {
  /** Deliver an event; `json` is its serialisation when the caller already built it. */
  emit(e: ProcessEvent, json?: string): void;
  /** Run `fn`, sending what it emits in one batch. */
  cork(fn: () => void): void;
  /** Resolves when the client can take more output. */
  waitWritable(): Promise<void>;
  /** Whether the client is behind (more than the high-water mark unsent). */
  backpressured(): boolean;
}

/** Result of `process/read`. */
export interface ReadResult {
  chunks: { seq: number; stream: StreamName; chunk: string }[];
  nextSeq: number;
  exited: boolean;
  exitCode: number | null;
  closed: boolean;
  failure: null;
  sandboxDenied: boolean;
}

/** A started process and its retained output. */
export class ManagedProcess {
  readonly id: string;
  readonly tty: boolean;
  readonly pipeStdin: boolean;
  private nextSeq = 1;
  private chunks: Chunk[] = [];
  private retained = 0;
  exited = false;
  exitCode: number | null = null;
  closed = false;
  terminated = false;
  private openStreams = 0;
  private proc: ReturnType<typeof Bun.spawn> | undefined;
  private pid = 0;
  private waiters = new Set<() => void>();
  private writeIds = new Set<string>();
  private cgroup: CallCgroup | undefined;
  /** The git guard's snapshot of a sandboxed process (../sandbox/git/call-check.ts), checked once (see {@link checkGit}). */
  private git: GitCheck | undefined;
  /** A sandboxed process's launch (./sandbox.ts `execLaunch`): its fds to place, what to give back once closed. */
  private sandboxLaunch: ExecLaunch | undefined;
  /** Without mount markers: paths a killed helper may leave as empty mount points (see {@link maybeClose}). */
  private leftovers: string[] = [];
  /** A sandboxed process's environment: where its helper records its mount points (../sandbox/linux/mount-markers.ts). */
  private markerEnv: Record<string, string | undefined> | undefined;
  /** Started under the lifeline guard ({@link pid} is the guard's). */
  private guarded = false;
  /** A terminal process's terminal under the guard (./terminal.ts); undefined with pipes or Bun's terminal. */
  private terminal: OwnTerminal | undefined;
  private readonly sink: ProcessSink;
  private readonly outputPrefix: string;
  private stopped = false;
  private readonly sandboxed: boolean;
  /** Codex's heuristic: a sandboxed process that failed with a denial in its output. */
  sandboxDenied = false;
  /** Called once when closed (the session starts the eviction timer). */
  onClosed: () => void = () => undefined;

  private constructor(id: string, tty: boolean, pipeStdin: boolean, sink: ProcessSink, sandboxed: boolean) {
    this.id = id;
    this.tty = tty;
    this.pipeStdin = pipeStdin && !tty;
    this.sink = sink;
    this.sandboxed = sandboxed;
    this.outputPrefix = `{"method":"process/output","params":{"processId":${JSON.stringify(id)},"seq":`;
  }

  /**
   * Spawn. Throws −32603 with the OS text ("No such file or directory (os error 2)") when the program or cwd is
   * missing or the spawn fails. Events may be emitted before this returns.
   */
  static start(spec: StartSpec, sink: ProcessSink): ManagedProcess {
    const mp = new ManagedProcess(spec.processId, spec.tty, spec.pipeStdin, sink, spec.sandbox !== undefined);
    mp.spawn(spec);
    return mp;
  }

  /**
   * Check the cwd, plan the argv (direct or sandboxed), place the process in its cgroup, spawn it (under the
   * lifeline guard on Linux, on a terminal or with pipes) and start watching it. Throws as {@link ManagedProcess.start}.
   */
  private spawn(spec: StartSpec): void {
    checkCwd(spec.cwd);
    // Nothing outlives the server (../sandbox/linux/lifeline.ts): every process starts under the lifeline guard,
    // which ends everything below it when this server ends, however it ends — also where there are no cgroups. The
    // guard reports the program's end on a status pipe and lets its leftovers run on (Codex's meaning: they end at
    // terminate, session expiry or shutdown). On a terminal the guard leads the terminal's session (the terminal is
    // its controlling terminal: ./terminal.ts); the program runs in that session and its foreground process group.
    const guard = process.platform === "linux" && lifelineProblem() === undefined;
    const planned = spec.sandbox === undefined ? directArgv(spec) : this.sandboxedLaunch(spec, spec.sandbox, guard);
    let started: ReturnType<ManagedProcess["launch"]>;
    try {
      const { argv, argv0, joinCgroup } = this.placeInCgroup(spec, guard, planned.argv, planned.argv0);
      started = this.launch(spec, argv, argv0, guard, joinCgroup);
    } catch (e) {
      this.sandboxLaunch?.release();
      throw e;
    } finally {
      this.sandboxLaunch?.closeFds(); // the child holds its copies (or never started)
    }
    this.watch(spec, started.status, started.argv0 !== undefined && !started.joined);
  }

  /**
   * The sandboxed launch (the server's one backend choice, issue 39): `serve`'s launch path (./sandbox.ts
   * `execLaunch`: bubblewrap or sandbox-exec started directly, its fds placed at spawn) when the process starts with
   * fds besides its stdio (under the guard, or with pipes), else our helper; with what the call leaves to check or
   * give back after it.
   */
  private sandboxedLaunch(spec: StartSpec, sandbox: ExecSandbox, guard: boolean): { argv: string[]; argv0: string | undefined } {
    const { call, launch } = execLaunchFor(sandbox, spec.env, spec.cwd, guard || !spec.tty, spec.argv);
    this.sandboxLaunch = launch;
    ({ markerEnv: this.markerEnv, leftovers: this.leftovers } = helperLeftovers(launch, spec.env, sandbox));
    try {
      this.git = GitCheck.take(execGitGuard(), call.writable(), call.enforcement === "landlock", `process ${this.id}`);
    } catch (e) {
      launch.closeFds();
      launch.release();
      throw rpcError(RPC.INTERNAL, `cannot record the git control state to protect it: ${(e as Error).message}`);
    }
    return { argv: launch.argv, argv0: undefined };
  }

  /**
   * Create the process's cgroup (when the server has them) and say how the process joins it: the guard joins it
   * (`joinCgroup`), our own helper joins it itself (`--join-cgroup`), or the trampoline does; otherwise the process
   * is moved in right after the spawn.
   */
  private placeInCgroup(
    spec: StartSpec,
    guard: boolean,
    argv: string[],
    argv0: string | undefined,
  ): { argv: string[]; argv0: string | undefined; joinCgroup?: string } {
    if (spec.cgroups === undefined) return { argv, argv0 };
    try {
      this.cgroup = spec.cgroups.create();
    } catch (e) {
      throw rpcError(RPC.INTERNAL, `cannot create the process's cgroup: ${(e as Error).message}`);
    }
    // The trampoline joins the cgroup before the program's first instruction; it keeps `arg0` only when it is
    // the program's own name (dash has no `exec -a`), else the process is moved in right after the spawn.
    // Our own sandbox helper (/proc/self/exe) is never trampolined (the shell would exec itself): it joins the
    // cgroup itself before it starts anything (`--join-cgroup`, after its role flag). Under the lifeline guard,
    // the guard joins it before it forks.
    if (guard) return { argv, argv0, joinCgroup: this.cgroup.procs };
    if (isSelfExe(argv[0])) argv.splice(2, 0, "--join-cgroup", this.cgroup.procs);
    else if (argv0 === undefined || argv0 === argv[0] || spec.sandbox !== undefined)
      return { argv: cgroupTrampoline(this.cgroup.procs, argv, spec.env.PWD !== undefined), argv0: undefined };
    return { argv, argv0 };
  }

  /**
   * Spawn: on a terminal, or with pipes (under the lifeline guard when `guard`, its status pipe's read end in
   * `status`). `joined`: the guard joined the cgroup. On failure the cgroup is released, the git check run, and
   * −32603 thrown with the OS text.
   */
  private launch(
    spec: StartSpec,
    argv: string[],
    argv0: string | undefined,
    guard: boolean,
    joinCgroup: string | undefined,
  ): { status?: number; joined: boolean; argv0: string | undefined } {
    let joined = false;
    let status: [number, number] | undefined;
    let pty: libc.PtyPair | undefined;
    try {
      // A sandboxed program never gets the variables that would make this executable the bun CLI (as under our helper).
      const env = isSelfExe(argv[0]) || spec.sandbox !== undefined ? envForSelf(spec.env) : spec.env;
      // Under the guard a terminal is our own (the guard makes it its controlling terminal: Bun's pty spawn keeps
      // the terminal's other end open until the process it started ends, and the guard may outlive the program by
      // far, so Bun's terminal would reach EOF only once every leftover had ended).
      if (spec.tty && guard) pty = this.openTerminal();
      const stdio: (number | "ignore" | "pipe")[] =
        pty !== undefined ? [pty.slave, pty.slave, pty.slave] : [spec.pipeStdin ? "pipe" : "ignore", "pipe", "pipe"];
      if (this.sandboxLaunch !== undefined) placeFds(stdio, this.sandboxLaunch.fds);
      try {
        if (guard) {
          status = libc.pipe2(libc.SOCK.SOCK_CLOEXEC);
          const g = guardedStart(argv, argv0, stdio, joinCgroup, { at: STATUS_FD, fd: status[1] }, pty !== undefined);
          argv = g.argv;
          argv0 = g.argv0;
          joined = joinCgroup !== undefined;
          this.guarded = g.argv0 === GUARD_ARGV0;
        }
        this.openStreams = spec.tty ? 1 : 2;
        this.proc =
          spec.tty && pty === undefined
            ? Bun.spawn(argv, {
                cwd: spec.cwd,
                env,
                argv0,
                terminal: {
                  cols: 80,
                  rows: 24,
                  data: (_t, data) => this.push("pty", new Uint8Array(data)),
                  exit: () => this.streamEnded(),
                },
              })
            : Bun.spawn(argv, {
                cwd: spec.cwd,
                env,
                argv0,
                stdio: stdio as unknown as ["pipe", "pipe", "pipe"],
                detached: true, // a new session (with a terminal, the guard's: ../../patches/room-launcher.c --ctty)
              });
      } finally {
        if (status !== undefined) libc.closeQuiet(status[1]);
        if (pty !== undefined) libc.closeQuiet(pty.slave);
      }
    } catch (e) {
      if (status !== undefined) libc.closeQuiet(status[0]);
      this.terminal?.destroy();
      this.terminal = undefined;
      void this.cgroup?.dispose();
      this.checkGit();
      const n = errnoOf(e);
      throw rpcError(RPC.INTERNAL, n === undefined ? (e as Error).message : osErrorText(n));
    }
    return { status: status?.[0], joined, argv0 };
  }

  /**
   * Our own terminal for a guarded terminal process (./terminal.ts): its reader and writer started on the master;
   * the slave returned for the child's fds 0–2 (the caller closes it once the child holds it). Throws when it cannot
   * be opened (nothing left open).
   */
  private openTerminal(): libc.PtyPair {
    const pty = libc.openPty(24, 80);
    try {
      this.terminal = new OwnTerminal(pty.master, {
        terminalOutput: (d) => this.push("pty", d),
        terminalEnded: () => this.streamEnded(),
        backpressured: () => this.sink.backpressured(),
        waitWritable: () => this.sink.waitWritable(),
      });
    } catch (e) {
      libc.closeQuiet(pty.master);
      libc.closeQuiet(pty.slave);
      throw e;
    }
    return pty;
  }

  /**
   * After the spawn: move the process into its cgroup when nothing else put it there (`moveIn`), and watch its end
   * (the guard's status pipe `status`, else the process's own exit) and its output.
   */
  private watch(spec: StartSpec, status: number | undefined, moveIn: boolean): void {
    const proc = this.proc!;
    const onExit = (code: number | null, signal: string | null) => this.recordExit(code, signal);
    this.pid = proc.pid;
    if (this.cgroup !== undefined && moveIn) {
      try {
        this.cgroup.add(this.pid);
      } catch (e) {
        log.warn("exec-server: cannot move a process into its cgroup", { processId: this.id, error: String(e) });
      }
    }
    // Under the guard the program's end comes on the status pipe (the guard itself ends after its leftovers); the
    // guard's own end stands in when it reported nothing (it could not start the program).
    // On a terminal the guard, not the program, leads the session: the hangup the kernel sends the terminal's
    // foreground group when the session leader ends (what ends a program's background jobs on a terminal) is sent
    // here when the program ends.
    if (status !== undefined)
      void readWaitStatus(status).then((w) => {
        if (w === undefined) return;
        if (spec.tty) this.hangUp();
        onExit(w.code, w.signal);
      });
    void proc.exited.then(() => onExit(proc.exitCode, (proc.signalCode as string | null | undefined) ?? null));
    if (!spec.tty) {
      void this.pump(proc.stdout as ReadableStream<Uint8Array>, "stdout");
      void this.pump(proc.stderr as ReadableStream<Uint8Array>, "stderr");
    }
  }

  private async pump(stream: ReadableStream<Uint8Array>, name: StreamName): Promise<void> {
    const reader = stream.getReader();
    try {
      for (;;) {
        if (this.sink.backpressured()) await this.sink.waitWritable();
        const { value, done } = await reader.read();
        if (done) break;
        if (value.byteLength > 0) this.push(name, value);
      }
    } catch (e) {
      log.debug("exec-server: output pump ended", { processId: this.id, error: String(e) });
    }
    this.streamEnded();
  }

  private wake(): void {
    if (this.waiters.size === 0) return;
    const ws = [...this.waiters];
    this.waiters.clear();
    for (const w of ws) w();
  }

  private push(stream: StreamName, data: Uint8Array): void {
    if (data.byteLength <= MAX_CHUNK_BYTES) this.pushChunk(stream, data);
    else
      this.sink.cork(() => {
        for (let off = 0; off < data.byteLength; off += MAX_CHUNK_BYTES)
          this.pushChunk(stream, data.subarray(off, Math.min(off + MAX_CHUNK_BYTES, data.byteLength)));
      });
  }

  private pushChunk(stream: StreamName, data: Uint8Array): void {
    const seq = this.nextSeq++;
    this.chunks.push({ seq, stream, data });
    this.retained += data.byteLength;
    while (this.retained > MAX_RETAINED_BYTES && this.chunks.length > 1) this.retained -= this.chunks.shift()!.data.byteLength;
    const chunk = encodeBase64(data);
    this.sink.emit(
      { method: "process/output", params: { processId: this.id, seq, stream, chunk } },
      `${this.outputPrefix}${seq},"stream":"${stream}","chunk":"${chunk}"}}`,
    );
    this.wake();
    // Bun's terminal cannot be paused from here (it reads eagerly): stop the tree until the client catches up (our
    // own terminal pauses its reading instead: ./terminal.ts).
    if (stream === "pty" && this.terminal === undefined && !this.stopped && !this.exited && this.sink.backpressured()) {
      this.stopped = true;
      this.signal("SIGSTOP");
      void this.sink.waitWritable().then(() => {
        this.stopped = false;
        if (!this.terminated) this.signal("SIGCONT");
      });
    }
  }

  private recordExit(code: number | null, signal: string | null): void {
    if (this.exited) return;
    this.exited = true;
    const sig = signal === null ? undefined : (osConstants.signals as Record<string, number>)[signal];
    this.exitCode = sig !== undefined ? 128 + sig : (code ?? -1);
    this.sandboxDenied = this.sandboxed && !this.terminated && this.exitCode !== 0 && SANDBOX_DENIAL.test(this.outputTail());
    const seq = this.nextSeq++;
    this.sink.emit({
      method: "process/exited",
      params: { processId: this.id, seq, exitCode: this.exitCode, sandboxDenied: this.sandboxDenied },
    });
    this.wake();
    this.maybeClose();
  }

  private streamEnded(): void {
    this.openStreams--;
    this.maybeClose();
  }

  private maybeClose(): void {
    if (this.closed || !this.exited || this.openStreams > 0) return;
    this.closed = true;
    // A sandbox helper killed with the process (terminate) could not give back its mount points: its markers name
    // them, and the sweep removes what no live process holds (../sandbox/linux/mount-markers.ts), never a folder the
    // user made or another server's sandbox stands on.
    // Without markers (no CODEX_HOME folder), the paths that were missing at the start and are empty now go.
    if (this.markerEnv !== undefined && this.leftovers.length === 0) sweepMountMarkers(this.markerEnv);
    else if (this.leftovers.length > 0) removeLeftoverMountPoints(this.leftovers);
    this.sandboxLaunch?.release(); // a direct launch's: the sandbox (bwrap's pid namespace) has ended with its program
    // Everything it started has ended (its cgroup is empty, or without cgroups the process exited): check now and
    // say what was undone on its output, before `process/closed`. Else when the cgroup empties (terminate, expiry).
    const report = this.cgroup === undefined || this.othersInCgroup() === 0 ? this.checkGit() : "";
    this.releaseCgroup();
    if (report !== "") this.push(this.tty ? "pty" : "stderr", new TextEncoder().encode(report));
    const seq = this.nextSeq++;
    this.sink.emit({ method: "process/closed", params: { processId: this.id, seq } });
    this.wake();
    this.onClosed();
  }

  /** The last ≤ 16 KiB of retained output, as text. */
  private outputTail(): string {
    const parts: Uint8Array[] = [];
    let n = 0;
    for (let i = this.chunks.length - 1; i >= 0 && n < 16384; i--) {
      parts.unshift(this.chunks[i]!.data);
      n += this.chunks[i]!.data.byteLength;
    }
    return Buffer.concat(parts).toString("latin1");
  }

  /** One page of retained output after `afterSeq` (spec §3.4 paging; nextSeq = last returned + 1). */
  private page(afterSeq: number, maxBytes: number | undefined): ReadResult {
    const out: ReadResult["chunks"] = [];
    let total = 0;
    for (const c of this.chunks) {
      if (c.seq <= afterSeq) continue;
      if (out.length > 0 && maxBytes !== undefined && total + c.data.byteLength > maxBytes) break;
      out.push({ seq: c.seq, stream: c.stream, chunk: encodeBase64(c.data) });
      total += c.data.byteLength;
      if (maxBytes !== undefined && total >= maxBytes) break;
    }
    const nextSeq = out.length > 0 ? out[out.length - 1]!.seq + 1 : this.nextSeq;
    return {
      chunks: out,
      nextSeq,
      exited: this.exited,
      exitCode: this.exitCode,
      closed: this.closed,
      failure: null,
      sandboxDenied: this.sandboxDenied,
    };
  }

  /** `process/read`: return at once when there is something to report, else wait up to `waitMs`. */
  async read(afterSeq: number, maxBytes: number | undefined, waitMs: number, aborted: () => boolean): Promise<ReadResult> {
    const deadline = performance.now() + waitMs;
    for (;;) {
      const r = this.page(afterSeq, maxBytes);
      const remaining = deadline - performance.now();
      if (r.chunks.length > 0 || r.closed || (r.exited && afterSeq < r.nextSeq - 1) || remaining <= 0 || aborted()) return r;
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, remaining);
        function done() {
          clearTimeout(t);
          resolve();
        }
        this.waiters.add(done);
      });
    }
  }

  /** `process/write`: the WriteStatus, or −32603 when stdin is gone after terminate. Repeated `writeId`s are not written again. */
  write(data: Uint8Array, writeId: string | undefined): "accepted" | "stdinClosed" {
    if (!this.tty && !this.pipeStdin) return "stdinClosed";
    if (this.terminated) throw rpcError(RPC.INTERNAL, "failed to write to process stdin");
    if (writeId !== undefined) {
      if (this.writeIds.has(writeId)) return "accepted";
      this.writeIds.add(writeId);
    }
    if (this.exited) return "accepted"; // bytes are lost, as upstream
    try {
      if (this.terminal !== undefined) this.terminal.write(data);
      else if (this.tty) this.proc!.terminal!.write(data);
      else {
        const sink = this.proc!.stdin as import("bun").FileSink;
        void Promise.resolve(sink.write(data)).catch(() => undefined);
        void Promise.resolve(sink.flush()).catch(() => undefined);
      }
    } catch {
      // the child closed its stdin: lost, as upstream
    }
    return "accepted";
  }

  /**
   * How many processes of the cgroup are not this process's own lifeline guard: once its streams are closed the
   * guard has ended, but it may not have been reaped yet (a zombie still counts as a member).
   */
  private othersInCgroup(): number {
    return this.cgroup?.members().filter((p) => !(this.guarded && p === this.pid)).length ?? 0;
  }

  /** Remove the cgroup once it is empty (processes that outlive their streams keep it until terminate or shutdown). */
  releaseCgroup(): void {
    const cg = this.cgroup;
    if (cg === undefined || this.othersInCgroup() > 0) return;
    this.cgroup = undefined;
    void cg.dispose();
    this.checkGit();
  }

  /**
   * The git guard's check of this process (exactly once per snapshot: ../sandbox/git/guard.ts), once it and
   * everything it started ended; undoes what it changed in git's control files and returns the report (also
   * logged), empty when nothing changed or it was not sandboxed. Never throws.
   */
  private checkGit(): string {
    const g = this.git;
    if (g === undefined) return "";
    this.git = undefined;
    return g.checkNow();
  }

  /**
   * The guarded terminal program ended: SIGHUP to the terminal's foreground process group (`tpgid` of the guard,
   * the session leader, in /proc), as the kernel sends it when a session leader with a pseudo-terminal exits (the
   * program leads the session in Codex). The guard ignores SIGHUP; processes that left the group or the session run
   * on, as they would there.
   */
  private hangUp(): void {
    if (!this.guarded || this.terminated) return;
    const fg = foregroundGroup(this.pid);
    if (fg !== undefined) killQuiet(-fg, "SIGHUP");
  }

  /** Send `sig` to the whole tree (process group, and descendants that left it). */
  signal(sig: NodeJS.Signals): void {
    if (this.pid <= 0) return;
    const tree = descendants(this.pid);
    killQuiet(-this.pid, sig);
    for (const p of tree) killQuiet(p, sig);
    if (!this.exited) killQuiet(this.pid, sig);
  }

  /** `process/terminate`: SIGKILL the tree; true if it was running. */
  terminate(): boolean {
    if (this.exited || this.proc === undefined) return false;
    this.terminated = true;
    this.cgroup?.kill();
    this.signal("SIGKILL");
    return true;
  }

  /** Kill whatever still runs (session expiry, shutdown). */
  kill(): void {
    if (!this.exited || !this.closed) {
      this.terminated = true;
      this.signal("SIGKILL");
    }
    const cg = this.cgroup;
    this.cgroup = undefined;
    if (cg === undefined) this.checkGit();
    else void cg.dispose().finally(() => this.checkGit());
  }
}
