/**
 * The patched shells with `SHELLMCP_INTERCEPT` against the real escalation server (src/escalate/server.ts) and the
 * real decision code: programs outside the set never reach the server, programs in it get Run / Deny / Escalate
 * through the in-shell client, nested patched shells keep both the set and the client, and the exec wrapper is
 * never started (EXEC_WRAPPER names a program that does not exist).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { EscalationServer } from "../../src/escalate/server.ts";
import { BoundaryPlacement } from "../../src/escalate/placement.ts";
import type { ResolvedRequest } from "../../src/escalate/decision/request.ts";
import { policyFromSources } from "../../src/execpolicy/load.ts";
import { decideExec, type EscalationSettings } from "../../src/escalate/decision/decide.ts";
import { interceptSetFor } from "../../src/escalate/decision/intercept-set.ts";
import { INTERCEPT_ENV_VAR } from "../../src/escalate/protocol/wire.ts";
import { runInShell } from "../helpers/escalation.ts";
import { patchedShell, shellsMissing } from "../helpers/shells.ts";

const missing = shellsMissing();
if (missing !== undefined) console.warn(`SKIP in-shell client + server suite: ${missing}`);

let server: EscalationServer;
beforeAll(async () => {
  server = await EscalationServer.start(new BoundaryPlacement());
});
afterAll(async () => {
  await server?.stop();
});

const RULES = [
  'prefix_rule(pattern=["printf", "escalate-me"], decision="allow")',
  'prefix_rule(pattern=["printf", "forbid-me"], decision="forbidden")',
  'prefix_rule(pattern=["/usr/bin/env", "never"], decision="allow")',
].join("\n");

for (const shell of ["bash", "zsh"] as const) {
  describe.skipIf(missing !== undefined)(`in-shell client with the real server (${shell})`, () => {
    test("skip, Run, Deny and Escalate in one script; nested shells keep the set", async () => {
      const policy = policyFromSources([{ path: "t.rules", text: RULES + "\n" }]);
      const settings: EscalationSettings = {
        policy,
        codexHome: "/nonexistent",
        preserveProgramPaths: false,
        onPrompt: "deny",
        memory: new Map(),
      };
      const seen: ResolvedRequest[] = [];
      const set = interceptSetFor(policy);
      const innerScript = 'printf "%s\\n" nested; /usr/bin/printf forbid-me; echo inner-rc=$?';
      const inner = `${patchedShell(shell)} -c '${innerScript}'`;
      const r = await runInShell(server, {
        shell,
        wrapper: "/nonexistent/codex-execve-wrapper",
        env: { [INTERCEPT_ENV_VAR]: set },
        script: [
          "/bin/echo skipped", // not in the set: never asked
          "/usr/bin/env true; echo env-rc=$?", // in the set (a path rule's basename), no rule matches: Run
          "/usr/bin/printf '%s\\n' plain", // in the set, no rule matches: Run
          "/usr/bin/printf escalate-me; echo; echo esc-rc=$?", // allow rule: Escalate (outside), output passes through
          "/usr/bin/printf forbid-me; echo forbid-rc=$?", // forbidden: Deny
          "rm -f /nonexistent-shellmcp-x; echo rm-rc=$?", // heuristic: prompt, no elicitation → Deny
          inner,
        ].join("\n"),
        decide: (req) => (seen.push(req), decideExec(settings, { paused: (f) => f() }, req)),
      });
      expect(r.stdout).toBe("skipped\nenv-rc=0\nplain\nescalate-me\nesc-rc=0\nforbid-rc=1\nrm-rc=1\nnested\ninner-rc=1\n");
      expect(r.stderr).toContain("Execution denied: Execution forbidden by policy\n");
      expect(r.stderr).toContain("Execution denied: this command needs a human's approval");
      expect(r.stderr).not.toContain("nonexistent/codex-execve-wrapper");
      expect(seen.map((s) => s.argv)).toEqual([
        ["/usr/bin/env", "true"],
        ["/usr/bin/printf", "%s\\n", "plain"],
        ["/usr/bin/printf", "escalate-me"],
        ["/usr/bin/printf", "forbid-me"],
        ["rm", "-f", "/nonexistent-shellmcp-x"],
        [patchedShell(shell), "-c", innerScript],
        ["/usr/bin/printf", "forbid-me"],
      ]);
    });
  });
}
