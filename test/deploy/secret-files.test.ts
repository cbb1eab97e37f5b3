/**
 * Secret files as Kubernetes mounts them (issue 44): src/auth/bearer.ts `secretFileModeProblem` accepts a file
 * only root and this process's own group can read and nobody can write (a secret volume for a non-root pod with
 * `fsGroup` comes out 0440 whatever `defaultMode` says, kubernetes/kubernetes#57923), and still refuses one others
 * can read or anyone but its owner can write, with the reason. The table runs on `stat` shapes; the real layouts
 * (`..data` symlinks, a supplementary fsGroup, uid 65532) run through the compiled exec-server in ./pod.test.ts and
 * here as this user. Before the change every group bit was refused ("accessible by group or others").
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readSecretFile, secretFileModeProblem } from "../../src/auth/bearer.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";

const ME = { uid: 1000, gids: [1000, 2000] };

describe("secretFileModeProblem (uid 1000, groups 1000 and the fsGroup 2000)", () => {
  const cases: [string, { mode: number; uid: number; gid: number }, string | undefined][] = [
    ["0600 of this user (as before)", { mode: 0o600, uid: 1000, gid: 1000 }, undefined],
    ["0400 of root, any group", { mode: 0o400, uid: 0, gid: 0 }, undefined],
    ["0440 root:fsGroup (a Kubernetes secret volume)", { mode: 0o440, uid: 0, gid: 2000 }, undefined],
    ["0440 root:own gid", { mode: 0o440, uid: 0, gid: 1000 }, undefined],
    ["0440 of this user, own group", { mode: 0o440, uid: 1000, gid: 1000 }, undefined],
    ["0444 root:fsGroup: others read", { mode: 0o444, uid: 0, gid: 2000 }, "(mode 0444): others can read or write it"],
    ["0604: others read", { mode: 0o604, uid: 1000, gid: 1000 }, "(mode 0604): others can read or write it"],
    ["0602: others write", { mode: 0o602, uid: 1000, gid: 1000 }, "(mode 0602): others can read or write it"],
    ["0460 root:fsGroup: group writes", { mode: 0o460, uid: 0, gid: 2000 }, "(mode 0460): its group can write it"],
    [
      "0640 of this user: group-readable and writable",
      { mode: 0o640, uid: 1000, gid: 1000 },
      "(mode 0640): its group can read it and it is writable",
    ],
    [
      "0440 root:a group this process is not in",
      { mode: 0o440, uid: 0, gid: 3000 },
      "its group 3000 can read it and this process is not in that group",
    ],
    ["0440 of another user, our group", { mode: 0o440, uid: 1001, gid: 2000 }, "its owner 1001 is neither root nor this user"],
  ];
  for (const [name, st, want] of cases)
    test(name, () => {
      const got = secretFileModeProblem("/s/token", { ...st, mode: 0o100000 | st.mode }, ME);
      if (want === undefined) expect(got).toBeUndefined();
      else {
        expect(got).toContain(want);
        expect(got).toContain("websocket auth secret /s/token is accessible by group or others");
        expect(got).toContain("chmod 600 /s/token");
      }
    });
});

describe("the layouts on disk, read as this user", () => {
  const dir = mkdtempSync(join(CONF_BASE, "secret-layouts-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const gid = process.getgid?.() ?? 0;

  /** kubelet's atomic writer: `token -> ..data/token`, `..data -> ..<timestamp>/`. */
  function volume(name: string, mode: number): string {
    const v = join(dir, name);
    const stamp = join(v, "..2026_11_29_09_00_00.1");
    mkdirSync(stamp, { recursive: true });
    writeFileSync(join(stamp, "token"), "tok-123\n");
    chmodSync(join(stamp, "token"), mode);
    symlinkSync("..2026_11_29_09_00_00.1", join(v, "..data"));
    symlinkSync("..data/token", join(v, "token"));
    return join(v, "token");
  }

  test.skipIf(process.platform === "win32")("0440 behind ..data symlinks is read (own group)", () => {
    expect(gid).toBeGreaterThanOrEqual(0);
    expect(readSecretFile(volume("k8s-0440", 0o440))).toBe("tok-123");
  });
  test("0400 behind ..data symlinks is read", () => {
    expect(readSecretFile(volume("k8s-0400", 0o400))).toBe("tok-123");
  });
  test("0644 behind ..data symlinks is refused with the reason", () => {
    const p = volume("k8s-0644", 0o644);
    expect(() => readSecretFile(p)).toThrow(
      `websocket auth secret ${p} is accessible by group or others (mode 0644): others can read or write it`,
    );
  });
  test("0660 behind ..data symlinks is refused (its group can write it)", () => {
    const p = volume("k8s-0660", 0o660);
    expect(() => readSecretFile(p)).toThrow("(mode 0660): its group can write it");
  });
});
