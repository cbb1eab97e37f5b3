/**
 * The network policy (src/network/policy.ts) against the vectors Codex 0.169 was observed with
 * (docs/network.md, from the spec §1.2–1.3, §1.7, §7): config keys and their errors, `network_rule`
 * compilation, pattern forms, normalisation, IP spellings, the local check, and that names which are not allowed
 * are never looked up.
 */
import { describe, expect, test } from "bun:test";
import { parseOverride, setPath, type Config } from "../../src/config/config.ts";
import { ShellmcpError } from "../../src/errors.ts";
import { policyFromSources } from "../../src/execpolicy/load.ts";
import {
  canonicalIp,
  decideHost,
  dialAllowed,
  emptyNetworkPolicy,
  hostMatches,
  isNonPublicIp,
  methodAllowed,
  normalizePattern,
  readNetworkPolicy,
  type NetworkPolicy,
} from "../../src/network/policy.ts";
import { parse as parseToml } from "smol-toml";

function policy(over: Partial<NetworkPolicy>): NetworkPolicy {
  return { ...emptyNetworkPolicy(), enabled: true, ...over };
}

/** A lookup that maps test names and records every name asked. */
function fakeLookup(map: Record<string, string[]>) {
  const asked: string[] = [];
  const lookup = async (h: string) => {
    asked.push(h);
    const a = map[h];
    if (a === undefined) throw new Error(`ENOTFOUND ${h}`);
    return a;
  };
  return { asked, lookup };
}

async function reason(p: NetworkPolicy, host: string, map: Record<string, string[]> = {}): Promise<string> {
  const d = await decideHost(p, host, fakeLookup(map).lookup);
  return d.allowed ? "allowed" : d.reason;
}

