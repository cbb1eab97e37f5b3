/**
 * The bubblewrap probe cache is start-up state a sandbox must not be able to forge (issue 22 item 4, issue 20):
 * it lives in a per-boot runtime folder, never in HOME, and is used only when the folder and file are this user's
 * and writable by nobody else.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { probeCacheDir, probeKey } from "../../src/sandbox/linux/bwrap-probe-cache.ts";
import { ownedAndPrivate } from "../../src/sandbox/paths.ts";
import { RUN_TMP } from "../helpers/test-dirs.ts";

const me = process.getuid!();

describe("where the probe cache lives", () => {
  test("root: /run/shellmcp (never HOME)", () => {
    expect(probeCacheDir(0, { HOME: "/root", XDG_RUNTIME_DIR: "/run/user/0" })).toBe("/run/shellmcp");
  });

  test("another user: a private XDG_RUNTIME_DIR, or nowhere", () => {
    const xdg = mkdtempSync(join(RUN_TMP, "xdg-"));
    chmodSync(xdg, 0o700);
    expect(probeCacheDir(me + 1, { XDG_RUNTIME_DIR: xdg })).toBeUndefined(); // not that user's folder (it is ours)
    if (me !== 0) expect(probeCacheDir(me, { XDG_RUNTIME_DIR: xdg })).toBe(join(xdg, "shellmcp"));
    expect(probeCacheDir(4242, {})).toBeUndefined();
    expect(probeCacheDir(4242, { XDG_RUNTIME_DIR: "relative/dir" })).toBeUndefined();
  });

  test("SHELLMCP_NO_PROBE_CACHE=1: nowhere", () => {
    expect(probeCacheDir(0, { SHELLMCP_NO_PROBE_CACHE: "1" })).toBeUndefined();
  });
});

describe("what is trusted", () => {
  const d = mkdtempSync(join(RUN_TMP, "probe-trust-"));

  test("a folder or file of ours that only we can write", () => {
    const dir = join(d, "ok");
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, "f"), "[]", { mode: 0o600 });
    chmodSync(dir, 0o700);
    expect(ownedAndPrivate(dir, me, true)).toBe(true);
    expect(ownedAndPrivate(join(dir, "f"), me, false)).toBe(true);
  });

  test("not: group- or world-writable, a symlink, someone else's, the wrong kind", () => {
    const open = join(d, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    expect(ownedAndPrivate(open, me, true)).toBe(false);
    const f = join(d, "gw");
    writeFileSync(f, "[]");
    chmodSync(f, 0o664);
    expect(ownedAndPrivate(f, me, false)).toBe(false);
    const priv = join(d, "priv");
    writeFileSync(priv, "[]", { mode: 0o600 });
    chmodSync(priv, 0o600);
    symlinkSync(priv, join(d, "link"));
    expect(ownedAndPrivate(join(d, "link"), me, false)).toBe(false);
    expect(ownedAndPrivate(priv, me + 1, false)).toBe(false);
    expect(ownedAndPrivate(priv, me, true)).toBe(false);
    expect(ownedAndPrivate(join(d, "missing"), me, false)).toBe(false);
  });

  test("the key changes with the network setting and names the binary", () => {
    const k1 = probeKey("/bin/sh", true);
    const k2 = probeKey("/bin/sh", false);
    expect(k1).toBeDefined();
    expect(k1).not.toBe(k2);
    expect(k1).toContain("/bin/sh");
    expect(probeKey(join(d, "no-such-bwrap"), true)).toBeUndefined();
  });
});
