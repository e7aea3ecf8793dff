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

  it('waits as long as Retry-After asks when that is longer than the backoff', () => {
    expect(nextDelay(1, 5000, () => 0)).toBe(5000);
    expect(nextDelay(1, 5000, () => 0.9)).toBe(5000);
    expect(nextDelay(3, 1500, () => 0.5)).toBe(1500);
    expect(nextDelay(1, 1000.2, () => 0.5)).toBe(1001);
  });

  it('never waits less than the backoff: Retry-After 0 or a date in the past (0 or less) makes no tight loop', () => {
    expect(nextDelay(1, 0, () => 0.9)).toBe(450);
    expect(nextDelay(3, 0, () => 0.5)).toBe(1000);
    expect(nextDelay(1, -20, () => 0.9)).toBe(450);
    expect(nextDelay(12, 1500, () => 0.9)).toBe(27_000);
  });

  it('is the larger of Retry-After and the backoff, for any attempt, Retry-After and draw', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.integer({ min: -1000, max: 400_000 }), fc.double({ min: 0, max: 1, maxExcluded: true }), (attempt, retryAfter, draw) => {
        const backoff = nextDelay(attempt, undefined, () => draw);
        return nextDelay(attempt, retryAfter, () => draw) === Math.max(retryAfter, backoff);
      }),
    );
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
