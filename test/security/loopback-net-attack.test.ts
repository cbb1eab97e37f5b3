/**
 * Attacks on the server's loopback network (src/sandbox/linux/loopback-net.ts, docs/sessions.md "The server's
 * loopback network (bubblewrap)"): a network-off command of a server whose calls share one private namespace tries to
 * widen it (an interface, an address, a route), to leave it (the host's loopback listener, a host daemon's Unix
 * socket), and to find its way into the namespace of the host; each fails, while the shared loopback itself works
 * (the premise, checked first in each test). Through the compiled binary and the MCP SDK client, under bubblewrap.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { probeBwrap } from "../../src/sandbox/linux/bwrap.ts";

const bwrapMissing = probeBwrap(true).ok ? undefined : "bubblewrap cannot run here";
const skip = skipWithout("loopback network attacks", shellsMissing() ?? toolMissing("python3", "curl") ?? bwrapMissing);
const sessions: Session[] = [];
const servers: Server[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
  for (const l of servers) l.close();
});

function workspace(): string {
  const d = join(CONF_BASE, `lo-attack-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  return d;
}

/** A bubblewrap server (network off, workspace-write on `ws`) whose session serves `ws` on 127.0.0.1:`port`. */
async function serverWithDevServer(ws: string, port: number): Promise<Session> {
  const s = await startServe({ args: ["--sandbox-backend", "bwrap"] });
  sessions.push(s);
  await s.sandboxState({ type: "workspace-write", network_access: false, writable_roots: [ws] }, ws);
  writeFileSync(join(ws, "marker.txt"), "dev\n");
  const raw = (await s.client.callTool(
    { name: "exec_command", arguments: { cmd: `python3 -u -m http.server ${port} --bind 127.0.0.1`, workdir: ws, yield_time_ms: 1000 } },
    undefined,
    { timeout: 120_000 },
  )) as { content: { text: string }[] };
  expect(raw.content.map((c) => c.text).join("\n")).toMatch(/^Process running with session ID \d+$/m);
  // The premise: a later call of the same server reaches it.
  const got = await sh(
    s,
    ws,
    `for i in $(seq 100); do curl -sf -m 2 http://127.0.0.1:${port}/marker.txt && exit 0; sleep 0.1; done; echo unreachable`,
  );
  expect(got).toBe("dev\n");
  return s;
}

async function sh(s: Session, ws: string, command: string): Promise<string> {
  return (await s.shell({ command, workdir: ws, login: false, timeout_ms: 60_000 })).out.output;
}

/** A TCP listener on the host's 127.0.0.1 that counts the connections it gets. */
async function hostListener(): Promise<{ port: number; connections: () => number }> {
  let n = 0;
  const l = createServer((c) => {
    n++;
    c.destroy();
  });
  servers.push(l);
  await new Promise<void>((r) => l.listen(0, "127.0.0.1", r));
  return { port: (l.address() as { port: number }).port, connections: () => n };
}

function freePort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = l.port;
  l.stop(true);
  return p;
}

describe.skipIf(skip)("attacks on the server's loopback network (bubblewrap, network off)", () => {
  test("a command cannot add an interface, an address or a route to it: it stays lo only", async () => {
    const ws = workspace();
    const s = await serverWithDevServer(ws, freePort());
    const py = [
      "import socket, subprocess",
      "try:",
      "    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); print('netlink made')",
      "except OSError as e:",
      "    print('netlink', e.errno)",
      "for cmd in (['ip', 'link', 'add', 'dummy0', 'type', 'dummy'], ['ip', 'addr', 'add', '10.9.9.9/24', 'dev', 'lo'], ['ip', 'route', 'add', 'default', 'dev', 'lo']):",
      "    try:",
      "        r = subprocess.run(cmd, capture_output=True)",
      "        print(cmd[1], 'exit', r.returncode)",
      "    except FileNotFoundError:",
      "        print(cmd[1], 'no ip')",
    ].join("\n");
    writeFileSync(join(ws, "widen.py"), py);
    const out = await sh(s, ws, "python3 widen.py");
    expect(out).toContain("netlink 1\n");
    expect(out).not.toMatch(/exit 0$/m);
    // Seen from a later call: still lo only, no address but 127.0.0.1 and ::1, no route.
    expect(await sh(s, ws, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")).toBe("lo\n");
    expect(await sh(s, ws, "tail -n +2 /proc/net/route | wc -l")).toBe("0\n");
    expect(await sh(s, ws, "cat /proc/net/if_inet6 2>/dev/null | cut -d' ' -f1 | sort -u")).toMatch(
      /^(00000000000000000000000000000001\n)?$/,
    );
  });

  test("a command cannot reach the host's loopback listener nor a host daemon's Unix socket from it", async () => {
    const ws = workspace();
    const s = await serverWithDevServer(ws, freePort());
    const host = await hostListener();
    // A "daemon" listening on a Unix socket file the sandbox can see (the workspace).
    const sock = join(ws, "daemon.sock");
    let unixHits = 0;
    const d = createServer((c) => {
      unixHits++;
      c.destroy();
    });
    servers.push(d);
    await new Promise<void>((r) => d.listen(sock, r));
    const py = [
      "import socket",
      "try:",
      `    socket.create_connection(('127.0.0.1', ${host.port}), timeout=3); print('host tcp reached')`,
      "except OSError as e:",
      "    print('host tcp', e.errno)",
      "try:",
      "    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
      `    u.connect(${JSON.stringify(sock)}); print('unix reached')`,
      "except OSError as e:",
      "    print('unix', e.errno)",
    ].join("\n");
    writeFileSync(join(ws, "leave.py"), py);
    const out = await sh(s, ws, "python3 leave.py");
    expect(out).toMatch(/^host tcp 111$/m); // ECONNREFUSED: nothing listens on that port in the server's namespace
    expect(out).toContain("unix 1\n"); // EPERM: no AF_UNIX socket can be made
    expect(host.connections()).toBe(0);
    expect(unixHits).toBe(0);
  });

  test("a command sees no process outside its own call and cannot enter another namespace", async () => {
    const ws = workspace();
    const s = await serverWithDevServer(ws, freePort());
    // Its own pid namespace: the dev server's processes (another call) are not even visible, let alone the host's.
    const pids = await sh(s, ws, "ls -d /proc/[0-9]* | wc -l");
    expect(Number(pids.trim())).toBeLessThan(10);
    const py = [
      "import ctypes, os",
      "libc = ctypes.CDLL(None, use_errno=True)",
      "for ns in ('/proc/1/ns/net', '/proc/1/ns/user'):",
      "    fd = os.open(ns, os.O_RDONLY)",
      "    if libc.setns(fd, 0) == 0: print(ns, 'entered')",
      "    else: print(ns, 'refused', ctypes.get_errno())",
    ].join("\n");
    writeFileSync(join(ws, "enter.py"), py);
    const out = await sh(s, ws, "python3 enter.py");
    expect(out).toMatch(/^\/proc\/1\/ns\/net refused [1-9]\d*\n\/proc\/1\/ns\/user refused [1-9]\d*\n$/);
  });
});
