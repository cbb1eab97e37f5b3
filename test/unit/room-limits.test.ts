/**
 * An escalation room too large to start is refused before anything runs (issue 42, "planBwrap refuses with a clear
 * message before an argv would exceed the kernel's limits", applied to rooms): src/escalate/rooms/build.ts
 * `buildRoom` checks the room's bubblewrap argv, or the Landlock helper's command line, against the kernel's and
 * bubblewrap's limits (src/sandbox/linux/exec-limits.ts) and answers `{ unavailable }` with the counts, the limit and
 * what happens instead (the program runs inside the call's sandbox, src/escalate/placement.ts). A room holds the
 * call's writable roots and denied paths plus its own grants, so it can be over a limit the call was under.
 *
 * The limits are injected small here (the same code path as the real ones: a real room over 6 MiB or 9,000 arguments
 * needs thousands of writable roots). Seen failing before the check: both rooms were built.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { buildRoom } from "../../src/escalate/rooms/build.ts";
import { prepareRoom, type RoomSpec } from "../../src/escalate/rooms/plan.ts";
import { planSandboxPolicy } from "../../src/sandbox/filesystem-plan.ts";
import { BWRAP_MAX_ARGS, execLimits, type ExecLimits } from "../../src/sandbox/linux/exec-limits.ts";
import type { RoomBackend } from "../../src/sandbox/room-backend.ts";
import { assertOutside, CONF_BASE } from "../helpers/test-dirs.ts";

mkdirSync(CONF_BASE, { recursive: true });
const root = assertOutside(mkdtempSync(join(CONF_BASE, "room-limits-")));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const BACKENDS: Record<string, RoomBackend> = {
  bwrap: { kind: "bwrap", bwrap: "/usr/bin/bwrap", noProc: false },
  landlock: { kind: "landlock", helper: ["/opt/shellmcp/codex-linux-sandbox"] },
};
const ENV = ["PATH=/usr/bin:/bin", `HOME=${root}`];

/** A workspace-write call in a fresh workspace with `extra` writable roots, and the room `npm` gets in it. */
function room(backend: RoomBackend, extra: number, limits: ExecLimits) {
  const ws = mkdtempSync(join(root, "ws-"));
  const roots = Array.from({ length: extra }, (_, i) => {
    const d = join(ws, `root-${i}`);
    mkdirSync(d);
    return d;
  });
  const spec: RoomSpec = {
    backend,
    call: planSandboxPolicy(
      {
        type: "workspace-write",
        writable_roots: roots,
        read_only_access: { type: "full-access" },
        network_access: false,
        exclude_tmpdir_env_var: true,
        exclude_slash_tmp: true,
      },
      ws,
      { HOME: root },
    ),
    extraWritable: {},
  };
  const prepared = prepareRoom(spec, "/usr/bin/npm", ws, ENV, [undefined, "npm"]);
  if (prepared.kind !== "room") throw new Error(`no room was planned: ${JSON.stringify(prepared)}`);
  const before = readdirSync(ws).sort();
  const built = buildRoom(spec, prepared.room, ws, prepared.env, ["/usr/bin/npm", "install"], limits);
  if (!("unavailable" in built)) built.release();
  // Whatever building made on the host (mount points) is given back, refused or not.
  expect(readdirSync(ws).sort()).toEqual(before);
  return built;
}

for (const [name, backend] of Object.entries(BACKENDS)) {
  test(`${name}: a room over the kernel's total for one execve is not built, and says why`, () => {
    const small: ExecLimits = { ...execLimits("unlimited"), total: 64 * 1024 };
    // Fits with a few roots (the same room at the same limits, so the refusal below is the size, not the room).
    expect("unavailable" in room(backend, 2, small)).toBe(false);
    const r = room(backend, 600, small);
    expect("unavailable" in r).toBe(true);
    const why = (r as { unavailable: string }).unavailable;
    expect(why).toContain("this escalation room is too large to start");
    expect(why).toContain("more than the kernel takes in one execve (65536 bytes");
    expect(why).toContain("No room was built (the program runs inside the call's sandbox instead)");
    expect(why).toContain("writable roots");
  });
}

test("bwrap: a room with more arguments than bubblewrap accepts is not built", () => {
  const few: ExecLimits = { ...execLimits("unlimited"), bwrapArgs: 200 };
  expect(BWRAP_MAX_ARGS).toBe(9000);
  expect("unavailable" in room(BACKENDS.bwrap!, 2, few)).toBe(false);
  const r = room(BACKENDS.bwrap!, 100, few);
  expect((r as { unavailable: string }).unavailable).toContain("more than the 200 arguments bubblewrap accepts");
});
