/**
 * The portable patched shells embedded in the compiled executable: build.ts copies the target's
 * `dist/shells-static/<platform>/{bash,zsh}` to `dist/embed/` before each compile (empty files for a platform
 * without portable shells, macOS), and Bun embeds them as file assets. Each value is the asset's path inside the
 * executable (`/$bunfs/root/bash-<hash>`), readable with `node:fs`. Only `portable-shells.ts` loads this module,
 * and only when compiled: from source the assets need not exist.
 */
import bash from "../../dist/embed/bash" with { type: "file" };
import zsh from "../../dist/embed/zsh" with { type: "file" };
import roomLauncher from "../../dist/embed/room-launcher" with { type: "file" };
import sandboxExec from "../../dist/embed/sandbox-exec" with { type: "file" };

/** Path of each embedded program inside the executable (an empty file: none embedded). */
export const EMBEDDED_SHELLS: Readonly<Record<"bash" | "zsh" | "room-launcher" | "sandbox-exec", string>> = {
  bash,
  zsh,
  "room-launcher": roomLauncher,
  "sandbox-exec": sandboxExec,
};
