/**
 * Preloaded by `bun test` (bunfig.toml): several suites create workspaces under ~/.cache/shellmcp-conf (outside
 * /tmp on purpose: /tmp is a writable root of workspace-write sandboxes). Remove that folder after the run.
 */
import { afterAll } from "bun:test";
import { rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

afterAll(() => {
  rmSync(join(homedir(), ".cache", "shellmcp-conf"), { recursive: true, force: true });
});
