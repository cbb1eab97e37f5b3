import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BUN, ROOT, binaryAs, ensureBinary, homeDir, run, tempDir } from "../helpers/binary.ts";

const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };

describe("compiled binary", () => {
  test("--version prints package.json's version", () => {
    const r = run([ensureBinary(), "--version"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
  });

  test("--help lists every command", () => {
    const r = run([ensureBinary(), "--help"]);
    expect(r.exitCode).toBe(0);
    for (const c of ["serve", "sandbox", "debug", "execpolicy", "exec-server"]) expect(r.stdout).toContain(c);
  });

  test("unknown command is a usage error", () => {
    const r = run([ensureBinary(), "no-such-command"]);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain("unknown command");
  });
});

describe("arg0 dispatch", () => {
  test("codex-execve-wrapper answers as the exec wrapper", () => {
    const r = run([binaryAs("codex-execve-wrapper")]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("usage: codex-execve-wrapper FILE");
  });

  test("codex-linux-sandbox answers as the Linux sandbox helper", () => {
    const r = run([binaryAs("codex-linux-sandbox"), "--help"]);
    expect(r.stderr + r.stdout).toMatch(/codex-linux-sandbox/);
    expect(r.stdout).not.toContain("Usage: shellmcp");
  });

  test("codex-fs answers as the fs helper", () => {
    const r = run([binaryAs("codex-fs")]);
    expect(r.stderr + r.stdout).toMatch(/codex-fs/);
    expect(r.stdout).not.toContain("Usage: shellmcp");
  });

  test("any other name is the CLI", () => {
    const r = run([binaryAs("my-shellmcp"), "--version"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
  });

  test("dispatch uses argv[0], not the file name (exec -a)", () => {
    const r = run(["bash", "-c", `exec -a /some/dir/codex-execve-wrapper "$0"`, ensureBinary()]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("usage: codex-execve-wrapper");
  });
});

describe("no autoload from an untrusted cwd", () => {
  function hostileDir(): { dir: string; marker: string } {
    const dir = tempDir("shellmcp-hostile-");
    const marker = join(dir, "PWNED");
    writeFileSync(join(dir, "evil.ts"), `require("node:fs").writeFileSync(${JSON.stringify(marker)}, "1");\n`);
    writeFileSync(join(dir, "bunfig.toml"), `preload = ["./evil.ts"]\n[run]\npreload = ["./evil.ts"]\n`);
    writeFileSync(join(dir, ".env"), "SHELLMCP_LOG=debug\n");
    writeFileSync(join(dir, "package.json"), `{"name":"evil","type":"commonjs"}\n`);
    writeFileSync(join(dir, "tsconfig.json"), `{"compilerOptions":{"jsx":"react"}}\n`);
    return { dir, marker };
  }

  test("control: plain Bun in that directory does load them", () => {
    const { dir, marker } = hostileDir();
    const r = run([BUN, join(ROOT, "src", "main.ts"), "--version"], { cwd: dir, env: { ...process.env, SHELLMCP_LOG: undefined } });
    expect(existsSync(marker)).toBe(true);
    expect(r.stderr).toContain("shellmcp debug: cli start");
  });

  test("the escalation worker is the embedded one, never a worker.ts from the cwd", async () => {
    const { dir, marker } = hostileDir();
    const evil = `require("node:fs").writeFileSync(${JSON.stringify(marker)}, "worker");\n`;
    for (const rel of ["worker.ts", "worker.js", "src/escalate/worker/worker.ts", "escalate/worker/worker.ts"]) {
      require("node:fs").mkdirSync(join(dir, rel, ".."), { recursive: true });
      writeFileSync(join(dir, rel), evil);
    }
    // CODEX_HOME is not the hostile cwd: it lies under $TMPDIR, which serve refuses. HOME is set too: without it
    // serve takes the passwd entry's, the real HOME of the user running the tests (its carried programs go there).
    const home = homeDir();
    const p = Bun.spawn([ensureBinary(), "serve", "--sandbox", "danger-full-access"], {
      cwd: dir,
      env: { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const sink = p.stdin as import("bun").FileSink;
    await sink.write(
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n',
    );
    await sink.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    await sink.write(
      `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell","arguments":{"command":"/bin/echo intercepted","workdir":${JSON.stringify(dir)},"login":false}}}\n`,
    );
    await sink.flush();
    const reader = p.stdout.getReader();
    let out = "";
    while (!out.includes('"id":2')) {
      const { value, done } = await reader.read();
      if (done) break;
      out += new TextDecoder().decode(value);
    }
    await sink.end();
    await p.exited;
    expect(out).toContain("intercepted");
    expect(existsSync(marker)).toBe(false);
  });

  test("the compiled binary ignores .env, bunfig.toml, package.json and tsconfig.json", () => {
    const { dir, marker } = hostileDir();
    const r = run([ensureBinary(), "--version"], { cwd: dir, env: { ...process.env, SHELLMCP_LOG: undefined } });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
    expect(existsSync(marker)).toBe(false);
    expect(r.stderr).not.toContain("shellmcp debug");
  });
});
