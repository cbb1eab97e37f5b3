/**
 * `serve --listen https://…` (issue 43): TLS with `--tls-cert/--tls-key` (Bun's server), and the safe defaults
 * for an address other than loopback: authentication chosen and TLS (or `--tls-terminated-by-proxy`), else refused.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { INITIALIZE, postHeaders, refusedStart, startHttpServe, type HttpServe } from "../helpers/http.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";

const skip = skipWithout("serve --listen TLS suite", shellsMissing() ?? toolMissing("openssl"));
const servers: HttpServe[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop().catch(() => undefined);
});

/** A self-signed certificate for 127.0.0.1 and localhost, and its key (PEM files, mode 600). */
function selfSigned(): { cert: string; key: string } {
  const d = mkdtempSync(join(CONF_BASE, "tls-"));
  const cert = join(d, "cert.pem");
  const key = join(d, "key.pem");
  const r = Bun.spawnSync(
    [
      "openssl",
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
    ],
    { stderr: "pipe" },
  );
  if (r.exitCode !== 0) throw new Error(r.stderr.toString());
  return { cert, key };
}

describe.skipIf(skip)("serve --listen https", () => {
  test("https with --tls-cert/--tls-key: a client trusting the certificate gets in with the token; plain http gets nothing", async () => {
    const { cert, key } = selfSigned();
    const s = await startHttpServe({ args: ["--listen", "https://127.0.0.1:0/mcp", "--tls-cert", cert, "--tls-key", key] });
    servers.push(s);
    expect(s.url.protocol).toBe("https:");
    const tls = { ca: readFileSync(cert, "utf8") };
    const r = await fetch(s.url, { method: "POST", headers: postHeaders(s.token), body: INITIALIZE, tls } as RequestInit);
    expect(r.status).toBe(200);
    expect(r.headers.get("mcp-session-id")).toBeTruthy();
    await expect(
      fetch(s.url.href.replace("https:", "http:"), { method: "POST", headers: postHeaders(s.token), body: INITIALIZE }),
    ).rejects.toThrow();
  });

  test("a non-loopback address with auth chosen and TLS starts; without TLS or a proxy flag it is refused", async () => {
    const { cert, key } = selfSigned();
    const sha = createHash("sha256").update("remote-token").digest("hex");
    const auth = ["--auth", "capability-token", "--auth-token-sha256", sha];
    const s = await startHttpServe({ args: ["--listen", "https://0.0.0.0:0/mcp", ...auth, "--tls-cert", cert, "--tls-key", key] });
    servers.push(s);
    const url = `https://127.0.0.1:${s.url.port}/mcp`;
    const tls = { ca: readFileSync(cert, "utf8") };
    const ok = await fetch(url, { method: "POST", headers: postHeaders("remote-token"), body: INITIALIZE, tls } as RequestInit);
    expect(ok.status).toBe(200);
    const foreign = await fetch(url, {
      method: "POST",
      headers: postHeaders("remote-token", { origin: "https://evil.example" }),
      body: INITIALIZE,
      tls,
    } as RequestInit);
    expect(foreign.status).toBe(403);
    const plain = await refusedStart(["--listen", "http://0.0.0.0:0/mcp", ...auth]);
    expect(plain.code).toBe(2);
    expect(plain.stderr).toContain("without TLS");
    const https = await refusedStart(["--listen", "https://127.0.0.1:0/mcp"]);
    expect(https.stderr).toContain("https needs --tls-cert and --tls-key");
  });
});
