/**
 * Issue 11, items 5, 6 (sandboxed side) and "normal programs keep working under network-off": protected paths
 * stay read-only when the project lies under /tmp or $TMPDIR (bwrap), a sandboxed command cannot read the
 * server's or the helper's environment under either backend, and seccomp's network-off filter lets `send()` on a
 * socketpair through while still denying `sendto` with an address.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, hostGit, py, requirePrograms, serveWithPid, token } from "../helpers/attack.ts";

requirePrograms("git", "bwrap", "/usr/bin/python3");
afterAll(closeAll);

describe("item 5: .git stays read-only under bwrap when the project is under /tmp or $TMPDIR", () => {
  const made: string[] = [];
  afterEach(() => {
    for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  for (const where of ["/tmp", "$TMPDIR"] as const) {
    test(`project under ${where}: writing .git/config fails inside workspace-write`, async () => {
      const tmpdir = confDir("tmpdir");
      const base = where === "/tmp" ? "/tmp" : tmpdir;
      const repo = mkdtempSync(join(base, "shellmcp-sec-proj-"));
      made.push(repo); // /tmp itself: not under the run's folders
      hostGit(repo, "init", "-q");
      const before = readFileSync(join(repo, ".git", "config"), "utf8");
      const s = await serveWithPid({ args: ["--sandbox-backend", "bwrap"], env: { TMPDIR: tmpdir } });
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, repo)).toEqual({});
      const r = (
        await s.shell({
          command: "echo '[core] fsmonitor = x' >> .git/config; echo rc=$?; mkdir .git/hooks/x; echo rc2=$?; touch ok && echo wrote",
          workdir: repo,
          login: false,
          timeout_ms: 20000,
        })
      ).out;
      expect(r.output).toContain("wrote"); // the project itself is writable
      expect(r.output).toContain("rc=1");
      expect(r.output).toContain("rc2=1");
      expect(readFileSync(join(repo, ".git", "config"), "utf8")).toBe(before);
    }, 60_000);
  }
});

describe("item 6 (sandboxed): the server's and the helper's environment cannot be read", () => {
  for (const backend of ["landlock", "bwrap"] as const) {
    test(`${backend}: /proc/$PPID/environ and every /proc/*/environ hold no server secret`, async () => {
      const secret = `sk-secret-marker-${token()}`;
      const s = await serveWithPid({ args: ["--sandbox-backend", backend], env: { OPENAI_API_KEY: secret } });
      const ws = confDir("ws");
      for (const policy of [{ type: "read-only" }, { type: "workspace-write", network_access: false }]) {
        expect(await s.sandboxState(policy, ws)).toEqual({});
        // Count, do not print: the secret must not show up in any environment the command can read.
        const r = (
          await s.shell({
            command:
              `{ cat /proc/$PPID/environ; p=$PPID; while [ "$p" -gt 1 ]; do cat /proc/$p/environ; p=$(awk '{print $4}' /proc/$p/stat 2>/dev/null || echo 1); done; ` +
              `cat /proc/*/environ /proc/*/task/*/environ; } 2>/dev/null | tr '\\0' '\\n' | grep -c -F '${secret}' | sed 's/^/FOUND /'; echo end`,
            workdir: ws,
            login: false,
            timeout_ms: 20000,
          })
        ).out;
        expect(r.output).toContain("end");
        expect(r.output).toContain("FOUND 0\n");
        expect(r.output).not.toContain(secret);
      }
    }, 60_000);
  }
});

describe("network off: send() on a socketpair works, sendto with an address does not", () => {
  for (const backend of ["landlock", "bwrap"] as const) {
    test(`${backend}: python socket.socketpair().send works; UDP sendto 127.0.0.1 is denied`, async () => {
      const s = await serveWithPid({ args: ["--sandbox-backend", backend] });
      const ws = confDir("ws");
      expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
      const run = async (command: string) => (await s.shell({ command, workdir: ws, login: false, timeout_ms: 20000 })).out;
      const pair = await run(
        py('import socket\na, b = socket.socketpair()\na.send(b"x")\nb.sendall(b"y")\nprint("got", a.recv(1), b.recv(1))'),
      );
      expect(pair.output).toStartWith("got b'y' b'x'\n"); // + the first Landlock call's git guard notice
      const udp = await run(
        py(
          'import socket\ntry:\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto(b"x", ("127.0.0.1", 9))\n    print("SENT")\nexcept OSError as e:\n    print("DENIED", e.errno)',
        ),
      );
      expect(udp.output).toStartWith("DENIED");
    }, 60_000);
  }
});
