/**
 * A deterministic pseudo-random generator (mulberry32) from a 32-bit seed: numbers in [0, 1), the same sequence for
 * the same seed, so a generated case reproduces from the seed a failure prints. For tests and benches only.
 */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
