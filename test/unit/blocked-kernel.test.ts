/**
 * Recognising the kernel sandbox's refusals in output (src/blocked/kernel.ts): the path each kind of error line
 * names, and no report for what the sandbox did not cause (a path it may write, the wrong errno for the backend, a
 * path this server could not write either, the network when the call has it).
 */
import { describe, expect, test } from "bun:test";
import { protectedConfigDirs, setProtectedConfigDirs } from "../../src/sandbox/protected-config.ts";
import { detectKernelBlocks, MAX_PATHS_CHECKED, pathOfErrorLine, type KernelContext } from "../../src/blocked/kernel.ts";

const VIEW = { full: false, roots: ["/ws", "/tmp"], readOnly: ["/ws/.git", "/ws/.codex"] };
const ctx = (o: Partial<KernelContext> = {}): KernelContext => ({
  backend: "bwrap",
  view: VIEW,
  workdir: "/ws",
  networkOff: true,
  hostCanWrite: () => true,
  ...o,
});
const kinds = (output: string, o: Partial<KernelContext> = {}) => detectKernelBlocks(output, ctx(o)).map((b) => [b.layer, b.target]);

describe("the path an error line names", () => {
  test.each([
    ["bash: line 1: /etc/x: Read-only file system", "Read-only file system", "/etc/x"],
    ["touch: cannot touch '/etc/x': Read-only file system", "Read-only file system", "/etc/x"],
    ["fatal: Unable to create '/ws/.git/index.lock': Read-only file system.", "Read-only file system", "/ws/.git/index.lock"],
    ["/ws/.git: Read-only file system", "Read-only file system", "/ws/.git"],
    ["error: could not lock config file .git/config: Permission denied", "Permission denied", ".git/config"],
    ["PermissionError: [Errno 13] Permission denied: '/opt/y'", "Permission denied", "/opt/y"],
    ["mkdir: cannot create directory ‘/opt/d’: Permission denied", "Permission denied", "/opt/d"],
    ["zsh:1: read-only file system: /etc/z", "Read-only file system", "/etc/z"],
    ["zsh:1: permission denied: /etc/z", "Permission denied", "/etc/z"],
  ])("%s", (line, error, path) => {
    expect(pathOfErrorLine(line, error)).toBe(path);
  });
  test("no path: nothing", () => {
    expect(pathOfErrorLine("PermissionError: [Errno 1] Operation not permitted", "Operation not permitted")).toBeUndefined();
  });
});

describe("what is reported", () => {
  test("outside the roots: sandbox-write; a read-only path inside a root: protected-path; relative paths from the workdir", () => {
    expect(kinds("bash: line 1: /etc/x: Read-only file system\nbash: line 1: .git/HEAD: Read-only file system\n")).toEqual([
      ["sandbox-write", "/etc/x"],
      ["protected-path", "/ws/.git/HEAD"],
    ]);
  });
  test("a protected config folder (CODEX_HOME) outside every root: protected-path, never 'add it to the writable roots'", () => {
    const before = protectedConfigDirs();
    setProtectedConfigDirs(["/home/u/.codex"]);
    try {
      expect(kinds("bash: line 1: /home/u/.codex/config.toml: Read-only file system\n")).toEqual([
        ["protected-path", "/home/u/.codex/config.toml"],
      ]);
    } finally {
      setProtectedConfigDirs([...before]);
    }
  });
  test("a writable path, a missing file, the other backend's errno, a path this server cannot write either: nothing", () => {
    expect(kinds("bash: line 1: own: Permission denied\ncat: /nope: No such file or directory\n", { backend: "landlock" })).toEqual([]);
    expect(kinds("bash: line 1: /etc/x: Permission denied\n")).toEqual([]); // bubblewrap refuses with EROFS
    expect(kinds("bash: line 1: /etc/x: Read-only file system\n", { backend: "landlock" })).toEqual([]);
    expect(kinds("bash: line 1: /etc/x: Read-only file system\n", { hostCanWrite: () => false })).toEqual([]);
    expect(kinds("bash: line 1: /etc/x: Read-only file system\n", { view: { full: true, roots: [], readOnly: [] } })).toEqual([]);
  });
  test("network: named hosts, resolver failures and refused sockets only when the call has no network", () => {
    const out =
      "curl: (6) Could not resolve host: a.example\nnpm error getaddrinfo ENOTFOUND b.example\n" +
      '  File "/usr/lib/python3.11/socket.py", line 232, in __init__\nPermissionError: [Errno 1] Operation not permitted\n';
    expect(kinds(out)).toEqual([
      ["network", "a.example"],
      ["network", "b.example"],
      ["network", "socket"], // the output names no family: the errno does not tell which
    ]);
    expect(kinds(out, { networkOff: false })).toEqual([]);
    expect(kinds("rm: cannot remove 'x': Operation not permitted\n")).toEqual([]);
  });
  test("network: a refused socket is labelled by the family the output names (unix or internet), each refusal by its own", () => {
    const traceback = (source: string) =>
      `Traceback (most recent call last):\n  File "/w/t.py", line 2, in <module>\n    ${source}\n` +
      '  File "/usr/lib/python3.11/socket.py", line 232, in __init__\n    _socket.socket.__init__(self, family, type, proto, fileno)\n' +
      "PermissionError: [Errno 1] Operation not permitted\n";
    expect(kinds(traceback("s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)"))).toEqual([["network", "unix socket"]]);
    expect(kinds(traceback("s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"))).toEqual([["network", "internet socket"]]);
    // One refusal's family does not label the next, unnamed one.
    expect(kinds(traceback("socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)") + traceback("socket.socket(family)"))).toEqual([
      ["network", "unix socket"],
      ["network", "socket"],
    ]);
  });
  test("a flood of refusals: each distinct path looked up once, at most MAX_PATHS_CHECKED", () => {
    const asked: string[] = [];
    const hostCanWrite = (p: string) => (asked.push(p), true);
    const same = "bash: line 1: /etc/x: Read-only file system\n".repeat(1000);
    expect(kinds(same, { hostCanWrite })).toEqual([["sandbox-write", "/etc/x"]]);
    expect(asked).toEqual(["/etc/x"]);
    asked.length = 0;
    const many = Array.from({ length: 200 }, (_, i) => `bash: line 1: /etc/x${i}: Read-only file system\n`).join("");
    expect(kinds(many, { hostCanWrite })).toHaveLength(MAX_PATHS_CHECKED);
    expect(asked).toHaveLength(MAX_PATHS_CHECKED);
  });
});
