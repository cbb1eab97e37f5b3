/**
 * The exec-server's method table (src/exec-server/methods.ts) against the methods Codex's exec-server registers:
 * every name in {@link CODEX_REGISTERED} is either in the table or in {@link NOT_OFFERED} with the reason, and the
 * table has nothing Codex does not register. A method added on one side only fails here.
 *
 * Pure: imports the table, runs no method.
 */
import { describe, expect, test } from "bun:test";
import { METHODS } from "../../src/exec-server/methods.ts";

/**
 * The request methods Codex's exec-server router registers (`build_router` in
 * `codex-rs/exec-server/src/server/registry.rs`, openai/codex, the version with `process/signal`, `fs/walk` and
 * `http/request`; the names are the constants of `codex-rs/exec-server/src/protocol.rs`). The `initialized`
 * notification it also registers is not a request: src/exec-server/envelope.ts handles it.
 */
const CODEX_REGISTERED = [
  "initialize",
  "http/request",
  "process/start",
  "environment/info",
  "environmentConfig/read",
  "environment/status",
  "capabilityRoots/discoverV1",
  "process/read",
  "process/write",
  "process/signal",
  "process/terminate",
  "fs/readFile",
  "fs/open",
  "fs/readBlock",
  "fs/close",
  "fs/writeFile",
  "fs/createDirectory",
  "fs/getMetadata",
  "fs/canonicalize",
  "fs/readDirectory",
  "fs/walk",
  "fs/remove",
  "fs/copy",
];

/**
 * Registered by Codex, answered −32601 by shellmcp: Codex 0.169's client works without each (exec-server spec,
 * exec-server-codex-0.169/README.md §3 "Optional methods": never sent in a turn, or tolerated as −32601).
 */
const NOT_OFFERED: Record<string, string> = {
  "http/request": "executor-side HTTP is out of scope (network goes through the proxy mode)",
  "environmentConfig/read": "optional: Codex 0.169 tolerates −32601",
  "environment/status": "newer than Codex 0.169",
  "capabilityRoots/discoverV1": "newer than Codex 0.169",
  "fs/open": "streamed reads: never sent by Codex 0.169 (sandboxedFileStreaming is false)",
  "fs/readBlock": "streamed reads: never sent by Codex 0.169",
  "fs/close": "streamed reads: never sent by Codex 0.169",
  "fs/canonicalize": "never sent by Codex 0.169",
  "fs/walk": "never sent by Codex 0.169",
};

describe("exec-server method table", () => {
  test("its names are Codex's registered methods less the ones not offered", () => {
    const expected = CODEX_REGISTERED.filter((m) => !(m in NOT_OFFERED)).sort();
    expect([...METHODS.keys()].sort()).toEqual(expected);
  });
  test("every method not offered is one Codex registers", () => {
    for (const m of Object.keys(NOT_OFFERED)) expect(CODEX_REGISTERED).toContain(m);
  });
  test("only initialize is outside the session gate", () => {
    expect([...METHODS].filter(([, m]) => !m.gated).map(([n]) => n)).toEqual(["initialize"]);
  });
});
