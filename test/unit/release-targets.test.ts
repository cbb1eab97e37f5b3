/**
 * Which targets `bun build.ts --release` builds (scripts/release.ts `releaseTargets`, issue 41): by default the
 * host OS's targets that can be built here, each other one skipped with its reason; `SHELLMCP_RELEASE_TARGETS`
 * names them (or `all`), and a named Linux target without its portable shells is an error. Pure.
 */
import { expect, test } from "bun:test";
import { releaseTargets } from "../../scripts/release.ts";

const onlyX64 = (t: string) => t !== "linux-arm64";

test("default on a linux-x64 host without arm64 shells: linux-x64 built, the others skipped with why", () => {
  const r = releaseTargets({}, "linux", onlyX64);
  expect(r.build).toEqual(["linux-x64"]);
  expect(r.skipped).toEqual([
    {
      target: "linux-arm64",
      why: "no portable shells in dist/shells-static/linux-arm64/ (bash scripts/build-shells-static.sh --arch aarch64)",
    },
    {
      target: "darwin-x64",
      why: expect.stringContaining("another OS than this linux host (cross-compile it with SHELLMCP_RELEASE_TARGETS=darwin-x64"),
    },
    { target: "darwin-arm64", why: expect.stringContaining("another OS than this linux host") },
  ]);
});

test("default on macOS: both darwin targets", () => {
  expect(releaseTargets({}, "darwin", onlyX64).build).toEqual(["darwin-x64", "darwin-arm64"]);
});

test("named targets: exactly those, in the usual order; all; unknown or unbuildable ones refused", () => {
  expect(releaseTargets({ SHELLMCP_RELEASE_TARGETS: "darwin-arm64,linux-x64" }, "linux", onlyX64)).toEqual({
    build: ["linux-x64", "darwin-arm64"],
    skipped: [],
  });
  expect(releaseTargets({ SHELLMCP_RELEASE_TARGETS: "all" }, "linux", () => true).build).toHaveLength(4);
  expect(() => releaseTargets({ SHELLMCP_RELEASE_TARGETS: "linux-x64,linux-arm64" }, "linux", onlyX64)).toThrow(
    "no portable shells for linux-arm64: bash scripts/build-shells-static.sh --arch aarch64",
  );
  expect(() => releaseTargets({ SHELLMCP_RELEASE_TARGETS: "windows-x64" }, "linux", onlyX64)).toThrow("unknown target windows-x64");
  expect(() => releaseTargets({}, "linux", () => false)).toThrow("nothing to build on this host");
});
