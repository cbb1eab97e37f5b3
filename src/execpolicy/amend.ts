/**
 * "Always allow" amendments (docs/execpolicy.md, "Amendments"): append
 *   prefix_rule(pattern=["tok1", "tok2"], decision="allow")
 * (or, for a network host, Codex's `network_rule(host=…, protocol=…, decision="allow", justification=…)`)
 * to `$CODEX_HOME/rules/default.rules`, exactly as Codex writes it, so the files stay compatible with Codex's
 * loader and de-duplication. Tokens are JSON-escaped (serde_json rules). The append happens under an exclusive
 * `flock` on the file, skips a line that is already present, adds a missing final newline first, and writes
 * the new bytes with one `write(2)` on an `O_APPEND` fd (no torn line even against writers without the lock).
 */
import { closeSync, constants, fstatSync, fsyncSync, mkdirSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { flock, LOCK } from "../../ffi/libc.ts";
import { ShellmcpError } from "../errors.ts";
import { readUntrustedText } from "../untrusted-fs.ts";
import type { Policy } from "./policy.ts";

/** The amendment line for `tokens`. Throws `USAGE` for an empty prefix. */
export function amendmentLine(tokens: readonly string[]): string {
  if (tokens.length === 0) throw new ShellmcpError("USAGE", "prefix rule requires at least one token");
  return `prefix_rule(pattern=[${tokens.map((t) => JSON.stringify(t)).join(", ")}], decision="allow")`;
}

/** Append an allow rule for `tokens` to `<codexHome>/rules/default.rules`. `added` is false for a duplicate. */
export function appendAllowRule(codexHome: string, tokens: readonly string[]): { path: string; added: boolean } {
  const line = amendmentLine(tokens);
  const dir = join(codexHome, "rules");
  try {
    mkdirSync(dir, { mode: 0o755 }); // one level only, as Codex: a missing CODEX_HOME is an error
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  }
  return appendLine(join(dir, "default.rules"), line);
}

/** `network_rule` protocols (Codex's names; `https` is what a CONNECT is recorded as). */
export type NetworkRuleProtocol = "http" | "https" | "socks5_tcp" | "socks5_udp";

/**
 * The amendment Codex writes when a person allows a host for good (`execpolicy/src/amend.rs`):
 * `network_rule(host="api.github.com", protocol="https", decision="allow", justification="Allow https_connect access to api.github.com")`.
 * `wire` is the protocol the request came by (`http`, `https_connect`, `socks5_tcp`), named in the justification.
 */
export function networkAmendmentLine(host: string, protocol: NetworkRuleProtocol, wire: string): string {
  return `network_rule(host=${JSON.stringify(host)}, protocol=${JSON.stringify(protocol)}, decision="allow", justification=${JSON.stringify(`Allow ${wire} access to ${host}`)})`;
}

/** Append an allowing `network_rule` for `host` to `<codexHome>/rules/default.rules` (as {@link appendAllowRule}). */
export function appendNetworkAllowRule(
  codexHome: string,
  host: string,
  protocol: NetworkRuleProtocol,
  wire: string,
): { path: string; added: boolean } {
  const dir = join(codexHome, "rules");
  try {
    mkdirSync(dir, { mode: 0o755 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  }
  return appendLine(join(dir, "default.rules"), networkAmendmentLine(host, protocol, wire));
}

function appendLine(path: string, line: string): { path: string; added: boolean } {
  // O_NONBLOCK|O_NOFOLLOW and a regular file only: a FIFO or link planted at the rules file never blocks the server.
  const fd = openSync(path, constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK | constants.O_NOFOLLOW, 0o644);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`);
    flock(fd, LOCK.EX);
    const current = readUntrustedText(path, { maxBytes: 4 << 20 });
    if (!current.ok) throw new Error(current.reason);
    if (current.text.split("\n").includes(line)) return { path, added: false };
    const prefix = current.text.length > 0 && !current.text.endsWith("\n") ? "\n" : "";
    writeSync(fd, Buffer.from(`${prefix}${line}\n`));
    fsyncSync(fd);
    return { path, added: true };
  } finally {
    closeSync(fd); // releases the lock
  }
}

/**
 * Mirror an amendment in a loaded policy: unless `tokens` are already allowed by a real rule, add the literal
 * allow rule (appended, so it never outranks a stricter rule: the strictest decision still wins).
 */
export function amendPolicyInMemory(policy: Policy, tokens: readonly string[]): boolean {
  const e = policy.check(tokens, { resolveHostExecutables: true }, () => "forbidden");
  if (e.decision === "allow" && e.matchedRules.some((m) => "prefixRuleMatch" in m)) return false;
  policy.addRule({ first: tokens[0]!, rest: tokens.slice(1).map((t) => ({ single: t })), decision: "allow" });
  return true;
}
