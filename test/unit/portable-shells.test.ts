/**
 * The checked copy of an embedded shell (src/carried/portable-shells.ts): written once, verified on each start,
 * replaced when changed, never written through a folder that is not ours.
 */
import { describe, expect, test } from "bun:test";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { isErrorCode } from "../../src/errors.ts";
import { defaultShell } from "../../src/serve/setup.ts";
import { installPortableShell, portableShellBases, roleLink } from "../../src/carried/portable-shells.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const SHELL = new TextEncoder().encode("#!/bin/sh\necho portable\n");

function base(): string {
  return join(mkdtempSync(join(CONF_BASE, "portable-")), "shellmcp");
}

describe("portable shells", () => {
  test("bases: the per-user runtime folder first, never the temporary folder", () => {
    expect(portableShellBases(0, "/root")).toEqual(["/run/shellmcp", "/root/.cache/shellmcp"]);
    expect(portableShellBases(1000, "/home/u")).toEqual(["/run/user/1000/shellmcp", "/home/u/.cache/shellmcp"]);
  });

  test("written once with mode 0755 in a private content folder, then reused", () => {
    const b = base();
    const p = installPortableShell("bash", SHELL, [b]);
    expect(p).toMatch(/\/shells-[0-9a-f]{16}\/bash$/);
    expect(readFileSync(p, "utf8")).toBe("#!/bin/sh\necho portable\n");
    expect(lstatSync(p).mode & 0o7777).toBe(0o755);
    expect(lstatSync(b).mode & 0o777).toBe(0o700);
    const ino = lstatSync(p).ino;
    expect(installPortableShell("bash", SHELL, [b])).toBe(p);
    expect(lstatSync(p).ino).toBe(ino); // not rewritten
  });

  test("a missing ~/.cache is created (a new account); /run/user/<uid> never is", () => {
    const home = mkdtempSync(join(CONF_BASE, "home-"));
    const p = installPortableShell("bash", SHELL, ["/run/user/4242424/shellmcp", join(home, ".cache", "shellmcp")]);
    expect(p.startsWith(join(home, ".cache", "shellmcp") + "/")).toBe(true);
    expect(lstatSync(join(home, ".cache")).mode & 0o777).toBe(0o700);
    expect(existsSync("/run/user/4242424")).toBe(false);
  });

  test("a changed, re-moded or replaced-by-symlink shell is replaced on the next start", () => {
    const b = base();
    const p = installPortableShell("zsh", SHELL, [b]);
    writeFileSync(p, "#!/bin/sh\necho evil\n");
    expect(readFileSync(installPortableShell("zsh", SHELL, [b]), "utf8")).toContain("portable");
    chmodSync(p, 0o777);
    installPortableShell("zsh", SHELL, [b]);
    expect(lstatSync(p).mode & 0o7777).toBe(0o755);
    const evil = join(CONF_BASE, `evil-${process.pid}`);
    writeFileSync(evil, "#!/bin/sh\necho evil\n");
    chmodSync(p, 0o755);
    rmSync(p);
    symlinkSync(evil, p);
    installPortableShell("zsh", SHELL, [b]);
    expect(lstatSync(p).isSymbolicLink()).toBe(false);
    expect(readFileSync(p, "utf8")).toContain("portable");
    expect(readFileSync(evil, "utf8")).toContain("evil"); // never written through the link
  });

  test("a folder that is a symlink or writable by others is refused; the next base is used", () => {
    const real = mkdtempSync(join(CONF_BASE, "real-"));
    const linked = join(mkdtempSync(join(CONF_BASE, "link-")), "shellmcp");
    symlinkSync(real, linked);
    const open = join(mkdtempSync(join(CONF_BASE, "open-")), "shellmcp");
    mkdirSync(open, { mode: 0o777 });
    chmodSync(open, 0o777);
    const good = base();
    const p = installPortableShell("bash", SHELL, [linked, open, good]);
    expect(p.startsWith(good + "/")).toBe(true);
    try {
      installPortableShell("bash", SHELL, [linked, open]);
      throw new Error("expected CONFIG");
    } catch (e) {
      expect(isErrorCode(e, "CONFIG")).toBe(true);
      expect((e as Error).message).toContain("is a symbolic link");
      expect((e as Error).message).toContain("writable by others");
    }
  });

  test("role links point at the executable and are repaired", () => {
    const b = base();
    const link = roleLink("codex-execve-wrapper", "/opt/x/shellmcp", [b]);
    expect(readlinkSync(link)).toBe("/opt/x/shellmcp");
    rmSync(link);
    symlinkSync("/elsewhere", link);
    expect(readlinkSync(roleLink("codex-execve-wrapper", "/opt/x/shellmcp", [b]))).toBe("/opt/x/shellmcp");
  });

  test("serve's default shell: SHELLMCP_SHELLS_DIR first; on macOS without shells, how to build them", () => {
    const dir = mkdtempSync(join(CONF_BASE, "shells-"));
    writeFileSync(join(dir, "zsh"), "");
    const saved = process.env.SHELLMCP_SHELLS_DIR;
    try {
      process.env.SHELLMCP_SHELLS_DIR = dir;
      expect(defaultShell("zsh", "linux")).toBe(join(dir, "zsh"));
      expect(() => defaultShell("bash", "linux")).toThrow(`SHELLMCP_SHELLS_DIR=${dir} holds no bash`);
      delete process.env.SHELLMCP_SHELLS_DIR;
      // From source nothing is embedded and Bun's folder has no shells/: the macOS message.
      let err: unknown;
      try {
        defaultShell("bash", "darwin");
      } catch (e) {
        err = e;
      }
      expect(isErrorCode(err, "CONFIG")).toBe(true);
      expect((err as Error).message).toContain("bash scripts/build-shells-macos.sh");
      expect((err as Error).message).toContain("SHELLMCP_SHELLS_DIR=<clone>/dist/shells");
    } finally {
      if (saved === undefined) delete process.env.SHELLMCP_SHELLS_DIR;
      else process.env.SHELLMCP_SHELLS_DIR = saved;
    }
  });
});
