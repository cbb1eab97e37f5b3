/**
 * The escalation server (src/escalate/server.ts) driven with deterministic fakes, as Codex tests its
 * `shell-escalation` server with a fixed policy and a forwarding `prepare_escalated_exec`: a fake worker port (the
 * test plays the worker: it posts requests and reads the commands the server sends back) and a fake placement
 * (src/escalate/placement.ts `Placement`) that records what it is asked. No process, no worker thread; the only
 * kernel object is each listener's socketpair, closed here as the worker would.
 *
 * What it pins: the placement is asked exactly once per `Escalate` decision, with the request the decision was
 * about and the grant behind it; a placement that refuses (rejects) becomes the Deny the wrapper is sent; a placement
 * that keeps the program inside becomes `Run` with the call's notice; `Run` and `Deny` decisions never ask it; and
 * the placement hears what became of what it placed (listener opened and closed, program and room ended, stop).
 */
import { afterEach, describe, expect, test } from "bun:test";
import * as libc from "../../ffi/libc.ts";
import type { EscalationBoundary } from "../../src/escalate/decision/boundary.ts";
import { resolveRequest, type Decided, type ResolvedRequest } from "../../src/escalate/decision/request.ts";
import type { EscalatedExec, Placed, Placement, PlacementEvent } from "../../src/escalate/placement.ts";
import type { EscalateRequest } from "../../src/escalate/protocol/wire.ts";
import { EscalationServer, type WorkerPort } from "../../src/escalate/server.ts";
import type { Command, WorkerEvent } from "../../src/escalate/worker/messages.ts";

type DecisionCommand = Extract<Command, { t: "decision" }>;

/** Plays the worker: records every command, answers `unlisten` and `stop` as the worker does, closes listen fds. */
class FakeWorker implements WorkerPort {
  readonly sent: Command[] = [];
  private emit: (e: WorkerEvent) => void = () => {};
  private readonly waiting = new Map<number, (c: DecisionCommand) => void>();

  send(c: Command): void {
    this.sent.push(c);
    if (c.t === "listen") libc.closeQuiet(c.fd); // the worker owns the server end
    if (c.t === "decision") this.waiting.get(c.sid)?.(c);
    if (c.t === "unlisten") this.emit({ t: "unlistened", lid: c.lid });
    if (c.t === "stop") this.emit({ t: "stopped" });
    if (this.closed) throw new Error(`${c.t} sent after the control socket was closed`);
  }

  connect(onEvent: (e: WorkerEvent) => void): void {
    this.emit = onEvent;
  }

  terminate(): void {}
  closed = false;
  close(): void {
    this.closed = true;
  }

  /** Post request `raw` of session `sid` of listener `lid`; resolves with the decision the server sends for it. */
  request(lid: number, sid: number, raw: EscalateRequest): Promise<DecisionCommand> {
    const decided = new Promise<DecisionCommand>((res) => this.waiting.set(sid, res));
    this.emit({ t: "request", lid, sid, request: raw });
    return decided;
  }

  /** Post any other worker event. */
  post(e: WorkerEvent): void {
    this.emit(e);
  }
}

/** Records each question and event; answers every `Escalate` with `answer` (a function of the exec, or a rejection). */
class FakePlacement implements Placement {
  readonly asked: EscalatedExec[] = [];
  readonly events: PlacementEvent[] = [];
  constructor(private readonly answer: (exec: EscalatedExec) => Promise<Placed>) {}

  prepareEscalatedExec(exec: EscalatedExec): Promise<Placed> {
    this.asked.push(exec);
    return this.answer(exec);
  }

  observe(e: PlacementEvent): void {
    this.events.push(e);
  }
}

const boundary: EscalationBoundary = {
  baseEnv: { PATH: "/usr/bin:/bin" },
  writable: { full: false, roots: ["/work/project"], readOnly: [] },
};

/** A request with a relative `file`, so the decided request (resolved) differs from the raw one. */
const raw: EscalateRequest = {
  file: "./bin/tool",
  argv: ["tool", "--flag"],
  workdir: "/work/project/../project",
  env: { PATH: "/usr/bin:/bin", LANG: "C" },
};

const spawnOf = (exec: EscalatedExec) => ({
  path: exec.request.file,
  argv: exec.request.argv,
  env: ["PATH=/usr/bin:/bin"],
  cwd: exec.request.workdir,
});

