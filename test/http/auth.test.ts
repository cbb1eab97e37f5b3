/**
 * `serve --listen` authentication (issue 43): HS256 signed bearer tokens (the exec-server's module, src/auth/) and
 * the OAuth 2.1 resource server of MCP 2026-07-28 (RFC 9728 metadata, JWKS verification with jose), attacked with
 * the tokens an attacker would try; sessions bound to the subject that opened them; exec-server's shared flag names.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT } from "jose";
import { signHs256Jwt } from "../../src/auth/bearer.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { connectHttp, INITIALIZE, postHeaders, startHttpServe, type HttpServe, type HttpSession } from "../helpers/http.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { ensureBinary, run } from "../helpers/binary.ts";

const skip = skipWithout("serve --listen auth suite", shellsMissing());
const servers: HttpServe[] = [];
const clients: HttpSession[] = [];
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  for (const s of servers) await s.stop().catch(() => undefined);
});
const now = () => Math.floor(Date.now() / 1000);
function privateFile(name: string, content: string, mode = 0o600): string {
  const d = mkdtempSync(join(CONF_BASE, "auth-"));
  const p = join(d, name);
  writeFileSync(p, content, { mode });
  return p;
}
async function initStatus(s: HttpServe, token: string): Promise<Response> {
  return fetch(s.url, { method: "POST", headers: postHeaders(token), body: INITIALIZE });
}

describe.skipIf(skip)("--auth signed-bearer-token (HS256, the exec-server's checks)", () => {
  const secret = "s".repeat(40);
  const ISS = "https://issuer.example";
  const AUD = "shellmcp-test";
  let s: HttpServe;
  const claims = (extra: Record<string, unknown> = {}) => ({ iss: ISS, aud: AUD, sub: "alice", exp: now() + 600, ...extra });

  test("a valid token runs a call; wrong aud, wrong iss, expired, not yet valid, alg none and another secret get 401", async () => {
    const file = privateFile("secret", secret);
    s = await startHttpServe({
      args: ["--auth", "signed-bearer-token", "--auth-shared-secret-file", file, "--auth-issuer", ISS, "--auth-audience", AUD],
    });
    servers.push(s);
    const c = await connectHttp(s.url, signHs256Jwt(claims(), secret));
    clients.push(c);
    expect(JSON.parse((await c.call("shell", { command: "echo jwt", workdir: "/", login: false })).text).output).toBe("jwt\n");
    const none = new UnsecuredJWT(claims()).encode();
    const bad = {
      "wrong aud": signHs256Jwt(claims({ aud: "another-resource" }), secret),
      "wrong iss": signHs256Jwt(claims({ iss: "https://evil.example" }), secret),
      expired: signHs256Jwt(claims({ exp: now() - 3600 }), secret),
      "not yet valid": signHs256Jwt(claims({ nbf: now() + 3600 }), secret),
      "alg none": none,
      "another secret": signHs256Jwt(claims(), "t".repeat(40)),
      "no exp": signHs256Jwt({ iss: ISS, aud: AUD, sub: "alice" }, secret),
    };
    for (const [what, token] of Object.entries(bad)) {
      const r = await initStatus(s, token);
      expect({ what, status: r.status }).toEqual({ what, status: 401 });
    }
  });

  test("a session is bound to its subject: another subject naming its Mcp-Session-Id gets 404", async () => {
    const alice = await connectHttp(s.url, signHs256Jwt(claims(), secret));
    clients.push(alice);
    const sid = alice.transport.sessionId!;
    const bob = signHs256Jwt(claims({ sub: "bob" }), secret);
    const r = await fetch(s.url, {
      method: "POST",
      headers: postHeaders(bob, { "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25" }),
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect(r.status).toBe(404);
    const g = await fetch(s.url, { method: "DELETE", headers: postHeaders(bob, { "mcp-session-id": sid }) });
    expect(g.status).toBe(404);
    expect((await alice.client.listTools()).tools.length).toBe(4); // still alice's
  });

  test("a secret file others can read is refused at start", async () => {
    const file = privateFile("secret", secret, 0o644);
    const r = run(
      [ensureBinary(), "serve", "--listen", "http://127.0.0.1:0/mcp", "--auth", "signed-bearer-token", "--auth-shared-secret-file", file],
      {
        env: { HOME: CONF_BASE, CODEX_HOME: mkdtempSync(join(CONF_BASE, "home-")) },
      },
    );
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("is accessible by group or others");
    expect(r.stderr).not.toContain("websocket");
  });
});

describe.skipIf(skip)("--auth oauth (MCP 2026-07-28: OAuth 2.1 resource server, RFC 9728)", () => {
  const ISS = "https://as.example";
  let s: HttpServe;
  let rsa: Awaited<ReturnType<typeof generateKeyPair>>;
  let ec: Awaited<ReturnType<typeof generateKeyPair>>;
  const sign = async (key: CryptoKey | Uint8Array, alg: string, kid: string, claims: Record<string, unknown>) =>
    new SignJWT(claims).setProtectedHeader({ alg, kid }).sign(key);
  const good = () => ({ iss: ISS, aud: s.url.href, sub: "alice", scope: "mcp:tools", exp: now() + 600 });

  test("metadata and 401 challenges name the resource; a token from the JWKS with the right aud, iss and scope runs a call", async () => {
    rsa = await generateKeyPair("RS256", { extractable: true });
    ec = await generateKeyPair("ES256", { extractable: true });
    const jwks = {
      keys: [
        { ...(await exportJWK(rsa.publicKey)), kid: "r1", alg: "RS256" },
        { ...(await exportJWK(ec.publicKey)), kid: "e1", alg: "ES256" },
      ],
    };
    const file = privateFile("jwks.json", JSON.stringify(jwks));
    s = await startHttpServe({ args: ["--auth", "oauth", "--auth-issuer", ISS, "--auth-jwks", file, "--auth-scope", "mcp:tools"] });
    servers.push(s);
    const meta = (await (await fetch(`${s.url.origin}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    expect(meta.resource).toBe(s.url.href);
    expect(meta.authorization_servers).toEqual([ISS]);
    const noToken = await fetch(s.url, { method: "POST", headers: postHeaders(undefined), body: INITIALIZE });
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${s.url.origin}/.well-known/oauth-protected-resource/mcp"`,
    );
    for (const [key, alg, kid] of [
      [rsa.privateKey, "RS256", "r1"],
      [ec.privateKey, "ES256", "e1"],
    ] as const) {
      const c = await connectHttp(s.url, await sign(key, alg, kid, good()));
      clients.push(c);
      expect(JSON.parse((await c.call("shell", { command: "echo oauth", workdir: "/", login: false })).text).output).toBe("oauth\n");
    }
  });

  test("wrong aud, wrong iss, expired, alg none, HS/RS confusion and an unknown key get 401; a missing scope 403", async () => {
    const other = await generateKeyPair("RS256", { extractable: true });
    const rsaPublicPem = Buffer.from(JSON.stringify(await exportJWK(rsa.publicKey)));
    const bad: Record<string, string> = {
      "wrong aud": await sign(rsa.privateKey, "RS256", "r1", { ...good(), aud: "https://other.example/mcp" }),
      "wrong iss": await sign(rsa.privateKey, "RS256", "r1", { ...good(), iss: "https://evil.example" }),
      expired: await sign(rsa.privateKey, "RS256", "r1", { ...good(), exp: now() - 3600 }),
      "no exp": await sign(rsa.privateKey, "RS256", "r1", { iss: ISS, aud: s.url.href, sub: "a", scope: "mcp:tools" }),
      "alg none": new UnsecuredJWT(good()).encode(),
      "HS256 keyed with the RSA public key": await sign(rsaPublicPem, "HS256", "r1", good()),
      "unknown key": await sign(other.privateKey, "RS256", "r9", good()),
      "known kid, other key": await sign(other.privateKey, "RS256", "r1", good()),
    };
    for (const [what, token] of Object.entries(bad)) {
      const r = await initStatus(s, token);
      expect({ what, status: r.status }).toEqual({ what, status: 401 });
      expect(r.headers.get("www-authenticate")).toContain('error="invalid_token"');
    }
    const noScope = await initStatus(s, await sign(rsa.privateKey, "RS256", "r1", { ...good(), scope: "other" }));
    expect(noScope.status).toBe(403);
    expect(noScope.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
  });
});

describe("exec-server: the shared --auth flag names", () => {
  test("--auth none --auth-token-file is refused with the shared module's message, as --ws-auth's", () => {
    const a = run([ensureBinary(), "exec-server", "--auth", "none", "--auth-token-file", "/nonexistent"], { env: { HOME: CONF_BASE } });
    const b = run([ensureBinary(), "exec-server", "--ws-auth", "none", "--ws-token-file", "/nonexistent"], { env: { HOME: CONF_BASE } });
    expect(a.exitCode).toBe(b.exitCode);
    expect(a.stderr).toBe(b.stderr);
    expect(a.stderr).toContain("takes no other websocket auth flag");
  });
});
