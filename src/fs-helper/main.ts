import { notImplemented } from "../not-implemented.ts";

/** arg0 role `codex-fs`: the sandboxed filesystem helper of the exec-server. Returns the exit status. */
export function fsHelperMain(_args: string[]): number {
  return notImplemented("the codex-fs role");
}
