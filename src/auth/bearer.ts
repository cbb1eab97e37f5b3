/**
 * Authentication of incoming exec-server websocket upgrades, as `codex exec-server` 0.169 does it
 * (`--ws-auth capability-token|signed-bearer-token`), checked before the upgrade: a refused client never reaches
 * the JSON-RPC layer, so no method runs for it.
 *
 * How the token travels (0.169, observed): the client sends `Authorization: Bearer <token>` on the HTTP upgrade.
 * Codex's client sends it when `$CODEX_HOME/environments.toml` names the server with `url` and `auth_bearer_token`;
 * `CODEX_EXEC_SERVER_URL` cannot carry one (user-info and query are not turned into a header).
 *
 * - capability token: the server keeps only the SHA-256 of the token (from `--ws-token-file`, trimmed, or given as
 *   `--ws-token-sha256`) and compares digests in constant time.
 * - signed bearer token: an HS256 JWT signed with the shared secret (`--ws-shared-secret-file`, trimmed, ≥ 32
 *   bytes); `exp` is required, `nbf` optional, both with `--ws-max-clock-skew-seconds` (default 30); `iss` and `aud`
 *   are checked when `--ws-issuer`/`--ws-audience` are given (`aud` a string or an array containing it).
 *   Verified with node:crypto (HMAC-SHA256 + timingSafeEqual) rather than an npm JWT library: the job is one
 *   algorithm and four claims, which is ~40 lines, while the maintained libraries (jose, jsonwebtoken) bring every
 *   JOSE algorithm and key format (and jsonwebtoken a dependency tree) we would then have to keep from being
 *   selectable.
 *
 * Unlike Codex, authentication is on by default (issue 30: without it every local user could run commands as the
 * server's user): a websocket listener started without `--ws-auth` gets a capability token generated at start
 * ({@link generateToken}: 32 random bytes, base64url), said once on stderr and written to no file unless
 * `--ws-token-out PATH` asks ({@link writeTokenFile}: a file only this user can read, removed when the server
 * stops). Never a file under the temporary folder: every workspace-write sandbox can read (and most can write) it.
 * `--ws-auth none` turns authentication off knowingly. `--listen stdio` needs none (only the process that started the
 * server can talk to it).
 *
 * Refusals are HTTP 401 with Codex's plain-text messages ("missing websocket bearer token", "invalid authorization
 * header", "invalid websocket bearer token", "invalid websocket jwt", "expired websocket jwt", "websocket jwt is not
 * valid yet", "websocket jwt issuer mismatch", "websocket jwt audience mismatch"). Stricter than Codex (a careful
 * server): secret files readable or writable by group or others are refused at start, and a JWT whose `iat` lies
 * beyond the clock skew in the future is refused ("websocket jwt is not valid yet"). No token, digest or secret is
 * ever logged or put in an error.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { ShellmcpError } from "../errors.ts";

/** Codex's default `--ws-max-clock-skew-seconds`. */
export const DEFAULT_MAX_CLOCK_SKEW_SECONDS = 30;

/** Codex's minimum shared-secret length for signed bearer tokens, bytes. */
export const MIN_SIGNED_BEARER_SECRET_BYTES = 32;

/** The websocket auth flags as given on the command line (commander's names). */
export interface WsAuthArgs {
  wsAuth?: string;
  wsTokenFile?: string;
  wsTokenSha256?: string;
  wsSharedSecretFile?: string;
  wsIssuer?: string;
  wsAudience?: string;
  wsMaxClockSkewSeconds?: string;
  /** Where to write the generated token (only without `--ws-auth`). */
  wsTokenOut?: string;
}

/**
 * Validated auth settings (no secret read yet). `generated`: no `--ws-auth` given — a token is generated at start
 * (written to `tokenOut` when given); `none`: `--ws-auth none`, no authentication.
 */
export type WsAuthSettings =
  | { mode: "generated"; tokenOut?: string }
  | { mode: "none" }
  | { mode: "capability-token"; tokenFile: string }
  | { mode: "capability-token"; tokenSha256: Buffer }
  | { mode: "signed-bearer-token"; sharedSecretFile: string; issuer?: string; audience?: string; maxClockSkewSeconds: number };

