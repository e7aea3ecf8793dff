import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BACKOFF_FACTOR, INITIAL_BACKOFF_MS, MAX_BACKOFF_MS, nextDelay } from '../../src/batcher/index.js';

describe('nextDelay', () => {
  it('uses the named policy: 500 ms initial, factor 2, cap 30 s', () => {
    expect([INITIAL_BACKOFF_MS, BACKOFF_FACTOR, MAX_BACKOFF_MS]).toEqual([500, 2, 30_000]);
  });

  it('draws up to the exponential ceiling of each attempt (full jitter)', () => {
    const justUnderOne = () => 0.999_999_9;
    expect(nextDelay(1, undefined, justUnderOne)).toBe(499);
    expect(nextDelay(2, undefined, justUnderOne)).toBe(999);
    expect(nextDelay(3, undefined, justUnderOne)).toBe(1999);
    expect(nextDelay(7, undefined, justUnderOne)).toBe(29_999);
    expect(nextDelay(8, undefined, justUnderOne)).toBe(29_999);
    expect(nextDelay(1_000_000, undefined, justUnderOne)).toBe(29_999);
    expect(nextDelay(3, undefined, () => 0)).toBe(0);
    expect(nextDelay(3, undefined, () => 0.5)).toBe(1000);
  });

  it('obeys Retry-After exactly, whatever the attempt and the jitter', () => {
    expect(nextDelay(1, 5000, () => 0)).toBe(5000);
    expect(nextDelay(12, 1500, () => 0.9)).toBe(1500);
    expect(nextDelay(1, 0, () => 0.9)).toBe(0);
    expect(nextDelay(1, -20, () => 0.9)).toBe(0);
  });

  it('stays within [0, cap] for any attempt and any random source, even a broken one', () => {
    fc.assert(
      fc.property(fc.integer({ min: -5, max: 10_000 }), fc.double(), (attempt, draw) => {
        const delay = nextDelay(attempt, undefined, () => draw);
        return Number.isInteger(delay) && delay >= 0 && delay < MAX_BACKOFF_MS;
      }),
    );
  });

  it('ignores a non-finite Retry-After and falls back to backoff', () => {
    expect(nextDelay(2, Number.NaN, () => 0.5)).toBe(500);
    expect(nextDelay(2, Number.POSITIVE_INFINITY, () => 0.5)).toBe(500);
  });
});
