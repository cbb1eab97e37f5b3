/**
 * `[shellmcp.room_network]`, `[shellmcp.room_readable]` (issue 30): what config.toml may say, and the room a grant
 * gives (planning only; test/security/room-reach.test.ts runs the rooms).
 */
import { describe, expect, test } from "bun:test";
import { escalationConfig } from "../../src/config/config.ts";
import { checkRoomNetworkGrants, grantPolicy } from "../../src/escalate/rooms/grants.ts";
import { grantNames, roomNetwork, type RoomSpec } from "../../src/escalate/rooms/plan.ts";
import { CREDENTIAL_STORES, pathsBeside } from "../../src/sandbox/secrets.ts";
import { planSandboxPolicy } from "../../src/sandbox/filesystem-plan.ts";

describe("[shellmcp.room_network] and [shellmcp.room_readable]", () => {
  test("a list of domains, host, call; ~/ expanded in room_readable", () => {
    const c = escalationConfig(
      { shellmcp: { room_network: { npm: ["registry.npmjs.org"], git: "host", make: "call" }, room_readable: { git: ["~/.ssh"] } } },
      "/home/u",
    );
    expect(c.roomNetwork).toEqual({ npm: ["registry.npmjs.org"], git: "host", make: "call" });
    expect(c.roomReadable).toEqual({ git: ["/home/u/.ssh"] });
  });

  test("anything else stops the server, naming the key", () => {
    for (const v of [true, "on", [], [1], { unix_sockets: ["/var/run/docker.sock"] }])
      expect(() => escalationConfig({ shellmcp: { room_network: { docker: v } } }, "/home/u")).toThrow(/room_network/);
    // A domain no host can match: serve's set-up checks each one with the proxy policy's rules.
    const bad = escalationConfig({ shellmcp: { room_network: { docker: ["bad host!"] } } }, "/home/u");
    expect(() => checkRoomNetworkGrants(bad.roomNetwork)).toThrow(/room_network\.docker/);
    expect(() => escalationConfig({ shellmcp: { room_readable: { git: ["relative"] } } }, "/home/u")).toThrow(
      /room_readable\.git: relative is not an absolute path/,
    );
  });

  test("the room's network: the call's by default, a grant's by any name the boundary checked", () => {
    const off: RoomSpec = {
      backend: { kind: "bwrap", bwrap: "/usr/bin/bwrap", noProc: false },
      call: planSandboxPolicy({ type: "read-only", access: { type: "full-access" }, network_access: false }, "/", {}),
      extraWritable: {},
    };
    expect(roomNetwork(off, "/usr/bin/python3.11", ["python3"])).toEqual({ network: "off" });
    const granted = { ...off, networkGrants: { python3: "host" as const } };
    expect(roomNetwork(granted, "/usr/bin/python3.11", ["/usr/bin/python3", "python3"])).toEqual({ network: "host" });
    expect(roomNetwork(granted, "/usr/bin/python3.11")).toEqual({ network: "off" }); // the name the command used
    const domains = { ...off, networkGrants: { npm: ["registry.npmjs.org"] } };
    expect(() => roomNetwork(domains, "/usr/lib/node_modules/npm/bin/npm-cli.js", ["npm"])).toThrow(/grants npm the domains/);
    const proxy = { ports: [3128, 8081], bridgeFd: 9, env: {} };
    expect(roomNetwork({ ...domains, grantProxies: { npm: proxy } }, "/x/npm-cli.js", ["npm"])).toEqual({ network: "proxy", proxy });
    expect(grantNames("/usr/bin/python3.11", ["/usr/bin/python3", "python3", undefined])).toEqual(["python3.11", "python3"]);
  });

  test("a grant's proxy allows exactly its domains (plus the call's lists), a port only where given, nothing local unless listed", () => {
    const { policy: p, exact } = grantPolicy(["Registry.NPMjs.org.", "127.0.0.1:4873", "[::1]:8080", "*.example.com:443"]);
    expect(p.allow).toEqual(["registry.npmjs.org", "*.example.com"]);
    expect([...exact].sort()).toEqual(
      [
        "127.0.0.1 4873 http",
        "127.0.0.1 4873 https_connect",
        "127.0.0.1 4873 socks5_tcp",
        "::1 8080 http",
        "::1 8080 https_connect",
        "::1 8080 socks5_tcp",
      ].sort(),
    );
    expect(p.allowLocalBinding).toBe(false);
    const withCall = grantPolicy(["a.example"], { ...p, allow: ["b.example"], deny: ["c.example"] }).policy;
    expect(withCall.allow).toEqual(["a.example", "b.example"]);
    expect(withCall.deny).toEqual(["c.example"]);
  });

  test("Landlock's read rules leave out exactly the hidden stores and every symlink", () => {
    expect(CREDENTIAL_STORES).toContain(".ssh");
    expect(pathsBeside("/", [])).toEqual(["/"]);
    expect(pathsBeside("/usr", ["/etc/passwd"])).toEqual(["/usr"]);
    expect(pathsBeside("/etc/passwd", ["/etc"])).toEqual([]);
    const rules = pathsBeside("/", ["/etc/passwd"]);
    expect(rules).not.toContain("/etc/passwd");
    expect(rules).not.toContain("/etc");
    expect(rules).not.toContain("/");
    expect(rules).toContain("/etc/hostname");
    expect(rules).toContain("/usr");
  });
});
