/**
 * The intercept set (issue 13, "skip the wrapper when no decision is possible"): the program names a patched
 * shell must still send through the escalation protocol, given the loaded policy. Every other exec can only be
 * decided `Run` (no rule can match it and the danger heuristic cannot flag it), which is what the shell does
 * anyway, so our patched shells exec it directly.
 *
 * Wire form, in the shell's environment as {@link INTERCEPT_ENV_VAR}: entries separated by `/` (a character no
 * basename contains). `NAME` matches a program whose basename is NAME; `*SUFFIX` one whose basename ends with
 * SUFFIX (`*` alone: every program). The shells (patches/escalate-client.c) also intercept every path whose
 * basename is empty, `.`, `..` or not valid UTF-8, since the server's lossy decoding and lexical normalisation
 * could change the name it sees. When the variable is absent, the shells send every exec to the wrapper.
 *
 * Why this is conservative (see {@link decideExec}): an exec of `file` is matched as `[abs(file), argv…]`; a rule
 * can match only if its first token equals `abs(file)` (then the token's basename is the file's basename) or, with
 * host-executable resolution, equals the file's basename; the heuristic can flag only `*git`, `rm`, `sudo`, `bash`,
 * `zsh`, `sh`. The set holds the basename of every rule's first token and those heuristic names, so everything
 * outside it gets `Run`. Amendments ("always allow") add rules to the same policy; the set is computed per shell
 * run, so later runs see them.
 */
import type { Policy } from "../../execpolicy/policy.ts";
import { INTERCEPT_ENV_VAR } from "../protocol/wire.ts";

/** Program names the danger heuristic ({@link commandMightBeDangerous}) can flag; `*git` is a suffix. */
export const HEURISTIC_PROGRAMS = ["*git", "rm", "sudo", "bash", "zsh", "sh"] as const;

/** Longest encoded set we put in the environment (bytes); a larger one becomes `*` (intercept everything). */
export const MAX_INTERCEPT_BYTES = 64 * 1024;

/** Basename as the shell computes it: undefined for an empty name, `.`, `..` or a trailing slash. */
function shellBasename(p: string): string | undefined {
  if (p === "" || p.endsWith("/")) return undefined;
  const b = p.slice(p.lastIndexOf("/") + 1);
  return b === "." || b === ".." ? undefined : b;
}

/**
 * Entries of the intercept set for `policy`: the basename of every rule's first token (trailing slashes
 * stripped; tokens without one need none, since the shell intercepts such paths itself) and
 * {@link HEURISTIC_PROGRAMS}. A name starting with `*` becomes a suffix entry that also covers the literal name.
 */
export function interceptEntries(policy: Policy): string[] {
  const out = new Set<string>(HEURISTIC_PROGRAMS);
  const names = new Set<string>(policy.rulesByProgram.keys());
  for (const n of policy.hostExecutables.keys()) names.add(n);
  for (const first of names) {
    const b = shellBasename(first.replace(/\/+$/, ""));
    if (b !== undefined) out.add(b);
  }
  return [...out];
}

/** The value of {@link INTERCEPT_ENV_VAR} for `policy`: `/`-separated entries, or `*` when too long. */
export function interceptSetFor(policy: Policy): string {
  const v = interceptEntries(policy).join("/");
  return Buffer.byteLength(v) > MAX_INTERCEPT_BYTES ? "*" : v;
}

function validUtf8(b: Uint8Array): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(b);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether a patched shell with intercept set `set` (the variable's value) sends an exec of `file` (raw bytes,
 * as the shell passes it to execve) to the escalation protocol. Mirrors `smcp_mode` in patches/escalate-client.c;
 * test/shells/intercept-set.test.ts checks the two agree.
 */
export function shellIntercepts(set: string, file: Uint8Array | string): boolean {
  const raw = typeof file === "string" ? Buffer.from(file) : Buffer.from(file);
  if (raw.length === 0 || raw[raw.length - 1] === 0x2f) return true;
  const nameBytes = raw.subarray(raw.lastIndexOf(0x2f) + 1);
  if (!validUtf8(nameBytes)) return true;
  const name = nameBytes.toString("utf8");
  if (name === "." || name === "..") return true;
  for (const e of set.split("/")) {
    if (e === "") continue;
    if (e.startsWith("*") ? name.endsWith(e.slice(1)) : name === e) return true;
  }
  return false;
}
