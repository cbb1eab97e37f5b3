/**
 * `shellmcp serve` end to end: the compiled binary, driven by the MCP SDK's Client over stdio.
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { homeDir } from "../helpers/binary.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { fifoMessage, mkfifo, noProcessLeft } from "../helpers/events.ts";

/**
 * Long sleeps whose command lines are unique to this test process (`sleep 100.<pid>`), so that looking for
 * survivors never sees another checkout's tests running the same commands on this machine.
 */
const NAP = { 100: `sleep 100.${process.pid}`, 101: `sleep 101.${process.pid}`, 102: `sleep 102.${process.pid}` } as const;
const skip = skipWithout("serve suite", shellsMissing());
/** The input schema Codex 0.97 lists, byte for byte (docs/escalation.md, "The `shell` tool"). */
const ORIGINAL_INPUT_SCHEMA =
  '{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"ExecParams","type":"object","properties":{"command":{"description":"The bash string to execute.","type":"string"},"workdir":{"description":"The working directory to execute the command in. Must be an absolute path.","type":"string"},"timeout_ms":{"description":"The timeout for the command in milliseconds.","type":"integer","format":"uint64","minimum":0,"nullable":true},"login":{"description":"Launch Bash with -lc instead of -c: defaults to true.","type":"boolean","nullable":true}},"required":["command","workdir"]}';
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
});
async function serve(o: Parameters<typeof startServe>[0] = {}) {
  const s = await startServe(o);
  sessions.push(s);
  return s;
}
/**
 * `output` split into the command's own part and the `shellmcp: blocked` lines after it (test/mcp/blocked-feedback.test.ts
 * checks those in full): `[own, ["rule touch t", …]]` (layer and target of each).
 */
function splitBlocked(output: string): [string, string[]] {
  const at = output.indexOf("\nshellmcp: blocked (");
  if (at < 0) return [output, []];
  const lines = output
    .slice(at + 1)
    .trimEnd()
    .split("\n");
  return [output.slice(0, at), lines.map((l) => /^shellmcp: blocked \((\S+)\) (.*?): /.exec(l)!.slice(1, 3).join(" "))];
}

/**
 * A workspace outside /tmp (so read-only really means read-only for it), and a git repository: an escalated
 * program's room writes the repository it runs in (issue 21), nothing else the read-only sandbox cannot.
 */
function workspace(): string {
  const d = join(CONF_BASE, `ws-${Math.random().toString(36).slice(2)}`);
  require("node:fs").mkdirSync(d, { recursive: true });
  expect(Bun.spawnSync(["git", "init", "-q", d]).exitCode).toBe(0);
  return d;
}