describe("config keys (Codex 0.169)", () => {
  const cfg = (toml: string, overrides: string[] = []): Config => {
    const c = parseToml(toml) as Config;
    for (const o of overrides) {
      const { path, value } = parseOverride(o);
      setPath(c, path, value);
    }
    return c;
  };

  test("feature flag off by default; bool and table forms", () => {
    expect(readNetworkPolicy({}, undefined).enabled).toBe(false);
    expect(readNetworkPolicy(cfg("[features]\nnetwork_proxy = true"), undefined).enabled).toBe(true);
    const t = readNetworkPolicy(
      cfg('[features.network_proxy]\nenabled = true\nallow_local_binding = true\n[features.network_proxy.domains]\n"a.test" = "allow"'),
      undefined,
    );
    expect(t).toMatchObject({ enabled: true, allowLocalBinding: true, allow: ["a.test"] });
  });

  test("default_permissions profile network table, table form applied on top, -c overrides", () => {
    const text = `
default_permissions = "dev"
[features]
network_proxy = true
[permissions.dev]
extends = ":workspace"
[permissions.dev.network]
enabled = true
mode = "limited"
enable_socks5 = false
[permissions.dev.network.domains]
"registry.npmjs.org" = "allow"
"**.pypi.org" = "allow"
"evil.test" = "deny"
"Example.COM.:443" = "allow"
`;
    const warnings: string[] = [];
    const p = readNetworkPolicy(cfg(text, ['permissions.dev.network.mode="full"']), undefined, (m) => warnings.push(m));
    expect(p).toEqual({
      enabled: true,
      mode: "full",
      allow: ["registry.npmjs.org", "**.pypi.org", "example.com"],
      deny: ["evil.test"],
      allowLocalBinding: false,
      enableSocks5: false,
      enableSocks5Udp: true,
    });
    expect(warnings.join("\n")).toContain("port");
    const off = readNetworkPolicy(cfg(text, ["features.network_proxy=false"]), undefined);
    expect(off.enabled).toBe(false);
  });

  test("errors Codex refuses: deny *, unknown key, bad mode, bad decision, undefined profile, wrong types", () => {
    const bad = (toml: string) => {
      try {
        readNetworkPolicy(cfg(toml), undefined);
      } catch (e) {
        expect(e).toBeInstanceOf(ShellmcpError);
        expect((e as ShellmcpError).code).toBe("CONFIG");
        return (e as Error).message;
      }
      throw new Error("accepted");
    };
    const prof = (net: string) => `default_permissions = "p"\n[permissions.p]\nextends = ":workspace"\n[permissions.p.network]\n${net}`;
    expect(bad(prof('[permissions.p.network.domains]\n"*" = "deny"'))).toBe(
      "network proxy constraints are invalid: invalid value for network.denied_domains: * (allowed exact hosts or scoped wildcards like *.example.com or **.example.com)",
    );
    expect(bad(prof("allowed_domains = []"))).toContain("unknown field `allowed_domains`");
    expect(bad(prof('mode = "open"'))).toContain("unknown variant `open`, expected `full` or `limited`");
    expect(bad(prof('[permissions.p.network.domains]\n"a.test" = "yes"'))).toContain("unknown variant `yes`");
    expect(bad(prof('allow_local_binding = "yes"'))).toContain("expected a boolean");
    expect(bad(prof('[permissions.p.network.domains]\n"" = "allow"'))).toContain("invalid value for network.allowed_domains");
    expect(bad('default_permissions = "nope"')).toBe("default_permissions refers to undefined profile `nope`");
    expect(bad("[features]\nnetwork_proxy = 3")).toContain("features.network_proxy must be a table");
    // `*` as allow is accepted (every host), as in 0.169.
    expect(readNetworkPolicy(cfg(prof('[permissions.p.network.domains]\n"*" = "allow"')), undefined).allow).toEqual(["*"]);
    // Codex's keys shellmcp does not act on are accepted.
    expect(() =>
      readNetworkPolicy(
        cfg(prof('proxy_url = "http://127.0.0.1:3128"\nsocks_url = "x"\nallow_upstream_proxy = false\nenable_socks5_udp = false')),
        undefined,
      ),
    ).not.toThrow();
  });

  test("network_rule: allow adds, forbidden denies, later wins, prompt ignored; rules beat config for the same host", () => {
    const rules = policyFromSources([
      {
        path: "a.rules",
        text: [
          'network_rule(host="Api.Example.COM.:443", protocol="https", decision="allow")',
          'network_rule(host="flip.test", protocol="http", decision="allow")',
          'network_rule(host="flip.test", protocol="socks5_tcp", decision="deny")',
          'network_rule(host="ask.test", protocol="http", decision="prompt")',
          'network_rule(host="cfg-denied.test", protocol="http", decision="allow")',
        ].join("\n"),
      },
    ]);
    const p = readNetworkPolicy(
      cfg('default_permissions = "p"\n[permissions.p.network.domains]\n"cfg-denied.test" = "deny"\n"flip.test" = "allow"'),
      rules,
    );
    expect(p.allow.sort()).toEqual(["api.example.com", "cfg-denied.test"]);
    expect(p.deny).toEqual(["flip.test"]);
  });
});

describe("examples/config/network.toml", () => {
  test("is a valid policy: the registries and the git host allowed, gist denied, nothing else", async () => {
    const text = await Bun.file(new URL("../../examples/config/network.toml", import.meta.url)).text();
    const p = readNetworkPolicy(parseToml(text) as Config, undefined);
    expect(p.enabled).toBe(true);
    const pub = { "registry.npmjs.org": ["104.16.0.1"], "pypi.org": ["151.101.0.223"], "github.com": ["140.82.112.3"] };
    for (const h of Object.keys(pub)) expect(await reason(p, h, pub)).toBe("allowed");
    expect(await reason(p, "gist.github.com", pub)).toBe("denied");
    expect(await reason(p, "pastebin.com", pub)).toBe("not_allowed");
  });
});

