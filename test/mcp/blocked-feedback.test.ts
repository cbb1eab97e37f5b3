/**
 * Blocked-action feedback (issue 41, docs/blocked-actions.md): every action a layer refused is reported in the
 * `shell` result as a `shellmcp: blocked (<layer>) <target>: <remedy>` line and in `_meta["shellmcp/blocked"]`, with
 * `isError` set; a command's ordinary failures (a missing file, its own permission error) are reported as nothing.
 * The compiled binary, the MCP SDK client, both Linux backends.
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chownSync, mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session, type ShellOutput } from "../helpers/mcp.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";

const skip = skipWithout("blocked-action feedback suite", shellsMissing() ?? toolMissing("bwrap", "git", "curl", "python3"));

interface Blocked {
  layer: string;
  target: string;
  remedy: string;
}

const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
});

/** A fresh folder outside every default writable root (CONF_BASE: not /tmp, not TMPDIR). */
function folder(prefix: string): string {
  const d = join(CONF_BASE, `${prefix}-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  return realpathSync(d);
}

/** One `shell` call: the parsed output, isError, and the structured report (`[]` when absent). */
async function run(s: Session, ws: string, command: string): Promise<{ out: ShellOutput; isError: boolean; blocked: Blocked[] }> {
  const r = await s.shell({ command, workdir: ws, login: false, timeout_ms: 30_000 });
  const meta = r.raw._meta as Record<string, unknown> | undefined;
  return { out: r.out, isError: r.isError, blocked: (meta?.["shellmcp/blocked"] as Blocked[] | undefined) ?? [] };
}

/** The `shellmcp: blocked` lines of an output. */
function blockedLines(output: string): string[] {
  return output.split("\n").filter((l) => l.startsWith("shellmcp: blocked"));
}

describe.skipIf(skip)("blocked-action feedback (compiled binary, SDK client)", () => {
  for (const backend of ["bwrap", "landlock"] as const) {
    describe(backend, () => {
      let s: Session;
      let ws: string;
      let outside: string;
      beforeAll(async () => {
        ws = folder("ws");
        outside = folder("outside");
        expect(Bun.spawnSync(["git", "init", "-q", ws]).exitCode).toBe(0);
        writeFileSync(join(ws, "tool.sh"), "#!/bin/sh\necho tool ran\n", { mode: 0o755 });
        s = await startServe({
          args: ["--sandbox-backend", backend],
          rules: [
            'prefix_rule(pattern=["rm"], decision="forbidden")',
            'prefix_rule(pattern=["shred"], decision="prompt")',
            `prefix_rule(pattern=["${ws}/tool.sh"], decision="allow")`,
          ].join("\n"),
        });
        sessions.push(s);
        expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
      });

      test("sandbox-write: a write outside the writable roots names the path and the writable-roots settings", async () => {
        const r = await run(s, ws, `echo x > ${outside}/f`);
        expect(r.isError).toBe(true);
        expect(r.blocked).toEqual([{ layer: "sandbox-write", target: `${outside}/f`, remedy: expect.stringContaining("writable_roots") }]);
        expect(blockedLines(r.out.output)).toEqual([`shellmcp: blocked (sandbox-write) ${outside}/f: ${r.blocked[0]!.remedy}`]);
        expect(r.blocked[0]!.remedy).toContain("--add-dir");
        // The shell's own error line names it as the user would, not by the carried shell's internal path.
        expect(r.out.output).toStartWith(`bash: line 1: ${outside}/f: `);
      });

      test("protected-path: git commit without a rule (bubblewrap: names .git/index.lock and the prefix_rule; Landlock: the kernel lets it, no report)", async () => {
        const r = await run(s, ws, "git -c user.name=t -c user.email=t@e commit -q --allow-empty -m x");
        if (backend === "landlock") {
          expect(r.out.exit_code).toBe(0);
          expect(r.blocked).toEqual([]);
          return;
        }
        expect(r.isError).toBe(true);
        expect(r.blocked).toEqual([
          {
            layer: "protected-path",
            target: `${ws}/.git/index.lock`,
            remedy: expect.stringContaining('prefix_rule(pattern=["git", "commit"]'),
          },
        ]);
        expect(blockedLines(r.out.output)).toHaveLength(1);
      });

      test("protected-path: a git hook (bubblewrap: refused by the kernel; Landlock: undone by the git guard), reported on both", async () => {
        const r = await run(s, ws, "printf '#!/bin/sh\\n' > .git/hooks/pre-commit");
        expect(r.isError).toBe(true);
        expect(r.blocked).toHaveLength(1);
        expect(r.blocked[0]!.layer).toBe("protected-path");
        if (backend === "bwrap") expect(r.blocked[0]!.target).toBe(`${ws}/.git/hooks/pre-commit`);
        else {
          expect(r.blocked[0]!.target).toEndWith("/.git/hooks/pre-commit");
          expect(r.blocked[0]!.remedy).toContain("put back after every call");
        }
        expect(blockedLines(r.out.output)).toHaveLength(1);
      });

      test("protected-path: .codex in the workspace (bubblewrap: read-only; Landlock: no kernel refusal, so no report)", async () => {
        const r = await run(s, ws, "echo x > .codex/config.toml");
        if (backend === "bwrap") {
          expect(r.blocked.map((b) => [b.layer, b.target])).toEqual([["protected-path", `${ws}/.codex/config.toml`]]);
          expect(r.isError).toBe(true);
        } else expect(r.blocked).toEqual([]);
      });

      test("network off: a host curl cannot resolve, and a socket the seccomp filter refuses", async () => {
        // A UDP socket: refused with the network off on both backends (bubblewrap's calls share the server's
        // loopback network, where TCP is allowed: docs/sessions.md).
        const r = await run(
          s,
          ws,
          "curl -sS http://blocked-feedback.example/; python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'",
        );
        expect(r.isError).toBe(true);
        // `python3 -c` shows no source line: nothing in the output says which family was refused.
        expect(r.blocked.map((b) => [b.layer, b.target])).toEqual([
          ["network", "blocked-feedback.example"],
          ["network", "socket"],
        ]);
        expect(r.blocked[0]!.remedy).toContain("network_access = true");
        expect(blockedLines(r.out.output)).toHaveLength(2);
      });

      test("network off: a refused AF_UNIX socket is a unix socket, a refused AF_INET one an internet socket", async () => {
        // Datagram sockets: AF_UNIX ones are refused with the network off on both backends (Landlock's filter allows
        // only AF_UNIX streams and seqpackets; bubblewrap's loopback network, proxy mode's, no new AF_UNIX socket).
        // Scripts, so that Python's traceback shows the line that names the family.
        writeFileSync(join(ws, "dgram1.py"), "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n");
        writeFileSync(join(ws, "dgram2.py"), "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n");
        const r = await run(s, ws, "python3 dgram1.py; python3 dgram2.py");
        expect(r.isError).toBe(true);
        expect(r.out.output).toContain("PermissionError: [Errno 1] Operation not permitted");
        expect(r.blocked.map((b) => [b.layer, b.target])).toEqual([
          ["network", "unix socket"],
          ["network", "internet socket"],
        ]);
        expect(blockedLines(r.out.output)).toHaveLength(2);
      });

      test("rule: a forbidden prefix_rule names the program and the rule", async () => {
        const r = await run(s, ws, "rm -f nothing");
        expect(r.isError).toBe(true);
        expect(r.blocked).toEqual([
          { layer: "rule", target: "rm -f nothing", remedy: expect.stringContaining('prefix_rule(pattern=["rm"], decision="forbidden")') },
        ]);
        expect(blockedLines(r.out.output)[0]).toStartWith("shellmcp: blocked (rule) rm -f nothing: ");
      });

      test("approval: a prompt rule with a client that cannot ask names the rule to change", async () => {
        const r = await run(s, ws, "shred -u nothing");
        expect(r.isError).toBe(true);
        expect(r.blocked.map((b) => [b.layer, b.target])).toEqual([["approval", "shred -u nothing"]]);
        expect(r.blocked[0]!.remedy).toContain('change that rule\'s decision to "allow"');
      });

      test("escalation: an allowed program the sandbox could have written runs inside it, reported (not an error)", async () => {
        const r = await run(s, ws, `${ws}/tool.sh`);
        expect(r.out.output).toStartWith("tool ran\n");
        expect(r.blocked.map((b) => [b.layer, b.target])).toEqual([["escalation", `${ws}/tool.sh`]]);
        expect(r.isError).toBe(false);
      });

      test("exec_command: a session that ends after a refused write reports it in its last result", async () => {
        const raw = (await s.client.callTool(
          { name: "exec_command", arguments: { cmd: `echo x > ${outside}/g; rm -f y`, workdir: ws, yield_time_ms: 10_000 } },
          undefined,
          { timeout: 60_000 },
        )) as { content: { text: string }[]; isError?: boolean; _meta?: Record<string, unknown> };
        expect(raw.content[0]!.text).toContain("Process exited with code 1");
        expect(raw.isError).toBe(true);
        expect((raw._meta?.["shellmcp/blocked"] as Blocked[]).map((b) => [b.layer, b.target])).toEqual([
          ["rule", "rm -f y"],
          ["sandbox-write", `${outside}/g`],
        ]);
        expect(blockedLines(raw.content[0]!.text)).toHaveLength(2);
      });

      test("silence: a missing file, a program's own permission error, a failing command", async () => {
        const r = await run(
          s,
          ws,
          "ls /nonexistent; cat /nonexistent; cat < /nonexistent; touch own && chmod 000 own && (echo y > own); false",
        );
        expect(r.out.exit_code).toBe(1);
        expect(r.blocked).toEqual([]);
        expect(blockedLines(r.out.output)).toEqual([]);
        expect(r.isError).toBe(false);
        expect(r.out.output).toContain("bash: line 1: /nonexistent: No such file or directory\n");
      });
    });
  }

  for (const backend of ["bwrap", "landlock"] as const)
    test(`${backend}, zsh: its error lines say zsh, and its refused writes are recognised`, async () => {
      const ws = folder("ws-zsh");
      const outside = folder("outside-zsh");
      const z = await startServe({ args: ["--shell", "zsh", "--sandbox-backend", backend, "--sandbox", "workspace-write", "--cd", ws] });
      sessions.push(z);
      const r = await run(z, ws, `echo $0; echo x > ${outside}/f`);
      expect(r.out.output).toStartWith(
        `zsh\nzsh:1: ${backend === "bwrap" ? "read-only file system" : "permission denied"}: ${outside}/f\n`,
      );
      expect(r.blocked.map((b) => [b.layer, b.target])).toEqual([["sandbox-write", `${outside}/f`]]);
    });

  // The server as a normal user (nobody, through setpriv): a write the user could not make outside the sandbox either
  // (/etc/passwd, /root) is that program's own failure, not the sandbox's, and is not reported.
  const asNobody = process.getuid?.() === 0 && Bun.which("setpriv") !== null;
  for (const backend of ["bwrap", "landlock"] as const)
    test.skipIf(!asNobody)(
      `${backend}, as an unprivileged user: only what the user could write outside the sandbox is reported`,
      async () => {
        const home = folder("home-nobody");
        const ws = folder("ws-nobody");
        const mine = folder("outside-nobody");
        for (const d of [home, ws, mine]) chownSync(d, 65534, 65534);
        const n = await startServe({
          codexHome: home,
          command: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", ensureBinary()],
          args: ["--sandbox-backend", backend, "--sandbox", "workspace-write", "--cd", ws],
        });
        sessions.push(n);
        const r = await run(n, ws, `id -u; echo x > /etc/passwd; echo x > /etc/new; echo x > /root/x; echo x > ${mine}/f`);
        expect(r.out.output).toStartWith("65534\n");
        expect(r.blocked.map((b) => [b.layer, b.target])).toEqual([["sandbox-write", `${mine}/f`]]);
      },
    );

  for (const backend of ["bwrap", "landlock"] as const)
    test(`${backend}, network proxy: a refused host is reported with host:port and the domains key`, async () => {
      const codexHome = folder("home");
      writeFileSync(
        join(codexHome, "config.toml"),
        'default_permissions = "agent"\n[features]\nnetwork_proxy = true\n[permissions.agent]\nextends = ":workspace"\n[permissions.agent.network]\nenabled = true\n[permissions.agent.network.domains]\n"allowed.example" = "allow"\n',
      );
      const p = await startServe({ codexHome, args: ["--sandbox-backend", backend] });
      sessions.push(p);
      const ws = folder("ws");
      await p.sandboxState({ type: "workspace-write", network_access: true }, ws);
      const r = await run(p, ws, "curl -sS -o /dev/null -w '%{http_code}\\n' http://refused.example:8080/");
      expect(r.out.output).toStartWith("403\n");
      expect(r.isError).toBe(true);
      expect(r.blocked).toEqual([
        { layer: "network", target: "refused.example:8080", remedy: expect.stringContaining('"refused.example" = "allow"') },
      ]);
      expect(blockedLines(r.out.output)).toHaveLength(1);
    });
});