/** A loaded policy: what {@link authorizeUpgrade} checks against. Holds a digest or the JWT secret, never printed. */
export type WsAuthPolicy =
  | { mode: "capability-token"; tokenSha256: Buffer }
  | { mode: "signed-bearer-token"; secret: Buffer; issuer?: string; audience?: string; maxClockSkewSeconds: number }
  | undefined;

const usage = (message: string) => new ShellmcpError("USAGE", message);

/**
 * The files of `s` that hold a credential (`--ws-token-file`, `--ws-shared-secret-file`, `--ws-token-out`),
 * absolute: hidden from every sandbox of the exec-server (src/sandbox/secrets.ts).
 */
export function secretFilesOf(s: WsAuthSettings): string[] {
  if (s.mode === "generated") return s.tokenOut !== undefined ? [s.tokenOut] : [];
  if (s.mode === "capability-token") return "tokenFile" in s ? [s.tokenFile] : [];
  if (s.mode === "signed-bearer-token") return [s.sharedSecretFile];
  return [];
}

/**
 * Check the flag combination as Codex 0.169 does (same messages). Relative paths are resolved against the current
 * directory (Codex accepts them too). Throws `ShellmcpError("USAGE")`.
 */
export function parseWsAuthArgs(a: WsAuthArgs): WsAuthSettings {
  const trimmedOrUndef = (v: string | undefined) => (v === undefined || v.trim() === "" ? undefined : v.trim());
  const jwtFlags =
    a.wsSharedSecretFile !== undefined || a.wsIssuer !== undefined || a.wsAudience !== undefined || a.wsMaxClockSkewSeconds !== undefined;
  const tokenFlags = a.wsTokenFile !== undefined || a.wsTokenSha256 !== undefined;
  if (a.wsTokenOut !== undefined && a.wsAuth !== undefined)
    throw usage(
      "`--ws-token-out` names where the generated token is written: it goes without `--ws-auth` (with `--ws-auth capability-token`, the token is yours: `--ws-token-file`)",
    );
  switch (a.wsAuth) {
    case undefined:
      if (jwtFlags || tokenFlags)
        throw usage("websocket auth flags require `--ws-auth capability-token` or `--ws-auth signed-bearer-token`");
      return a.wsTokenOut === undefined ? { mode: "generated" } : { mode: "generated", tokenOut: absolute(a.wsTokenOut) };
    case "none":
      if (jwtFlags || tokenFlags) throw usage("`--ws-auth none` takes no other websocket auth flag");
      return { mode: "none" };
    case "capability-token":
      if (jwtFlags)
        throw usage(
          "`--ws-shared-secret-file`, `--ws-issuer`, `--ws-audience`, and `--ws-max-clock-skew-seconds` require `--ws-auth signed-bearer-token`",
        );
      if (a.wsTokenFile !== undefined && a.wsTokenSha256 !== undefined)
        throw usage("`--ws-token-file` and `--ws-token-sha256` are mutually exclusive");
      if (a.wsTokenFile !== undefined) return { mode: "capability-token", tokenFile: absolute(a.wsTokenFile) };
      if (a.wsTokenSha256 !== undefined) return { mode: "capability-token", tokenSha256: parseSha256Hex(a.wsTokenSha256) };
      throw usage("`--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth capability-token` is set");
    case "signed-bearer-token": {
      if (tokenFlags)
        throw usage("`--ws-token-file` and `--ws-token-sha256` require `--ws-auth capability-token`, not `signed-bearer-token`");
      if (a.wsSharedSecretFile === undefined)
        throw usage("`--ws-shared-secret-file` is required when `--ws-auth signed-bearer-token` is set");
      let skew = DEFAULT_MAX_CLOCK_SKEW_SECONDS;
      if (a.wsMaxClockSkewSeconds !== undefined) {
        if (!/^\d+$/.test(a.wsMaxClockSkewSeconds))
          throw usage(
            `invalid value '${a.wsMaxClockSkewSeconds}' for '--ws-max-clock-skew-seconds <SECONDS>': invalid digit found in string`,
          );
        skew = Number(a.wsMaxClockSkewSeconds);
        if (!Number.isSafeInteger(skew)) throw usage("websocket auth clock skew must fit in a signed 64-bit integer");
      }
      return {
        mode: "signed-bearer-token",
        sharedSecretFile: absolute(a.wsSharedSecretFile),
        issuer: trimmedOrUndef(a.wsIssuer),
        audience: trimmedOrUndef(a.wsAudience),
        maxClockSkewSeconds: skew,
      };
    }
    default:
      throw usage(`invalid value '${a.wsAuth}' for '--ws-auth <MODE>': expected 'capability-token', 'signed-bearer-token' or 'none'`);
  }
}

