/**
 * Network proxy mode end to end (issue 24): the compiled `shellmcp serve` driven by the MCP SDK client, with
 * local servers only. The server runs in a private mount namespace (an outer bubblewrap that binds a hosts file
 * over /etc/hosts) so that `allowed.test` and friends resolve to 127.0.0.1 for it; nothing here reaches the real
 * network. Both Linux backends: bubblewrap (private network namespace + bridge) and Landlock (ABI ≥ 4 port rules;
 * below, refused).
 */
import { CONF_BASE, RUN_TMP } from "../helpers/test-dirs.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../helpers/binary.ts";
import { closeAll, SERVER_PROC_HIDDEN, serveWithPid, type AttackSession } from "../helpers/attack.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { landlockAbi } from "../../src/sandbox/linux/landlock.ts";
import { withoutBlocked, type StartOptions } from "../helpers/mcp.ts";
import { agentNetworkConfig } from "../helpers/network.ts";

const skip = skipWithout("network proxy suite", shellsMissing() ?? toolMissing("bwrap", "curl", "perl"));
const BIG = randomBytes(30 * 1024 * 1024);
const BIG_SHA = createHash("sha256").update(BIG).digest("hex");
const NAMES = [
  "allowed.test",
  "api.sub.test",
  "sub.test",
  "deep.test",
  "a.deep.test",
  "b.deep.test",
  "rule.test",
  "other.test",
  "declined.test",
  "rule-me.test",
];
let upstream: ReturnType<typeof Bun.serve>;
let port: number;
let hosts: string;

beforeAll(() => {
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const u = new URL(req.url);
      if (u.pathname === "/big") return new Response(BIG);
      return new Response(`hello ${req.method} ${req.headers.get("host")}\n`);
    },
  });
  port = upstream.port!;
  hosts = join(RUN_TMP, "hosts.test");
  writeFileSync(hosts, `127.0.0.1 localhost\n${NAMES.map((n) => `127.0.0.1 ${n}`).join("\n")}\n`);
});
afterAll(async () => {
  await closeAll();
  await upstream.stop(true);
});

const CONFIG = (extra = "") =>
  agentNetworkConfig({
    allowLocalBinding: true,
    extra,
    domains: { "allowed.test": "allow", "*.sub.test": "allow", "**.deep.test": "allow", "a.deep.test": "deny", "127.0.0.3": "deny" },
  });
const RULES = 'network_rule(host="rule.test", protocol="https", decision="allow")\n';

