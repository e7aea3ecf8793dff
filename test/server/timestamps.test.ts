/** Timestamp parsing and formatting (SPEC §2: accept Z, offsets, naive; give UTC microseconds). */
import { describe, expect, it } from 'vitest';
import { formatMicros, instantFromSeconds, parseTimestamp } from '../../src/server/timestamps.js';

describe('parseTimestamp', () => {
  it.each([
    ['2026-01-02T03:04:05.123456Z', '2026-01-02T03:04:05.123456Z'],
    ['2026-01-02T03:04:05Z', '2026-01-02T03:04:05.000000Z'],
    ['2026-01-02T03:04:05.1Z', '2026-01-02T03:04:05.100000Z'],
    ['2026-01-02T03:04:05.123456789Z', '2026-01-02T03:04:05.123456Z'],
    ['2026-01-02T03:04:05.123456', '2026-01-02T03:04:05.123456Z'],
    ['2026-01-02 03:04:05', '2026-01-02T03:04:05.000000Z'],
    ['2026-01-02T03:04', '2026-01-02T03:04:00.000000Z'],
    ['2026-01-02', '2026-01-02T00:00:00.000000Z'],
    ['2026-01-02T05:04:05.5+02:00', '2026-01-02T03:04:05.500000Z'],
    ['2026-01-02T00:30:00-0130', '2026-01-02T02:00:00.000000Z'],
    ['2026-01-01T00:00:00+01:00', '2025-12-31T23:00:00.000000Z'],
    ['2024-02-29T12:00:00z', '2024-02-29T12:00:00.000000Z'],
    ['1969-12-31T23:59:59.999999Z', '1969-12-31T23:59:59.999999Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000000Z'],
    ['0050-06-01T00:00:00Z', '0050-06-01T00:00:00.000000Z'],
    ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999000Z'],
  ])('reads %s as %s', (input, expected) => {
    expect(parseTimestamp(input)?.text).toBe(expected);
  });

  it.each([
    '',
    'yesterday',
    '2026-13-01T00:00:00Z',
    '2026-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T00:60:00Z',
    '2026-01-01T00:00:60Z',
    '2026-01-01T00:00:00+24:00',
    '2026-1-01T00:00:00Z',
    '2026-01-01T00:00:00ZZ',
    '2026-01-01T00:00:00Z; DROP TABLE calls',
    '0001-01-01T00:00:00+01:00',
    '9999-12-31T23:00:00-01:00',
    '+12026-01-01T00:00:00Z',
  ])('rejects %j', (input) => {
    expect(parseTimestamp(input)).toBeNull();
  });

  it('keeps microseconds exactly, so times sort and subtract correctly', () => {
    const a = parseTimestamp('2026-01-02T03:04:05.000001Z');
    const b = parseTimestamp('2026-01-02T03:04:05.000002Z');
    expect(b!.micros - a!.micros).toBe(1);
    expect(a!.text < b!.text).toBe(true);
    expect(parseTimestamp('2026-01-02T03:04:05Z')!.micros).toBe(Date.UTC(2026, 0, 2, 3, 4, 5) * 1000);
  });
});