function absolute(p: string): string {
  return isAbsolute(p) ? p : resolve(p);
}

function parseSha256Hex(v: string): Buffer {
  const t = v.trim();
  if (!/^[0-9a-fA-F]{64}$/.test(t)) throw usage("--ws-token-sha256 must be a 64-character hex SHA-256 digest");
  return Buffer.from(t, "hex");
}

/**
 * Read a secret file, trimmed, as Codex does ("failed to read websocket auth secret PATH: …", "… must not be
 * empty"), and — unlike Codex — refuse one that is not a regular file or that group or others may read or write
 * (a token other local users can read protects nothing). Throws `ShellmcpError("USAGE")`; the message never
 * contains the file's content.
 */
export function readSecretFile(path: string): string {
  let raw: string;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw usage(`websocket auth secret ${path} is not a regular file`);
    const problem = secretFileModeProblem(path, st);
    if (problem !== undefined) throw usage(problem);
    raw = readFileSync(path, "utf8");
  } catch (e) {
    if (e instanceof ShellmcpError) throw e;
    throw usage(`failed to read websocket auth secret ${path}: ${osText(e)}`);
  }
  const t = raw.trim();
  if (t === "") throw usage(`websocket auth secret ${path} must not be empty`);
  return t;
}

/**
 * Why the secret file `path` (its `stat`, symlinks followed: a Kubernetes secret volume's `token -> ..data/token`,
 * `..data -> ..2026_…` layout reads as the file it leads to) is too open to be a secret, or undefined when it is not.
 * Accepted:
 * - no group or other access bits (`0600`, `0400`), as before;
 * - a file only root and this process's own group can read and nobody can write: owner root or this uid, group
 *   this process's gid or one of its supplementary groups (a pod's `fsGroup`), mode with no write bit and no other
 *   bit (`0440`, `0400`) — what Kubernetes makes of a secret volume for a non-root pod with `fsGroup`, whatever
 *   `defaultMode` says (kubernetes/kubernetes#57923; issue 44).
 * Refused, with the mode and the fix: anything others can read or write, anything a group can write, and a
 * group-readable file that is writable by its owner or belongs to a group this process is not in.
 */
export function secretFileModeProblem(
  path: string,
  st: { mode: number; uid: number; gid: number },
  me: { uid: number; gids: readonly number[] } = {
    uid: process.getuid?.() ?? -1,
    gids: [process.getgid?.() ?? -1, ...(process.getgroups?.() ?? [])],
  },
): string | undefined {
  const mode = st.mode & 0o777;
  if ((mode & 0o066) === 0) return undefined;
  const octal = mode.toString(8).padStart(4, "0");
  const groupOnly = (mode & 0o226) === 0 && (st.uid === 0 || st.uid === me.uid) && me.gids.includes(st.gid);
  if (groupOnly) return undefined;
  const why =
    (mode & 0o006) !== 0
      ? "others can read or write it"
      : (mode & 0o020) !== 0
        ? "its group can write it"
        : (mode & 0o200) !== 0
          ? "its group can read it and it is writable (a group-readable secret must be writable by nobody, as a Kubernetes secret volume's 0440)"
          : !me.gids.includes(st.gid)
            ? `its group ${st.gid} can read it and this process is not in that group`
            : `its group can read it and its owner ${st.uid} is neither root nor this user`;
  return `websocket auth secret ${path} is accessible by group or others (mode ${octal}): ${why}; run \`chmod 600 ${path}\``;
}

