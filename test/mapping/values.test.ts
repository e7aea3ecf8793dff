import { describe, expect, it } from 'vitest';
import { hrTimeFromUnixNanos, hrTimeToIso, toJsonValue, unflattenAttributes } from '../../src/mapping/index.js';

describe('hrTimeToIso', () => {
  it('writes UTC with six fraction digits, cutting (not rounding) below a microsecond', () => {
    expect(hrTimeToIso([1_767_323_045, 123_456_789])).toBe('2026-01-02T03:04:05.123456Z');
    expect(hrTimeToIso([0, 0])).toBe('1970-01-01T00:00:00.000000Z');
    expect(hrTimeToIso([951_782_400, 999])).toBe('2000-02-29T00:00:00.000000Z');
    expect(hrTimeToIso([4_102_444_799, 999_999_999])).toBe('2099-12-31T23:59:59.999999Z');
  });

  it('carries nanoseconds of a second or more, and fractional seconds', () => {
    expect(hrTimeToIso([10, 2_000_000_500])).toBe('1970-01-01T00:00:12.000000Z');
    expect(hrTimeToIso([10.5, 0])).toBe('1970-01-01T00:00:10.500000Z');
  });

  it('agrees with Date on the date and time for times across four centuries', () => {
    let seconds = -2_208_988_800; // 1900-01-01
    for (let i = 0; i < 2000; i++) {
      seconds += 6_311_123 + (i % 7) * 86_399; // ~73 days apart, varying time of day
      const micros = (i * 7919) % 1_000_000;
      const expected = `${new Date(seconds * 1000).toISOString().slice(0, 19)}.${String(micros).padStart(6, '0')}Z`;
      expect(hrTimeToIso([seconds, micros * 1000 + 999])).toBe(expected);
    }
  });

  it('throws a RangeError for times that are not numbers', () => {
    expect(() => hrTimeToIso([Number.NaN, 0])).toThrow(RangeError);
    expect(() => hrTimeToIso([0, Number.POSITIVE_INFINITY])).toThrow(RangeError);
  });
});

describe('hrTimeFromUnixNanos', () => {
  it('reads OTLP nanosecond times given as bigint, text or number', () => {
    expect(hrTimeFromUnixNanos(1_767_323_045_123_456_789n)).toEqual([1_767_323_045, 123_456_789]);
    expect(hrTimeFromUnixNanos('1767323045123456789')).toEqual([1_767_323_045, 123_456_789]);
    expect(hrTimeToIso(hrTimeFromUnixNanos(1_767_323_045_123_456_000))).toBe('2026-01-02T03:04:05.123456Z');
    expect(hrTimeFromUnixNanos(0)).toEqual([0, 0]);
  });

  it('gives NaN times for unreadable input instead of throwing', () => {
    expect(hrTimeFromUnixNanos('soon')).toEqual([Number.NaN, Number.NaN]);
    expect(hrTimeFromUnixNanos(Number.POSITIVE_INFINITY)).toEqual([Number.NaN, Number.NaN]);
    expect(() => hrTimeToIso(hrTimeFromUnixNanos('1.5'))).toThrow(RangeError);
  });
});

describe('toJsonValue', () => {
  it('keeps JSON values and the very same arrays when nothing needs converting', () => {
    const list = ['a', 1, true, null];
    expect(toJsonValue(list)).toBe(list);
    expect(toJsonValue('text')).toBe('text');
    expect(toJsonValue(-0.5)).toBe(-0.5);
  });

  it('converts bytes, non-finite numbers, bigint, undefined and other objects', () => {
    expect(toJsonValue(new Uint8Array([0xde, 0xad, 0xbe, 0xef]))).toBe('3q2+7w==');
    expect(toJsonValue(Buffer.from('hi'))).toBe('aGk=');
    expect(toJsonValue(new Uint8Array(new ArrayBuffer(8), 2, 3).fill(255))).toBe('////');
    expect(toJsonValue(Number.NaN)).toBe('nan');
    expect(toJsonValue(Number.POSITIVE_INFINITY)).toBe('inf');
    expect(toJsonValue(Number.NEGATIVE_INFINITY)).toBe('-inf');
    expect(toJsonValue(2n ** 70n)).toBe('1180591620717411303424');
    expect(toJsonValue(undefined)).toBeNull();
    expect(toJsonValue(new Date(0))).toBe(String(new Date(0)));
    expect(toJsonValue(Symbol('s'))).toBe('Symbol(s)');
    expect(toJsonValue(new Map([[1, 2]]))).toBe('[object Map]');
  });

  it('converts inside arrays and plain objects (OTLP arrays and key-value lists), copying only then', () => {
    expect(toJsonValue([1, Number.NaN, undefined, 3n])).toEqual([1, 'nan', null, '3']);
    const nested = { a: [new Uint8Array([1])], b: { c: Number.NEGATIVE_INFINITY }, d: 'ok' };
    expect(toJsonValue(nested)).toEqual({ a: ['AQ=='], b: { c: '-inf' }, d: 'ok' });
    expect(nested.b.c).toBe(Number.NEGATIVE_INFINITY);
  });

  it('does not throw on hostile values', () => {
    const throwing = {
      toString() {
        throw new Error('no');
      },
    };
    Object.setPrototypeOf(throwing, Object.create(Object.prototype));
    expect(toJsonValue(throwing)).toBe('[object Object]');
    const bare = Object.create(null) as Record<string, unknown>;
    bare.x = 1;
    expect(toJsonValue(bare)).toEqual({ x: 1 });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => JSON.stringify(toJsonValue(cyclic))).not.toThrow();
  });
});