describe('parseTimestamp on canonical text (kept as sent)', () => {
  it('gives an instant the same text however it is written, in every year', () => {
    for (const [canonical, other] of [
      ['2026-11-21T12:10:09.539000Z', '2026-11-21T13:10:09.539+01:00'],
      ['2024-02-29T23:59:59.999999Z', '2024-02-29 23:59:59.9999991'],
      ['0050-06-22T12:26:51.281838Z', '0050-06-22T12:26:51.281838+00:00'],
      ['2300-01-01T00:00:00.000007Z', '2300-01-01T00:00:00.000007'],
      ['9000-06-30T23:59:59.999999Z', '9000-06-30t23:59:59.999999z'],
    ] as const) {
      expect(parseTimestamp(canonical), canonical).toEqual(parseTimestamp(other));
      expect(parseTimestamp(canonical)!.text).toBe(canonical);
    }
  });

  it('writes the exact microseconds of any year, though µs since the epoch are rounded past 2^53', () => {
    // Doubles step by 32 µs near year 9999: the text comes from whole seconds and the fraction.
    expect(parseTimestamp('2300-01-01T01:00:00.000007+01:00')?.text).toBe('2300-01-01T00:00:00.000007Z');
    expect(parseTimestamp('9999-12-31T22:59:59.999999-01:00')?.text).toBe('9999-12-31T23:59:59.999999Z');
    expect(parseTimestamp('0001-01-01 00:00:00.000001')?.text).toBe('0001-01-01T00:00:00.000001Z');
  });

  it('takes the last microsecond of year 9999 and nothing after it', () => {
    expect(parseTimestamp('9999-12-31T23:59:59.999999Z')?.text).toBe('9999-12-31T23:59:59.999999Z');
    expect(parseTimestamp('9999-12-31T23:59:59.9999999')?.text).toBe('9999-12-31T23:59:59.999999Z');
    expect(parseTimestamp('9999-12-31T23:59:59.999999-00:01')).toBeNull();
    expect(parseTimestamp('0001-01-01T00:00:00.999999+00:01')).toBeNull();
  });

  it('still refuses days that do not exist', () => {
    expect(parseTimestamp('2023-02-29T00:00:00.000000Z')).toBeNull();
    expect(parseTimestamp('2100-02-29T00:00:00.000000Z')).toBeNull();
    expect(parseTimestamp('2026-04-31T00:00:00.000000Z')).toBeNull();
    expect(parseTimestamp('2000-02-29T00:00:00.000000Z')!.text).toBe('2000-02-29T00:00:00.000000Z');
    expect(parseTimestamp('0004-02-29T00:00:00.000000Z')).not.toBeNull();
  });
});

describe('formatMicros', () => {
  it('writes fixed-width UTC text with microseconds, also before 1970', () => {
    expect(formatMicros(0)).toBe('1970-01-01T00:00:00.000000Z');
    expect(formatMicros(1)).toBe('1970-01-01T00:00:00.000001Z');
    expect(formatMicros(-1)).toBe('1969-12-31T23:59:59.999999Z');
    expect(formatMicros(Date.UTC(2026, 0, 2, 3, 4, 5, 123) * 1000 + 456)).toBe('2026-01-02T03:04:05.123456Z');
  });

  it('keeps the fixed form past 2^53 µs (about year 2255), where doubles lose microseconds', () => {
    const canonical = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
    for (const text of ['6533-09-17T07:10:28.690996Z', '9000-06-30T23:59:59.999999Z', '2300-01-01T00:00:00.000001Z', '4000-01-01T00:00:00.999990Z']) {
      const instant = parseTimestamp(text)!;
      expect(instant.text, text).toMatch(canonical);
      // Within the double's step there (32 µs near year 9999) of the instant written.
      expect(Math.abs(parseTimestamp(instant.text)!.micros - instant.micros), text).toBeLessThanOrEqual(32);
    }
    for (let seconds = 142001741566.001; seconds < 142001741567; seconds += 0.0137) {
      expect(instantFromSeconds(seconds)?.text).toMatch(canonical);
    }
  });
});

describe('instantFromSeconds', () => {
  it('reads Unix seconds to the microsecond, as the text parseTimestamp gives', () => {
    expect(instantFromSeconds(1767225600.25)).toEqual(parseTimestamp('2026-01-01T00:00:00.25Z'));
    expect(instantFromSeconds(1767225600.123456)?.text).toBe('2026-01-01T00:00:00.123456Z');
    expect(instantFromSeconds(-0.000001)?.text).toBe('1969-12-31T23:59:59.999999Z');
  });

  it('has no instant for values that are not finite or fall outside years 0001-9999', () => {
    for (const seconds of [Number.NaN, Number.POSITIVE_INFINITY, -Number.MAX_VALUE, 1e12, -7e10]) {
      expect(instantFromSeconds(seconds), String(seconds)).toBeNull();
    }
    expect(instantFromSeconds(253402300799)?.text).toBe('9999-12-31T23:59:59.000000Z');
  });
});
