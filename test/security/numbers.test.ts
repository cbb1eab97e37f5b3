/**
 * Issue 11, item 9: numbers are checked. A `timeout_ms` above what a timer can hold is clamped or rejected with a
 * clear message (no timer firing every millisecond, no flood of TimeoutOverflowWarning); a JSON-RPC line over the
 * cap is rejected with -32600 before it is buffered whole, and the server keeps answering.
 */
import { afterAll, describe, expect, test } from "bun:test";
import type { FileSink, Subprocess } from "bun";
import { ensureBinary, homeDir } from "../helpers/binary.ts";
import { closeAll, confDir, cpuSeconds, serveWithPid } from "../helpers/attack.ts";

afterAll(closeAll);

describe("item 9: timeout_ms at and above 2^31", () => {
  test("2^31, 2^32, 2^53-1 and u64::MAX: each call completes (or is refused clearly); no TimeoutOverflowWarning; CPU stays low", async () => {
    const s = await serveWithPid();
    const ws = confDir("ws");
    await s.shell({ command: "true", workdir: ws, login: false }); // warm up
    for (const t of [2 ** 31, 2 ** 32, Number.MAX_SAFE_INTEGER, 18446744073709551615]) {
      const cpu0 = cpuSeconds(s.pid);
      const wall0 = Date.now();
      let text: string;
      try {
        const r = await s.shell({ command: "sleep 2; echo done", workdir: ws, login: false, timeout_ms: t });
        text = r.out.output;
        if (r.isError) expect(text).toMatch(/timeout_ms/);
        else {
          expect(text).toBe("done\n");
          expect(r.out.timed_out).toBe(false);
        }
      } catch (e) {
        text = String(e);
        expect(text).toMatch(/timeout_ms/); // a clear JSON-RPC error naming the parameter
      }
      const cpu = cpuSeconds(s.pid) - cpu0;
      const wall = (Date.now() - wall0) / 1000;
      console.log(`timeout_ms=${t}: ${JSON.stringify(text.trim())}, server CPU ${cpu.toFixed(2)} s over ${wall.toFixed(1)} s`);
      // An idle wait for `sleep 2` costs the server a few tens of ms; a 1 ms timer costs far more.
      expect(cpu).toBeLessThan(0.5 * wall);
    }
    const warnings = s
      .stderr()
      .split("\n")
      .filter((l) => l.includes("TimeoutOverflowWarning")).length;
    expect(warnings).toBe(0);
  }, 60_000);
});

/** Raw stdio serve: send lines, read replies by id. */
async function rawServe() {
  const p = Bun.spawn([ensureBinary(), "serve", "--sandbox", "danger-full-access"], {
    env: { PATH: "/usr/bin:/bin", CODEX_HOME: homeDir("shellmcp-home-"), HOME: "/root" },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  }) as Subprocess<"pipe", "pipe", "pipe">;
  const replies: Record<string, unknown>[] = [];
  let buf = "";
  void (async () => {
    const dec = new TextDecoder();
    for await (const chunk of p.stdout) {
      buf += dec.decode(chunk, { stream: true });
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim()) replies.push(JSON.parse(line));
      }
    }
  })();
  const sink = p.stdin as FileSink;
  const send = async (s: string) => {
    await sink.write(s);
    await sink.flush();
  };
  const until = async (pred: (m: Record<string, unknown>) => boolean, ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const m = replies.find(pred);
      if (m) return m;
      await Bun.sleep(5);
    }
    return undefined;
  };
  await send(
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}\n{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
  );
  expect(await until((m) => m.id === 1, 10_000)).toBeDefined();
  return { p, send, until, replies, end: async () => (sink.end(), p.kill(), await p.exited) };
}

/**
 * Send one `bytes`-long JSON-RPC line (a tools/list request padded with a huge param) and time until the first
 * reply to it; with `expectRejected`, that reply must be -32600. Then check the server still answers.
 */
async function hugeLine(bytes: number, expectRejected: boolean): Promise<number> {
  const srv = await rawServe();
  try {
    const head = '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"pad":"';
    const tail = '"}}\n';
    const line = head + "a".repeat(bytes - head.length - tail.length) + tail;
    const t0 = performance.now();
    const sending = srv.send(line);
    const reply = await srv.until((m) => (m.error as { code?: number } | undefined)?.code === -32600 || m.id === 2, 60_000);
    const ms = performance.now() - t0;
    await sending.catch(() => undefined);
    console.log(`${(bytes / 1e6).toFixed(0)} MB line: reply after ${ms.toFixed(0)} ms: ${JSON.stringify(reply).slice(0, 160)}`);
    expect(reply).toBeDefined();
    if (expectRejected) expect((reply?.error as { code?: number } | undefined)?.code).toBe(-32600);
    await srv.send('{"jsonrpc":"2.0","id":3,"method":"tools/list"}\n');
    const after = await srv.until((m) => m.id === 3, 10_000);
    expect((after?.result as { tools: { name: string }[] } | undefined)?.tools.map((t) => t.name)).toContain("shell");
    return ms;
  } finally {
    await srv.end();
  }
}

describe("item 9: oversized JSON-RPC lines", () => {
  test("a 50 MB line is rejected with -32600 within 5 s and the server keeps answering; 10 MB vs 50 MB grows about linearly", async () => {
    const ms10 = await hugeLine(10_000_000, false); // may be under the cap: any answer, timed
    const ms50 = await hugeLine(50_000_000, true);
    console.log(`10 MB: ${ms10.toFixed(0)} ms, 50 MB: ${ms50.toFixed(0)} ms, ratio ${(ms50 / ms10).toFixed(1)} (linear: 5)`);
    expect(ms50).toBeLessThan(5000);
    // Loose: quadratic splitting makes 50 MB cost ~25× 10 MB; linear reading ~5× (noise allowed for).
    expect(ms50 / Math.max(ms10, 100)).toBeLessThan(15);
  }, 120_000);
});
