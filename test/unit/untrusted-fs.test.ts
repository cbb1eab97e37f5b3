/** src/untrusted-fs.ts: every outcome of a read of a file a sandbox could have made. */
import { afterAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readUntrusted, readUntrustedText, readUntrustedTextOrAbsent, UntrustedFileError } from "../../src/untrusted-fs.ts";

const dir = mkdtempSync(join(tmpdir(), "untrusted-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("readUntrusted", () => {
  test("a regular file", () => {
    writeFileSync(join(dir, "f"), "hello");
    expect(readUntrustedText(join(dir, "f"))).toEqual({ ok: true, text: "hello" });
  });
  test("missing", () => {
    expect(readUntrusted(join(dir, "nope")).ok === false && (readUntrusted(join(dir, "nope")) as { why: string }).why).toBe("missing");
    expect(readUntrustedTextOrAbsent(join(dir, "nope"))).toBeUndefined();
  });
  test("a FIFO with no writer: refused at once (the open would block without O_NONBLOCK)", () => {
    execFileSync("mkfifo", [join(dir, "fifo")]);
    const r = readUntrusted(join(dir, "fifo"));
    expect(r.ok ? "read" : r.why).toBe("not-regular");
    expect(() => readUntrustedTextOrAbsent(join(dir, "fifo"))).toThrow(UntrustedFileError);
  });
  test("a device and a directory are not regular files", () => {
    expect((readUntrusted("/dev/zero") as { why: string }).why).toBe("not-regular");
    expect((readUntrusted(dir) as { why: string }).why).toBe("not-regular");
  });
  test("a symlink is refused unless follow is asked for", () => {
    writeFileSync(join(dir, "target"), "t");
    symlinkSync(join(dir, "target"), join(dir, "link"));
    expect((readUntrusted(join(dir, "link")) as { why: string }).why).toBe("symlink");
    expect(readUntrustedText(join(dir, "link"), { follow: true })).toEqual({ ok: true, text: "t" });
    symlinkSync(join(dir, "fifo"), join(dir, "link-to-fifo"));
    expect((readUntrusted(join(dir, "link-to-fifo"), { follow: true }) as { why: string }).why).toBe("not-regular");
  });
  test("over the size cap: refused, never truncated; head reads only the start", () => {
    writeFileSync(join(dir, "big"), "x".repeat(100));
    expect((readUntrusted(join(dir, "big"), { maxBytes: 99 }) as { why: string }).why).toBe("too-large");
    expect(readUntrusted(join(dir, "big"), { maxBytes: 100 }).ok).toBe(true);
    expect(readUntrustedText(join(dir, "big"), { head: 4 })).toEqual({ ok: true, text: "xxxx" });
  });
});