describe.skipIf(skip)("shellmcp serve (SDK client, compiled binary)", () => {
  test("initialize and tools/list: Codex's tool schema, our name and version, the sandbox-state capability", async () => {
    const s = await serve();
    expect(s.client.getServerCapabilities()?.experimental).toEqual({ "codex/sandbox-state": { version: "1.0.0" } });
    expect(s.client.getServerVersion()?.name).toBe("shellmcp");
    const { tools } = await s.client.listTools();
    // shell, then Codex's unified exec tools (issue 31; test/mcp/unified-exec.test.ts).
    expect(tools.map((t) => t.name)).toEqual(["shell", "exec_command", "write_stdin", "list_sessions"]);
    const t = tools[0]!;
    expect(t.name).toBe("shell");
    // Codex's sentence first, then the default timeout and the session hint (issue 31; test/mcp/default-timeout.test.ts).
    expect(
      t.description!.startsWith("Runs a shell command and returns its output. You MUST provide the workdir as an absolute path. "),
    ).toBe(true);
    // The original's input schema, less Rust's `format: "uint64"` for a client that is not Codex (this one is
    // "shellmcp-test"; src/mcp/shell-tool.ts shellToolFor). Codex gets it byte for byte: the raw wire test below
    // says it is codex-mcp-client and checks key order too (the SDK client reorders).
    const { format: _uint64, ...timeout } = JSON.parse(ORIGINAL_INPUT_SCHEMA).properties.timeout_ms;
    expect(_uint64).toBe("uint64");
    const original = JSON.parse(ORIGINAL_INPUT_SCHEMA);
    expect(t.inputSchema).toEqual({ ...original, properties: { ...original.properties, timeout_ms: timeout } });
    expect(t.outputSchema?.required).toEqual(["exit_code", "output", "duration", "timed_out"]);
  });

  test("echo, exit codes, stderr interleaved, workdir, structuredContent", async () => {
    const s = await serve();
    const ws = workspace();
    const r = await s.shell({ command: "echo a; echo b >&2; echo c; pwd; exit 3", workdir: ws, login: false });
    expect(r.out.exit_code).toBe(3);
    expect(r.out.output).toBe(`a\nb\nc\n${ws}\n`);
    expect(r.out.timed_out).toBe(false);
    expect(r.isError).toBe(false);
    expect(r.raw.structuredContent).toEqual(r.out as never);
    expect(r.out.duration.secs * 1e9 + r.out.duration.nanos).toBeGreaterThan(0);
  });

  test("login on (default) and off", async () => {
    const s = await serve();
    const ws = workspace();
    expect((await s.shell({ command: "shopt -q login_shell && echo login || echo plain", workdir: ws })).out.output).toBe("login\n");
    expect((await s.shell({ command: "shopt -q login_shell && echo login || echo plain", workdir: ws, login: false })).out.output).toBe(
      "plain\n",
    );
  });

  test("read-only by default: writes fail in the sandbox (isError from the denial heuristic, output kept)", async () => {
    const s = await serve();
    const ws = workspace();
    const r = await s.shell({ command: "touch f", workdir: ws, login: false });
    expect(r.out.exit_code).not.toBe(0);
    expect(r.out.output).toMatch(/Read-only file system|Permission denied/);
    expect(r.isError).toBe(true);
    expect(existsSync(join(ws, "f"))).toBe(false);
  });

  test("an allow rule escalates: the program runs outside the read-only sandbox", async () => {
    const s = await serve({ rules: 'prefix_rule(pattern = ["touch"], decision = "allow")\n' });
    const ws = workspace();
    const r = await s.shell({ command: "touch escalated && echo ok; echo x > not-escalated", workdir: ws, login: false });
    expect(existsSync(join(ws, "escalated"))).toBe(true);
    expect(existsSync(join(ws, "not-escalated"))).toBe(false);
    expect(r.out.output).toContain("ok\n");
  });

  test("the intercept set: only programs a rule or the danger heuristic names reach the server; --intercept-all sends every exec", async () => {
    const rules = 'prefix_rule(pattern = ["touch"], decision = "forbidden")\n';
    const command = "printenv SHELLMCP_INTERCEPT; /bin/true; touch t; echo rc=$?";
    const decided = (err: string) => [...err.matchAll(/exec decision \{"file":"([^"]+)"/g)].map((m) => m[1]);
    const s = await serve({ rules, env: { SHELLMCP_LOG: "debug", SHELLMCP_INTERCEPT: "*" } });
    const ws = workspace();
    const r = await s.shell({ command, workdir: ws, login: false });
    const [set, ...rest] = r.out.output.split("\n");
    expect(set!.split("/").sort()).toEqual(["*git", "bash", "rm", "sh", "sudo", "touch", "zsh"]); // the inherited "*" is replaced
    expect(splitBlocked(rest.join("\n"))).toEqual(["Execution denied: Execution forbidden by policy\nrc=1\n", ["rule touch t"]]);
    expect(decided(s.stderr())).toEqual(["/usr/bin/touch"]); // printenv and /bin/true ran without a round trip
    const all = await serve({ rules, args: ["--intercept-all"], env: { SHELLMCP_LOG: "debug", SHELLMCP_INTERCEPT: "*" } });
    const r2 = await all.shell({ command, workdir: ws, login: false });
    // printenv: not set (status 1)
    expect(splitBlocked(r2.out.output)).toEqual(["Execution denied: Execution forbidden by policy\nrc=1\n", ["rule touch t"]]);
    expect(decided(all.stderr())).toEqual(["/usr/bin/printenv", "/bin/true", "/usr/bin/touch"]);
  });

  test("forbidden: denied with Codex's message, nothing runs", async () => {
    const s = await serve({ rules: 'prefix_rule(pattern = ["rm"], decision = "forbidden")\n', args: ["--sandbox", "danger-full-access"] });
    const ws = workspace();
    writeFileSync(join(ws, "keep"), "x");
    const r = await s.shell({ command: "rm keep; echo rc=$?", workdir: ws, login: false });
    // Codex's message, then shellmcp's report of the refusal (issue 41).
    expect(splitBlocked(r.out.output)).toEqual(["Execution denied: Execution forbidden by policy\nrc=1\n", ["rule rm keep"]]);
    expect(existsSync(join(ws, "keep"))).toBe(true);
  });

  test("prompt: accept escalates, decline and cancel deny with Codex's reasons; the message is Codex's", async () => {
    const answers: Record<string, "accept" | "decline" | "cancel"> = {
      "first.txt": "accept",
      "second.txt": "decline",
      "third.txt": "cancel",
    };
    const s = await serve({
      rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n',
      onElicit: (message) => ({ action: answers[Object.keys(answers).find((k) => message.includes(k))!]! }),
    });
    const ws = workspace();
    const r = await s.shell({ command: "touch first.txt; touch second.txt; touch third.txt; ls", workdir: ws, login: false });
    expect(splitBlocked(r.out.output)).toEqual([
      "Execution denied: User declined execution\nExecution denied: User cancelled execution\nfirst.txt\n",
      ["approval touch second.txt", "approval touch third.txt"],
    ]);
    expect(s.elicitations[0]).toBe(`Allow agent to run \`/usr/bin/touch first.txt\` in \`${ws}\`?`);
  });

  test("answers are remembered for the session", async () => {
    let asked = 0;
    const s = await serve({
      rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n',
      onElicit: () => (asked++, { action: "accept" }),
    });
    const ws = workspace();
    await s.shell({ command: "touch a; touch a; touch b", workdir: ws, login: false });
    expect(asked).toBe(2);
  });

  test("always allow: appends Codex's rule line to default.rules and stops asking", async () => {
    let asked = 0;
    const s = await serve({
      rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n',
      onElicit: () => (asked++, { action: "accept", content: { always_allow: true } }),
    });
    const ws = workspace();
    await s.shell({ command: "touch one", workdir: ws, login: false });
    expect(readFileSync(join(s.codexHome, "rules", "default.rules"), "utf8")).toContain(
      'prefix_rule(pattern=["touch", "one"], decision="allow")',
    );
    expect(existsSync(join(ws, "one"))).toBe(true);
    await s.shell({ command: "touch one", workdir: ws, login: false });
    expect(asked).toBe(1);
  });

  test("a client without elicitation: prompt denies with a reason a model can act on; --on-prompt run-in-sandbox runs it sandboxed", async () => {
    const s = await serve({ rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n' });
    const ws = workspace();
    const r = await s.shell({ command: "touch x", workdir: ws, login: false });
    expect(r.out.output).toContain("needs a human's approval");
    // A prompt *rule* asked: adding an allow rule would change nothing (the strictest rule wins), so the reason
    // says to change that rule (issue 22, item 7).
    expect(r.out.output).toContain('a prompt rule matching ["touch"] asks for it');
    expect(r.out.output).toContain(`change that rule's decision to "allow" in your rules files (${s.codexHome}/rules/)`);
    expect(existsSync(join(ws, "x"))).toBe(false);
    const t = await serve({ rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n', args: ["--on-prompt", "run-in-sandbox"] });
    const r2 = await t.shell({ command: "touch y", workdir: ws, login: false });
    expect(r2.out.output).toMatch(/Read-only file system|Permission denied/); // ran, inside the sandbox
  });

  test("a timeout kills the whole tree, escalated children included, and returns the output so far", async () => {
    const s = await serve({ rules: 'prefix_rule(pattern = ["sleep"], decision = "allow")\n' });
    const ws = workspace();
    const t0 = Date.now();
    const r = await s.shell({
      command: `echo started; ${NAP[100]} & /bin/sh -c '${NAP[100]}' & wait`,
      workdir: ws,
      login: false,
      timeout_ms: 1500,
    });
    expect(Date.now() - t0).toBeLessThan(8000);
    expect(r.out.timed_out).toBe(true);
    expect(r.isError).toBe(true);
    expect(r.out.output).toContain("started");
    expect(await noProcessLeft(NAP[100])).toEqual([]);
  });

  test("time waiting for a human does not count against timeout_ms", async () => {
    const s = await serve({
      rules: 'prefix_rule(pattern = ["touch"], decision = "prompt")\n',
      onElicit: async () => (await Bun.sleep(4500), { action: "accept" }),
    });
    const ws = workspace();
    // The timeout still covers the sandbox's start and the escalation (3 s: ample on a loaded machine); the human
    // takes longer than that.
    const r = await s.shell({ command: "touch late && echo done", workdir: ws, login: false, timeout_ms: 3000 });
    expect(r.out.timed_out).toBe(false);
    expect(r.out.output).toBe("done\n");
    expect(r.out.duration.secs).toBeGreaterThanOrEqual(4);
  });

  test("codex/sandbox-state/update changes what is writable (next call)", async () => {
    const s = await serve();
    const ws = workspace();
    expect((await s.shell({ command: "touch before", workdir: ws, login: false })).out.exit_code).not.toBe(0);
    expect(await s.sandboxState({ type: "workspace-write" }, ws)).toEqual({});
    const r = await s.shell({ command: "touch after && echo ok", workdir: ws, login: false });
    expect(r.out.output).toBe("ok\n");
    expect(existsSync(join(ws, "after"))).toBe(true);
    await expect(s.sandboxState({ type: "bogus" }, ws)).rejects.toThrow("failed to deserialize sandbox state");
    await expect(
      s.client.request(
        { method: "codex/sandbox-state/update" } as never,
        (await import("@modelcontextprotocol/sdk/types.js")).EmptyResultSchema,
      ),
    ).rejects.toThrow("missing params for sandbox state request");
  });

  test("8 parallel calls run concurrently", async () => {
    const s = await serve();
    const ws = workspace();
    const t0 = Date.now();
    const rs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => s.shell({ command: `sleep 1; echo ${i}`, workdir: ws, login: false })),
    );
    rs.forEach((r, i) => expect(r.out.output).toBe(`${i}\n`));
    expect(Date.now() - t0).toBeLessThan(6000);
  });

  test("2 MiB of output is capped, keeping head and tail, with counts", async () => {
    const s = await serve();
    const ws = workspace();
    const r = await s.shell({
      command: "echo FIRST; head -c 2097152 /dev/zero | tr '\\000' x; echo; echo LAST",
      workdir: ws,
      login: false,
    });
    expect(r.out.output.startsWith("FIRST\n")).toBe(true);
    expect(r.out.output.endsWith("LAST\n")).toBe(true);
    expect(r.out.output).toMatch(
      /\[\.\.\. shellmcp: \d+ bytes omitted from the middle of 2097164 bytes of output; shown: the first 524288 and the last 524288 bytes \.\.\.\]/,
    );
    expect(r.out.output.length).toBeLessThan(1048576 + 200);
  });

  test("2 MiB of NUL bytes: the response still fits what a client accepts", async () => {
    const s = await serve();
    const ws = workspace();
    const r = await s.shell({ command: "echo FIRST; head -c 2097152 /dev/zero; echo LAST", workdir: ws, login: false });
    expect(r.out.output.startsWith("FIRST\n")).toBe(true);
    expect(r.out.output.endsWith("LAST\n")).toBe(true);
    expect(r.out.output).toContain("omitted");
    expect(JSON.stringify(r.raw).length).toBeLessThan(10 * 1024 * 1024);
  });

  test("bad arguments are JSON-RPC errors with serde's wording", async () => {
    const s = await serve();
    await expect(s.client.callTool({ name: "shell", arguments: { command: "true" } })).rejects.toThrow(
      "failed to deserialize parameters: missing field `workdir`",
    );
    await expect(s.client.callTool({ name: "shell", arguments: { command: "true", workdir: "/", timeout_ms: -5 } })).rejects.toThrow(
      "invalid value: integer `-5`, expected u64",
    );
    await expect(s.client.callTool({ name: "nope", arguments: {} })).rejects.toThrow("tool not found");
  });

  test("progress notifications for long commands when the client sends a token", async () => {
    const s = await serve();
    const ws = workspace();
    const seen: unknown[] = [];
    const r = await s.shell(
      { command: "echo first; sleep 6; echo done", workdir: ws, login: false, timeout_ms: 20000 },
      { onprogress: (p) => seen.push(p) },
    );
    expect(r.out.output).toBe("first\ndone\n");
    expect(seen.length).toBeGreaterThanOrEqual(1);
    // Issue 31: the notification carries the end of the output so far.
    expect((seen[0] as { message?: string }).message).toMatch(/^running for \d+ s, 6 bytes of output; last output: first\n$/);
  });

  test("cancellation kills the command's process group", async () => {
    const s = await serve();
    const ws = workspace();
    // The command says it is running through a named pipe in its (writable) workspace.
    expect(await s.sandboxState({ type: "workspace-write" }, ws)).toEqual({});
    mkfifo(join(ws, "up"));
    const up = fifoMessage(join(ws, "up"));
    const ac = new AbortController();
    const p = s.shell(
      { command: `${NAP[101]} & echo up > up; ${NAP[101]}; echo never`, workdir: ws, login: false, timeout_ms: 60000 },
      { signal: ac.signal },
    );
    expect(await up).toBe("up\n");
    ac.abort();
    await expect(p).rejects.toThrow();
    expect(await noProcessLeft(NAP[101])).toEqual([]);
  });

  test("the shell's environment follows shell_environment_policy: *TOKEN* excluded by default, -c overrides", async () => {
    const s = await serve({
      env: { GITHUB_TOKEN: "secret", PLAIN_VAR: "plain" },
      args: ["-c", 'shell_environment_policy.set={ADDED="yes"}'],
    });
    const ws = workspace();
    const r = await s.shell({
      command: "echo ${GITHUB_TOKEN:-none} ${PLAIN_VAR:-none} ${ADDED:-none} ${CODEX_SANDBOX_NETWORK_DISABLED:-none}",
      workdir: ws,
      login: false,
    });
    expect(r.out.output).toBe("none plain yes 1\n");
  });

  test("zsh as the shell", async () => {
    const s = await serve({ rules: 'prefix_rule(pattern = ["touch"], decision = "allow")\n', args: ["--shell", "zsh"] });
    const ws = workspace();
    const r = await s.shell({ command: "echo $ZSH_VERSION; touch z", workdir: ws, login: false });
    expect(r.out.output).toBe("5.9\n");
    expect(existsSync(join(ws, "z"))).toBe(true); // escalated through zsh's interception
  });

  test("a broken rules file or config: the server stays up, tools/list answers, every call fails closed naming the file", async () => {
    for (const [what, setup] of [
      [
        "rules",
        (home: string) => writeFileSync(join(home, "rules", "default.rules"), 'prefix_rule(pattern = ["rm"], decision = "forbiden")\n'),
      ],
      ["config", (home: string) => writeFileSync(join(home, "config.toml"), '[shellmcp]\nescalation = "everywhere"\n')],
    ] as const) {
      const home = homeDir();
      require("node:fs").mkdirSync(join(home, "rules"));
      setup(home);
      const s = await serve({ codexHome: home });
      const { tools } = await s.client.listTools();
      expect(tools.map((t) => t.name)).toEqual(["shell", "exec_command", "write_stdin", "list_sessions"]);
      const ws = workspace();
      for (let i = 0; i < 2; i++) {
        const r = (await s.client.callTool({ name: "shell", arguments: { command: "touch ran", workdir: ws } })) as {
          isError?: boolean;
          content: { text: string }[];
        };
        expect(r.isError).toBe(true);
        const text = r.content[0]!.text;
        expect(text).toStartWith("shellmcp cannot run commands: ");
        if (what === "rules") {
          expect(text).toContain(`failed to parse policy at ${join(home, "rules", "default.rules")}`);
          expect(text).toContain("invalid decision: forbiden");
        } else expect(text).toContain('shellmcp.escalation must be "room" or "host"');
        expect(existsSync(join(ws, "ran"))).toBe(false);
      }
      expect(s.stderr()).toContain("shellmcp serve: ");
    }
  });
});

describe.skipIf(skip)("robustness (raw stdio)", () => {
  test("malformed lines get JSON-RPC errors and the server keeps serving; EOF ends it with no process left", async () => {
    const { ensureBinary } = await import("../helpers/binary.ts");
    const home = homeDir();
    const ws = workspace();
    const p = Bun.spawn([ensureBinary(), "serve", "--sandbox", "danger-full-access"], {
      // HOME too: without it serve takes the passwd entry's (the real HOME of the user running the tests), where a
      // user other than root without /run/user/<uid> gets its carried programs.
      env: { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const send = (s: string) => (p.stdin as import("bun").FileSink).write(s + "\n");
    await send(
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"codex-mcp-client","version":"0"}}}',
    );
    await send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
    await send("{not json");
    await send("[1,2,3]");
    await send('{"jsonrpc":"2.0","id":6,"method":"tools/list"}');
    await send(
      '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"shell","arguments":{"command":"' +
        NAP[102] +
        ' & echo bg","workdir":"' +
        ws +
        '","login":false}}}',
    );
    await (p.stdin as import("bun").FileSink).flush();
    const reader = p.stdout.getReader();
    let text = "";
    while (!text.includes('"id":7')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const lines = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.some((l) => l.error?.code === -32700)).toBe(true);
    expect(lines.some((l) => l.error?.code === -32600)).toBe(true);
    expect(JSON.parse(lines.find((l) => l.id === 7).result.content[0].text).output).toBe("bg\n");
    // On the wire, the input schema is the original's byte for byte, key order included.
    expect(text).toContain(`"inputSchema":${ORIGINAL_INPUT_SCHEMA}`);
    await (p.stdin as import("bun").FileSink).end();
    expect(await p.exited).toBe(0);
    expect(await noProcessLeft(NAP[102])).toEqual([]);
  });
});

describe.skipIf(skip)("login: false reads no startup file, whatever the sandbox", () => {
  // Bash sources ~/.bashrc when it thinks rshd started it: getpeername(0) failing with an errno outside POSIX's
  // list counts as "a network connection". The network-off seccomp filter answers getpeername with EPERM, so an
  // unpatched bash (and Codex 0.97's server) runs ~/.bashrc in every `login: false` call, and only when the
  // network is off. Our bash patch counts EPERM/ENOSYS as "not a connection" (patches/, lib/sh/netconn.c).
  const CASES = [
    ["bwrap", { type: "read-only" }],
    ["bwrap", { type: "workspace-write", network_access: false }],
    ["bwrap", { type: "workspace-write", network_access: true }],
    ["landlock", { type: "workspace-write", network_access: false }],
    ["landlock", { type: "read-only" }],
    ["bwrap", { type: "danger-full-access" }],
  ] as const;
  for (const [backend, policy] of CASES) {
    test(`${backend}, ${JSON.stringify(policy)}: ~/.bashrc not read with login: false; ~/.profile read with login: true`, async () => {
      const s = await serve({ args: ["--sandbox-backend", backend] });
      writeFileSync(join(s.codexHome, ".bashrc"), "echo BASHRC-READ\n");
      writeFileSync(join(s.codexHome, ".profile"), "echo PROFILE-READ\n");
      const ws = workspace();
      expect(await s.sandboxState(policy, ws)).toEqual({});
      const plain = await s.shell({ command: "echo ran", workdir: ws, login: false });
      expect(plain.out.output).toStartWith("ran\n"); // the first Landlock call also carries the git guard's notice
      const login = await s.shell({ command: "echo ran", workdir: ws, login: true });
      expect(login.out.output).toContain("PROFILE-READ\n");
      expect(login.out.output).toContain("ran\n");
    });
  }
});