function workspace(): string {
  const d = join(CONF_BASE, `net-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  return d;
}

/** A server in its own mount namespace with the test hosts file, `config.toml` in its CODEX_HOME. */
async function serve(
  config: string,
  backend: "bwrap" | "landlock",
  env: Record<string, string> = {},
  onElicit?: StartOptions["onElicit"],
  rules: string = RULES,
): Promise<AttackSession & { ws: string }> {
  const codexHome = join(CONF_BASE, `home-${Math.random().toString(36).slice(2)}`);
  mkdirSync(codexHome, { recursive: true });
  writeFileSync(join(codexHome, "config.toml"), config);
  const s = await serveWithPid({
    codexHome,
    rules,
    command: ["bwrap", "--dev-bind", "/", "/", "--bind", hosts, "/etc/hosts", "--", ensureBinary()],
    args: ["--sandbox-backend", backend],
    env,
    onElicit,
  });
  const ws = workspace();
  await s.sandboxState({ type: "workspace-write", network_access: true, writable_roots: [ws] }, ws);
  return Object.assign(s, { ws });
}

async function sh(s: AttackSession & { ws: string }, command: string) {
  const r = await s.shell({ command, workdir: s.ws, login: false, timeout_ms: 60_000 });
  return r.out;
}

/** The pid of the shellmcp process under the outer bubblewrap started for `s`. */
function serverPid(s: AttackSession): number {
  const walk = (pid: number): number | undefined => {
    try {
      if (readlinkSync(`/proc/${pid}/exe`).endsWith("/shellmcp")) return pid;
    } catch {}
    let kids: string[] = [];
    try {
      kids = readdirSync(`/proc/${pid}/task`).flatMap((t) =>
        readFileSync(`/proc/${pid}/task/${t}/children`, "utf8").trim().split(/\s+/).filter(Boolean),
      );
    } catch {}
    for (const k of kids) {
      const f = walk(Number(k));
      if (f !== undefined) return f;
    }
    return undefined;
  };
  const p = walk(s.pid);
  if (p === undefined) throw new Error("shellmcp process not found");
  return p;
}

/** Socket inodes the process holds, and those of them listening on TCP (host namespace tables). */
function sockets(pid: number): { all: number; listening: number } {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m !== null) inodes.add(m[1]!);
    } catch {}
  }
  let listening = 0;
  for (const t of ["tcp", "tcp6"]) {
    for (const line of readFileSync(`/proc/${pid}/net/${t}`, "utf8").split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === "0A" && inodes.has(f[9]!)) listening++;
    }
  }
  return { all: inodes.size, listening };
}

describe.skipIf(skip)("network proxy mode, bubblewrap backend (compiled binary, SDK client)", () => {
  let s: AttackSession & { ws: string };
  beforeAll(async () => {
    s = await serve(CONFIG(), "bwrap");
  });

  test("allowed host; case and trailing dot; both wildcard forms; a network_rule host", async () => {
    const o = await sh(
      s,
      [
        `http://allowed.test:${port}/`,
        `http://ALLOWED.test.:${port}/`,
        `http://api.sub.test:${port}/`,
        `http://deep.test:${port}/`,
        `http://b.deep.test:${port}/`,
        `http://rule.test:${port}/`,
      ]
        .map((u) => `curl -sS ${u}`)
        .join("; "),
    );
    expect(o.exit_code).toBe(0);
    expect(o.output).toBe(
      ["allowed.test", "ALLOWED.test.", "api.sub.test", "deep.test", "b.deep.test", "rule.test"]
        .map((h) => `hello GET ${h}:${port}\n`)
        .join(""),
    );
  });

  test("refused: not allowed, deny beats allow, apex of *.x; Codex's answers; the tool result names each host with the reason", async () => {
    const o = await sh(
      s,
      `curl -sS -i http://other.test:${port}/; echo; curl -sS http://a.deep.test:${port}/; echo; curl -sS -o /dev/null -w '%{http_code}\\n' http://sub.test:${port}/`,
    );
    expect(o.output).toContain("HTTP/1.1 403 Forbidden");
    expect(o.output).toContain("x-proxy-error: blocked-by-allowlist");
    expect(o.output).toContain(
      `{"status":"blocked","host":"other.test","reason":"not_allowed","decision":"deny","source":"baseline_policy","protocol":"http","port":${port},"message":"Domain not in allowlist."}`,
    );
    expect(o.output).toContain('"reason":"denied"');
    expect(o.output).toContain(`shellmcp: network access refused: other.test:${port} (http): not_allowed — Domain not in allowlist.\n`);
    expect(o.output).toContain(
      `shellmcp: network access refused: a.deep.test:${port} (http): denied — Domain denied by the sandbox policy.\n`,
    );
    expect(o.output).toContain(`shellmcp: network access refused: sub.test:${port} (http): not_allowed`);
  });

  test("CONNECT and SOCKS5 (allowed and refused); the proxy environment is Codex's", async () => {
    const o = await sh(
      s,
      [
        `curl -sS -p http://allowed.test:${port}/`,
        `curl -sS -p http://other.test:${port}/; echo "exit=$?"`,
        `curl -sS -x "$ALL_PROXY" http://allowed.test:${port}/`,
        `curl -sS -x "$ALL_PROXY" http://other.test:${port}/; echo "exit=$?"`,
        `env | grep -E '^(HTTP_PROXY|https_proxy|ALL_PROXY|NO_PROXY|no_proxy|CODEX_NETWORK_PROXY_ACTIVE|CODEX_NETWORK_ALLOW_LOCAL_BINDING|NPM_CONFIG_PROXY|PIP_PROXY|NODE_USE_ENV_PROXY)=' | sort`,
        `echo "disabled=\${CODEX_SANDBOX_NETWORK_DISABLED-unset}"`,
      ].join("; "),
    );
    expect(o.output).toContain(`hello GET allowed.test:${port}\n`);
    expect(o.output).toContain("CONNECT tunnel failed, response 403");
    expect(o.output).toContain("exit=56");
    expect(o.output).toContain("exit=97");
    expect(o.output).toContain(
      [
        "ALL_PROXY=socks5h://127.0.0.1:8081",
        "CODEX_NETWORK_ALLOW_LOCAL_BINDING=1",
        "CODEX_NETWORK_PROXY_ACTIVE=1",
        "HTTP_PROXY=http://127.0.0.1:3128",
        "NODE_USE_ENV_PROXY=1",
        "NO_PROXY=localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16",
        "NPM_CONFIG_PROXY=http://127.0.0.1:3128",
        "PIP_PROXY=http://127.0.0.1:3128",
        "https_proxy=http://127.0.0.1:3128",
        "no_proxy=localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16",
      ].join("\n"),
    );
    expect(o.output).toContain("disabled=unset");
    expect(o.output).toContain(`(https_connect): not_allowed`);
    expect(o.output).toContain(`(socks5_tcp): not_allowed`);
  });

  test("plain-HTTP Host mismatch is a 400; IP spellings of a denied address are denied", async () => {
    const req = (target: string, host: string) =>
      `exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://${target}/ HTTP/1.1\\r\\nHost: ${host}\\r\\n\\r\\n' >&3; grep -aoE '^HTTP/1.1 [0-9]+ [A-Za-z ]+|"reason":"[a-z_]*"' <&3; exec 3<&-`;
    const o = await sh(
      s,
      [
        req(`allowed.test:${port}`, `other.test:${port}`),
        req("2130706435:80", "2130706435:80"),
        req("127.0.0.3:80", "127.0.0.3:80"),
        req("0x7f.0.0.3:80", "0x7f.0.0.3:80"),
        req("127.0.3:80", "127.0.3:80"),
        req("[::ffff:127.0.0.3]:80", "[::ffff:127.0.0.3]:80"),
      ].join("; "),
    );
    const lines = o.output.split("\n").filter((l) => l.startsWith("HTTP/") || l.startsWith('"reason"'));
    expect(lines[0]).toBe("HTTP/1.1 400 Bad Request");
    expect(lines.slice(1)).toEqual(Array.from({ length: 5 }, () => ["HTTP/1.1 403 Forbidden", '"reason":"denied"']).flat());
    // Reported in the spelling the request used, as Codex names the host in its answer.
    for (const h of ["2130706435", "127.0.0.3", "0x7f.0.0.3", "127.0.3", "[::ffff:127.0.0.3]"])
      expect(o.output).toContain(`shellmcp: network access refused: ${h}:80 (http): denied — Domain denied by the sandbox policy.\n`);
  });

  test("no direct egress: TCP, UDP, DNS, new AF_UNIX sockets (socketpair still works)", async () => {
    const o = await sh(
      s,
      [
        `curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:${port}/; echo "tcp=$?"`,
        `(echo x > /dev/udp/127.0.0.1/53) 2>&1; echo "udp=$?"`,
        `getent ahosts example.invalid >/dev/null; echo "dns=$?"`,
        `perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die "unix: $!\\n"; print "unix: made\\n"' 2>&1`,
        `perl -MSocket -e 'socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) or die "pair: $!\\n"; print "pair: made\\n"' 2>&1`,
        `perl -MSocket -e 'socket(my $s, AF_INET, SOCK_DGRAM, 0) or die "dgram: $!\\n"; print "dgram: made\\n"' 2>&1`,
      ].join("; "),
    );
    expect(o.output).toContain("tcp=7");
    expect(o.output).toMatch(/Operation not permitted[\s\S]*udp=1/);
    expect(o.output).not.toContain("dns=0");
    expect(o.output).toContain("unix: Operation not permitted");
    expect(o.output).toContain("pair: made");
    expect(o.output).toContain("dgram: Operation not permitted");
  });

  test("a 30 MB download through a rate-limited client arrives byte-identical; 50 parallel downloads", async () => {
    const o = await sh(
      s,
      `curl -sS --limit-rate 15M -o big http://allowed.test:${port}/big && sha256sum big | cut -d' ' -f1; ` +
        `for i in $(seq 50); do curl -sS -o /dev/null -w '%{http_code}\\n' http://allowed.test:${port}/ & done | sort | uniq -c`,
    );
    expect(o.output).toBe(`${BIG_SHA}\n     50 200\n`);
  }, 90_000);

  test("parallel calls each get their own namespace and proxy; refusals stay with their call", async () => {
    const rs = await Promise.all(
      ["allowed.test", "other.test", "b.deep.test", "a.deep.test"].map((h) =>
        sh(s, `curl -sS -o /dev/null -w '%{http_code}\\n' http://${h}:${port}/`),
      ),
    );
    expect(rs.map((r) => r.output.split("\n")[0])).toEqual(["200", "403", "200", "403"]);
    expect(rs[0]!.output).not.toContain("refused");
    expect(rs[1]!.output).toContain("other.test");
    expect(rs[1]!.output).not.toContain("a.deep.test");
    expect(rs[3]!.output).toContain("a.deep.test");
    expect(rs[3]!.output).not.toContain("other.test");
  });

  test.skipIf(skipWithout("the server's sockets after proxied calls", SERVER_PROC_HIDDEN))(
    "nothing of a call stays open in the server after it (no listener, no socket per call)",
    async () => {
      const pid = serverPid(s);
      const call = () => sh(s, `curl -sS -o /dev/null http://allowed.test:${port}/; curl -sS -o /dev/null http://other.test:${port}/`);
      await call();
      const settle = async (limit: number) => {
        let now = sockets(pid);
        for (let i = 0; i < 40 && now.all > limit; i++) {
          await Bun.sleep(50);
          now = sockets(pid);
        }
        return now;
      };
      const before = await settle(0);
      // Quick commands too: their listeners may arrive after the call has ended (they must be closed then as well).
      for (let i = 0; i < 5; i++) {
        await call();
        await sh(s, "true");
      }
      expect(sockets(pid).listening).toBe(0);
      // Before the fix for adopted listeners, every call left its two namespace listeners open in the server.
      expect((await settle(before.all)).all).toBeLessThanOrEqual(before.all);
    },
  );
});

