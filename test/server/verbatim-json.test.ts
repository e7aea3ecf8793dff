/**
 * The canonical-JSON scanner: it may accept only bytes that `JSON.stringify(JSON.parse(bytes))`
 * writes back unchanged (and that the body parser would not refuse), because the server stores
 * what it accepts as is. Checked against V8's own JSON, on fixed cases and generated texts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { endOfCanonicalJson, MAX_VERBATIM_KEYS, MAX_VERBATIM_NESTING, NOT_CANONICAL } from '../../src/server/verbatim-json.js';

const scan = (text: string): number => endOfCanonicalJson(Buffer.from(text, 'utf8'), 0);
const accepts = (text: string): boolean => scan(text) === Buffer.byteLength(text);

/** Whether `value` holds an own key the body parser refuses or a parse would reorder. */
function hasUnkeepableKey(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value)) return value.some(hasUnkeepableKey);
  return Object.keys(value).some((key) => key === '__proto__' || key === 'constructor' || /^[0-9]/.test(key)) ||
    Object.values(value).some(hasUnkeepableKey);
}

/** Whether a string of `value` (a key or a value) holds a lone surrogate, which JSON.stringify escapes. */
function hasLoneSurrogate(value: unknown): boolean {
  // With the `u` flag a well-formed pair is one code point: only a lone half matches.
  if (typeof value === 'string') return /[\ud800-\udfff]/u.test(value);
  if (typeof value !== 'object' || value === null) return false;
  return Object.entries(value).some(([key, inner]) => hasLoneSurrogate(key) || hasLoneSurrogate(inner));
}

/** What accepting `bytes` promises: the parsed path would store exactly these bytes. */
function expectKeepable(bytes: Buffer): void {
  const text = bytes.toString('utf8');
  const parsed: unknown = JSON.parse(text);
  expect(JSON.stringify(parsed)).toBe(text);
  expect(hasUnkeepableKey(parsed)).toBe(false);
}

