/**
 * The call proxy (src/network/proxy.ts) in this process, with local servers only and an injected name lookup
 * (test names map to 127.0.0.1; every name asked is recorded): Codex 0.169's wire answers for plain HTTP, CONNECT
 * and SOCKS5, one request per connection, the Host check, the SNI check, half-closes through tunnels, limited mode,
 * the connection bound, and a 30 MB download through a rate-limited curl arriving byte-identical.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as net from "node:net";
import * as tls from "node:tls";
import { tempDir } from "../helpers/binary.ts";
import { emptyNetworkPolicy, type NetworkPolicy } from "../../src/network/policy.ts";
import { CallProxy, type ProxyPorts } from "../../src/network/proxy.ts";
import { parseClientHelloSni } from "../../src/network/proxy-wire.ts";

const BIG = randomBytes(30 * 1024 * 1024);
let server: ReturnType<typeof Bun.serve>;
let port: number;
let echo: net.Server;
let echoPort: number;
const echoed: Buffer[] = [];
const asked: string[] = [];
const NAMES: Record<string, string[]> = {
  "allowed.test": ["127.0.0.1"],
  "api.allowed.test": ["127.0.0.1"],
  "deep.test": ["127.0.0.1"],
  "a.deep.test": ["127.0.0.1"],
  "b.deep.test": ["127.0.0.1"],
};
const lookup = async (h: string) => {
  asked.push(h);
  const a = NAMES[h];
  if (a === undefined) throw new Error("ENOTFOUND");
  return a;
};

beforeAll(async () => {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const u = new URL(req.url);
      if (u.pathname === "/big") return new Response(BIG);
      return new Response(
        `${req.method} ${u.pathname} host=${req.headers.get("host")} conn=${req.headers.get("connection")} proxy=${req.headers.get("proxy-authorization")}`,
      );
    },
  });
  port = server.port!;
  echo = net.createServer((s) => s.on("data", (d) => echoed.push(d as Buffer)).on("error", () => undefined));
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", () => r()));
  echoPort = (echo.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await server.stop(true);
  echo.close();
});

async function withProxy(over: Partial<NetworkPolicy>, f: (p: ProxyPorts, proxy: CallProxy) => Promise<void>): Promise<CallProxy> {
  const proxy = new CallProxy({ policy: { ...emptyNetworkPolicy(), enabled: true, allowLocalBinding: true, ...over }, lookup });
  const ports = await proxy.listenLoopback();
  try {
    await f(ports, proxy);
  } finally {
    await proxy.close();
  }
  return proxy;
}

async function curl(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn(["curl", "-sS", "--max-time", "20", ...args], { stdout: "pipe", stderr: "pipe" });
  const [out, err] = [await new Response(p.stdout).text(), await new Response(p.stderr).text()];
  return { code: await p.exited, out, err };
}

/** Send raw bytes to a port and read everything until the peer closes. */
async function raw(p: number, data: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const s = net.connect(p, "127.0.0.1", () => s.write(data));
    s.on("data", (d) => chunks.push(d as Buffer));
    s.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
    s.on("error", reject);
    setTimeout(() => s.destroy(), 10_000);
  });
}

