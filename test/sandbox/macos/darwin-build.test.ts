/**
 * The darwin builds (`build.ts --target darwin-x64|darwin-arm64`, Bun runtimes from the npm registry) are Mach-O
 * executables for the right CPU and carry the Seatbelt generator (its rule text and the absolute sandbox-exec
 * path). They cannot be run here; what runs on a Mac is listed in README.md ("macOS").
 */
import { describe, expect, test } from "bun:test";
import { crossBuild as build } from "../../helpers/binary.ts";

describe("darwin builds", () => {
  for (const [target, cpu] of [
    ["darwin-x64", 0x01000007], // CPU_TYPE_X86_64
    ["darwin-arm64", 0x0100000c], // CPU_TYPE_ARM64
  ] as const) {
    test(`${target}: a Mach-O executable carrying the Seatbelt policy generator`, () => {
      const bin = build(target);
      expect(bin.readUInt32LE(0)).toBe(0xfeedfacf); // MH_MAGIC_64
      expect(bin.readUInt32LE(4)).toBe(cpu);
      expect(bin.readUInt32LE(12)).toBe(2); // MH_EXECUTE
      expect(bin.indexOf("closed by default: anything not allowed below is refused")).toBeGreaterThan(0);
      expect(bin.indexOf("/usr/bin/sandbox-exec")).toBeGreaterThan(0);
    }, 180_000);
  }
});
