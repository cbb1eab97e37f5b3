/**
 * The escalation room on macOS (issue 21: "built by the same backends … Seatbelt on macOS"): an escalated program
 * runs under `/usr/bin/sandbox-exec` with a policy generated from the room's plan — the call's writable roots plus
 * the repository, the git control paths excluded from writing, the network on (or only the proxy's ports) — where
 * it used to stay inside the call's sandbox. Generated here (this is Linux); what runs on a Mac is listed in
 * README.md ("macOS").
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { planSandboxPolicy } from "../../../src/sandbox/filesystem-plan.ts";
import { roomLaunch } from "../../../src/escalate/rooms/build.ts";
import { darwinPath } from "../../../src/sandbox/macos/seatbelt.ts";
import type { RoomSpec } from "../../../src/escalate/rooms/plan.ts";
import { CallSandbox } from "../../../src/sandbox/backend.ts";
import { SeatbeltBackend } from "../../../src/sandbox/macos/backend.ts";
import { roomFor } from "../../../src/shell/call-acquire.ts";
import { hostGit } from "../../helpers/attack.ts";
import { CONF_BASE } from "../../helpers/test-dirs.ts";

function repo(): string {
  const ws = join(CONF_BASE, `sb-room-${Math.random().toString(36).slice(2, 8)}`);
  mkdirSync(ws, { recursive: true });
  hostGit(ws, "init", "-q");
  return ws;
}

const READ_ONLY = { type: "read-only" as const, access: { type: "full-access" as const }, network_access: false };

/** The `-DKEY=VALUE` parameters of a sandbox-exec argv, as a map. */
function params(argv: string[]): Map<string, string> {
  return new Map(argv.filter((a) => a.startsWith("-D")).map((a) => [a.slice(2, a.indexOf("=")), a.slice(a.indexOf("=") + 1)]));
}

describe("escalation room under Seatbelt", () => {
  test("serve's calls under Seatbelt get Seatbelt rooms (they used to get none)", () => {
    const ws = repo();
    const state = { policy: READ_ONLY, policyCwd: ws, workdir: ws, env: {} };
    const spec = roomFor({ sandbox: new CallSandbox(new SeatbeltBackend(), state, planSandboxPolicy(READ_ONLY, ws, {})) });
    expect(spec.backend).toEqual({ kind: "seatbelt", allowLocalBinding: false });
  });

  test("a read-only call: the room writes the repository but not its git control paths, with the call's network (off)", () => {
    const ws = repo();
    const spec: RoomSpec = {
      backend: { kind: "seatbelt", allowLocalBinding: false },
      call: planSandboxPolicy(READ_ONLY, ws, {}),
      extraWritable: {},
    };
    const l = roomLaunch(spec, "/usr/bin/git", ["git", "status"], ws, ["PATH=/usr/bin:/bin", "CODEX_SANDBOX_NETWORK_DISABLED=1"]);
    if ("unavailable" in l) throw new Error(l.unavailable);
    expect(l.argv.slice(0, 2)).toEqual(["/usr/bin/sandbox-exec", "-p"]);
    expect(l.argv.slice(-3)).toEqual(["--", "git", "status"]);
    const policy = l.argv[2]!;
    expect(policy).not.toContain("(allow network-outbound)"); // issue 30: the call's network, not the host's
    const p = params(l.argv);
    const mac = darwinPath(ws); // /var is /private/var on a Mac
    const roots = [...p].filter(([k]) => /^WRITABLE_ROOT_\d+$/.test(k)).map(([, v]) => v);
    expect(roots.sort()).toEqual([mac, join(mac, ".git")].sort());
    const excluded = new Set([...p].filter(([k]) => k.includes("_EXCLUDED_")).map(([, v]) => v));
    for (const c of ["config", "hooks", "info"]) expect({ c, excluded: excluded.has(join(mac, ".git", c)) }).toEqual({ c, excluded: true });
    // The room has the call's network (none): Codex's "network disabled" marker says so; Seatbelt's own marker too.
    expect(l.env).toContain("CODEX_SANDBOX_NETWORK_DISABLED=1");
    expect(l.env).toContain("CODEX_SANDBOX=seatbelt");
    expect(l.env).toContain("GIT_TERMINAL_PROMPT=0");
    expect(l.mustNotAppear).toContain(join(ws, ".git", "commondir"));
  });

  test('[shellmcp.room_network] git = "host": that program\'s room has the network, without the marker', () => {
    const ws = repo();
    const spec: RoomSpec = {
      backend: { kind: "seatbelt", allowLocalBinding: false },
      call: planSandboxPolicy(READ_ONLY, ws, {}),
      extraWritable: {},
      networkGrants: { git: "host" },
    };
    const l = roomLaunch(spec, "/usr/bin/git", ["git", "fetch"], ws, ["PATH=/usr/bin:/bin", "CODEX_SANDBOX_NETWORK_DISABLED=1"]);
    if ("unavailable" in l) throw new Error(l.unavailable);
    expect(l.argv[2]!).toContain("(allow network-outbound)");
    expect(l.env).not.toContain("CODEX_SANDBOX_NETWORK_DISABLED=1");
    // A domain grant needs a proxy Seatbelt rooms do not get yet: no room, never a wider network.
    const d = roomLaunch({ ...spec, networkGrants: { git: ["example.com"] } }, "/usr/bin/git", ["git", "fetch"], ws, [
      "PATH=/usr/bin:/bin",
    ]);
    expect("unavailable" in d ? d.unavailable : "built").toContain("[shellmcp.room_network] grants git");
  });

  test("proxy mode: outbound only to the proxy's loopback ports, and its variables", () => {
    const ws = repo();
    const spec: RoomSpec = {
      backend: { kind: "seatbelt", allowLocalBinding: false },
      call: planSandboxPolicy(READ_ONLY, ws, {}),
      extraWritable: {},
      proxy: { ports: [41234], env: { HTTPS_PROXY: "http://127.0.0.1:41234" } },
    };
    const l = roomLaunch(spec, "/usr/bin/git", ["git", "fetch"], ws, ["PATH=/usr/bin:/bin", "HTTPS_PROXY=http://evil:1"]);
    if ("unavailable" in l) throw new Error(l.unavailable);
    const policy = l.argv[2]!;
    expect(policy).toContain('(remote ip "localhost:41234")');
    expect(policy).not.toContain("(allow network-outbound)\n");
    expect(l.env.filter((e) => e.startsWith("HTTPS_PROXY="))).toEqual(["HTTPS_PROXY=http://127.0.0.1:41234"]);
  });
});
