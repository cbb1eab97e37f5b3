/**
 * Authentication of HTTP requests, shared by `serve --listen` (MCP over streamable HTTP, ../http/server.ts) and
 * built on the exec-server's module (./bearer.ts: capability token, HS256 JWT, the generated token), plus the
 * MCP 2026-07-28 authorization: an OAuth 2.1 resource server (`--auth oauth`) verifying the authorization server's
 * access tokens against its JWKS with `jose` (RS256, ES256, EdDSA only; exact `aud` = this server's canonical URL,
 * `iss`, `exp` required, optional required scope → 403 `insufficient_scope`), and advertising RFC 9728 protected
 * resource metadata, named in every 401's `WWW-Authenticate: Bearer resource_metadata="…"`.
 *
 * Flags (`serve`): `--auth capability-token|signed-bearer-token|oauth|none`, `--auth-token-file`,
 * `--auth-token-sha256`, `--auth-shared-secret-file`, `--auth-issuer`, `--auth-audience`, `--auth-jwks FILE|URL`,
 * `--auth-scope`, `--auth-max-clock-skew-seconds` — the exec-server's `--ws-*` flags renamed (the same checks and
 * messages, with "--auth" for "--ws-auth" and "bearer token" for "websocket bearer token"). Without `--auth`, a
 * capability token is generated at start. No token, digest or secret is ever logged or put in a response.
 */
import { readFileSync, statSync } from "node:fs";
import { createLocalJWKSet, createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTVerifyGetKey } from "jose";
import { ShellmcpError } from "../errors.ts";
import { authorizeUpgrade, generateToken, loadWsAuthPolicy, parseWsAuthArgs, policyForToken, type WsAuthPolicy } from "./bearer.ts";

/** The `--auth*` flags as commander gives them. */
export interface HttpAuthArgs {
  auth?: string;
  authTokenFile?: string;
  authTokenSha256?: string;
  authSharedSecretFile?: string;
  authIssuer?: string;
  authAudience?: string;
  authJwks?: string;
  authScope?: string;
  authMaxClockSkewSeconds?: string;
}

/** Who a request authenticated as: legacy sessions and modern-era state are bound to it. */
export interface Principal {
  /** A stable name of the credential's holder: `token` (a capability token), `jwt:<sub>` (or `jwt`), `oauth:<iss> <sub>`, or `anonymous`. */
  subject: string;
}

/** A refusal: HTTP status, a short plain message, and the `WWW-Authenticate` header when there is one. */
export interface HttpRefusal {
  status: 401 | 403;
  message: string;
  wwwAuthenticate?: string;
}

/** A loaded authenticator. */
export interface HttpAuth {
  /** `--auth` as chosen (`generated` when none was given). */
  mode: "generated" | "none" | "capability-token" | "signed-bearer-token" | "oauth";
  /** The generated token (mode `generated` only): said once on stderr at start, never written to a file. */
  generatedToken?: string;
  /** The files holding a credential (hidden from every sandbox: ../sandbox/secrets.ts). */
  secretFiles: string[];
  /** `--auth-issuer` (oauth: the authorization server named in the protected resource metadata). */
  issuer?: string;
  /** `--auth-scope`: the scopes a token must carry (oauth). */
  scopes: string[];
  /** Check a request's `Authorization` header. `resourceMetadataUrl` goes into 401s (oauth). */
  check(authorization: string | null, resourceMetadataUrl: string): Promise<Principal | HttpRefusal>;
}

const usage = (m: string) => new ShellmcpError("USAGE", m);

/** The exec-server's messages, said with serve's flag names. */
function renamed(e: unknown): unknown {
  if (!(e instanceof ShellmcpError)) return e;
  return new ShellmcpError(
    e.code,
    e.message
      .replace(/--ws-auth\b/g, "--auth")
      .replace(/--ws-/g, "--auth-")
      .replace(/websocket /g, ""),
    e.data,
  );
}

function bearerOf(authorization: string | null): string | undefined {
  if (authorization === null || /[^\t\x20-\x7e]/.test(authorization)) return undefined;
  const m = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  return m?.[1];
}

/**
 * Parse and load the `--auth*` flags; `canonicalUrl()` is this server's endpoint URL once it listens (oauth's
 * default and required audience). Throws `ShellmcpError("USAGE")` naming the flag (secret files others can read are refused, as the
 * exec-server's).
 */