describe("plain HTTP (absolute-form)", () => {
  test("allowed host reaches the server with origin-form, Connection: close, Proxy-* dropped", async () => {
    await withProxy({ allow: ["allowed.test"] }, async (p) => {
      const r = await curl([
        "-x",
        `http://127.0.0.1:${p.http}`,
        "-H",
        "Proxy-Authorization: Basic eA==",
        `http://allowed.test:${port}/x?y=1`,
      ]);
      expect(r.err).toBe("");
      expect(r.out).toBe(`GET /x host=allowed.test:${port} conn=close proxy=null`);
    });
  });

  test("refused: 403, x-proxy-error, Codex's JSON body; recorded on the call", async () => {
    asked.length = 0;
    const proxy = await withProxy({ allow: ["allowed.test"], deny: ["a.deep.test"] }, async (p) => {
      const notAllowed = await raw(p.http, `GET http://other.test:${port}/ HTTP/1.1\r\nHost: other.test:${port}\r\n\r\n`);
      expect(notAllowed).toStartWith("HTTP/1.1 403 Forbidden\r\n");
      expect(notAllowed).toContain("content-type: application/json\r\n");
      expect(notAllowed).toContain("x-proxy-error: blocked-by-allowlist\r\n");
      const body = notAllowed.slice(notAllowed.indexOf("\r\n\r\n") + 4);
      expect(body).toBe(
        `{"status":"blocked","host":"other.test","reason":"not_allowed","decision":"deny","source":"baseline_policy","protocol":"http","port":${port},"message":"Domain not in allowlist."}`,
      );
      const denied = await raw(p.http, `GET http://a.deep.test:${port}/ HTTP/1.1\r\nHost: a.deep.test:${port}\r\n\r\n`);
      expect(denied).toContain("x-proxy-error: blocked-by-denylist\r\n");
      expect(denied).toContain('"reason":"denied"');
    });
    expect(proxy.refusals).toEqual([
      { host: "other.test", port, protocol: "http", reason: "not_allowed" },
      { host: "a.deep.test", port, protocol: "http", reason: "denied" },
    ]);
    expect(asked).toEqual([]); // refused names are never looked up
  });

  test("Host header differing from the target: 400; origin-form routed by Host", async () => {
    await withProxy({ allow: ["allowed.test"] }, async (p) => {
      const r = await raw(p.http, `GET http://allowed.test:${port}/ HTTP/1.1\r\nHost: other.test:${port}\r\n\r\n`);
      expect(r).toStartWith("HTTP/1.1 400 Bad Request\r\n");
      expect(r).toEndWith("Host header does not match request target");
      const o = await raw(p.http, `GET /o HTTP/1.1\r\nHost: allowed.test:${port}\r\n\r\n`);
      expect(o).toContain(`GET /o host=allowed.test:${port}`);
    });
  });

  test("one request per connection: a second pipelined request for another host never reaches it", async () => {
    await withProxy({ allow: ["allowed.test"] }, async (p) => {
      const r = await raw(
        p.http,
        `GET http://allowed.test:${port}/one HTTP/1.1\r\nHost: allowed.test:${port}\r\n\r\nGET http://other.test:${port}/two HTTP/1.1\r\nHost: other.test:${port}\r\n\r\n`,
      );
      expect(r).toContain("GET /one");
      expect(r).not.toContain("/two");
    });
  });

  test("limited mode: GET passes, POST is 403 method_not_allowed, CONNECT and SOCKS refused", async () => {
    const proxy = await withProxy({ allow: ["allowed.test"], mode: "limited" }, async (p) => {
      expect((await curl(["-x", `http://127.0.0.1:${p.http}`, `http://allowed.test:${port}/g`])).out).toStartWith("GET /g");
      const post = await raw(
        p.http,
        `POST http://allowed.test:${port}/ HTTP/1.1\r\nHost: allowed.test:${port}\r\nContent-Length: 0\r\n\r\n`,
      );
      expect(post).toContain("x-proxy-error: blocked-by-method-policy\r\n");
      expect(post).toContain('"message":"Method not allowed in limited mode."');
      expect((await curl(["-p", "-x", `http://127.0.0.1:${p.http}`, `http://allowed.test:${port}/`])).code).toBe(56);
      expect((await curl(["--socks5-hostname", `127.0.0.1:${p.socks}`, `http://allowed.test:${port}/`])).code).toBe(97);
    });
    expect(proxy.refusals.map((r) => r.reason)).toEqual(["method_not_allowed", "mitm_required", "method_not_allowed"]);
  });
});

