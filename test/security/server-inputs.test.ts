/**
 * Issue 34, items 1 and 2: the server decides only from what the sandbox cannot write, and never waits on it.
 * Each attack runs from inside ordinary `shell` calls of the compiled `serve` (real MCP client), on both backends
 * and with a Codex-style client (sandbox state per session) and a plain one (`--sandbox workspace-write --cd`),
 * and is judged by effects: the server still answers within its timeouts, and a marker outside every writable
 * root stays unwritten.
 *
 * 1 a FIFO at `.gitmodules` (with `git status` allowed), or at `.git/commondir` of a repository the command made
 *   (then any allowed program): the decision read it with a blocking read on the main thread, and every later
 *   call of the session hung.
 * 2 a room program writes `.git/commondir` naming a folder outside, and while it runs the next escalated
 *   program's room was planned from that file: the named folder was writable there.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, hostGit, oneCommitRepo, requirePrograms, serveWithPid, withDeadline } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { assertOutside } from "../helpers/test-dirs.ts";

afterAll(closeAll);

type Backend = "bwrap" | "landlock";
type ClientKind = "codex" | "plain";

/** A serve session writing repository `ws` (one commit), with `rules`, on `backend`, as `client` would drive it. */
async function setup(rules: string, backend: Backend, client: ClientKind) {
  const ws = oneCommitRepo(confDir("inputs-ws"));
  const outside = assertOutside(confDir("inputs-outside"));
  const args = ["--sandbox-backend", backend, ...(client === "plain" ? ["--sandbox", "workspace-write", "--cd", ws] : [])];
  const s = await serveWithPid({ rules, args, env: { SHELLMCP_LOG: "info" } });
  if (client === "codex") expect(await s.sandboxState({ type: "workspace-write", network_access: false }, ws)).toEqual({});
  const run = async (command: string, timeout_ms = 20_000) => (await s.shell({ command, workdir: ws, login: false, timeout_ms })).out;
  return { s, ws, outside, run };
}

/** The session still answers: a trivial call comes back within `ms`. */
async function stillAnswers(run: (c: string, t?: number) => Promise<{ output: string }>, ms = 15_000): Promise<void> {
  const r = await withDeadline(run("echo alive", 5_000), ms, "a call after the attack");
  expect(r.output).toContain("alive");
}

const missing = shellsMissing();

describe.skipIf(skipWithout("server inputs suite", missing))("issue 34: the server's inputs", () => {
  requirePrograms("git", "python3", "bwrap");

  for (const backend of ["bwrap", "landlock"] as const) {
    for (const client of ["codex", "plain"] as const) {
      describe(`${backend}, ${client} client`, () => {
        test("item 1: a FIFO at .gitmodules, then an allowed git status: the server keeps answering", async () => {
          const { run } = await setup('prefix_rule(pattern=["git", "status"], decision="allow")\n', backend, client);
          // git itself (inside the sandbox) may wait on the FIFO until the call's timeout: that is the command's
          // business; the server must answer this call by its timeout and the next one at once.
          const r = await withDeadline(run("mkfifo .gitmodules && git status --short; echo rc=$?", 4_000), 20_000, "the attack call");
          expect(typeof r.exit_code).toBe("number");
          // The result says the allowed git ran inside the sandbox, and why (a FIFO, or a writable .git under Landlock).
          expect(r.output).toMatch(/shellmcp: `git status --short` ran inside the sandbox, not escalated: .*(a FIFO|can be written)/);
          await stillAnswers(run);
        }, 60_000);

        test("item 1: a FIFO at .git/commondir of a repository the command made, then an allowed program", async () => {
          const { run } = await setup('prefix_rule(pattern=["ls"], decision="allow")\n', backend, client);
          const r = await withDeadline(
            run("git init -q sub && mkfifo sub/.git/commondir && cd sub && ls -a; echo rc=$?", 4_000),
            20_000,
            "the attack call",
          );
          expect(r.output).toContain(".git"); // ls ran (inside the sandbox: the layout cannot be trusted)
          expect(r.output).toMatch(
            /shellmcp: `ls -a` ran inside the sandbox, not escalated: .*cannot be trusted: .*commondir is not a regular file \(a FIFO\)/,
          );
          await stillAnswers(run);
        }, 60_000);

        test("item 2: a commondir written by a running room program does not widen the next room", async () => {
          const { s, ws, outside, run } = await setup('prefix_rule(pattern=["python3"], decision="allow")\n', backend, client);
          const marker = join(outside, ".bashrc");
          // A: an escalated program that writes .git/commondir naming the outside folder, and keeps running.
          // B: while A runs, another escalated program in the same repository appends to the outside folder.
          const a = `import time; open(".git/commondir", "w").write(${JSON.stringify(outside)} + "\\n"); print("A-WROTE", flush=True); time.sleep(4)`;
          const b = `open(${JSON.stringify(marker)}, "a").write("pwned\\n"); print("B-WROTE")`;
          const r = await run(`python3 -c '${a}' & sleep 1.5; python3 -c '${b}'; echo b=$?; wait`, 30_000);
          expect(existsSync(marker)).toBe(false);
          expect(r.output).not.toContain("B-WROTE");
          // Whatever A wrote is gone once the call has ended (never left for the user's git on the host).
          expect(existsSync(join(ws, ".git", "commondir"))).toBe(false);
          expect(hostGit(ws, "log", "--format=%s", "-1")).toBe("first");
          await stillAnswers(run);
          expect(s.stderr()).not.toContain("escalation decision failed");
        }, 60_000);
      });
    }
  }
});
