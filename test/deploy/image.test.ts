/**
 * The OCI image (issue 44): `bash scripts/build-image.sh` builds an OCI archive from the release tarball that
 * podman loads, running as 65532, carrying no secret; its root filesystem, run as the pod would (./pod.ts: read-only,
 * uid 65532, no capabilities, no user namespaces, the token in a secret volume's layout), answers /readyz and runs a
 * `process/start` carrying Codex's workspace-write profile under Landlock.
 *
 * Which base: `--base scratch` by default (needs no network: the executable and its four glibc libraries, so the
 * process started is the executable itself), `SHELLMCP_TEST_IMAGE_BASE=debian` for the documented default (mmdebstrap
 * from a Debian mirror, ~3 minutes here; the process started is /bin/sh). Building needs root, tar, gzip, python3;
 * podman is used when installed (`podman load` into a throwaway store); without it the OCI layout is checked alone.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { ROOT } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { ExecClient, workspaceWrite } from "../exec-server/client.ts";
import { startServer } from "../exec-server/codex-harness.ts";
import { makePod, podMissing, POD_UID } from "./pod.ts";

const BASE = process.env.SHELLMCP_TEST_IMAGE_BASE === "debian" ? "debian" : "scratch";
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const IMAGE = join(ROOT, "dist", "image", `shellmcp-${VERSION}-linux-x64${BASE === "debian" ? "" : "-scratch"}.oci.tar`);
const TOKEN = "image-pod-token-0123456789abcdef";

function missing(): string | undefined {
  if (process.platform !== "linux" || process.arch !== "x64") return "builds the linux-x64 image on Linux x86-64 only";
  if (process.getuid?.() !== 0) return "scripts/build-image.sh runs as root";
  return toolMissing("tar", "gzip", "python3", ...(BASE === "debian" ? ["mmdebstrap"] : [])) ?? podMissing();
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe.skipIf(skipWithout(`OCI image (base ${BASE})`, missing()))(`the OCI image (base ${BASE})`, () => {
  const work = mkdtempSync(join(CONF_BASE, "image-"));
  afterAll(() => rmSync(work, { recursive: true, force: true }));
  const rootfs = join(work, "rootfs");
  let config: Record<string, any>;

  test("build-image.sh builds an OCI archive: digests check, user 65532, entrypoints named, no secret inside", () => {
    const r = Bun.spawnSync(["bash", join(ROOT, "scripts", "build-image.sh"), "--base", BASE], {
      cwd: ROOT,
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(r.stderr.toString() + r.stdout.toString()).toContain(IMAGE);
    expect(r.exitCode).toBe(0);
    const layout = join(work, "oci");
    mkdirSync(layout);
    expect(Bun.spawnSync(["tar", "-xf", IMAGE, "-C", layout]).exitCode).toBe(0);
    expect(JSON.parse(readFileSync(join(layout, "oci-layout"), "utf8"))).toEqual({ imageLayoutVersion: "1.0.0" });
    const blob = (digest: string) => {
      const b = readFileSync(join(layout, "blobs", "sha256", digest.slice("sha256:".length)));
      expect(`sha256:${sha256(b)}`).toBe(digest);
      return b;
    };
    const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8"));
    expect(index.manifests[0].annotations["org.opencontainers.image.ref.name"]).toBe(`localhost/shellmcp:${VERSION}`);
    const manifest = JSON.parse(blob(index.manifests[0].digest).toString());
    config = JSON.parse(blob(manifest.config.digest).toString());
    expect(config.config.User).toBe("65532:65532");
    expect(config.config.Entrypoint).toEqual(["/usr/local/bin/shellmcp"]);
    expect(config.config.Cmd[0]).toBe("exec-server");
    expect(config.config.Labels["io.shellmcp.entrypoint.serve"]).toBe("shellmcp serve");
    expect(config.config.Labels["io.shellmcp.entrypoint.mcp-http"]).toBeDefined();
    mkdirSync(rootfs);
    manifest.layers.forEach((l: { digest: string }, i: number) => {
      const raw = gunzipSync(blob(l.digest));
      expect(`sha256:${sha256(raw)}`).toBe(config.rootfs.diff_ids[i]);
      const f = join(work, `layer${i}.tar`);
      writeFileSync(f, raw);
      const list = Bun.spawnSync(["tar", "-tvf", f], { stdout: "pipe" }).stdout.toString();
      // No secret: nothing named like a token, key or credential, and the secret mount point is empty.
      expect(
        list.split("\n").filter((line) => /token|secret|\.pem$|id_rsa|credentials|auth\.json/i.test(line) && !line.endsWith("/")),
      ).toEqual([]);
      expect(Bun.spawnSync(["tar", "-xf", f, "-C", rootfs]).exitCode).toBe(0);
    });
    expect(existsSync(join(rootfs, "opt", "shellmcp", "shellmcp"))).toBe(true);
    expect(existsSync(join(rootfs, "etc", "codex", "rules", "agent.rules"))).toBe(true);
  }, 600_000);

  test.skipIf(toolMissing("podman") !== undefined)(
    "podman loads it (into a throwaway store)",
    () => {
      // podman refuses a run root path longer than 50 characters: a short folder, removed at the end.
      const store = mkdtempSync("/tmp/smcp-pm-");
      afterAll(() => rmSync(store, { recursive: true, force: true }));
      const p = (...a: string[]) =>
        Bun.spawnSync(["podman", "--root", join(store, "root"), "--runroot", join(store, "run"), "--storage-driver", "vfs", ...a], {
          stdout: "pipe",
          stderr: "pipe",
        });
      const load = p("load", "-i", IMAGE);
      expect(load.stderr.toString() + load.stdout.toString()).toContain(`localhost/shellmcp:${VERSION}`);
      const inspect = p("image", "inspect", `localhost/shellmcp:${VERSION}`, "--format", "{{.Config.User}}");
      expect(inspect.stdout.toString().trim()).toBe("65532:65532");
    },
    300_000,
  );

  test("its root, run as the pod would: /readyz answers, a 0440 token is accepted, Codex's workspace-write process/start runs", async () => {
    expect(config).toBeDefined();
    const pod = makePod(rootfs);
    const secrets = join(pod.outside, "secret");
    const stamp = join(secrets, "..2026_11_29_09_00_00.3");
    mkdirSync(stamp, { recursive: true, mode: 0o755 });
    writeFileSync(join(stamp, "token"), `${TOKEN}\n`);
    chownSync(join(stamp, "token"), 0, POD_UID + 1);
    chmodSync(join(stamp, "token"), 0o440);
    symlinkSync("..2026_11_29_09_00_00.3", join(secrets, "..data"));
    symlinkSync("..data/token", join(secrets, "token"));
    const env = Object.fromEntries((config.config.Env as string[]).map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
    const server = await startServer(
      [
        ...pod.argv(env, { fsGroup: POD_UID + 1, secrets }),
        ...config.config.Entrypoint,
        ...[
          "exec-server",
          "--listen",
          "ws://127.0.0.1:0",
          "--ws-auth",
          "capability-token",
          "--ws-token-file",
          "/run/secrets/shellmcp/token",
        ],
      ],
      process.env,
    );
    try {
      const ready = await fetch(server.url.replace("ws://", "http://") + "/readyz");
      expect(ready.status).toBe(200);
      const c = await ExecClient.connect(server.url, { authorization: `Bearer ${TOKEN}` });
      await c.init();
      const argv =
        BASE === "debian" ? ["/bin/sh", "-c", "id -u; touch made-in-image; echo done"] : ["/usr/local/bin/shellmcp", "--version"];
      const r = await c.request("process/start", {
        processId: "p1",
        argv,
        cwd: pod.wsInside,
        env: { PATH: "/usr/local/bin:/usr/bin:/bin" },
        tty: false,
        sandbox: workspaceWrite(pod.wsInside),
      });
      expect(r.error).toBeUndefined();
      const { output, exitCode } = await c.collect("p1");
      c.close();
      expect(exitCode).toBe(0);
      if (BASE === "debian") {
        expect(output).toContain(String(POD_UID));
        expect(existsSync(join(pod.ws, "made-in-image"))).toBe(true);
      } else expect(output).toContain(VERSION);
    } finally {
      await server.stop();
    }
  }, 120_000);
});
