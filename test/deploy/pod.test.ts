/**
 * shellmcp in a pod made on this machine (issue 44; ./pod.ts: read-only root, uid 65532 with no passwd entry and no
 * HOME, no capabilities, no_new_privs, new user namespaces refused by a seccomp filter as a runtime's default
 * profile does): `auto` chooses Landlock and says why once, `serve` runs Codex 0.169's workspace-write calls (the
 * git guard undoing a planted hook), the exec-server runs a `process/start` carrying Codex's profile with its token
 * in a Kubernetes secret volume's layout (0440, `..data` symlinks, group = fsGroup), and where Landlock is not
 * offered (gVisor: ENOSYS) the message says so; the first call's weaker-protection notice says that the pod refuses
 * user namespaces (bubblewrap is installed) instead of advising to install bubblewrap.
 *
 * Before the fixes these failed: `serve` answered every call "ENOENT … uv_os_homedir" (or, with HOME set, the
 * helper's crash reported as "not a patched shell"); the exec-server's process/start was refused "which Landlock
 * cannot enforce"; the 0440 token was refused "accessible by group or others"; the ENOSYS message said "needs
 * Linux 5.13+".
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import fixture from "../fixtures/codex-0.169-tools-call-meta.json";
import { ensureBinary, run } from "../helpers/binary.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { PATCHED_SHELLS_DIR } from "../helpers/shells.ts";
import { ExecClient, workspaceWrite } from "../exec-server/client.ts";
import { CODEX, runCodex, startServer, type StartedServer } from "../exec-server/codex-harness.ts";
import { signHs256Jwt } from "../../src/auth/bearer.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { makePod, podMissing, POD_UID, type Pod } from "./pod.ts";

const TOKEN = "pod-capability-token-0123456789abcdef";
const FS_GROUP = 65533;

/** Codex 0.169's `_meta` for a workspace-write call in `proj`. */
function meta(proj: string): Record<string, unknown> {
  const f = fixture as unknown as Record<string, { _meta: Record<string, unknown> }>;
  return JSON.parse(JSON.stringify(f["workspace-write"]!._meta).replaceAll("<proj>", proj));
}

/** A git repository in the pod's workspace, owned by the pod's uid. */
function gitInit(dir: string): void {
  expect(run(["git", "init", "-q", dir]).exitCode).toBe(0);
  expect(run(["chown", "-R", `${POD_UID}:${POD_UID}`, dir]).exitCode).toBe(0);
}

/**
 * A Kubernetes secret volume holding `token` (kubelet's atomic writer: `token -> ..data/token`,
 * `..data -> ..<timestamp>`), files owned by root with group `gid` and `mode`; returns the path the pod reads.
 */
function secretVolume(dir: string, gid: number, mode: number): string {
  const stamp = join(dir, "..2026_11_29_09_00_00.000000001");
  mkdirSync(stamp, { recursive: true, mode: 0o755 });
  writeFileSync(join(stamp, "token"), `${TOKEN}\n`);
  chownSync(join(stamp, "token"), 0, gid);
  chmodSync(join(stamp, "token"), mode);
  symlinkSync("..2026_11_29_09_00_00.000000001", join(dir, "..data"));
  symlinkSync("..data/token", join(dir, "token"));
  chmodSync(dir, 0o1777);
  return join(dir, "token");
}

