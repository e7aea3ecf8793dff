import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  CanonicalJsonError,
  MAX_JSON_DEPTH,
  canonicalJson,
  compareCodePoints,
  digestOf,
  digestOfBytes,
  isDigest,
  pythonFloatRepr,
} from '../../src/wire/digest.js';

/**
 * The expected digest of a canonical text, computed here from the rule of SPEC §2.2 with
 * node:crypto directly (never with the code under test).
 */
function expectedDigest(canonicalText: string | Buffer): string {
  const base64 = createHash('sha256').update(canonicalText).digest('base64');
  return base64.replace(/=+$/, '').replace(/\+/g, 'X').replace(/\//g, 'Y');
}

// Each vector: a value and the text Python's json.dumps(value, sort_keys=True) prints, written
// out by hand from the rules (separators, escapes, key order, number forms).
const VECTORS: ReadonlyArray<{ name: string; value: unknown; text: string }> = [
  { name: 'empty object', value: {}, text: '{}' },
  { name: 'empty list', value: [], text: '[]' },
  { name: 'scalars', value: [null, true, false, 0, -7, 'x'], text: '[null, true, false, 0, -7, "x"]' },
  {
    name: 'key order and separators',
    value: { b: 1, a: 2, B: 3, aa: 4, '': 5 },
    text: '{"": 5, "B": 3, "a": 2, "aa": 4, "b": 1}',
  },
  {
    name: 'nested objects sort at every level',
    value: { z: { y: [{ d: 1, c: { f: null, e: [] } }], x: {} }, a: [3, 2, 1] },
    text: '{"a": [3, 2, 1], "z": {"x": {}, "y": [{"c": {"e": [], "f": null}, "d": 1}]}}',
  },
  {
    name: 'quotes, backslash and control characters',
    value: { s: 'q"b\\n\nr\rt\tb\bf\f\u0000\u0001\u001f\u007f~ ' },
    text: '{"s": "q\\"b\\\\n\\nr\\rt\\tb\\bf\\f\\u0000\\u0001\\u001f\\u007f~ "}',
  },
  {
    name: 'non-ASCII escaped with lowercase hex',
    value: { 'é': 'ü€\u2028\u00ff\uffff' },
    text: '{"\\u00e9": "\\u00fc\\u20ac\\u2028\\u00ff\\uffff"}',
  },
  {
    name: 'astral characters as surrogate pairs',
    value: ['😀', '𝄞x'],
    text: '["\\ud83d\\ude00", "\\ud834\\udd1ex"]',
  },
  {
    name: 'astral keys sort after U+E000..U+FFFF (code point order, not UTF-16 order)',
    value: { '😀': 1, '\ue000': 2, '\uffff': 3, a: 4 },
    text: '{"a": 4, "\\ue000": 2, "\\uffff": 3, "\\ud83d\\ude00": 1}',
  },
  {
    name: 'lone surrogate',
    value: ['\ud800', '\udc00a'],
    text: '["\\ud800", "\\udc00a"]',
  },
  {
    name: 'floats in shortest round-trip form',
    value: [2.5, 0.1, -1.25, 0.30000000000000004, 123456789.123, 1000000000000000.5, 0.0001, 0.00025],
    text: '[2.5, 0.1, -1.25, 0.30000000000000004, 123456789.123, 1000000000000000.5, 0.0001, 0.00025]',
  },
  {
    name: 'exponent form from 1e16 up and below 1e-4',
    value: [1e16, 1.5e16, -2e17, 1e22, 1e-5, 1.5e-7, -3e-10, 5e-324, 1.7976931348623157e308],
    text: '[1e+16, 1.5e+16, -2e+17, 1e+22, 1e-05, 1.5e-07, -3e-10, 5e-324, 1.7976931348623157e+308]',
  },
  {
    name: 'integral values print as integers below 1e16, -0 as 0',
    value: [1.0, -0, 9007199254740991, 9999999999999998, 1e15],
    text: '[1, 0, 9007199254740991, 9999999999999998, 1000000000000000]',
  },
];

describe('canonicalJson', () => {
  for (const vector of VECTORS) {
    it(`prints ${vector.name} as Python does`, () => {
      expect(canonicalJson(vector.value)).toBe(vector.text);
    });
  }

  it('reads values parsed from JSON text (what the server hashes)', () => {
    const parsed: unknown = JSON.parse('{"b": 1.0, "a": "\\ud83d\\ude00", "c": [1e-5, -0.0]}');
    expect(canonicalJson(parsed)).toBe('{"a": "\\ud83d\\ude00", "b": 1, "c": [1e-05, 0]}');
  });

  it('rejects NaN, Infinity and values that are not JSON', () => {
    for (const bad of [NaN, Infinity, -Infinity, undefined, () => 1, 10n, Symbol('s'), new Date(0), new Map()]) {
      expect(() => canonicalJson([bad])).toThrow(CanonicalJsonError);
    }
  });

  it('accepts objects without a prototype', () => {
    const bare = Object.create(null) as Record<string, unknown>;
    bare['k'] = 1;
    expect(canonicalJson(bare)).toBe('{"k": 1}');
  });

  it('refuses nesting deeper than MAX_JSON_DEPTH without overflowing the stack', () => {
    const nest = (levels: number): unknown => {
      let value: unknown = 0;
      for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { k: value };
      return value;
    };
    expect(() => canonicalJson(nest(MAX_JSON_DEPTH))).not.toThrow();
    expect(() => canonicalJson(nest(MAX_JSON_DEPTH + 1))).toThrow(CanonicalJsonError);
    expect(() => canonicalJson(nest(200_000))).toThrow(CanonicalJsonError);
  });
});

describe('pythonFloatRepr', () => {
  it('writes integral floats with .0 and exponents with sign and two digits', () => {
    expect(pythonFloatRepr(1)).toBe('1.0');
    expect(pythonFloatRepr(9999999999999998)).toBe('9999999999999998.0');
    expect(pythonFloatRepr(-0)).toBe('-0.0');
    expect(pythonFloatRepr(1e16)).toBe('1e+16');
    expect(pythonFloatRepr(1.5e100)).toBe('1.5e+100');
    expect(pythonFloatRepr(1e-4)).toBe('0.0001');
    expect(pythonFloatRepr(9.99e-5)).toBe('9.99e-05');
  });
});

describe('compareCodePoints', () => {
  it('orders like Python str comparison', () => {
    const keys = ['😀', '\ue000', 'b', 'a', 'ab', '', '\ud800', '\ud800x', '\uffff', '𝄞'];
    const sorted = [...keys].sort(compareCodePoints);
    expect(sorted).toEqual(['', 'a', 'ab', 'b', '\ud800', '\ud800x', '\ue000', '\uffff', '𝄞', '😀']);
    expect(compareCodePoints('\ud83d\ude00', '\ud83d')).toBeGreaterThan(0);
    expect(compareCodePoints('\ud83dx', '\ud83d\ude00')).toBeLessThan(0);
    expect(compareCodePoints('same', 'same')).toBe(0);
  });
});

describe('digestOf / digestOfBytes', () => {
  for (const vector of VECTORS) {
    it(`hashes the canonical text of ${vector.name}`, () => {
      const digest = digestOf(vector.value);
      expect(digest).toBe(expectedDigest(vector.text));
      expect(isDigest(digest)).toBe(true);
    });
  }

  it('gives equal digests for equal values whatever the key order', () => {
    expect(digestOf({ a: 1, b: [{ c: 2, d: 3 }] })).toBe(digestOf({ b: [{ d: 3, c: 2 }], a: 1 }));
    expect(digestOf({ a: 1 })).not.toBe(digestOf({ a: 2 }));
  });

  it('hashes raw bytes without any canonical form', () => {
    const bytes = Buffer.from([0, 255, 1, 2, 0xfe, 0x2d, 0x5f]);
    expect(digestOfBytes(bytes)).toBe(expectedDigest(bytes));
    expect(digestOfBytes(new Uint8Array())).toBe(expectedDigest(Buffer.alloc(0)));
  });

  it('uses only [A-Za-z0-9]: - and _ of base64url become X and Y', () => {
    // Search a few values until both replaced characters have been exercised.
    let sawReplacement = false;
    for (let i = 0; i < 64 && !sawReplacement; i++) {
      const raw = createHash('sha256').update(canonicalJson({ i })).digest('base64url');
      sawReplacement = /[-_]/.test(raw);
      expect(digestOf({ i })).toBe(raw.replace(/-/g, 'X').replace(/_/g, 'Y'));
      expect(digestOf({ i })).toMatch(/^[A-Za-z0-9]{43}$/);
    }
    expect(sawReplacement).toBe(true);
  });
});
