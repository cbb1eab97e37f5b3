/**
 * Preloaded by `bun test` (bunfig.toml). Two per-run folders, both removed after the run, so that a test run
 * leaves nothing behind and concurrent runs (other checkouts) never remove each other's files:
 * - {@link CONF_BASE} (~/.cache/shellmcp-conf/run-<pid>): workspaces that must lie outside /tmp (/tmp is a
 *   writable root of workspace-write sandboxes);
 * - {@link RUN_TMP} (<tmpdir>/shellmcp-run-<pid>), made this process's `TMPDIR`, so every `mkdtemp(tmpdir())`
 *   of the suites and of the programs they start lands in it. It is still under /tmp, so tests about paths
 *   under /tmp and under `$TMPDIR` keep their meaning.
 */
import { afterAll } from "bun:test";
import { mkdirSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";

/** This test run's workspace folder outside /tmp (created on load). */
export const CONF_BASE = join(homedir(), ".cache", "shellmcp-conf", `run-${process.pid}`);
mkdirSync(CONF_BASE, { recursive: true });

/** This test run's temporary folder (created on load; `process.env.TMPDIR` points at it). */
export const RUN_TMP = join(tmpdir(), `shellmcp-run-${process.pid}`);
mkdirSync(RUN_TMP, { recursive: true });
process.env.TMPDIR = RUN_TMP;

afterAll(() => {
  rmSync(CONF_BASE, { recursive: true, force: true });
  rmSync(RUN_TMP, { recursive: true, force: true });
});