function osText(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  const texts: Record<string, [string, number]> = {
    ENOENT: ["No such file or directory", 2],
    EACCES: ["Permission denied", 13],
    EISDIR: ["Is a directory", 21],
    ENOTDIR: ["Not a directory", 20],
  };
  const t = err.code === undefined ? undefined : texts[err.code];
  return t === undefined ? err.message : `${t[0]} (os error ${t[1]})`;
}

/**
 * Load the secrets once (later changes to the files are not seen, as in Codex). `generated` is loaded from its
 * token with {@link policyForToken}, not here (undefined). Throws `ShellmcpError("USAGE")`.
 */
export function loadWsAuthPolicy(s: WsAuthSettings): WsAuthPolicy {
  if (s.mode === "none" || s.mode === "generated") return undefined;
  if (s.mode === "capability-token") {
    if ("tokenSha256" in s) return { mode: "capability-token", tokenSha256: s.tokenSha256 };
    return { mode: "capability-token", tokenSha256: sha256(Buffer.from(readSecretFile(s.tokenFile), "utf8")) };
  }
  const secret = Buffer.from(readSecretFile(s.sharedSecretFile), "utf8");
  if (secret.length < MIN_SIGNED_BEARER_SECRET_BYTES)
    throw usage(`signed websocket bearer secret ${s.sharedSecretFile} must be at least ${MIN_SIGNED_BEARER_SECRET_BYTES} bytes`);
  return { mode: "signed-bearer-token", secret, issuer: s.issuer, audience: s.audience, maxClockSkewSeconds: s.maxClockSkewSeconds };
}

function sha256(b: Buffer): Buffer {
  return createHash("sha256").update(b).digest();
}

/** Bytes of randomness in a generated capability token (256 bits). */
export const GENERATED_TOKEN_BYTES = 32;

/** A fresh capability token: {@link GENERATED_TOKEN_BYTES} random bytes, base64url (43 characters, no padding). */
export function generateToken(): string {
  return randomBytes(GENERATED_TOKEN_BYTES).toString("base64url");
}

/** The capability-token policy that accepts exactly `token` (its SHA-256 is kept, not the token). */
export function policyForToken(token: string): WsAuthPolicy {
  return { mode: "capability-token", tokenSha256: sha256(Buffer.from(token, "utf8")) };
}

/** Where a generated token was written, and how to remove it (idempotent, never throws). */
export interface TokenFile {
  path: string;
  remove(): void;
}

/**
 * Write `token` (plus a newline) to `path`, a file only this user can read (`--ws-token-out`: an existing file or
 * link there is replaced; the new file is created exclusively, never through a link). The file is created with mode
 * `0600` and checked after opening (a regular file of this user, one link, no group/other bits). `remove()` deletes
 * it. Throws `ShellmcpError("USAGE")` with the path and the OS reason. There is no default place: the temporary
 * folder, the only one every user has, is readable by every workspace-write sandbox.
 */
