/**
 * `stringifyWithinDepth`: the JSON text of a stored value, or null past MAX_JSON_DEPTH, with the
 * same verdict as `assertJsonDepth` (which walks every value) at about the cost of the stringify.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assertJsonDepth, stringifyWithinDepth } from '../../src/server/json-depth.js';
import { MAX_JSON_DEPTH } from '../../src/wire/digest.js';

/** `levels` nested containers, alternating arrays and objects, around `inner`. */
function nested(levels: number, inner: unknown = 1): unknown {
  let value = inner;
  for (let level = 0; level < levels; level++) value = level % 2 === 0 ? [value] : { k: value };
  return value;
}

const withinBound = (value: unknown): boolean => {
  try {
    assertJsonDepth(value, 'value');
    return true;
  } catch {
    return false;
  }
};

describe('stringifyWithinDepth', () => {
  it('is JSON.stringify for values within the bound', () => {
    for (const value of [null, 0, 'é"\\', [], {}, { a: [1, { b: null }] }, nested(MAX_JSON_DEPTH)]) {
      expect(stringifyWithinDepth(value)).toBe(JSON.stringify(value));
    }
  });

  it('refuses a container at depth MAX_JSON_DEPTH, with the shortest text that can hold one', () => {
    const tooDeep = nested(MAX_JSON_DEPTH + 1, []);
    expect(stringifyWithinDepth(nested(MAX_JSON_DEPTH + 1))).toBeNull();
    expect(stringifyWithinDepth(tooDeep)).toBeNull();
    expect(stringifyWithinDepth({ wide: 'x'.repeat(5000), deep: nested(MAX_JSON_DEPTH) })).toBeNull();
    // A long but shallow value is walked and passes.
    const long = { list: Array.from({ length: 2000 }, (_, i) => ({ i })) };
    expect(stringifyWithinDepth(long)).toBe(JSON.stringify(long));
  });

  it('refuses values deep enough to overflow JSON.stringify instead of throwing', () => {
    const hostile = JSON.parse(`${'['.repeat(200_000)}${']'.repeat(200_000)}`) as unknown;
    expect(stringifyWithinDepth(hostile)).toBeNull();
  });

  it('agrees with assertJsonDepth on any JSON value', () => {
    const deepish = fc.integer({ min: MAX_JSON_DEPTH - 3, max: MAX_JSON_DEPTH + 3 }).chain((levels) =>
      fc.jsonValue({ maxDepth: 3 }).map((inner) => nested(levels, inner)),
    );
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), deepish, fc.jsonValue().map((v) => ({ v, d: nested(MAX_JSON_DEPTH - 1) }))), (value) => {
        const text = stringifyWithinDepth(value);
        expect(text === null).toBe(!withinBound(value));
        if (text !== null) expect(text).toBe(JSON.stringify(value));
      }),
      { numRuns: 300 },
    );
  });
});