describe("CONNECT", () => {
  test("allowed tunnel; refused: 403 text/plain with the message (curl exit 56)", async () => {
    await withProxy({ allow: ["**.deep.test"], deny: ["a.deep.test"] }, async (p) => {
      const ok = await curl(["-p", "-x", `http://127.0.0.1:${p.http}`, `http://b.deep.test:${port}/t`]);
      expect(ok.out).toStartWith("GET /t");
      const r = await raw(p.http, `CONNECT a.deep.test:${port} HTTP/1.1\r\nHost: a.deep.test:${port}\r\n\r\n`);
      expect(r).toBe(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nx-proxy-error: blocked-by-denylist\r\ncontent-length: 36\r\nconnection: close\r\n\r\nDomain denied by the sandbox policy.",
      );
      expect((await curl(["-p", "-x", `http://127.0.0.1:${p.http}`, `http://other.test:${port}/`])).code).toBe(56);
    });
  });

  test("half-closes pass through CONNECT and SOCKS5 tunnels (a server that answers after the client's FIN)", async () => {
    const after = net.createServer({ allowHalfOpen: true }, (s) => {
      let got = "";
      s.on("data", (d) => (got += d));
      s.on("end", () => s.end(`after FIN: ${got}`));
    });
    await new Promise<void>((r) => after.listen(0, "127.0.0.1", () => r()));
    const ap = (after.address() as net.AddressInfo).port;
    /** Open a tunnel with `open` (bytes to send, bytes of the proxy's answer), send `msg`, half-close, read to the end. */
    const through = (to: number, open: Buffer, answerBytes: (buf: Buffer) => number | undefined, msg: string) =>
      new Promise<string>((resolve, reject) => {
        const s = net.connect({ port: to, host: "127.0.0.1", allowHalfOpen: true }, () => s.write(open));
        let buf = Buffer.alloc(0);
        let open_ = false;
        s.on("data", (d) => {
          buf = Buffer.concat([buf, d as Buffer]);
          const n = open_ ? undefined : answerBytes(buf);
          if (n !== undefined) {
            open_ = true;
            buf = buf.subarray(n);
            s.end(msg); // FIN after the message: the server answers only then
          }
        });
        s.on("close", () => resolve(buf.toString("latin1")));
        s.on("error", reject);
      });
    try {
      const proxy = await withProxy({ allow: ["allowed.test"] }, async (p) => {
        const head = (b: Buffer) => (b.indexOf("\r\n\r\n") < 0 ? undefined : b.indexOf("\r\n\r\n") + 4);
        const connect = Buffer.from(`CONNECT allowed.test:${ap} HTTP/1.1\r\nHost: allowed.test:${ap}\r\n\r\n`);
        expect(await through(p.http, connect, head, "via CONNECT")).toBe("after FIN: via CONNECT");
        const name = Buffer.from("allowed.test");
        const socks = Buffer.from([5, 1, 0, 5, 1, 0, 3, name.length, ...name, ap >> 8, ap & 255]);
        expect(await through(p.socks!, socks, (b) => (b.length >= 12 ? 12 : undefined), "via SOCKS5")).toBe("after FIN: via SOCKS5");
      });
      expect(proxy.refusals).toEqual([]);
    } finally {
      after.close();
    }
  });

  test("a TLS ClientHello naming another host closes the tunnel; the same name passes", async () => {
    const hello = async (p: ProxyPorts, servername: string): Promise<"closed" | "open"> => {
      const s = net.connect(p.http, "127.0.0.1");
      await new Promise((r) => s.once("connect", r));
      s.write(`CONNECT allowed.test:${echoPort} HTTP/1.1\r\nHost: allowed.test:${echoPort}\r\n\r\n`);
      await new Promise((r) => s.once("data", r));
      const t = tls.connect({ socket: s, servername, rejectUnauthorized: false });
      t.on("error", () => undefined);
      return new Promise((resolve) => {
        s.once("close", () => resolve("closed"));
        setTimeout(() => resolve("open"), 1500);
      }).finally(() => s.destroy()) as Promise<"closed" | "open">;
    };
    const proxy = await withProxy({ allow: ["allowed.test"] }, async (p) => {
      echoed.length = 0;
      expect(await hello(p, "evil.test")).toBe("closed");
      expect(echoed.length).toBe(0); // nothing of the hello reached the server
      expect(await hello(p, "ALLOWED.test")).toBe("open");
      expect(Buffer.concat(echoed)[0]).toBe(0x16);
    });
    expect(proxy.refusals).toEqual([{ host: "allowed.test", port: echoPort, protocol: "https_connect", reason: "sni_mismatch" }]);
  });

  test("ClientHello parser: SNI, no TLS, incomplete", () => {
    expect(parseClientHelloSni(Buffer.from("SSH-2.0-x\r\n"))).toEqual({ value: null, used: 0 });
    expect(parseClientHelloSni(Buffer.from([0x16, 3, 1]))).toBeUndefined();
  });
});

