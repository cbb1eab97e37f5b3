/**
 * Stopwatch (src/shell/stopwatch.ts): a call's timeout that does not count time spent waiting for a human.
 * The clock is injected, so running time is exact; expiry is awaited as an event, never slept for.
 */
import { describe, expect, test } from "bun:test";
import { Stopwatch } from "../../src/shell/stopwatch.ts";

/** A manual clock in ms. */
function clock(start = 1000) {
  const c = { t: start, now: () => c.t };
  return c;
}

/** A stopwatch whose expiry resolves `expired`. */
function watch(limitMs: number, c = clock()) {
  let fired = 0;
  let resolve!: () => void;
  const expired = new Promise<void>((r) => (resolve = r));
  const sw = new Stopwatch(
    limitMs,
    () => {
      fired++;
      resolve();
    },
    c.now,
  );
  return { sw, c, expired, fired: () => fired };
}

describe("Stopwatch", () => {
  test("counts running time from construction", () => {
    const { sw, c } = watch(60_000);
    expect(sw.runningMs).toBe(0);
    c.t += 250;
    expect(sw.runningMs).toBe(250);
    sw.dispose();
  });

  test("fires once when running time reaches the limit", async () => {
    const { sw, c, expired, fired } = watch(5);
    c.t += 5;
    await expired;
    expect(sw.expired).toBe(true);
    expect(fired()).toBe(1);
    sw.pause();
    sw.resume();
    expect(fired()).toBe(1);
  });

  test("a zero limit fires at once, inside the constructor", () => {
    const { sw, fired } = watch(0);
    expect(fired()).toBe(1);
    expect(sw.expired).toBe(true);
  });

  test("paused time does not count", () => {
    const { sw, c } = watch(60_000);
    c.t += 100;
    sw.pause();
    c.t += 10_000;
    expect(sw.runningMs).toBe(100);
    sw.resume();
    c.t += 50;
    expect(sw.runningMs).toBe(150);
    sw.dispose();
  });

  test("pauses nest: counting restarts only when the last one is undone; extra resumes are ignored", () => {
    const { sw, c } = watch(60_000);
    sw.pause();
    sw.pause();
    c.t += 500;
    sw.resume();
    c.t += 500;
    expect(sw.runningMs).toBe(0);
    sw.resume();
    c.t += 30;
    expect(sw.runningMs).toBe(30);
    sw.resume();
    sw.resume();
    c.t += 20;
    expect(sw.runningMs).toBe(50);
    sw.pause(); // one pause still stops it after the extra resumes
    c.t += 1000;
    expect(sw.runningMs).toBe(50);
    sw.dispose();
  });

  test("a paused stopwatch past its limit does not fire until resumed", async () => {
    const { sw, c, expired, fired } = watch(5);
    sw.pause();
    c.t += 1_000_000;
    await Promise.resolve();
    expect(fired()).toBe(0);
    expect(sw.expired).toBe(false);
    sw.resume();
    c.t += 5;
    await expired;
    expect(fired()).toBe(1);
  });

  test("paused(f) pauses while f runs, and resumes even when f throws", async () => {
    const { sw, c } = watch(60_000);
    const seen = await sw.paused(async () => {
      c.t += 5000;
      return sw.runningMs;
    });
    expect(seen).toBe(0);
    await expect(
      sw.paused(async () => {
        c.t += 5000;
        throw new Error("no answer");
      }),
    ).rejects.toThrow("no answer");
    c.t += 7;
    expect(sw.runningMs).toBe(7);
    sw.dispose();
  });

  test("dispose stops it for good", async () => {
    const { sw, c, fired } = watch(5);
    sw.dispose();
    c.t += 1000;
    sw.resume();
    await Bun.sleep(0);
    expect(fired()).toBe(0);
  });
});
