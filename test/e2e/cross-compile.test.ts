/**
 * build.ts cross-compiles for linux-arm64 and darwin-arm64 with Bun runtimes from the npm registry
 * (`@oven/bun-<target>`, cached in .cache/bun-runtimes). Checked from the executables' headers.
 */
import { describe, expect, test } from "bun:test";
import { crossBuild } from "../helpers/binary.ts";

const build = (target: string): Buffer => crossBuild(target).subarray(0, 64);

describe("cross-compilation", () => {
  test("linux-arm64: an ELF executable for aarch64", () => {
    const h = build("linux-arm64");
    expect([...h.subarray(0, 4)]).toEqual([0x7f, 0x45, 0x4c, 0x46]);
    expect(h.readUInt16LE(18)).toBe(183); // EM_AARCH64
  }, 180_000);

  test("darwin-arm64: a Mach-O executable for arm64", () => {
    const h = build("darwin-arm64");
    expect(h.readUInt32LE(0)).toBe(0xfeedfacf); // MH_MAGIC_64
    expect(h.readUInt32LE(4)).toBe(0x0100000c); // CPU_TYPE_ARM64
  }, 180_000);
});