describe('endOfCanonicalJson', () => {
  it.each([
    '{}', '[]', '""', '0', '-1', '-1.5', '0.1', '123456789012345', '1e+21', '1.5e-7', '9007199254740993'.slice(0, 15),
    'true', 'false', 'null', '{"a":[1,"x",{"b":null}],"c":true}', '"tab\\tnl\\nquote\\"bs\\\\"', '"\\u001f\\u0000\\u007f"'.replace('\\u007f', '\u007f'),
    '"\\b\\f\\r"', '"é 漢 😀"', `{${['01', '02', '03'].map((n) => `"${'k'.repeat(40)}${n}":1`).join(',')}}`, '{"":1}', '{"-1":2}', '{"a":{"a":{"a":1}}}', '"\u2028"',
  ])('accepts %s, which JSON.stringify writes just so', (text) => {
    expect(accepts(text)).toBe(true);
    expectKeepable(Buffer.from(text));
  });

  it.each([
    ['whitespace', '{"a": 1}'],
    ['whitespace in a list', '[1, 2]'],
    ['a number with a fraction of zero', '1.0'],
    ['an exponent JavaScript does not print', '1e2'],
    ['an uppercase exponent', '1E+21'],
    ['negative zero', '-0'],
    ['a leading zero', '01'],
    ['a long integer that does not print as written', '12345678901234567890'],
    ['a number out of range', '1e400'],
    ['a bare minus', '-'],
    ['an escaped slash', '"\\/"'],
    ['an escape of a plain character', '"\\u0041"'],
    ['an uppercase control escape', '"\\u001F"'],
    ['a control escape that has a short form', '"\\u000a"'],
    ['an escaped surrogate pair', '"\\ud83d\\ude00"'],
    ['a lone escaped surrogate', '"\\ud800"'],
    ['an unknown escape', '"\\x"'],
    ['a raw control character', '"a\u0001b"'],
    ['an unterminated string', '"abc'],
    ['a duplicate key', '{"a":1,"a":2}'],
    ['a duplicate key after others', '{"a":1,"b":2,"c":3,"b":4}'],
    ['a duplicate among keys of one length and prefix', `{${['01', '02', '03', '02'].map((n) => `"${'k'.repeat(40)}${n}":1`).join(',')}}`],
    ['an array-index key (V8 lists those first)', '{"b":1,"1":2}'],
    ['a __proto__ key', '{"__proto__":{"x":1}}'],
    ['a constructor key', '{"a":{"constructor":{"prototype":{}}}}'],
    ['a trailing comma', '[1,]'],
    ['a missing value', '{"a":}'],
    ['a truncated literal', 'tru'],
    ['a single-quoted string', "'a'"],
    ['nothing', ''],
  ])('refuses %s', (_what, text) => {
    expect(scan(text)).toBe(NOT_CANONICAL);
  });

  it('stops at the end of the value, wherever the bytes go on', () => {
    const bytes = Buffer.from('xx{"a":[1,2]},"b"');
    expect(endOfCanonicalJson(bytes, 2)).toBe(13);
  });

  it(`leaves nesting deeper than ${MAX_VERBATIM_NESTING} and objects of more than ${MAX_VERBATIM_KEYS} keys to the parsed path`, () => {
    const nested = (depth: number): string => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    expect(accepts(nested(MAX_VERBATIM_NESTING))).toBe(true);
    expect(scan(nested(MAX_VERBATIM_NESTING + 1))).toBe(NOT_CANONICAL);
    const object = (keys: number): string => JSON.stringify(Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i])));
    expect(accepts(object(MAX_VERBATIM_KEYS))).toBe(true);
    expect(scan(object(MAX_VERBATIM_KEYS + 1))).toBe(NOT_CANONICAL);
    // Hostile depth costs nothing: the scan stops at the bound.
    expect(scan(nested(100_000))).toBe(NOT_CANONICAL);
  });

  it('accepts whatever JSON.stringify writes, unless a key or a surrogate needs the parsed path', () => {
    // ASCII units make digit-led keys common; binary ones reach every code point; the third
    // kind of string holds lone surrogates, which JSON.stringify escapes.
    const loneSurrogates = fc.string({ unit: fc.integer({ min: 0xd7fe, max: 0xe001 }).map((code) => String.fromCharCode(code)), maxLength: 3 });
    const values = fc.oneof(
      fc.jsonValue({ maxDepth: 6, stringUnit: 'binary' }),
      fc.jsonValue({ maxDepth: 4, stringUnit: 'binary-ascii' }),
      fc.dictionary(loneSurrogates, loneSurrogates, { maxKeys: 3 }),
    );
    fc.assert(
      fc.property(values, (value) => {
        const text = JSON.stringify(value);
        const expected = !hasUnkeepableKey(value) && !hasLoneSurrogate(value);
        expect(accepts(text)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it('accepts no text that the parsed path would store differently (generated near-JSON)', () => {
    fc.assert(
      fc.property(nearJsonText, (text) => {
        const bytes = Buffer.from(text, 'utf8');
        const end = endOfCanonicalJson(bytes, 0);
        if (end !== NOT_CANONICAL) expectKeepable(bytes.subarray(0, end));
      }),
      { numRuns: 5000 },
    );
  });
});

/** Texts that are mostly JSON, with the spellings the scanner must tell apart. */
const nearJsonText: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => {
  const number = fc.oneof(
    fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
    fc.integer().map(String),
    fc.constantFrom('0', '-0', '1.0', '1e2', '1E2', '1e+21', '1.5e-7', '0.1', '01', '-', '1.', '.5', '1e400', '12345678901234567890', '-1.5', '1e-7', '5e-324'),
  );
  const stringToken = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 8 }).map((s) => JSON.stringify(s)),
    fc.constantFrom('"\\/"', '"\\u0041"', '"\\u001f"', '"\\u001F"', '"\\u000a"', '"\\ud83d\\ude00"', '"\\ud800"', '"a\u0001"', '"\\x"', '"\\', '"é"', '"\\"'),
  );
  const key = fc.oneof(stringToken, fc.constantFrom('"a"', '"b"', '"1"', '"01"', '"__proto__"', '"constructor"', '""', '"-1"', '"\\u0061"'));
  const separator = fc.constantFrom(',', ',', ',', ' ,', ', ');
  const join = (items: string[], sep: string): string => items.join(sep);
  return {
    value: fc.oneof(
      { depthSize: 'small', maxDepth: 4 },
      number,
      stringToken,
      fc.constantFrom('true', 'false', 'null', 'nul', 'True'),
      fc.tuple(fc.array(tie('value'), { maxLength: 4 }), separator).map(([items, sep]) => `[${join(items, sep)}]`),
      fc
        .tuple(fc.array(fc.tuple(key, fc.constantFrom(':', ':', ': '), tie('value')), { maxLength: 4 }), separator)
        .map(([members, sep]) => `{${join(members.map(([k, colon, v]) => `${k}${colon}${v}`), sep)}}`),
    ),
  };
}).value;