export function writeTokenFile(token: string, path: string): TokenFile {
  let created = false;
  const target = path;
  try {
    try {
      if (!lstatSync(target).isDirectory()) unlinkSync(target);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
    const fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    created = true;
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || st.nlink !== 1 || st.uid !== process.getuid?.() || (st.mode & 0o077) !== 0)
        throw new Error("not a private regular file of this user after creation");
      writeSync(fd, `${token}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    if (created) unlinkSync(target);
    throw usage(`cannot write the websocket auth token to ${path}: ${osText(e)}`);
  }
  let removed = false;
  const written = target;
  return {
    path: written,
    remove() {
      if (removed) return;
      removed = true;
      try {
        unlinkSync(written);
      } catch {
        // already gone
      }
    },
  };
}

/** Why an upgrade was refused: HTTP status (401) and Codex's message (the response body). */
export interface AuthRefusal {
  status: 401;
  message: string;
}

const refuse = (message: string): AuthRefusal => ({ status: 401, message });

/**
 * Check an upgrade request's `Authorization` header against `policy`. Returns undefined when the connection may
 * proceed (always when there is no policy), else the refusal. `nowSeconds` is the Unix time (tests). Checked once
 * per connection, at the upgrade (as Codex: expiry does not end an established connection).
 */
export function authorizeUpgrade(
  authorization: string | null,
  policy: WsAuthPolicy,
  nowSeconds = Date.now() / 1000,
): AuthRefusal | undefined {
  if (policy === undefined) return undefined;
  if (authorization === null) return refuse("missing websocket bearer token");
  // Codex reads the header as visible ASCII (tab and space allowed); anything else is not a header it accepts.
  if (/[^\t\x20-\x7e]/.test(authorization)) return refuse("invalid authorization header");
  const sp = authorization.indexOf(" ");
  if (sp < 0 || authorization.slice(0, sp).toLowerCase() !== "bearer") return refuse("invalid authorization header");
  const token = authorization.slice(sp + 1).trim();
  if (token === "") return refuse("invalid authorization header");
  if (policy.mode === "capability-token") {
    return timingSafeEqual(sha256(Buffer.from(token, "utf8")), policy.tokenSha256) ? undefined : refuse("invalid websocket bearer token");
  }
  return verifyJwt(token, policy, Math.floor(nowSeconds));
}

const B64URL = /^[A-Za-z0-9_-]*$/;

function b64urlJson(part: string): unknown {
  if (!B64URL.test(part)) throw new Error("not base64url");
  return JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
}

/** HS256 JWT checks in Codex's order: signature/shape, exp, nbf (then our iat), iss, aud. */
function verifyJwt(
  token: string,
  p: Exclude<WsAuthPolicy, undefined | { mode: "capability-token" }>,
  now: number,
): AuthRefusal | undefined {
  const invalid = refuse("invalid websocket jwt");
  const parts = token.split(".");
  if (parts.length !== 3) return invalid;
  const [h, c, s] = parts as [string, string, string];
  let header: unknown;
  let claims: unknown;
  try {
    header = b64urlJson(h);
    claims = b64urlJson(c);
  } catch {
    return invalid;
  }
  if (typeof header !== "object" || header === null || (header as { alg?: unknown }).alg !== "HS256") return invalid;
  if (!B64URL.test(s)) return invalid;
  const expected = createHmac("sha256", p.secret).update(`${h}.${c}`).digest();
  const given = Buffer.from(s, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return invalid;
  if (typeof claims !== "object" || claims === null || Array.isArray(claims)) return invalid;
  const cl = claims as Record<string, unknown>;
  const int = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v);
  if (!int(cl.exp)) return invalid;
  if (cl.nbf !== undefined && cl.nbf !== null && !int(cl.nbf)) return invalid;
  if (cl.iss !== undefined && cl.iss !== null && typeof cl.iss !== "string") return invalid;
  const aud = cl.aud;
  if (aud !== undefined && aud !== null && typeof aud !== "string" && !(Array.isArray(aud) && aud.every((x) => typeof x === "string")))
    return invalid;
  const skew = p.maxClockSkewSeconds;
  if (now > (cl.exp as number) + skew) return refuse("expired websocket jwt");
  if (typeof cl.nbf === "number" && now < cl.nbf - skew) return refuse("websocket jwt is not valid yet");
  if (typeof cl.iat === "number" && now < cl.iat - skew) return refuse("websocket jwt is not valid yet");
  if (p.issuer !== undefined && cl.iss !== p.issuer) return refuse("websocket jwt issuer mismatch");
  if (p.audience !== undefined && !(aud === p.audience || (Array.isArray(aud) && aud.includes(p.audience))))
    return refuse("websocket jwt audience mismatch");
  return undefined;
}

/**
 * Sign an HS256 JWT with `secret` (for tests and for operators minting a token for `auth_bearer_token`; the
 * server only verifies). `claims` are serialised as given.
 */
export function signHs256Jwt(claims: Record<string, unknown>, secret: string | Buffer): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o), "utf8").toString("base64url");
  const head = `${enc({ alg: "HS256", typ: "JWT" })}.${enc(claims)}`;
  return `${head}.${createHmac("sha256", secret).update(head).digest("base64url")}`;
}
