import { checkLayout } from "./errors.js";

const TWO_POW_32 = 2 ** 32;

/**
 * Bits that hold every integer in `0..=span`: the bit length of `span`, 0 for 0.
 * `bitsForSpan(1000) === 10`, `bitsForSpan(2n ** 64n - 1n) === 64`.
 */
export function bitsForSpan(span: number | bigint): number {
  if (typeof span === "bigint") {
    checkLayout(span >= 0n && span < 1n << 64n, `span ${span} outside 0..=2^64-1`);
    return span === 0n ? 0 : span.toString(2).length;
  }
  checkLayout(Number.isSafeInteger(span) && span >= 0, `span ${span} is not a safe non-negative integer`);
  if (span >= TWO_POW_32) {
    // Division by a power of two is exact, so the high word's bit length is exact too.
    return 32 + bitsForSpan(Math.floor(span / TWO_POW_32));
  }
  return 32 - Math.clz32(span);
}