describe('unflattenAttributes', () => {
  it('nests dotted keys and parses JSON text that starts with { or [', () => {
    expect(
      unflattenAttributes({
        'llm.token_count.prompt': 3,
        'llm.token_count.completion': 4,
        'input.value': '{"q":1}',
        list: '[1, 2]',
        notJson: '{broken',
        quoted: '"x"',
        spaced: ' {"a":1}',
        plain: 'x',
      }).root,
    ).toEqual({
      llm: { token_count: { prompt: 3, completion: 4 } },
      input: { value: { q: 1 } },
      list: [1, 2],
      notJson: '{broken',
      quoted: '"x"',
      spaced: ' {"a":1}',
      plain: 'x',
    });
  });

  it('keeps a key that collides with a deeper key flat, in either order', () => {
    const expected = { a: { b: 1 }, 'a.b.c': 2 };
    expect(unflattenAttributes({ 'a.b': 1, 'a.b.c': 2 }).root).toEqual(expected);
    expect(unflattenAttributes({ 'a.b.c': 2, 'a.b': 1 }).root).toEqual(expected);
    const three = { x: 1, 'x.y': 2, 'x.y.z': 3 };
    expect(unflattenAttributes({ 'x.y.z': 3, 'x.y': 2, x: 1 }).root).toEqual(three);
    expect(unflattenAttributes({ x: 1, 'x.y.z': 3, 'x.y': 2 }).root).toEqual(three);
    expect(unflattenAttributes({ 'x.y': 2, x: 1, 'x.y.z': 3 }).root).toEqual(three);
  });

  it('unflattens tens of thousands of attributes, collisions included (OTLP ingest sets no limit)', () => {
    // Built so every key path walks through branches made by earlier keys, and every tenth group
    // collides with a shorter key that comes after its deeper keys (so the deeper keys spill flat).
    const attributes: Record<string, number> = {};
    const GROUPS = 20_000;
    for (let group = 0; group < GROUPS; group += 1) {
      attributes[`g${group}.a.x`] = group;
      attributes[`g${group}.a.y`] = group;
      if (group % 10 === 0) attributes[`g${group}.a`] = -group;
    }
    const { root, hasFlatKeys } = unflattenAttributes(attributes);
    expect(hasFlatKeys).toBe(true);
    expect(Object.keys(root)).toHaveLength(GROUPS + (GROUPS / 10) * 2);
    expect(root.g1).toEqual({ a: { x: 1, y: 1 } });
    expect(root.g19999).toEqual({ a: { x: 19999, y: 19999 } });
    expect(root.g10).toEqual({ a: -10 });
    expect(root['g10.a.x']).toBe(10);
    expect(root['g10.a.y']).toBe(10);
  });

  it('treats objects parsed from JSON text as values, not as places for deeper keys', () => {
    const expected = { cfg: { a: 1 }, 'cfg.b': 2 };
    expect(unflattenAttributes({ cfg: '{"a":1}', 'cfg.b': 2 }).root).toEqual(expected);
    expect(unflattenAttributes({ 'cfg.b': 2, cfg: '{"a":1}' }).root).toEqual(expected);
  });

  it('keeps hostile and prototype-named keys as plain data', () => {
    const tree = unflattenAttributes({
      '__proto__.polluted': 'yes',
      'constructor.name': 'c',
      toString: 't',
      '': 'empty',
      'a..b': 'double-dot',
    }).root;
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(tree)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(tree))).toEqual(
      JSON.parse('{"__proto__":{"polluted":"yes"},"constructor":{"name":"c"},"toString":"t","":"empty","a":{"":{"b":"double-dot"}}}'),
    );
  });

  it('drops undefined values and handles a missing attribute set', () => {
    expect(unflattenAttributes({ a: undefined, b: 1 }).root).toEqual({ b: 1 });
    expect(unflattenAttributes(undefined).root).toEqual({});
  });
});
