/**
 * Issue 30, item 5: a person's network approval is remembered at the scope it was asked — host, port and
 * protocol — not for the whole host. The compiled `serve` in proxy mode (bubblewrap), an SDK client that answers
 * elicitations; two listeners on 127.0.0.1. A yes ("This command" or "This session") for `127.0.0.1:P1` must not
 * let the command reach `127.0.0.1:P2` unasked: P2 gets its own question, and when that one is declined, the P2
 * listener receives nothing.
 */
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { agentNetworkConfig } from "../helpers/network.ts";

const skip = skipWithout("approval-scope suite", shellsMissing() ?? toolMissing("bwrap", "curl"));

/** Two local HTTP listeners; `hits[i]` counts the requests listener i received. */
const hits = [0, 0];
let servers: ReturnType<typeof Bun.serve>[] = [];
const sessions: Session[] = [];
beforeAll(() => {
  servers = [0, 1].map((i) =>
    Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch() {
        hits[i]!++;
        return new Response(`hello ${i}\n`);
      },
    }),
  );
});
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
  for (const s of servers) await s.stop(true);
});

/** A proxy-mode server whose human answers `yes` for port P1 and declines everything else. */
async function serve(yes: "once" | "session"): Promise<Session & { ws: string }> {
  const codexHome = join(CONF_BASE, `h4-scope-${Math.random().toString(36).slice(2)}`);
  mkdirSync(codexHome, { recursive: true });
  writeFileSync(join(codexHome, "config.toml"), agentNetworkConfig({ allowLocalBinding: true, domains: { "allowed.test": "allow" } }));
  const p1 = servers[0]!.port;
  const s = await startServe({
    codexHome,
    args: ["--sandbox-backend", "bwrap"],
    onElicit: (message) => (message.includes(`127.0.0.1:${p1}?`) ? { action: "accept", content: { scope: yes } } : { action: "decline" }),
  });
  sessions.push(s);
  const ws = join(codexHome, "ws");
  mkdirSync(ws);
  await s.sandboxState({ type: "workspace-write", network_access: true, writable_roots: [ws] }, ws);
  return Object.assign(s, { ws });
}

describe.skipIf(skip)("network approvals are per host, port and protocol (compiled binary, proxy mode)", () => {
  for (const yes of ["once", "session"] as const) {
    test(`"${yes}" for 127.0.0.1:P1 does not open 127.0.0.1:P2`, async () => {
      hits[0] = 0;
      hits[1] = 0;
      const s = await serve(yes);
      const [p1, p2] = servers.map((x) => x.port);
      const { out } = await s.shell({
        command: `curl --noproxy '' -sS http://127.0.0.1:${p1}/; curl --noproxy '' -sS -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:${p2}/`,
        workdir: s.ws,
        login: false,
        timeout_ms: 60_000,
      });
      expect(out.output).toContain("hello 0\n403\n");
      expect(out.output).toContain(`127.0.0.1:${p2} (http): not_allowed`);
      expect(s.elicitations).toEqual([
        expect.stringContaining(`Allow network access to 127.0.0.1:${p1}?`),
        expect.stringContaining(`Allow network access to 127.0.0.1:${p2}?`),
      ]);
      expect(hits).toEqual([1, 0]);
      // The yes holds at its own scope: a session yes lets a later call reach P1 unasked; a once yes does not.
      const again = await s.shell({ command: `curl --noproxy '' -sS http://127.0.0.1:${p1}/`, workdir: s.ws, login: false });
      expect(again.out.output).toBe("hello 0\n");
      expect(s.elicitations.length).toBe(yes === "session" ? 2 : 3);
    });
  }
});
