/**
 * The one rendering of untrusted text for people (issue 30): every question shellmcp asks (the exec and network
 * elicitations), every log line, and the decision text a tool result carries goes through here. Text the model
 * chose — a folder name, an argument, a host name — must not be able to move the cursor, erase a line, reorder
 * what a person reads, or hide a part of itself, so that what a person approves is what runs.
 *
 * {@link visible} renders each character that is not plainly printable as an escape a person can read:
 * - C0 controls, DEL and C1 controls (Unicode `Cc`): `\t`, `\n`, `\r` by name, others `\xNN` (ESC is `\x1b`);
 * - format characters (`Cf`: bidi embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069, the marks
 *   U+200E/U+200F/U+061C, zero-width characters U+200B–U+200D, U+2060–U+2064, the BOM U+FEFF, soft hyphen,
 *   tag characters …), line and paragraph separators (U+2028, U+2029) and lone surrogates: `\uXXXX` (or
 *   `\u{XXXXX}` above U+FFFF).
 * Everything else (letters of any script, spaces, symbols, emoji) is kept as is. A backslash is kept as is too:
 * `\r` in the output may then be a CR or the two characters `\` `r` — both are visible, neither hides anything.
 *
 * {@link bounded} cuts a rendered text at a byte budget (UTF-8, at a character boundary) and says how much was
 * left out: `… 412 more bytes`.
 */

/** Characters rendered as escapes (see the module comment). `u` flag: by code point; `v`-free for older engines. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/gu;

const NAMED: Record<string, string> = { "\t": "\\t", "\n": "\\n", "\r": "\\r" };

function escapeOne(ch: string): string {
  const named = NAMED[ch];
  if (named !== undefined) return named;
  const cp = ch.codePointAt(0)!;
  if (cp <= 0xff) return `\\x${cp.toString(16).padStart(2, "0")}`;
  if (cp <= 0xffff) return `\\u${cp.toString(16).padStart(4, "0")}`;
  return `\\u{${cp.toString(16)}}`;
}

/**
 * `s` with every control, format, separator character and lone surrogate replaced by a visible escape (`\r`,
 * `\x1b`, `\u202e`). Total: never throws; the result holds only printable characters and spaces.
 */
export function visible(s: string): string {
  return s.replace(UNSAFE, escapeOne);
}

/**
 * {@link visible}, but line feeds are kept as line breaks: for multi-line texts of our own (a tool result's refusal
 * message) that embed untrusted parts. Everything else that {@link visible} escapes is escaped, CR included.
 */
export function visibleLines(s: string): string {
  return s.split("\n").map(visible).join("\n");
}

/** Default byte budget of one untrusted part of a question (a command line, a folder), UTF-8 bytes. */
export const MAX_PART_BYTES = 1024;

/**
 * {@link visible}`(s)`, cut to at most `maxBytes` UTF-8 bytes at a character boundary; when cut, followed by
 * `… N more bytes`, N the rendered bytes left out. `maxBytes` ≥ 0 (bytes, default {@link MAX_PART_BYTES}).
 */
export function bounded(s: string, maxBytes: number = MAX_PART_BYTES): string {
  const r = visible(s);
  const total = Buffer.byteLength(r, "utf8");
  if (total <= maxBytes) return r;
  let bytes = 0;
  let end = 0;
  for (const ch of r) {
    const n = Buffer.byteLength(ch, "utf8");
    if (bytes + n > maxBytes) break;
    bytes += n;
    end += ch.length;
  }
  return `${r.slice(0, end)}… ${total - bytes} more bytes`;
}
