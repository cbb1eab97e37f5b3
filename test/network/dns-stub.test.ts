/**
 * Names the policy refuses are never resolved (issue 24): a DNS stub on 127.0.0.1:53 logs every query it gets, in a
 * private network namespace (an outer bubblewrap with `/etc/resolv.conf` pointing at the stub, names absent from
 * its hosts file) where the upstream server and `shellmcp sandbox linux --allow-domain` also run. The stub must see
 * queries for the allowed name only: none for refused or denied names (plain HTTP, CONNECT, SOCKS5 with remote
 * resolution), none from inside the sandbox (no resolver reachable there).
 */
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../helpers/binary.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

const root = process.getuid?.() === 0;
const skip = skipWithout(
  "DNS stub suite",
  toolMissing("bwrap", "curl") ?? shellsMissing() ?? (root ? undefined : "needs root to bind port 53 in a private network namespace"),
);

/** Runs inside the outer namespace: the stub, the upstream, then the sandboxed command; prints a JSON report. */
const HARNESS = `
const [shellmcp, script] = process.argv.slice(2);
const queries = [];
const dns = await Bun.udpSocket({
  hostname: "127.0.0.1",
  port: 53,
  socket: {
    data(sock, buf, port, addr) {
      const b = Buffer.from(buf);
      let i = 12;
      const labels = [];
      while (i < b.length && b[i] !== 0) { labels.push(b.subarray(i + 1, i + 1 + b[i]).toString()); i += 1 + b[i]; }
      const name = labels.join(".");
      const qtype = b.readUInt16BE(i + 1);
      queries.push(name);
      const known = name === "dns-allowed.test";
      const head = Buffer.from(b.subarray(0, 12));
      head.writeUInt16BE(0x8180 | (known ? 0 : 3), 2); // response, RD+RA, NOERROR or NXDOMAIN
      head.writeUInt16BE(1, 4);
      head.writeUInt16BE(known && qtype === 1 ? 1 : 0, 6);
      head.writeUInt32BE(0, 8);
      const question = b.subarray(12, i + 5);
      const answer = known && qtype === 1 ? Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 127, 0, 0, 1]) : Buffer.alloc(0);
      sock.send(Buffer.concat([head, question, answer]), port, addr);
    },
  },
});
const up = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response("hello " + req.headers.get("host") + "\\n") });
const p = Bun.spawn([shellmcp, "sandbox", "linux", "--full-auto", "--allow-domain", "dns-allowed.test", "--allow-domain", "*.deny-me.test",
  "--deny-domain", "x.deny-me.test", "--allow-local-binding", "--", "bash", "-c", script.replaceAll("PORT", String(up.port))],
  { stdout: "pipe", stderr: "pipe", env: process.env });
const [out, err] = [await new Response(p.stdout).text(), await new Response(p.stderr).text()];
const code = await p.exited;
up.stop(true);
dns.close();
console.log(JSON.stringify({ code, out, err, queries }));
`;

describe.skipIf(skip)("refused names are never resolved (DNS stub)", () => {
  test("the stub sees the allowed name only", async () => {
    const dir = join(CONF_BASE, "dns-stub");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "harness.ts"), HARNESS);
    writeFileSync(join(dir, "resolv.conf"), "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n");
    writeFileSync(join(dir, "hosts"), "127.0.0.1 localhost\n");
    const script = [
      "curl -sS http://dns-allowed.test:PORT/",
      "curl -sS -o /dev/null -w '%{http_code}\\n' http://secret-data-123.notallowed.test:PORT/",
      "curl -sS -o /dev/null -w '%{http_code}\\n' http://x.deny-me.test:PORT/",
      "curl -sS -p -o /dev/null http://connect-secret.notallowed.test:PORT/ 2>/dev/null; echo connect=$?",
      'curl -sS -x "$ALL_PROXY" -o /dev/null http://socks-secret.notallowed.test:PORT/ 2>/dev/null; echo socks=$?',
      "getent ahosts leak-from-sandbox.test >/dev/null; echo getent=$?",
    ].join("; ");
    const p = Bun.spawn(
      [
        "bwrap",
        "--dev-bind",
        "/",
        "/",
        "--unshare-net",
        "--cap-add",
        "CAP_NET_BIND_SERVICE",
        "--bind",
        join(dir, "resolv.conf"),
        "/etc/resolv.conf",
        "--bind",
        join(dir, "hosts"),
        "/etc/hosts",
        "--tmpfs",
        "/tmp",
        "--",
        process.execPath,
        join(dir, "harness.ts"),
        ensureBinary(),
        script,
      ],
      { cwd: dir, env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: dir, CODEX_HOME: dir, LC_ALL: "C" }, stdout: "pipe", stderr: "pipe" },
    );
    const [out, err] = [await new Response(p.stdout).text(), await new Response(p.stderr).text()];
    expect(await p.exited, err).toBe(0);
    const r = JSON.parse(out.trim().split("\n").pop()!) as { code: number; out: string; err: string; queries: string[] };
    expect(r.out).toContain("hello dns-allowed.test:");
    expect(r.out).toContain("403\n403\nconnect=56\nsocks=97\n");
    expect(r.out).not.toContain("getent=0");
    expect(r.err).toContain("secret-data-123.notallowed.test");
    expect(r.err).toContain("x.deny-me.test");
    expect(r.queries.length).toBeGreaterThan(0);
    expect([...new Set(r.queries)]).toEqual(["dns-allowed.test"]);
  }, 60_000);
});
