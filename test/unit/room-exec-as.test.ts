/**
 * How the escalation room execs a program with the judged argv[0] (src/escalate/rooms/build.ts, execAs): directly when
 * argv[0] names the program (its canonical path, the path the command named it by, or a bare name the trusted PATH
 * resolves to it), through the host bash's `exec -a` otherwise (bwrap 0.8 cannot set argv[0]).
 */
import { describe, expect, test } from "bun:test";
import { realpathSync } from "node:fs";
import { execAs } from "../../src/escalate/rooms/build.ts";

const TRUE = realpathSync("/bin/true"); // /usr/bin/true on a merged /usr

describe("execAs", () => {
  test("argv[0] is the canonical path: exec'd as is", () => {
    expect(execAs(TRUE, [TRUE, "x"])).toEqual([TRUE, "x"]);
  });

  test("argv[0] is the path the command named the program by (checked by the boundary): exec'd as is", () => {
    expect(execAs(TRUE, ["/bin/true", "x"], "", "/bin/true")).toEqual(["/bin/true", "x"]);
  });

  test("an absolute argv[0] that is not the named path goes through exec -a", () => {
    const argv = execAs(TRUE, ["/bin/true", "x"], "", "/usr/local/bin/true");
    expect(argv.slice(0, 5)).toEqual(["/bin/bash", "--norc", "--noprofile", "-c", 'exec -a "$0" "$@"']);
    expect(argv.slice(5)).toEqual(["/bin/true", TRUE, "x"]);
  });

  test("a bare argv[0] the PATH resolves to the program: exec'd by name; another name: exec -a", () => {
    expect(execAs(TRUE, ["true"], "/usr/bin:/bin")).toEqual(["true"]);
    expect(execAs(TRUE, ["git-archive"], "/usr/bin:/bin")[0]).toBe("/bin/bash");
  });
});
