/**
 * OAuth end to end (issue 43, MCP 2026-07-28 authorization): a real authorization server on loopback
 * (`oidc-provider`, client credentials grant, RFC 8707 resource indicators, JWT access tokens signed ES256) and
 * `serve --listen --auth oauth` as the resource server; the MCP SDK v1 client's own OAuth support
 * (`ClientCredentialsProvider`) meets the 401, reads the protected resource metadata it names, discovers the
 * authorization server, obtains a token for this endpoint and runs a call.
 */
import { afterAll, describe, expect, test } from "bun:test";
import type { Server } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { exportJWK, generateKeyPair } from "jose";
import Provider from "oidc-provider";
import { startHttpServe, type HttpServe } from "../helpers/http.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const skip = skipWithout("serve --listen OAuth end to end", shellsMissing());
const closers: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c();
});

/** Start oidc-provider on a free loopback port; resolves with its issuer URL. */
async function authorizationServer(scope: string): Promise<string> {
  const { privateKey } = await generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: "as-1", alg: "ES256", use: "sig" };
  let issuer = "";
  const provider = () =>
    new Provider(issuer, {
      clients: [
        {
          client_id: "agent",
          client_secret: "agent-secret-0123456789",
          grant_types: ["client_credentials"],
          redirect_uris: [],
          response_types: [],
          id_token_signed_response_alg: "ES256",
        },
      ],
      jwks: { keys: [jwk] },
      scopes: [scope],
      ttl: { ClientCredentials: 600 },
      features: {
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx: unknown, resource: string) => ({
            scope,
            audience: resource,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "ES256" } },
          }),
        },
      },
    });
  // The issuer names the port: listen first on a placeholder app, then serve the provider on that socket.
  const { createServer } = await import("node:http");
  let handler: ((req: unknown, res: unknown) => void) | undefined;
  const server: Server = createServer((req, res) => handler!(req, res));
  await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
  issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  handler = provider().callback() as never;
  closers.push(() => new Promise((res) => server.close(res)));
  return issuer;
}

describe.skipIf(skip)("OAuth end to end: oidc-provider + serve --auth oauth + the SDK client's OAuth", () => {
  test("the client is refused, discovers the authorization server from the metadata, gets a token for this resource, and runs shell", async () => {
    const issuer = await authorizationServer("mcp:tools");
    const s: HttpServe = await startHttpServe({
      args: ["--auth", "oauth", "--auth-issuer", issuer, "--auth-jwks", `${issuer}/jwks`, "--auth-scope", "mcp:tools"],
    });
    closers.push(() => s.stop());
    const authProvider = new ClientCredentialsProvider({
      clientId: "agent",
      clientSecret: "agent-secret-0123456789",
      scope: "mcp:tools",
      expectedIssuer: issuer,
    });
    const client = new Client({ name: "oauth-e2e", version: "0" });
    const transport = new StreamableHTTPClientTransport(s.url, { authProvider });
    await client.connect(transport);
    closers.push(() => client.close());
    const r = (await client.callTool({ name: "shell", arguments: { command: "echo via-oauth", workdir: "/", login: false } })) as {
      content: { text: string }[];
    };
    expect(JSON.parse(r.content[0]!.text).output).toBe("via-oauth\n");
    // The token the client holds is for this endpoint and from this issuer.
    const token = authProvider.tokens()!.access_token;
    const claims = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()) as Record<string, unknown>;
    expect(claims.aud).toBe(s.url.href);
    expect(claims.iss).toBe(issuer);
  });
});
