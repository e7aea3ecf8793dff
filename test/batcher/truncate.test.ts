import { describe, expect, it } from 'vitest';
import { truncateLargestStrings } from '../../src/batcher/index.js';

const size = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

describe('truncateLargestStrings', () => {
  it('returns an equal copy when the value already fits', () => {
    const value = { a: 'short', b: [1, 2, { c: 'x' }] };
    const result = truncateLargestStrings(value, 1000);
    expect(result).toEqual(value);
    expect(result).not.toBe(value);
  });

  it('cuts the largest string first, marks it, and leaves small ones alone', () => {
    const value = { big: 'a'.repeat(100_000), small: 'b'.repeat(200), n: 3 };
    const result = truncateLargestStrings(value, 5_000)!;
    expect(size(result)).toBeLessThanOrEqual(5_000);
    expect(result.small).toBe(value.small);
    expect(result.n).toBe(3);
    expect(result.big).toMatch(/^a+…\[truncated \d+ bytes\]$/);
    const removed = Number(/truncated (\d+) bytes/.exec(result.big)![1]);
    expect(removed + result.big.indexOf('…')).toBe(100_000);
    expect(value.big.length).toBe(100_000); // input untouched
  });

  it('cuts several strings inside nested arrays when one is not enough', () => {
    const value = [{ a: 'x'.repeat(3000) }, { b: ['y'.repeat(3000), 'z'.repeat(3000)] }];
    const result = truncateLargestStrings(value, 2000)!;
    expect(size(result)).toBeLessThanOrEqual(2000);
    expect(JSON.stringify(result).match(/…\[truncated/g)!.length).toBe(3);
  });

  it('counts UTF-8 bytes and never splits a surrogate pair', () => {
    const value = { text: '😀'.repeat(10_000) };
    const result = truncateLargestStrings(value, 1000)!;
    expect(size(result)).toBeLessThanOrEqual(1000);
    const kept = result.text.slice(0, result.text.indexOf('…'));
    expect(kept).toBe('😀'.repeat(kept.length / 2));
  });

  it('handles strings full of characters JSON escapes', () => {
    const value = { text: '"\\\n'.repeat(20_000) };
    const result = truncateLargestStrings(value, 3000)!;
    expect(size(result)).toBeLessThanOrEqual(3000);
  });

  it('gives up (undefined) when cutting every string is not enough', () => {
    const many = Array.from({ length: 2000 }, (_, index) => index);
    expect(truncateLargestStrings({ many, s: 'q'.repeat(10_000) }, 500)).toBeUndefined();
    expect(truncateLargestStrings({ s: 'q'.repeat(10_000) }, 10)).toBeUndefined();
  });

  it('with bestEffort, cuts as far as the strings allow when that is not enough, and gives up only when nothing can be cut', () => {
    const many = Array.from({ length: 2000 }, (_, index) => index);
    const result = truncateLargestStrings({ many, s: 'q'.repeat(10_000) }, 500, { bestEffort: true });
    expect(result?.many).toEqual(many);
    expect(result?.s).toMatch(/^q{64}…\[truncated \d+ bytes\]$/);
    expect(size(result)).toBeLessThan(size({ many, s: 'q'.repeat(10_000) }));
    expect(truncateLargestStrings({ many, s: 'short' }, 500, { bestEffort: true })).toBeUndefined();
  });
});