describe("patterns and normalisation", () => {
  test("pattern forms", () => {
    expect(hostMatches("*.allowed.test", "api.allowed.test")).toBe(true);
    expect(hostMatches("*.allowed.test", "x.y.allowed.test")).toBe(true);
    expect(hostMatches("*.allowed.test", "allowed.test")).toBe(false);
    expect(hostMatches("*.allowed.test", "evilallowed.test")).toBe(false);
    for (const h of ["deep.test", "a.deep.test", "x.y.deep.test"]) expect(hostMatches("**.deep.test", h)).toBe(true);
    expect(hostMatches("**.deep.test", "notdeep.test")).toBe(false);
    expect(hostMatches("region*.v2.x.com", "region-eu.v2.x.com")).toBe(true);
    expect(hostMatches("region*.v2.x.com", "other.v2.x.com")).toBe(false);
    expect(hostMatches("*", "anything.test")).toBe(true);
    expect(hostMatches("a.test", "a.test")).toBe(true);
    expect(hostMatches("a.test", "b.a.test")).toBe(false);
  });

  test("entries: case, trailing dot, ports dropped, brackets, IP spellings canonical", () => {
    expect(normalizePattern("ALLOWED.TEST.", "allow")).toBe("allowed.test");
    expect(normalizePattern("allowed.test:9999", "allow")).toBe("allowed.test");
    expect(normalizePattern("[::1]:8080", "allow")).toBe("::1");
    expect(normalizePattern("2130706433", "deny")).toBe("127.0.0.1");
    expect(normalizePattern("*", "allow")).toBe("*");
    expect(() => normalizePattern("*", "deny")).toThrow();
    expect(() => normalizePattern("a b.test", "allow")).toThrow();
  });

  test("IP spellings", () => {
    for (const s of ["2130706433", "127.1", "0x7f.0.0.1", "::ffff:127.0.0.1", "0177.0.0.1"]) expect(canonicalIp(s)).toBe("127.0.0.1");
    expect(canonicalIp("::FFFF:7f00:1")).toBe("127.0.0.1");
    expect(canonicalIp("0:0:0:0:0:0:0:1")).toBe("::1");
    expect(canonicalIp("example.com")).toBeUndefined();
    expect(canonicalIp("1.2.3.4.example")).toBeUndefined();
  });

  test("non-public addresses", () => {
    for (const ip of [
      "127.0.0.2",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "255.255.255.255",
      "192.0.2.1",
      "::1",
      "::",
      "fe80::1",
      "fd00::1",
      "fc00::1",
      "ff02::1",
      "64:ff9b::7f00:1",
    ])
      expect(isNonPublicIp(canonicalIp(ip)!)).toBe(true);
    for (const ip of ["1.1.1.1", "8.8.8.8", "172.32.0.1", "2606:4700::1111", "64:ff9b::808:808"])
      expect(isNonPublicIp(canonicalIp(ip)!)).toBe(false);
  });

  test("limited mode methods", () => {
    for (const m of ["GET", "HEAD", "OPTIONS"]) expect(methodAllowed("limited", m)).toBe(true);
    for (const m of ["POST", "PUT", "DELETE", "CONNECT", "get"]) expect(methodAllowed("limited", m)).toBe(false);
    expect(methodAllowed("full", "POST")).toBe(true);
  });
});

