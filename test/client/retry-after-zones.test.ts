/**
 * Retry-After parsing on a machine outside UTC. RFC 9110 §5.6.7: every HTTP-date form is UTC, the asctime form
 * included (it carries no zone, but HTTP dates are always GMT). Date.parse reads a date without a
 * zone as local time, so on a machine that is not on UTC the asctime form is off by the offset.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classify, MAX_RETRY_AFTER_MS, parseRetryAfter } from '../../src/client/classify.js';

const originalTz = process.env.TZ;
beforeAll(() => {
  // A zone behind UTC (New York, -5 h in January): any machine outside UTC shows the same defect.
  process.env.TZ = 'America/New_York';
});
afterAll(() => {
  if (originalTz === undefined) delete process.env.TZ;
  else process.env.TZ = originalTz;
});

const now = Date.UTC(2026, 0, 2, 3, 4, 5); // Fri, 02 Jan 2026 03:04:05 GMT

describe('Retry-After on a machine outside UTC', () => {
  it('the zone change took effect in this process (precondition)', () => {
    expect(new Date(now).getTimezoneOffset()).toBe(300);
  });

  it('reads the asctime form as GMT, like the other two forms', () => {
    // 20 s after `now`, in the three forms RFC 9110 lists.
    expect(parseRetryAfter('Fri, 02 Jan 2026 03:04:25 GMT', now)).toBe(20_000);
    expect(parseRetryAfter('Friday, 02-Jan-26 03:04:25 GMT', now)).toBe(20_000);
    expect(parseRetryAfter('Fri Jan  2 03:04:25 2026', now)).toBe(20_000);
  });

  it('a 503 answered with an asctime Retry-After asks for the right wait', () => {
    const outcome = classify(
      { status: 503, headers: { 'retry-after': 'Fri Jan  2 03:04:15 2026' }, body: '' },
      { url: 'http://127.0.0.1:1/call/upsert_batch', username: 'dev', now },
    );
    expect(outcome).toMatchObject({ kind: 'retry', afterMs: 10_000 });
    expect((outcome as { afterMs?: number }).afterMs).toBeLessThan(MAX_RETRY_AFTER_MS);
  });
});

describe('Retry-After: hostile values', () => {
  it('huge, negative, exponent, hex, empty, and list values', () => {
    expect(parseRetryAfter('9'.repeat(400), now)).toBe(MAX_RETRY_AFTER_MS);
    expect(parseRetryAfter('-5', now)).toBeUndefined();
    expect(parseRetryAfter('1e3', now)).toBeUndefined();
    expect(parseRetryAfter('0x10', now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter('5, 6', now)).toBeUndefined();
    expect(parseRetryAfter('Infinity', now)).toBeUndefined();
    expect(parseRetryAfter('Fri, 32 Jan 2026 03:04:25 GMT', now)).toBeUndefined();
  });
});
