/**
 * Shared answer of a role or command that is dispatched but not built yet: a clear message on stderr
 * and exit status 2 (usage-class failure), never a silent success.
 */
import { writeStderr } from "./stderr.ts";

/** Exit status of a role or command that is not built yet. */
export const NOT_IMPLEMENTED_EXIT = 2;

/** Print `shellmcp: <what> is not implemented yet` and return {@link NOT_IMPLEMENTED_EXIT}. */
export function notImplemented(what: string): number {
  writeStderr(`shellmcp: ${what} is not implemented yet\n`);
  return NOT_IMPLEMENTED_EXIT;
}
