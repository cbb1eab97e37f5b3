/**
 * Preloaded by `bun test` (bunfig.toml): several suites create workspaces under {@link CONF_BASE}
 * (~/.cache/shellmcp-conf/run-<pid>: outside /tmp on purpose, /tmp is a writable root of workspace-write
 * sandboxes). One folder per test run, so concurrent runs (other checkouts) never remove each other's
 * workspaces; this run's folder is removed after it.
 */
import { afterAll } from "bun:test";
import { mkdirSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** This test run's workspace folder (created on load). */
export const CONF_BASE = join(homedir(), ".cache", "shellmcp-conf", `run-${process.pid}`);
mkdirSync(CONF_BASE, { recursive: true });

afterAll(() => {
  rmSync(CONF_BASE, { recursive: true, force: true });
});
