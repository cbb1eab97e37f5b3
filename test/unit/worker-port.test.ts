/**
 * The escalation worker's parking (src/escalate/worker/port.ts `ParkingWorker`), against a stand-in worker
 * (test/fixtures/park-port-worker.ts) that reports every command it reads: which worker gets each command around a
 * park, what is answered without a worker, and that parking leaves no fd behind. The real worker's side is
 * test/escalate/worker-park.test.ts.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { ParkingWorker } from "../../src/escalate/worker/port.ts";
import type { Command, WorkerEvent } from "../../src/escalate/worker/messages.ts";

const FIXTURE = new URL("../fixtures/park-port-worker.ts", import.meta.url).href;

/** Until `ok()` holds (every 5 ms, up to `ms`); throws when it never does. */
async function until(ok: () => boolean, ms = 10_000): Promise<void> {
  for (const end = performance.now() + ms; !ok(); await Bun.sleep(5)) if (performance.now() > end) throw new Error("timed out waiting");
}

/** A port over the stand-in: each command the workers read (`worker`: 1 for the first started), the other events. */
function harness() {
  const counter = new SharedArrayBuffer(64);
  const port = new ParkingWorker(FIXTURE, counter);
  const seen: { worker: number; command: Command }[] = [];
  const events: WorkerEvent["t"][] = [];
  const errors: string[] = [];
  port.connect(
    (e) => (e.t === "session-error" ? seen.push({ worker: e.lid, command: JSON.parse(e.message) as Command }) : events.push(e.t)),
    (m) => errors.push(m),
  );
  const started = () => new Int32Array(counter)[0]!;
  return { port, seen, events, errors, started };
}

let open: ParkingWorker[] = [];
afterEach(() => {
  for (const p of open.splice(0)) {
    p.terminate();
    p.close();
  }
});

describe("ParkingWorker", () => {
  test("commands sent while a park waits go to the next worker, in order; the parked one reads none of them", async () => {
    const h = harness();
    open.push(h.port);
    await until(() => h.events.includes("ready"));
    h.port.send({ t: "kill", lid: 7, signal: 15 });
    const parked = h.port.park();
    h.port.send({ t: "listen", lid: 8, fd: -1 });
    h.port.send({ t: "unlisten", lid: 8, killChildren: true });
    expect(await parked).toBe(true);
    await until(() => h.seen.length === 4);
    expect(h.seen).toEqual([
      { worker: 1, command: { t: "kill", lid: 7, signal: 15 } },
      { worker: 1, command: { t: "park" } },
      { worker: 2, command: { t: "listen", lid: 8, fd: -1 } },
      { worker: 2, command: { t: "unlisten", lid: 8, killChildren: true } },
    ]);
    expect(h.port.restarts).toBe(1);
    expect(h.started()).toBe(2);
    expect(h.errors).toEqual([]);
  });

  test("a refused park: the held commands go to the same worker, and no other starts", async () => {
    const h = harness();
    open.push(h.port);
    h.port.send({ t: "kill", lid: 1, signal: 0 }); // the stand-in refuses the next park
    const parked = h.port.park();
    h.port.send({ t: "kill", lid: 2, signal: 9 });
    expect(await parked).toBe(false);
    await until(() => h.seen.length === 3);
    expect(h.seen.map((s) => [s.worker, s.command.t])).toEqual([
      [1, "kill"],
      [1, "park"],
      [1, "kill"],
    ]);
    expect(h.port.restarts).toBe(0);
    expect(h.started()).toBe(1);
  });

  test("parked: only a listen starts a worker; a heap release, an unlisten and a stop are answered here, a kill dropped", async () => {
    const h = harness();
    open.push(h.port);
    const first = h.port.park();
    expect(await h.port.park()).toBe(false); // still parking: the first ask's answer comes first
    expect(await first).toBe(true);
    expect(await h.port.park()).toBe(true);
    h.port.send({ t: "release-heap" });
    h.port.send({ t: "kill", lid: 3, signal: 9 });
    h.port.send({ t: "release-output", lid: 3 });
    h.port.send({ t: "decision", sid: 4, action: { kind: "Run" } });
    h.port.send({ t: "unlisten", lid: 3, killChildren: true });
    h.port.send({ t: "stop" });
    await until(() => h.events.includes("stopped"));
    expect(h.events).toEqual(["ready", "heap-released", "unlistened", "stopped"]);
    expect(h.started()).toBe(1);
    expect(h.seen.map((s) => s.command.t)).toEqual(["park"]);
  });

  test("50 parks and restarts leave no fd behind", async () => {
    const h = harness();
    open.push(h.port);
    const fds = () => readdirSync("/proc/self/fd").length;
    await until(() => h.events.includes("ready"));
    expect(await h.port.park()).toBe(true);
    const before = fds();
    for (let i = 0; i < 50; i++) {
      h.port.send({ t: "listen", lid: i, fd: -1 });
      await until(() => h.seen.length === 2 * i + 2);
      expect(await h.port.park()).toBe(true);
    }
    expect(h.started()).toBe(51);
    expect(fds()).toBe(before);
  });
});
