/**
 * The {@link LaunchPlatform} of this process (issue 42): the one place that names the platform modules
 * (./linux/, ./macos/) for the one command run (src/shell/), which asks this object only. Its layer lies between
 * the escalation wire and the backends (docs/architecture.md, "Layering"). Each part keeps its own platform check:
 * the lifeline guard is missing off Linux (./linux/room-launcher.ts `launcherBinary`), the backends are chosen by
 * the call's platform (src/shell/backend-choice.ts), the git guard's confined repair runs on Linux only.
 */
import { selfExecCommand } from "../self.ts";
import type { LaunchPlatform } from "./platform.ts";
import { CodexHelperBackend, HelperBackend } from "./linux/backend.ts";
import { forgetBwrapProbe, probeBwrap } from "./linux/bwrap.ts";
import { repairBatch } from "./linux/git-repair-child.ts";
import {
  EXEC_FD,
  GUARD_ARGV0,
  GUARD_END_SIGNAL,
  guardedArgv,
  LIFELINE_FD,
  lifelineProblem,
  lifelineReadFd,
  selfExecFd,
} from "./linux/lifeline.ts";
import { SeatbeltBackend } from "./macos/backend.ts";

/** This process's platform parts: the lifeline guard, the sandbox backends, the git guard's repairs. */
export const HOST_PLATFORM: LaunchPlatform = {
  lifeline: {
    fd: LIFELINE_FD,
    execFd: EXEC_FD,
    argv0: GUARD_ARGV0,
    endSignal: GUARD_END_SIGNAL,
    problem: lifelineProblem,
    readFd: lifelineReadFd,
    selfExecFd,
    guardedArgv,
  },
  backends: {
    probeBwrap: () => probeBwrap(true),
    forgetBwrapProbe,
    helper: (s) => new HelperBackend(s.kind, s.exe, s.flags, s.directBwrap, s.landlockWhy, s.passesFds, s.landlockFix),
    codexHelper: (exe, useBwrap) => new CodexHelperBackend(exe, useBwrap),
    seatbelt: () => new SeatbeltBackend(),
    directBwrap: (b) => (b instanceof HelperBackend ? b.directBwrap : undefined),
  },
  gitRepair: (platform) => (platform === "linux" ? (ops) => repairBatch(ops, selfExecCommand()) : undefined),
};
