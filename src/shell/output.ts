/**
 * Output of a command, capped: keeps the first half and the last half of `capBytes` and counts what was dropped
 * in between, so that both how a command started and how it ended reach the model. Decoding is lossy UTF-8
 * (invalid bytes → U+FFFD), as Codex.
 */

/** Default cap: 1 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

/** Collects bytes up to a cap, keeping head and tail. */
export class CappedOutput {
  private head: Uint8Array[] = [];
  private headBytes = 0;
  private tail: Uint8Array[] = [];
  private tailBytes = 0;
  /** Bytes seen in all. */
  total = 0;

  constructor(private readonly capBytes: number = DEFAULT_MAX_OUTPUT_BYTES) {}

  /** Bytes dropped from the middle. */
  get dropped(): number {
    return Math.max(0, this.total - this.headBytes - this.tailBytes);
  }

  /** Add a chunk. */
  push(chunk: Uint8Array): void {
    this.total += chunk.byteLength;
    const headCap = Math.ceil(this.capBytes / 2);
    let c = chunk;
    if (this.headBytes < headCap) {
      const take = Math.min(headCap - this.headBytes, c.byteLength);
      this.head.push(c.slice(0, take));
      this.headBytes += take;
      c = c.subarray(take);
    }
    if (c.byteLength === 0) return;
    const tailCap = this.capBytes - headCap;
    this.tail.push(c.slice());
    this.tailBytes += c.byteLength;
    while (this.tailBytes - this.tail[0]!.byteLength >= tailCap) this.tailBytes -= this.tail.shift()!.byteLength;
    if (this.tailBytes > tailCap) {
      const extra = this.tailBytes - tailCap;
      this.tail[0] = this.tail[0]!.subarray(extra);
      this.tailBytes -= extra;
    }
  }

  /**
   * What was kept, decoded: `whole` when nothing was dropped (head and tail decoded together, so a character split
   * between them stays whole), else `head` and `tail` apart. For callers with a marker of their own.
   */
  kept(): { whole: string } | { head: string; tail: string } {
    const dec = (parts: Uint8Array[]) => new TextDecoder("utf-8", { fatal: false }).decode(Buffer.concat(parts));
    return this.dropped === 0 ? { whole: dec([...this.head, ...this.tail]) } : { head: dec(this.head), tail: dec(this.tail) };
  }

  /**
   * The text: head, a notice of dropped bytes if any, tail. The notice says what was dropped exactly: bytes (not
   * lines: a line at either edge may be cut, and a character cut there reads U+FFFD), from the middle, and how
   * many of the first and of the last bytes are shown. The line breaks around it are the notice's own.
   */
  text(): string {
    const k = this.kept();
    if ("whole" in k) return k.whole;
    return `${k.head}\n[... shellmcp: ${this.dropped} bytes omitted from the middle of ${this.total} bytes of output; shown: the first ${this.headBytes} and the last ${this.tailBytes} bytes ...]\n${k.tail}`;
  }
}
