/**
 * POSIX shell word splitting and quoting, as Codex uses them (Rust `shlex` 1.3).
 *
 * - {@link shlexSplit}: how `match`/`not_match` example strings become argv (quotes, backslash escapes,
 *   `#` comments at the start of a word); `undefined` for invalid syntax (unbalanced quote, trailing `\`).
 * - {@link shlexQuote}/{@link shlexJoin}: how Codex renders argv in messages (docs/escalation.md, "Elicitation"):
 *   greedy chunks, each unquoted if possible, else single-quoted, else double-quoted.
 */

/** Split `s` into words like a POSIX shell would (no expansion). `undefined` on invalid syntax. */
export function shlexSplit(s: string): string[] | undefined {
  const words: string[] = [];
  let i = 0;
  const n = s.length;
  const isBlank = (c: string) => c === " " || c === "\t" || c === "\n";
  while (i < n) {
    while (i < n && isBlank(s[i]!)) i++;
    if (i >= n) break;
    if (s[i] === "#") {
      while (i < n && s[i] !== "\n") i++;
      continue;
    }
    let word = "";
    while (i < n && !isBlank(s[i]!)) {
      const c = s[i]!;
      if (c === "'") {
        const end = s.indexOf("'", i + 1);
        if (end < 0) return undefined;
        word += s.slice(i + 1, end);
        i = end + 1;
      } else if (c === '"') {
        i++;
        for (;;) {
          if (i >= n) return undefined;
          const d = s[i]!;
          if (d === '"') {
            i++;
            break;
          }
          if (d === "\\") {
            const e = s[i + 1];
            if (e === undefined) return undefined;
            if (e === "$" || e === "`" || e === '"' || e === "\\") word += e;
            else if (e !== "\n") word += "\\" + e;
            i += 2;
            continue;
          }
          word += d;
          i++;
        }
      } else if (c === "\\") {
        const e = s[i + 1];
        if (e === undefined) return undefined;
        if (e !== "\n") word += e;
        i += 2;
      } else {
        word += c;
        i++;
      }
    }
    words.push(word);
  }
  return words;
}

const UNQUOTED_OK = /^[A-Za-z0-9+\-./:@\]_]$/;

function fitsUnquoted(c: string): boolean {
  return UNQUOTED_OK.test(c);
}
function fitsSingle(c: string): boolean {
  return c !== "'" && c !== "\\" && c !== "^";
}
function fitsDouble(c: string): boolean {
  return c !== "`" && c !== "$" && c !== "!" && c !== "^";
}

/**
 * Quote one word as Rust `shlex::try_quote` does: `''` for empty; otherwise greedy chunks, extending while some
 * strategy still fits every character, preferring unquoted, then single, then double quotes. A chunk starting
 * with `^` may only be single-quoted. Characters no strategy can hold (only possible for a NUL) throw.
 */
export function shlexQuote(word: string): string {
  if (word === "") return "''";
  const chars = [...word];
  let out = "";
  let i = 0;
  while (i < chars.length) {
    let unq = true;
    let sgl = true;
    let dbl = chars[i] !== "^";
    let j = i;
    while (j < chars.length) {
      const c = chars[j]!;
      const u: boolean = unq && fitsUnquoted(c);
      // `^` may start a single-quoted chunk, never appear later in one (observed: a^b → a'^b').
      const s: boolean = sgl && (fitsSingle(c) || (c === "^" && j === i));
      const d: boolean = dbl && fitsDouble(c);
      if (!u && !s && !d) break;
      unq = u;
      sgl = s;
      dbl = d;
      j++;
    }
    if (j === i) throw new Error(`cannot quote character ${JSON.stringify(chars[i])}`);
    const chunk = chars.slice(i, j).join("");
    if (unq) out += chunk;
    else if (sgl) out += `'${chunk}'`;
    else out += `"${chunk.replace(/["\\]/g, (m) => "\\" + m)}"`;
    i = j;
  }
  return out;
}

/** `shlex::try_join`: each word quoted, joined with single spaces. */
export function shlexJoin(words: readonly string[]): string {
  return words.map(shlexQuote).join(" ");
}
