/**
 * The one error type of shellmcp: a string `code` to branch on and structured `data` to report.
 * Never branch on `message`; it is for people.
 */

/** Every error code in use. Add new ones here so that `switch` over codes stays exhaustive. */
export type ErrorCode =
  | "SYSCALL" // a libc/kernel call failed; data: { call, errno, errname }
  | "USAGE" // bad command-line input
  | "PROTOCOL" // malformed or unexpected escalation frame / JSON
  | "RULES_PARSE" // a .rules file failed to parse or validate
  | "SANDBOX_UNAVAILABLE" // the requested sandbox cannot be applied here
  | "CONFIG" // config.toml / -c override problem
  | "ESCALATION_UNAVAILABLE" // the escalation worker could not start or died
  | "UNANSWERED"; // a person was asked (e.g. through the local approver) and nobody answered in time; message: the Deny reason

/** Error with a stable `code` and optional structured `data`. */
export class ShellmcpError extends Error {
  readonly code: ErrorCode;
  readonly data: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, data: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ShellmcpError";
    this.code = code;
    this.data = data;
  }
}

/** True when `e` is a {@link ShellmcpError} with `code`. */
export function isErrorCode(e: unknown, code: ErrorCode): e is ShellmcpError {
  return e instanceof ShellmcpError && e.code === code;
}