describe.skipIf(skipWithout("pod simulation", podMissing()))(
  "shellmcp in a pod-like confinement (uid 65532, no HOME, no user namespaces)",
  () => {
    let pod: Pod;
    beforeAll(() => {
      ensureBinary();
      pod = makePod();
    });

    describe("serve", () => {
      let s: Session;
      afterAll(async () => s?.close());

      test("auto chooses Landlock and says why once; Codex's workspace-write call runs, a planted hook is undone", async () => {
        const proj = join(pod.ws, "serve-proj");
        gitInit(proj);
        s = await startServe({
          command: [...pod.argv({ SHELLMCP_SHELLS_DIR: PATCHED_SHELLS_DIR }), ensureBinary()],
          cwd: pod.ws,
        });
        const call = async (command: string) => {
          const raw = (await s.client.callTool(
            { name: "shell", arguments: { command, workdir: proj, login: false }, _meta: meta(proj) },
            undefined,
            {
              timeout: 60_000,
            },
          )) as { content: { text: string }[]; isError?: boolean };
          return raw.content.map((c) => c.text).join("\n");
        };
        const first = await call("id -u; touch made-in-pod; mkdir -p .git/hooks; printf '#!/bin/sh\\n' > .git/hooks/pre-commit");
        expect(first).toContain(String(POD_UID));
        expect(first).not.toContain("Landlock cannot enforce");
        expect(existsSync(join(proj, "made-in-pod"))).toBe(true);
        expect(existsSync(join(proj, ".git", "hooks", "pre-commit"))).toBe(false); // undone by the git guard
        expect(first).toContain("pre-commit");
        // The weaker-protection notice: bubblewrap is installed, the pod refuses user namespaces; nothing to install.
        expect(first).toContain("which is weaker than bubblewrap");
        expect(first).toContain("bubblewrap is installed, but this container or pod refuses new user namespaces");
        expect(first).not.toContain("installing bubblewrap");
        const second = await call("touch second");
        expect(existsSync(join(proj, "second"))).toBe(true);
        expect(second).not.toContain("not a patched shell");
        const err = s.stderr();
        expect(err.split("commands run under Landlock").length - 1).toBe(1);
        expect(err).toContain("seccomp filter");
        expect(err).not.toContain("sysctl");
        expect(err).not.toContain("uv_os_homedir");
      }, 120_000);

      test("with no HOME and no shells folder, the failure names the cause (never 'not a patched shell')", async () => {
        // A copy of the executable with no `shells/` beside it (a checkout's dist/ has one, from scripts/install.sh).
        const lone = join(dirname(pod.ws), "lone");
        mkdirSync(lone, { mode: 0o755 });
        copyFileSync(ensureBinary(), join(lone, "shellmcp"));
        chmodSync(join(lone, "shellmcp"), 0o755);
        const t = await startServe({ command: [...pod.argv(), join(lone, "shellmcp")], cwd: pod.ws });
        try {
          const r = (await t.client.callTool({ name: "shell", arguments: { command: "true", workdir: pod.ws } }, undefined, {
            timeout: 60_000,
          })) as { content: { text: string }[]; isError?: boolean };
          expect(r.isError).toBe(true);
          expect(r.content[0]!.text).toContain("no folder to put the portable bash in");
          expect(r.content[0]!.text).toContain("SHELLMCP_SHELLS_DIR");
          expect(r.content[0]!.text).not.toContain("uv_os_homedir");
          expect(r.content[0]!.text).not.toContain("not a patched shell");
        } finally {
          await t.close();
        }
      }, 120_000);
    });

    describe("exec-server", () => {
      let server: StartedServer | undefined;
      afterAll(async () => server?.stop());

      test("a 0440 token in a secret volume (group = fsGroup) is accepted; Codex's workspace-write process/start runs", async () => {
        const token = secretVolume(join(pod.outside, "secret"), FS_GROUP, 0o440);
        const proj = join(pod.ws, "exec-proj");
        gitInit(proj);
        server = await startServer(
          [
            ...pod.argv({ SHELLMCP_SHELLS_DIR: PATCHED_SHELLS_DIR }, { fsGroup: FS_GROUP }),
            ensureBinary(),
            "exec-server",
            "--listen",
            "ws://127.0.0.1:0",
            "--ws-auth",
            "capability-token",
            "--ws-token-file",
            token,
          ],
          process.env,
          pod.ws,
        );
        const c = await ExecClient.connect(server.url, { authorization: `Bearer ${TOKEN}` });
        await c.init();
        const r = await c.request("process/start", {
          processId: "p1",
          argv: ["/bin/sh", "-c", "id -u; touch made-by-exec; mkdir -p .git/hooks && echo x > .git/hooks/post-checkout; echo done"],
          cwd: proj,
          env: { PATH: "/usr/bin:/bin" },
          tty: false,
          sandbox: workspaceWrite(proj),
        });
        expect(r.error).toBeUndefined();
        const { output, exitCode } = await c.collect("p1");
        c.close();
        expect(output).toContain(String(POD_UID));
        expect(output).toContain("done");
        expect(exitCode).toBe(0);
        expect(existsSync(join(proj, "made-by-exec"))).toBe(true);
        expect(existsSync(join(proj, ".git", "hooks", "post-checkout"))).toBe(false);
      }, 120_000);

      test("a world-readable token in the same layout is refused with the reason", () => {
        const token = secretVolume(join(pod.outside, "secret-444"), FS_GROUP, 0o444);
        const r = run([
          ...pod.argv({}, { fsGroup: FS_GROUP }),
          ensureBinary(),
          "exec-server",
          "--listen",
          "ws://127.0.0.1:0",
          "--ws-auth",
          "capability-token",
          "--ws-token-file",
          token,
        ]);
        expect(r.exitCode).toBe(1);
        expect(r.stderr).toContain("(mode 0444): others can read or write it");
        expect(r.stderr + r.stdout).not.toContain(TOKEN);
      });
    });

    test.skipIf(
      skipWithout("pod simulation: a real Codex turn", CODEX === undefined ? "@openai/codex 0.169 not installed: npm ci" : undefined),
    )(
      "a real Codex 0.169 turn (workspace-write) runs through the pod's exec-server with a token minted for this sandbox",
      async () => {
        // The deployment's late-bound identity (deploy/kubernetes): HS256 tokens whose aud is the pod's own name.
        const SANDBOX = "shellmcp-x7k2p";
        const SECRET = "a-shared-secret-of-at-least-32-bytes-0123456789";
        const dir = join(pod.outside, "jwt-secret");
        const stamp = join(dir, "..2026_11_29_09_00_00.2");
        mkdirSync(stamp, { recursive: true, mode: 0o755 });
        writeFileSync(join(stamp, "ws-secret"), SECRET);
        chownSync(join(stamp, "ws-secret"), 0, FS_GROUP);
        chmodSync(join(stamp, "ws-secret"), 0o440);
        symlinkSync("..2026_11_29_09_00_00.2", join(dir, "..data"));
        symlinkSync("..data/ws-secret", join(dir, "ws-secret"));
        const s = await startServer(
          [
            ...pod.argv({ SHELLMCP_SHELLS_DIR: PATCHED_SHELLS_DIR, SANDBOX_NAME: SANDBOX }, { fsGroup: FS_GROUP, binds: [CONF_BASE] }),
            ensureBinary(),
            ...["exec-server", "--listen", "ws://127.0.0.1:0", "--ws-auth", "signed-bearer-token"],
            ...["--ws-shared-secret-file", join(dir, "ws-secret"), "--ws-audience", SANDBOX],
          ],
          process.env,
          pod.ws,
        );
        try {
          const now = Math.floor(Date.now() / 1000);
          const envToml = (token: string) => () =>
            `default = "box"\ninclude_local = false\n\n[[environments]]\nid = "box"\nurl = "${s.url}"\nauth_bearer_token = "${token}"\n`;
          const steps = ({ proj }: { proj: string }) => [
            { tool: "exec_command" as const, args: { cmd: "echo in-pod; id -u; touch made-by-codex; ls made-by-codex", workdir: proj } },
          ];
          const asUser = { uid: POD_UID, gid: POD_UID };
          const ok = await runCodex({
            serverUrl: s.url,
            sandbox: "workspace-write",
            steps,
            asUser,
            environmentsToml: envToml(signHs256Jwt({ aud: SANDBOX, exp: now + 600 }, SECRET)),
          });
          expect(ok.mock.output(0)).toContain("in-pod");
          expect(ok.mock.output(0)).toContain(String(POD_UID));
          expect(ok.mock.output(0)).toContain("Process exited with code 0");
          expect(existsSync(join(ok.proj, "made-by-codex"))).toBe(true);
          // A token minted for another sandbox is refused.
          const other = await runCodex({
            serverUrl: s.url,
            sandbox: "workspace-write",
            steps,
            asUser,
            environmentsToml: envToml(signHs256Jwt({ aud: "shellmcp-other", exp: now + 600 }, SECRET)),
          });
          expect(other.mock.output(0)).not.toContain("in-pod");
        } finally {
          await s.stop();
        }
      },
      180_000,
    );

    test("where Landlock is not offered (gVisor: ENOSYS) the refusal says so, not 'needs Linux 5.13+'", () => {
      const r = run([...pod.argv({}, { gvisor: true }), ensureBinary(), "sandbox", "linux", "--backend", "landlock", "--", "true"]);
      expect(r.exitCode).toBe(101);
      expect(r.stderr).toContain("Landlock is not offered here");
      expect(r.stderr).toContain("gVisor");
      expect(r.stderr).not.toContain("5.13+");
    });
  },
);
