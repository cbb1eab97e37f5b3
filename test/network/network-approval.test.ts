/**
 * Asking a person about a host (src/mcp/network-approval.ts): no elicitation capability → no question; an answer
 * that never comes, a decline or a cancel → no; accept with a scope → that scope ("once" when missing or unknown);
 * "always" appends Codex's `network_rule` amendment (the protocol a CONNECT came by is `https`).
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { networkAsker, networkElicitationMessage } from "../../src/mcp/network-approval.ts";
import { tempDir } from "../helpers/binary.ts";

const q = { host: "pypi.org", port: 443, protocol: "https_connect" as const };

describe("network approval", () => {
  test("no capability: no asker", () => {
    expect(networkAsker(undefined, "/nonexistent")).toBeUndefined();
  });

  test("timeout, decline, cancel: no; accept: the scope, once by default", async () => {
    const home = tempDir("shellmcp-approval-");
    const never = networkAsker(() => new Promise(() => undefined), home, 50)!;
    expect(await never(q)).toBeUndefined();
    expect(await networkAsker(async () => ({ action: "decline" }), home)!(q)).toBeUndefined();
    expect(await networkAsker(async () => ({ action: "cancel" }), home)!(q)).toBeUndefined();
    expect(await networkAsker(async () => ({ action: "accept" }), home)!(q)).toBe("once");
    expect(await networkAsker(async () => ({ action: "accept", content: { scope: "bogus" } }), home)!(q)).toBe("once");
    expect(await networkAsker(async () => ({ action: "accept", content: { scope: "session" } }), home)!(q)).toBe("session");
  });

  test("always: Codex's network_rule line appended once", async () => {
    const home = tempDir("shellmcp-approval-");
    mkdirSync(join(home, "rules"));
    const seen: string[] = [];
    const ask = networkAsker(async (message) => (seen.push(message), { action: "accept", content: { scope: "always" } }), home)!;
    expect(await ask(q)).toBe("always");
    expect(await ask(q)).toBe("always");
    expect(readFileSync(join(home, "rules", "default.rules"), "utf8")).toBe(
      'network_rule(host="pypi.org", protocol="https", decision="allow", justification="Allow https_connect access to pypi.org")\n',
    );
    expect(seen[0]).toBe(networkElicitationMessage("pypi.org", 443, "https_connect"));
    expect(networkElicitationMessage("::1", 80, "http")).toBe(
      "Allow network access to [::1]:80? (the command's http request is not in the network allow list)",
    );
  });
});