describe.skipIf(skip)("network proxy mode: Codex 0.169's per-call permission profile", () => {
  test('`network: "enabled"` in the call\'s _meta: proxied; `"restricted"`: no network at all', async () => {
    const s = await serve(CONFIG(), "bwrap");
    const meta = (network: "enabled" | "restricted") => ({
      "codex/sandbox-state": {
        permissionProfile: {
          type: "managed",
          file_system: {
            type: "restricted",
            entries: [
              { path: { type: "special", value: { kind: "root" } }, access: "read" },
              { path: { type: "path", path: s.ws }, access: "write" },
            ],
          },
          network,
        },
        sandboxCwd: `file://${s.ws}`,
        useLegacyLandlock: false,
      },
    });
    const call = async (network: "enabled" | "restricted") => {
      const raw = (await s.client.callTool(
        {
          name: "shell",
          arguments: {
            command: `curl -sS --max-time 5 http://allowed.test:${port}/; curl -sS -o /dev/null -w '%{http_code}\\n' --max-time 5 http://other.test:${port}/; echo "proxy=\${HTTP_PROXY-none}"`,
            workdir: s.ws,
            login: false,
          },
          _meta: meta(network),
        },
        undefined,
        { timeout: 60_000 },
      )) as { content: { text: string }[] };
      return (JSON.parse(raw.content[0]!.text) as { output: string }).output;
    };
    const on = await call("enabled");
    expect(on).toContain(`hello GET allowed.test:${port}\n403\nproxy=http://127.0.0.1:3128\n`);
    const off = await call("restricted");
    expect(off).toContain("proxy=none");
    expect(off).not.toContain("hello");
  });
});

