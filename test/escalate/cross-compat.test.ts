/**
 * Wire compatibility with the Rust original (`@openai/codex-shell-tool-mcp@0.97.0`), both ways:
 * - the reference `codex-execve-wrapper` against our escalation server;
 * - our wrapper (the compiled binary) against the reference `codex-exec-mcp-server`.
 * Run, Escalate and Deny each.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EscalationServer } from "../../src/escalate/server.ts";
import { BoundaryPlacement } from "../../src/escalate/placement.ts";
import type { ResolvedRequest } from "../../src/escalate/decision/request.ts";
import { tempDir } from "../helpers/binary.ts";
import { ourWrapper, runInShell } from "../helpers/escalation.ts";
import { referenceShellToolDir, startLineRpc, type LineRpc } from "../helpers/reference.ts";
import { patchedShell, shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const ref = referenceShellToolDir();
const skip = skipWithout(
  "cross-compatibility suite",
  shellsMissing() ?? (ref === undefined ? "reference @openai/codex-shell-tool-mcp not installed (npm ci)" : undefined),
);

const basename = (p: string) => p.slice(p.lastIndexOf("/") + 1);

describe.skipIf(skip)("reference wrapper → our server", () => {
  let server: EscalationServer;
  beforeAll(async () => (server = await EscalationServer.start(new BoundaryPlacement())));
  afterAll(async () => server?.stop());

  const decide = (r: ResolvedRequest) => {
    const name = basename(r.file);
    if (name === "sh") return { kind: "Escalate" as const };
    if (name === "touch") return { kind: "Deny" as const, reason: "Execution forbidden by policy" };
    return { kind: "Run" as const };
  };

  test("Run, Escalate and Deny", async () => {
    const dir = tempDir();
    const r = await runInShell(server, {
      wrapper: join(ref!, "codex-execve-wrapper"),
      script: `/bin/echo run-ok; sh -c 'echo "esc $(cat /proc/$PPID/comm)"; exit 7'; echo "rc=$?"; /usr/bin/touch ${dir}/x; echo "rc=$?"`,
      decide,
    });
    // The escalated sh is started by this test process (our server), through its lifeline guard, not by bash.
    expect(r.stdout).toBe("run-ok\nesc shellmcp-guard\nrc=7\nrc=1\n");
    expect(r.stderr).toBe("Execution denied: Execution forbidden by policy\n");
    expect(existsSync(join(dir, "x"))).toBe(false);
  });
});

describe.skipIf(skip)("our wrapper → reference server", () => {
  let rpc: LineRpc;
  let work: string;
  beforeAll(async () => {
    const home = tempDir("shellmcp-codex-home-");
    work = tempDir("shellmcp-work-");
    mkdirSync(join(home, "rules"));
    writeFileSync(
      join(home, "rules", "default.rules"),
      ['prefix_rule(pattern=["sh"], decision="allow")', 'prefix_rule(pattern=["touch"], decision="forbidden")'].join("\n") + "\n",
    );
    rpc = await startLineRpc([join(ref!, "codex-exec-mcp-server"), "--bash", patchedShell("bash"), "--execve", ourWrapper()], {
      PATH: "/usr/bin:/bin",
      HOME: "/root",
      CODEX_HOME: home,
    });
    const upd = await rpc.request("codex/sandbox-state/update", { sandboxPolicy: { type: "danger-full-access" }, sandboxCwd: work });
    expect(upd.result).toEqual({});
  });
  afterAll(async () => rpc?.close());

  async function shell(command: string): Promise<{ exit_code: number; output: string }> {
    const res = await rpc.request("tools/call", { name: "shell", arguments: { command, workdir: work, login: false } });
    const content = (res.result as { content: { text: string }[] }).content;
    return JSON.parse(content[0]!.text);
  }

  test("Run: no rule, runs in place under bash", async () => {
    // cat's parent is the shell itself ($$) when it ran in place; it would be the server if escalated.
    const r = await shell(
      `/bin/cat /proc/self/stat > ${work}/stat; read -r _ _ _ ppid _ < ${work}/stat; [ "$ppid" = "$$" ] && echo ran-in-bash`,
    );
    expect(r.exit_code).toBe(0);
    expect(r.output).toBe("ran-in-bash\n");
  });

  test("Escalate: allow rule, runs as a child of the reference server", async () => {
    const r = await shell(`sh -c 'cat /proc/$PPID/comm; exit 5'; echo "rc=$?"`);
    expect(r.output).toBe("codex-exec-mcp-\nrc=5\n");
  });

  test("Deny: forbidden rule", async () => {
    const r = await shell(`touch ${work}/nope; echo "rc=$?"`);
    expect(r.output).toContain("rc=1\n");
    expect(r.output).toContain("Execution denied: Execution forbidden by policy");
    expect(existsSync(join(work, "nope"))).toBe(false);
  });
});