let server: EscalationServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/** A server over a fake worker and `placement`, one listener deciding with `decide`; what the decision saw, and the notices. */
function setUp(placement: FakePlacement, decide: (r: ResolvedRequest) => Decided | Promise<Decided>) {
  const worker = new FakeWorker();
  server = new EscalationServer(worker, placement);
  const decided: ResolvedRequest[] = [];
  const notices: { text: string; detail?: { argv: readonly string[]; reason: string } }[] = [];
  const listener = server.listen({
    boundary,
    decide: (r) => {
      decided.push(r);
      return decide(r);
    },
    notice: (text, detail) => notices.push(detail === undefined ? { text } : { text, detail }),
  });
  listener.releaseClientFd();
  return { worker, listener, decided, notices };
}

describe("escalation server: a run that ends while its exec is placed", () => {
  for (const opens of [true, false])
    test(`what was placed is given back, nothing is sent${opens ? "; the kept room the decision opened ends" : "; a room opened earlier is left to the worker"}`, async () => {
      let place!: (p: Placed) => void;
      const placement = new FakePlacement(() => new Promise<Placed>((res) => (place = res)));
      const { worker, listener } = setUp(placement, () => ({ kind: "Escalate" }));
      const sent = worker.request(listener.id, 9, raw);
      let decisionSent = false;
      void sent.then(() => (decisionSent = true));
      while (place === undefined) await Promise.resolve();
      await listener.close(); // the run ends while the placement runs
      const start = { path: "/usr/bin/bwrap", argv: ["bwrap"], env: [], cwd: "/", contained: true };
      place({ spawn: { ...spawnOf(placement.asked[0]!), room: { rid: 4, ...(opens ? { start } : {}) } } });
      for (let i = 0; i < 20; i++) await Promise.resolve();
      const after = placement.events.slice(placement.events.findIndex((e) => e.t === "listener-closed") + 1);
      expect(after).toEqual([
        ...(opens ? [{ t: "room-ended" as const, listener: listener.id, room: 4 }] : []),
        { t: "listener-closed", listener: listener.id },
      ]);
      expect(worker.sent.some((c) => c.t === "decision")).toBe(false);
      expect(decisionSent).toBe(false);
    });
});

describe("escalation server whose worker dies", () => {
  test("a listener's close waiting for the worker resolves when the worker dies (nobody will answer it)", async () => {
    let fail: (message: string) => void = () => undefined;
    const port: WorkerPort = {
      send: (c) => c.t === "listen" && libc.closeQuiet(c.fd), // the worker owns the server end; it answers nothing
      connect: (_onEvent, onError) => (fail = onError),
      terminate: () => undefined,
      close: () => undefined,
    };
    const s = new EscalationServer(port, new FakePlacement(async (exec) => ({ spawn: spawnOf(exec) })));
    const l = s.listen({ boundary, decide: () => ({ kind: "Run" }) });
    l.releaseClientFd();
    let closed = false;
    const closing = l.close().then(() => (closed = true));
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect(closed).toBe(false); // waits for the worker's `unlistened`
    fail("the worker crashed");
    await closing;
    expect(closed).toBe(true);
    await s.releaseHeap(); // answers at once: the worker is dead
    expect(() => s.listen({ boundary, decide: () => ({ kind: "Run" }) })).toThrow("the escalation worker died");
  });
});

