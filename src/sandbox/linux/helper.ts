import { notImplemented } from "../../not-implemented.ts";

/** arg0 role `codex-linux-sandbox`: Codex's Linux sandbox helper CLI. Returns the exit status. */
export function linuxSandboxMain(_args: string[]): number {
  return notImplemented("the codex-linux-sandbox role");
}
