/**
 * What every command module of the CLI shares: the repeatable-flag collector and the shape of the callback that
 * receives an action's exit status (src/cli.ts builds the program from these modules).
 */

/** Receives the exit status (0–255) of the command that ran; src/cli.ts's `cliMain` returns the last one given. */
export type SetExit = (code: number) => void;

/** Commander's argument parser of a repeatable flag: `value` appended to the values given so far (a new array). */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}