describe("escalation server with a fake placement", () => {
  test("an Escalate asks the placement exactly once, with the decided request and grant; the worker starts its spawn", async () => {
    const placement = new FakePlacement(async (exec) => ({ spawn: spawnOf(exec) }));
    const { worker, listener, decided } = setUp(placement, () => ({ kind: "Escalate", grant: { program: "tool" } }));

    const answer = await worker.request(listener.id, 7, raw);

    expect(decided).toEqual([resolveRequest(raw)]);
    expect(decided[0]!.file).toBe("/work/project/bin/tool");
    expect(placement.asked).toEqual([{ listener: listener.id, session: 7, request: decided[0]!, boundary, grant: { program: "tool" } }]);
    expect(placement.asked[0]!.request).toBe(decided[0]!); // the very request the decision saw
    expect(answer).toEqual({
      t: "decision",
      sid: 7,
      action: { kind: "Escalate" },
      spawn: { path: "/work/project/bin/tool", argv: ["tool", "--flag"], env: ["PATH=/usr/bin:/bin"], cwd: "/work/project" },
    });
  });

  test("each Escalate is placed once: two sessions, two questions, no more", async () => {
    const placement = new FakePlacement(async (exec) => ({ spawn: spawnOf(exec) }));
    const { worker, listener } = setUp(placement, () => ({ kind: "Escalate" }));

    await Promise.all([worker.request(listener.id, 1, raw), worker.request(listener.id, 2, { ...raw, argv: ["tool", "other"] })]);

    expect(placement.asked.map((e) => [e.session, e.request.argv])).toEqual([
      [1, ["tool", "--flag"]],
      [2, ["tool", "other"]],
    ]);
    expect(placement.asked.every((e) => !("grant" in e))).toBe(true); // no grant decided, none invented
  });

  test("a refusal from the placement is the Deny the wrapper is sent (fail closed), with its reason", async () => {
    const placement = new FakePlacement(() => Promise.reject(new Error("the room's mount points are gone")));
    const { worker, listener, notices } = setUp(placement, () => ({ kind: "Escalate", grant: { program: "tool" } }));

    const answer = await worker.request(listener.id, 3, raw);

    expect(placement.asked).toHaveLength(1);
    expect(answer).toEqual({
      t: "decision",
      sid: 3,
      action: { kind: "Deny", reason: "escalation policy error: the room's mount points are gone" },
      spawn: undefined,
    });
    expect(notices).toEqual([]);
  });

  test("placed inside the sandbox: the wrapper is told Run, and the call's notice says why", async () => {
    const placement = new FakePlacement(async () => ({ inside: "the program lies where the sandbox can write" }));
    const { worker, listener, notices } = setUp(placement, () => ({ kind: "Escalate" }));

    const answer = await worker.request(listener.id, 4, raw);

    expect(placement.asked).toHaveLength(1);
    expect(answer).toEqual({ t: "decision", sid: 4, action: { kind: "Run" }, spawn: undefined });
    expect(notices.map((n) => n.detail)).toEqual([{ argv: ["tool", "--flag"], reason: "the program lies where the sandbox can write" }]);
    expect(notices[0]!.text).toContain("ran inside the sandbox, not escalated: the program lies where the sandbox can write");
  });

  test("Run and Deny decisions never ask the placement", async () => {
    const placement = new FakePlacement(async (exec) => ({ spawn: spawnOf(exec) }));
    const decisions: Decided[] = [{ kind: "Run" }, { kind: "Deny", reason: "Execution forbidden by policy" }];
    const { worker, listener } = setUp(placement, () => decisions.shift()!);

    const run = await worker.request(listener.id, 5, raw);
    const deny = await worker.request(listener.id, 6, raw);

    expect(run).toEqual({ t: "decision", sid: 5, action: { kind: "Run" }, spawn: undefined });
    expect(deny).toEqual({ t: "decision", sid: 6, action: { kind: "Deny", reason: "Execution forbidden by policy" }, spawn: undefined });
    expect(placement.asked).toEqual([]);
  });

  test("a decision that throws is denied without asking the placement", async () => {
    const placement = new FakePlacement(async (exec) => ({ spawn: spawnOf(exec) }));
    const { worker, listener } = setUp(placement, () => Promise.reject(new Error("rules unreadable")));

    const answer = await worker.request(listener.id, 8, raw);

    expect(answer.action).toEqual({ kind: "Deny", reason: "escalation policy error: rules unreadable" });
    expect(placement.asked).toEqual([]);
  });

  test("a call still ending after stop sends nothing on the closed control socket (its fd number may be reused)", async () => {
    const placement = new FakePlacement(async (exec) => ({ spawn: spawnOf(exec) }));
    const { worker } = setUp(placement, () => ({ kind: "Run" }));
    const late = server!.listen({ boundary, decide: () => ({ kind: "Run" }), outputFd: libc.pipe2(libc.SOCK.SOCK_CLOEXEC)[1] });
    await server!.stop();
    expect(worker.closed).toBe(true);
    const sent = worker.sent.length;
    late.signalChildren(9);
    await late.close();
    expect(worker.sent.length).toBe(sent);
  });

  test("the placement hears what became of what it placed: listening, program and room ended, listener closed, stop", async () => {
    const placement = new FakePlacement(async (exec) => ({ spawn: spawnOf(exec) }));
    const { worker, listener } = setUp(placement, () => ({ kind: "Escalate" }));
    worker.post({ t: "exited", lid: listener.id, sid: 9, pid: 1234, exitCode: 0 });
    worker.post({ t: "room-ended", lid: listener.id, rid: 2 });
    await listener.close();
    await server!.stop();

    expect(placement.events).toEqual([
      { t: "listening", boundary },
      { t: "program-ended", session: 9 },
      { t: "room-ended", listener: listener.id, room: 2 },
      { t: "listener-closed", listener: listener.id },
      { t: "stopping" },
      { t: "stopped" },
    ]);
  });
});