export function loadHttpAuth(a: HttpAuthArgs, canonicalUrl: () => string): HttpAuth {
  if (a.auth === "oauth") return loadOauth(a, canonicalUrl);
  if (a.authJwks !== undefined || a.authScope !== undefined) throw usage("`--auth-jwks` and `--auth-scope` require `--auth oauth`");
  let policy: WsAuthPolicy;
  let mode: HttpAuth["mode"];
  let generatedToken: string | undefined;
  let secretFiles: string[] = [];
  try {
    const s = parseWsAuthArgs({
      wsAuth: a.auth,
      wsTokenFile: a.authTokenFile,
      wsTokenSha256: a.authTokenSha256,
      wsSharedSecretFile: a.authSharedSecretFile,
      wsIssuer: a.authIssuer,
      wsAudience: a.authAudience,
      wsMaxClockSkewSeconds: a.authMaxClockSkewSeconds,
    });
    mode = s.mode;
    if (s.mode === "capability-token" && "tokenFile" in s) secretFiles = [s.tokenFile];
    if (s.mode === "signed-bearer-token") secretFiles = [s.sharedSecretFile];
    if (s.mode === "generated") {
      generatedToken = generateToken();
      policy = policyForToken(generatedToken);
    } else policy = loadWsAuthPolicy(s);
  } catch (e) {
    throw renamed(e);
  }
  return {
    mode,
    generatedToken,
    secretFiles,
    scopes: [],
    async check(authorization) {
      if (policy === undefined) return { subject: "anonymous" };
      const refused = authorizeUpgrade(authorization, policy);
      if (refused !== undefined)
        return { status: 401, message: refused.message.replace(/websocket /g, ""), wwwAuthenticate: 'Bearer realm="shellmcp"' };
      // One capability token: every holder is the one principal (nothing derived from the token is kept or logged).
      if (policy.mode === "capability-token") return { subject: "token" };
      const token = bearerOf(authorization) ?? "";
      const claims = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as { sub?: unknown };
      return { subject: typeof claims.sub === "string" ? `jwt:${claims.sub}` : "jwt" };
    },
  };
}

/** The algorithms an OAuth access token may be signed with (asymmetric only: no HS/RS confusion, no `none`). */
export const OAUTH_ALGORITHMS = ["RS256", "ES256", "EdDSA"] as const;

function loadOauth(a: HttpAuthArgs, canonicalUrl: () => string): HttpAuth {
  if (a.authTokenFile !== undefined || a.authTokenSha256 !== undefined || a.authSharedSecretFile !== undefined)
    throw usage("`--auth-token-file`, `--auth-token-sha256` and `--auth-shared-secret-file` do not go with `--auth oauth`");
  if (a.authIssuer === undefined) throw usage("`--auth oauth` needs `--auth-issuer URL` (the authorization server)");
  if (a.authJwks === undefined) throw usage("`--auth oauth` needs `--auth-jwks FILE|URL` (the authorization server's signing keys)");
  const issuer = a.authIssuer.trim();
  const audience = a.authAudience?.trim();
  const skew = a.authMaxClockSkewSeconds === undefined ? 30 : Number(a.authMaxClockSkewSeconds);
  if (!Number.isSafeInteger(skew) || skew < 0) throw usage("--auth-max-clock-skew-seconds must be a whole number of seconds");
  let keys: JWTVerifyGetKey;
  if (/^https?:\/\//.test(a.authJwks)) {
    const u = new URL(a.authJwks);
    if (u.protocol !== "https:" && !["127.0.0.1", "localhost", "[::1]"].includes(u.hostname))
      throw usage(`--auth-jwks ${a.authJwks}: keys fetched over the network need https (http only on loopback)`);
    keys = createRemoteJWKSet(u);
  } else {
    let text: string;
    try {
      if (!statSync(a.authJwks).isFile()) throw new Error("not a regular file");
      text = readFileSync(a.authJwks, "utf8");
      keys = createLocalJWKSet(JSON.parse(text));
    } catch (e) {
      throw usage(`--auth-jwks ${a.authJwks}: not a readable JSON Web Key Set (${(e as Error).message})`);
    }
  }
  const scopes = (a.authScope ?? "").split(/\s+/).filter((s) => s !== "");
  const challenge = (metadata: string, extra = "") => `Bearer resource_metadata="${metadata}"${extra}`;
  return {
    mode: "oauth",
    secretFiles: [],
    issuer,
    scopes,
    async check(authorization, metadata) {
      if (authorization === null) return { status: 401, message: "missing bearer token", wwwAuthenticate: challenge(metadata) };
      const token = bearerOf(authorization);
      const invalid = (why: string): HttpRefusal => ({
        status: 401,
        message: why,
        wwwAuthenticate: challenge(metadata, `, error="invalid_token", error_description="${why}"`),
      });
      if (token === undefined) return invalid("invalid authorization header");
      let payload: Record<string, unknown>;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer,
          audience: audience ?? canonicalUrl(),
          algorithms: [...OAUTH_ALGORITHMS],
          clockTolerance: skew,
          requiredClaims: ["exp", "iss", "aud"],
        }));
      } catch (e) {
        if (e instanceof joseErrors.JWTExpired) return invalid("expired token");
        if (e instanceof joseErrors.JWTClaimValidationFailed) return invalid(`token ${e.claim} mismatch or not valid yet`);
        return invalid("invalid token");
      }
      if (scopes.length > 0) {
        const granted = new Set(
          typeof payload.scope === "string"
            ? payload.scope.split(" ")
            : Array.isArray(payload.scp)
              ? payload.scp.filter((x): x is string => typeof x === "string")
              : [],
        );
        if (!scopes.every((s) => granted.has(s)))
          return {
            status: 403,
            message: "insufficient scope",
            wwwAuthenticate: challenge(metadata, `, error="insufficient_scope", scope="${scopes.join(" ")}"`),
          };
      }
      return { subject: `oauth:${issuer} ${typeof payload.sub === "string" ? payload.sub : "?"}` };
    },
  };
}

/** Whether `r` is a refusal rather than a principal. */
export function isRefusal(r: Principal | HttpRefusal): r is HttpRefusal {
  return "status" in r;
}
