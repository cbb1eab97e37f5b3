/**
 * How a call's sandbox backend builds escalation rooms ({@link RoomBackend}): what each backend (./backend.ts
 * `SandboxBackend.room`) answers, and what the room builder (src/escalate/rooms/build.ts) builds from. The room
 * itself — what it writes, reads and reaches — is planned in src/escalate/rooms/plan.ts. Types only.
 */

/** How rooms are built for one call, by the call's backend. */
export type RoomBackend =
  /** No room: the program runs on the host (`escalation = "host"`, or the call itself is not sandboxed). */
  | { kind: "host" }
  /** bubblewrap at `bwrap`; `noProc` when `/proc` cannot be mounted here (as the call's own probe found). */
  | { kind: "bwrap"; bwrap: string; noProc: boolean }
  /** Landlock + seccomp through this binary's sandbox helper (`helper`: the argv that starts it). */
  | { kind: "landlock"; helper: string[] }
  /**
   * Seatbelt on macOS: `/usr/bin/sandbox-exec` with a policy generated from the room's plan (its read-only paths
   * inside writable roots included: Seatbelt excludes them by path). `allowLocalBinding`: proxy mode's local rules.
   */
  | { kind: "seatbelt"; allowLocalBinding: boolean }
  /** A room cannot be built here: escalated programs run inside the call's sandbox instead (never on the host). */
  | { kind: "unavailable"; reason: string };
