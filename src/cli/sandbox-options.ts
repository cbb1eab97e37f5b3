/**
 * The flags and actions `sandbox linux|macos` (./sandbox.ts) and their older names `debug landlock|seatbelt`
 * (./debug.ts) share: one set of sandbox flags, the Linux network proxy's entries, the macOS extras, and the lazy
 * hand-offs to src/sandbox-cli/linux.ts and src/sandbox-cli/macos.ts.
 */
import type { Command } from "commander";
import { collect, type SetExit } from "./options.ts";

/** The sandbox options as commander gives them (`--no-proc` arrives as `proc: false`). */
type SandboxOpts = Omit<import("../sandbox-cli/linux.ts").SandboxCliOptions, "noProc"> & { proc?: boolean };

/** The flags of every sandbox command, and its `[cmd...]` argument passed through untouched. Returns `c`. */
function sandboxOptions(c: Command): Command {
  return c
    .option("--sandbox <MODE>", "read-only (default), workspace-write or danger-full-access")
    .option("--full-auto", "workspace-write with the network off: the cwd, /tmp and $TMPDIR are writable")
    .option("--add-dir <DIR>", "an extra writable root (repeatable; workspace-write)", collect, [])
    .option("--network", "allow network access")
    .option("--backend <NAME>", "auto (bwrap if it works, else Landlock), bwrap or landlock")
    .option("--policy <JSON>", "a full Codex SandboxPolicy JSON instead of the flags above")
    .option("--no-proc", "do not mount /proc in bwrap")
    .option("-C, --cd <DIR>", "working directory (and workspace root) for the command")
    .argument("[cmd...]", "the command and its arguments")
    .passThroughOptions();
}

/**
 * The Linux command's flags on `c`: the sandbox flags, then network proxy mode for a person (docs/network.md): the
 * config's policy plus these entries. Returns `c`.
 */
export function linuxOptions(c: Command): Command {
  return sandboxOptions(c)
    .option(
      "--allow-domain <HOST>",
      "network only through the proxy, which allows HOST (Codex patterns: *.x, **.x; repeatable)",
      collect,
      [],
    )
    .option("--deny-domain <HOST>", "the proxy refuses HOST (deny wins; repeatable)", collect, [])
    .option("--allow-local-binding", "the proxy allows local and private addresses without an exact entry");
}

/** The macOS command's flags on `c`: the sandbox flags, a permission profile, `--print-policy`. Returns `c`. */
export function macosOptions(c: Command): Command {
  return sandboxOptions(c)
    .option("--permission-profile <JSON>", "a Codex 0.169 permission profile JSON instead of the flags above")
    .option("--print-policy", "print the Seatbelt policy and the sandbox-exec argv instead of running (any OS)");
}

/**
 * The Linux command's action: `sandboxLinuxCli` with `defaultBackend` when no `--backend` is given (`auto`, or
 * `landlock` for `debug landlock`); its exit status goes to `setExit`.
 */
export function runLinux(setExit: SetExit, defaultBackend: "auto" | "landlock"): (cmd: string[], o: SandboxOpts) => Promise<void> {
  return async (cmd, o) => {
    const { sandboxLinuxCli } = await import("../sandbox-cli/linux.ts");
    setExit(await sandboxLinuxCli(cmd, { ...o, noProc: o.proc === false }, defaultBackend));
  };
}

/** The macOS command's action: `sandboxMacosCli` on this host (or `--print-policy` anywhere); its exit status goes to `setExit`. */
export function runMacos(
  setExit: SetExit,
): (cmd: string[], o: SandboxOpts & { permissionProfile?: string; printPolicy?: boolean }) => Promise<void> {
  return async (cmd, o) => {
    const { sandboxMacosCli, processHost } = await import("../sandbox-cli/macos.ts");
    setExit(await sandboxMacosCli(cmd, o, processHost(o.cd)));
  };
}