describe("decisions (Codex 0.169's order)", () => {
  const pub = {
    "allowed.test": ["93.184.216.34"],
    "api.allowed.test": ["93.184.216.35"],
    "local.test": ["127.0.0.1"],
    "deep.test": ["1.2.3.4"],
    "a.deep.test": ["1.2.3.5"],
  };

  test("allowed, not allowed, case and trailing dot, port ignored", async () => {
    const p = policy({ allow: ["allowed.test"] });
    expect(await reason(p, "allowed.test", pub)).toBe("allowed");
    expect(await reason(p, "ALLOWED.TEST.", pub)).toBe("allowed");
    expect(await reason(p, "other.test", pub)).toBe("not_allowed");
    expect(await reason(p, "", pub)).toBe("not_allowed");
    expect(await reason(p, "bad host", pub)).toBe("not_allowed");
    expect(await reason(policy({ allow: ["my_host.test"] }), "MY_HOST.test", { "my_host.test": ["93.184.216.36"] })).toBe("allowed");
  });

  test("deny wins over allow, wildcard forms", async () => {
    const p = policy({ allow: ["**.deep.test", "*.allowed.test"], deny: ["a.deep.test"] });
    expect(await reason(p, "deep.test", pub)).toBe("allowed");
    expect(await reason(p, "a.deep.test", pub)).toBe("denied");
    expect(await reason(p, "api.allowed.test", pub)).toBe("allowed");
    expect(await reason(p, "allowed.test", pub)).toBe("not_allowed");
  });

  test("IP spellings of a denied address are denied", async () => {
    const p = policy({ allow: ["*"], deny: ["127.0.0.1", "localhost"] });
    for (const h of ["2130706433", "127.1", "0x7f.0.0.1", "[::ffff:127.0.0.1]", "localhost.", "LOCALHOST"])
      expect(await reason(p, h)).toBe("denied");
    // 127.0.0.2 is not denied; without allow_local_binding it is local and not listed exactly.
    expect(await reason(p, "127.0.0.2")).toBe("not_allowed_local");
    expect(await reason({ ...p, allowLocalBinding: true }, "127.0.0.2")).toBe("allowed");
  });

  test("local targets: literal needs an exact entry (not a wildcard); names resolving locally need allow_local_binding", async () => {
    expect(await reason(policy({ allow: ["*"] }), "127.0.0.1")).toBe("not_allowed_local");
    expect(await reason(policy({ allow: ["127.0.0.1"] }), "127.0.0.1")).toBe("allowed");
    expect(await reason(policy({ allow: ["localhost"] }), "localhost", { localhost: ["127.0.0.1"] })).toBe("allowed");
    // 0.169: allowed.test -> 127.0.0.1 with 127.0.0.1 also allowed is still refused.
    expect(await reason(policy({ allow: ["local.test", "127.0.0.1"] }), "local.test", pub)).toBe("not_allowed_local");
    expect(await reason(policy({ allow: ["local.test"], allowLocalBinding: true }), "local.test", pub)).toBe("allowed");
    // A lookup failure for the local check fails closed.
    expect(await reason(policy({ allow: ["gone.test"] }), "gone.test", pub)).toBe("not_allowed_local");
    // A name resolving to a denied literal: policy_denied (0.169, spec §7).
    expect(await reason(policy({ allow: ["local.test"], deny: ["127.0.0.1"], allowLocalBinding: true }), "local.test", pub)).toBe(
      "policy_denied",
    );
  });

  test("names that are not allowed (or denied) are never looked up", async () => {
    const f = fakeLookup(pub);
    const p = policy({ allow: ["allowed.test"], deny: ["evil.test"] });
    await decideHost(p, "secret-data-123.notallowed.test", f.lookup);
    await decideHost(p, "evil.test", f.lookup);
    await decideHost(p, "allowed.test", f.lookup);
    expect(f.asked).toEqual(["allowed.test"]);
  });

  test("the dialed address is re-checked", () => {
    const p = policy({ allow: ["allowed.test", "127.0.0.1", "localhost"] });
    expect(dialAllowed(p, "allowed.test", "93.184.216.34")).toBe(true);
    expect(dialAllowed(p, "allowed.test", "127.0.0.1")).toBe(false);
    expect(dialAllowed(p, "127.0.0.1", "127.0.0.1")).toBe(true);
    expect(dialAllowed(p, "localhost", "::1")).toBe(true);
    expect(dialAllowed({ ...p, allowLocalBinding: true }, "allowed.test", "10.0.0.1")).toBe(true);
    expect(dialAllowed({ ...p, deny: ["10.0.0.1"], allowLocalBinding: true }, "allowed.test", "10.0.0.1")).toBe(false);
  });
});