describe("SOCKS5", () => {
  test("allowed by name; refused with reply 2 (curl exit 97); IPv4 literal of a denied address", async () => {
    const proxy = await withProxy({ allow: ["allowed.test", "*"], deny: ["127.0.0.1"], allowLocalBinding: false }, async (p) => {
      const refused = await curl(["--socks5", `127.0.0.1:${p.socks}`, `http://127.0.0.1:${port}/`]);
      expect(refused.code).toBe(97);
      const reply = await raw(p.socks!, Buffer.from([5, 1, 0, 5, 1, 0, 3, 10, ...Buffer.from("other.test"), port >> 8, port & 255]));
      expect([...Buffer.from(reply, "latin1")]).toEqual([5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    });
    // other.test: `*` allows it, but it resolves nowhere → not_allowed_local (fail closed).
    expect(proxy.refusals.map((r) => `${r.host} ${r.reason}`)).toEqual(["127.0.0.1 denied", "other.test not_allowed_local"]);
    await withProxy({ allow: ["allowed.test"] }, async (p) => {
      const ok = await curl(["--socks5-hostname", `127.0.0.1:${p.socks}`, `http://allowed.test:${port}/s`]);
      expect(ok.out).toStartWith("GET /s");
      const udp = await raw(p.socks!, Buffer.from([5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0]));
      expect(udp.charCodeAt(3)).toBe(7); // UDP ASSOCIATE: command not supported
    });
  });

  test("enable_socks5 = false: no SOCKS listener", async () => {
    await withProxy({ allow: ["allowed.test"], enableSocks5: false }, async (p) => {
      expect(p.socks).toBeUndefined();
    });
  });
});

describe("asking a person about not_allowed hosts", () => {
  test("asked once per host (concurrent requests share the answer); denied and local hosts never asked; scopes", async () => {
    const questions: string[] = [];
    const answers: Record<string, "once" | "session" | undefined> = { "other.test": "once", "api.allowed.test": "session" };
    const sessionAllowed = new Set<string>();
    const ask = async (q: { host: string; port: number; protocol: string }) => {
      questions.push(`${q.host}:${q.port} ${q.protocol}`);
      await Bun.sleep(50);
      return answers[q.host];
    };
    const lookupAll = async (h: string) => (h === "nowhere.test" ? Promise.reject(new Error("ENOTFOUND")) : ["127.0.0.1"]);
    const make = () =>
      new CallProxy({
        policy: { ...emptyNetworkPolicy(), enabled: true, allowLocalBinding: true, allow: [], deny: ["a.deep.test"] },
        lookup: lookupAll,
        ask,
        sessionAllowed,
      });
    const first = make();
    const p = await first.listenLoopback();
    const get = (host: string) =>
      curl(["-o", "/dev/null", "-w", "%{http_code}", "-x", `http://127.0.0.1:${p.http}`, `http://${host}:${port}/`]);
    const codes = await Promise.all([
      get("other.test"),
      get("other.test"),
      get("OTHER.test."),
      get("api.allowed.test"),
      get("a.deep.test"),
      get("declined.test"),
    ]);
    expect(codes.map((c) => c.out)).toEqual(["200", "200", "200", "200", "403", "403"]);
    expect(questions.sort()).toEqual([`api.allowed.test:${port} http`, `declined.test:${port} http`, `other.test:${port} http`]);
    expect(first.refusals.map((r) => `${r.host} ${r.reason}`).sort()).toEqual(["a.deep.test denied", "declined.test not_allowed"]);
    await first.close();
    // A new call: "once" is forgotten, "session" holds.
    questions.length = 0;
    const second = make();
    const p2 = await second.listenLoopback();
    const get2 = (host: string) =>
      curl(["-o", "/dev/null", "-w", "%{http_code}", "-x", `http://127.0.0.1:${p2.http}`, `http://${host}:${port}/`]);
    expect((await get2("api.allowed.test")).out).toBe("200");
    expect((await get2("other.test")).out).toBe("200");
    expect(questions).toEqual([`other.test:${port} http`]);
    await second.close();
  });
});

describe("bounds and backpressure", () => {
  test("30 MB through a rate-limited client arrives byte-identical (plain and CONNECT)", async () => {
    const dir = tempDir("shellmcp-proxy-");
    await withProxy({ allow: ["allowed.test"] }, async (p) => {
      for (const [name, extra] of [
        ["plain", []],
        ["tunnel", ["-p"]],
      ] as const) {
        const file = join(dir, name);
        const r = await curl([
          ...extra,
          "--limit-rate",
          "20M",
          "-x",
          `http://127.0.0.1:${p.http}`,
          "-o",
          file,
          `http://allowed.test:${port}/big`,
        ]);
        expect(r.err).toBe("");
        const got = readFileSync(file);
        expect(got.length).toBe(BIG.length);
        expect(createHash("sha256").update(got).digest("hex")).toBe(createHash("sha256").update(BIG).digest("hex"));
      }
    });
  }, 60_000);

  test("connections beyond the bound are closed; close() ends every connection and listener", async () => {
    const proxy = new CallProxy({ policy: { ...emptyNetworkPolicy(), enabled: true }, lookup, maxConnections: 2 });
    const p = await proxy.listenLoopback();
    const open = () =>
      new Promise<net.Socket>((r) => {
        const s = net.connect(p.http, "127.0.0.1", () => r(s));
        s.on("error", () => undefined);
      });
    const a = await open();
    const b = await open();
    await Bun.sleep(50);
    const c = await open();
    const cClosed = await new Promise((r) => {
      c.once("close", () => r(true));
      setTimeout(() => r(false), 2000);
    });
    expect(cClosed).toBe(true);
    const closed = Promise.all([a, b].map((s) => new Promise((r) => s.once("close", r))));
    await proxy.close();
    await closed;
    const refused = await new Promise((r) => {
      const s = net.connect(p.http, "127.0.0.1");
      s.on("error", (e) => r((e as NodeJS.ErrnoException).code));
      s.on("connect", () => r("connected"));
    });
    expect(refused).toBe("ECONNREFUSED");
  });
});
