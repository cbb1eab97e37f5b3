/**
 * `[shellmcp] approver` and `approver_timeout_ms` (docs/approvals.md, "Turning it on"), and `serve` with an
 * approver folder it must not use: every call answers with the reason instead of running.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { approverConfig } from "../../src/config/config.ts";
import { closeAll, confDir, serveWithPid } from "../helpers/attack.ts";
import { afterAll } from "bun:test";

afterAll(closeAll);

describe("approverConfig", () => {
  test("absent: nothing set", () => expect(approverConfig({})).toEqual({ enabled: undefined, timeoutMs: undefined }));
  test("on, with a timeout", () =>
    expect(approverConfig({ shellmcp: { approver: true, approver_timeout_ms: 5000 } })).toEqual({ enabled: true, timeoutMs: 5000 }));
  test('"always"', () => expect(approverConfig({ shellmcp: { approver: "always" } })).toMatchObject({ enabled: "always" }));
  test("a wrong type or value names the key", () => {
    expect(() => approverConfig({ shellmcp: { approver: "yes" } })).toThrow('shellmcp.approver must be true, false or "always"');
    expect(() => approverConfig({ shellmcp: { approver: true, approver_timeout_ms: 0 } })).toThrow("shellmcp.approver_timeout_ms");
  });
});

test("serve refuses an approver folder that is a link: each call says why, nothing runs", async () => {
  const home = confDir("appr-home");
  const elsewhere = confDir("appr-elsewhere");
  chmodSync(elsewhere, 0o700);
  symlinkSync(elsewhere, join(home, "approvals"));
  mkdirSync(join(home, "rules"), { recursive: true });
  const ws = confDir("appr-ws");
  const s = await serveWithPid({ codexHome: home, args: ["--approver", "--cd", ws] });
  const r = (await s.client.callTool({ name: "shell", arguments: { command: `echo ran > ${ws}/ran`, workdir: ws } })) as {
    isError?: boolean;
    content: { text: string }[];
  };
  expect(r.isError).toBe(true);
  expect(r.content[0]!.text).toContain("the approver's folder is unsafe");
  expect(r.content[0]!.text).toContain("symbolic link");
  expect(existsSync(join(ws, "ran"))).toBe(false);
}, 60_000);

test("[shellmcp] approver = true in config.toml turns it on (a socket appears)", async () => {
  const home = confDir("appr-home");
  await Bun.write(join(home, "config.toml"), "[shellmcp]\napprover = true\n");
  const s = await serveWithPid({ codexHome: home, args: ["--cd", confDir("appr-ws")] });
  const sock = join(home, "approvals", `${s.pid}.sock`);
  const until = Date.now() + 20_000;
  // the set-up runs after the early initialize answer: a first call waits for it
  await s.shell({ command: "true", workdir: home });
  while (!existsSync(sock) && Date.now() < until) await Bun.sleep(50);
  expect(Bun.spawnSync(["stat", "-c", "%a %F", sock]).stdout.toString().trim()).toBe("600 socket");
}, 60_000);