describe.skipIf(skip)("network proxy mode: limited mode, feature off", () => {
  test("limited mode: GET passes, POST is refused (method_not_allowed), CONNECT refused", async () => {
    const s = await serve(CONFIG('mode = "limited"'), "bwrap");
    const o = await sh(
      s,
      `curl -sS http://allowed.test:${port}/; curl -sS -X POST -d x http://allowed.test:${port}/; echo; curl -sS -p http://allowed.test:${port}/; echo "exit=$?"`,
    );
    expect(o.output).toContain(`hello GET allowed.test:${port}\n`);
    expect(o.output).toContain('"reason":"method_not_allowed"');
    expect(o.output).toContain("exit=56");
    expect(o.output).toContain("(http): method_not_allowed — Method not allowed in limited mode.");
  });

  test("feature off: network on stays full network, with no proxy variables (Codex)", async () => {
    const s = await serve(CONFIG().replace("network_proxy = true", "network_proxy = false"), "bwrap");
    const o = await sh(s, `curl -sS --noproxy '*' http://127.0.0.1:${port}/; echo "proxy=\${HTTP_PROXY-unset}"`);
    expect(o.output).toBe(`hello GET 127.0.0.1:${port}\nproxy=unset\n`);
  });
});

describe.skipIf(skip)("network proxy mode: local targets, asking about unknown hosts", () => {
  test("without allow_local_binding: a name resolving to 127.0.0.1 is refused (not_allowed_local), an exact 127.0.0.1 entry passes, NO_PROXY is empty", async () => {
    const s = await serve(
      CONFIG().replace("allow_local_binding = true", "allow_local_binding = false") + '"127.0.0.1" = "allow"\n',
      "bwrap",
    );
    const o = await sh(s, `curl -sS http://allowed.test:${port}/; echo; curl -sS http://127.0.0.1:${port}/; echo "no_proxy=[$NO_PROXY]"`);
    expect(o.output).toContain('"reason":"not_allowed_local"');
    expect(o.output).toContain(`hello GET 127.0.0.1:${port}\n`);
    expect(o.output).toContain("no_proxy=[]");
    expect(o.output).toContain(`allowed.test:${port} (http): not_allowed_local — Sandbox policy blocks local/private network addresses.`);
  });

  test("elicitation: once (asked again next call), always (a network_rule appended, not asked again), decline, denied never asked", async () => {
    const answers: Record<string, { action: "accept" | "decline"; content?: Record<string, string> }> = {
      other: { action: "accept", content: { scope: "once" } },
      "rule-me": { action: "accept", content: { scope: "always" } },
      declined: { action: "decline" },
    };
    const s = await serve(CONFIG(), "bwrap", {}, (message) => answers[/to ([a-z-]+)\./.exec(message)![1]!]!);
    const o1 = await sh(s, `curl -sS http://other.test:${port}/; curl -sS -o /dev/null -w '%{http_code}\\n' http://a.deep.test:${port}/`);
    expect(withoutBlocked(o1.output)).toBe(
      `hello GET other.test:${port}\n403\nshellmcp: network access refused: a.deep.test:${port} (http): denied — Domain denied by the sandbox policy.\n`,
    );
    expect(o1.output).toContain(`\nshellmcp: blocked (network) a.deep.test:${port}: a deny entry`);
    expect(s.elicitations).toEqual([
      `Allow network access to other.test:${port}? (the command's http request is not in the network allow list)`,
    ]);
    await sh(s, `curl -sS -o /dev/null http://other.test:${port}/`);
    expect(s.elicitations.length).toBe(2); // "once" held for one call only
    const o2 = await sh(
      s,
      `curl -sS -o /dev/null -w '%{http_code}\\n' http://declined.test:${port}/; curl -sS -p http://rule-me.test:${port}/; curl -sS http://rule-me.test:${port}/`,
    );
    expect(o2.output).toContain(`403\nhello GET rule-me.test:${port}\nhello GET rule-me.test:${port}\n`);
    expect(o2.output).toContain(`declined.test:${port} (http): not_allowed`);
    expect(s.elicitations.length).toBe(4);
    expect(readFileSync(join(s.codexHome, "rules", "default.rules"), "utf8")).toContain(
      'network_rule(host="rule-me.test", protocol="https", decision="allow", justification="Allow https_connect access to rule-me.test")\n',
    );
  });
});

describe.skipIf(skip)("network proxy mode: escalated programs go through the same proxy", () => {
  for (const backend of ["bwrap", "landlock"] as const) {
    test(`${backend}: a program escalated by a rule runs in its room with the proxy only`, async () => {
      const codexRules = 'prefix_rule(pattern=["curl"], decision="allow")\n';
      const s = await serve(CONFIG(), backend, {}, undefined, RULES + codexRules);
      const o = await sh(
        s,
        [
          `curl -sS http://allowed.test:${port}/`,
          `curl -sS -o /dev/null -w '%{http_code}\\n' http://other.test:${port}/`,
          `curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:${port}/; echo "direct=$?"`,
        ].join("; "),
      );
      expect(o.output).toContain(`hello GET allowed.test:${port}\n403\n`);
      expect(o.output).toContain("direct=7");
      expect(o.output).toContain(`shellmcp: network access refused: other.test:${port} (http): not_allowed`);
      expect(s.stderr()).toMatch(new RegExp(`escalated.*curl.*${backend === "bwrap" ? "bwrap" : "landlock"}`));
    });
  }
});

describe.skipIf(skip)("shellmcp sandbox linux --allow-domain / --deny-domain", () => {
  const codexHome = join(CONF_BASE, "cli-codex-home");
  mkdirSync(codexHome, { recursive: true });
  const cli = async (args: string[], script: string, env: Record<string, string> = {}) => {
    const p = Bun.spawn(
      [
        "bwrap",
        "--dev-bind",
        "/",
        "/",
        "--bind",
        hosts,
        "/etc/hosts",
        "--",
        ensureBinary(),
        "sandbox",
        "linux",
        ...args,
        "--",
        "bash",
        "-c",
        script,
      ],
      {
        cwd: workspace(),
        env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: CONF_BASE, CODEX_HOME: codexHome, ...env },
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const [out, err] = [await new Response(p.stdout).text(), await new Response(p.stderr).text()];
    return { code: await p.exited, out, err };
  };
  for (const backend of ["bwrap", "landlock"] as const) {
    test(`${backend}: allowed, denied (deny wins), not allowed; no direct egress; refusals on stderr`, async () => {
      const r = await cli(
        ["--backend", backend, "--full-auto", "--allow-domain", "**.deep.test", "--deny-domain", "a.deep.test", "--allow-local-binding"],
        `curl -sS http://b.deep.test:${port}/; for h in a.deep.test other.test; do curl -sS -o /dev/null -w '%{http_code}\\n' http://$h:${port}/; done; ` +
          `curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:${port}/ 2>/dev/null; echo "direct=$?"; exit 3`,
      );
      expect(r.out).toBe(`hello GET b.deep.test:${port}\n403\n403\ndirect=7\n`);
      expect(r.code).toBe(3);
      expect(r.err).toBe(
        `shellmcp: network access refused: a.deep.test:${port} (http): denied — Domain denied by the sandbox policy.\n` +
          `shellmcp: network access refused: other.test:${port} (http): not_allowed — Domain not in allowlist.\n`,
      );
    });
  }

  test.skipIf(
    skipWithout(
      "Landlock proxy mode in its own pid namespace",
      process.getuid?.() !== 0 ? "needs root (unshare of a pid namespace)" : landlockAbi() < 4 ? "Landlock ABI < 4" : undefined,
    ),
  )("Landlock below ABI 6 (simulated 5) runs the command as its own pid namespace's init with the proxy rules kept", async () => {
    const r = await cli(
      ["--backend", "landlock", "--full-auto", "--allow-domain", "allowed.test", "--allow-local-binding"],
      `echo "pid=$$"; curl -sS http://allowed.test:${port}/; curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:${port}/ 2>/dev/null; echo "direct=$?"`,
      { SHELLMCP_SIMULATE_LANDLOCK_ABI: "5" },
    );
    expect(r.out).toBe(`pid=1\nhello GET allowed.test:${port}\ndirect=7\n`);
  });

  test("a deny * is refused with Codex's message", async () => {
    const r = await cli(["--deny-domain", "*"], "true");
    expect(r.code).toBe(2);
    expect(r.err).toContain("invalid value for network.denied_domains: *");
  });
});

const abi = landlockAbi();
describe.skipIf(skip || skipWithout("Landlock proxy suite", abi >= 4 ? undefined : `Landlock ABI ${abi} < 4`))(
  "network proxy mode, Landlock backend",
  () => {
    test("allowed and refused through the host-loopback proxy; direct TCP elsewhere refused; nothing listening after", async () => {
      const s = await serve(CONFIG(), "landlock");
      const o = await sh(
        s,
        [
          `curl -sS http://allowed.test:${port}/`,
          `curl -sS -o /dev/null -w '%{http_code}\\n' http://other.test:${port}/`,
          `curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:${port}/; echo "direct=$?"`,
          `perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die "unix: $!\\n"' 2>&1`,
          `echo "$HTTP_PROXY"`,
        ].join("; "),
      );
      expect(o.output).toContain(`hello GET allowed.test:${port}\n403\n`);
      expect(o.output).toContain("direct=7");
      expect(o.output).toContain("unix: Operation not permitted");
      const proxyUrl = o.output
        .trim()
        .split("\n")
        .find((l) => l.startsWith("http://127.0.0.1:"))!;
      const proxyPort = Number(proxyUrl.split(":").pop());
      expect(proxyPort).toBeGreaterThan(0);
      const refused = await new Promise((r) => {
        const c = require("node:net").connect(proxyPort, "127.0.0.1");
        c.on("error", (e: NodeJS.ErrnoException) => r(e.code));
        c.on("connect", () => (c.destroy(), r("connected")));
      });
      expect(refused).toBe("ECONNREFUSED");
    });

    test("below ABI 4 proxy mode is refused with a clear message, never widened", async () => {
      const s = await serve(CONFIG(), "landlock", { SHELLMCP_SIMULATE_LANDLOCK_ABI: "3" });
      const o = await sh(s, `curl -sS http://allowed.test:${port}/; echo reached`);
      expect(o.output).not.toContain("reached");
      // Below ABI 6 a user other than root is refused first for the pid namespace signals need (src/sandbox/linux/run.ts).
      expect(o.output).toContain(
        process.getuid?.() === 0
          ? "network proxy mode under Landlock needs Landlock ABI 4 (Linux 6.7+)"
          : "Landlock ABI 3 on this kernel cannot keep a sandboxed command from signalling your other processes",
      );
    });
  },
);
