/**
 * A key list's cached layout must rebuild exactly the tree `unflattenAttributes` makes: the same
 * nesting, the same collisions kept flat, the same key order in every object.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { buildTree, layOut, MAX_LAYOUT_KEYS } from '../../src/mapping/attribute-layout.js';
import { unflattenAttributes } from '../../src/mapping/unflatten.js';

/** Both trees, compared with key order (JSON text) and own-property structure (toEqual). */
function expectSameTree(attributes: Record<string, unknown>): void {
  const laidOut = layOut(attributes);
  expect(laidOut).toBeDefined();
  const { tree } = buildTree(laidOut!);
  const expected = unflattenAttributes(attributes);
  expect(JSON.stringify(tree.root)).toBe(JSON.stringify(expected.root));
  expect(tree.root).toEqual(expected.root);
  expect(tree.hasFlatKeys).toBe(expected.hasFlatKeys);
}

function attributesOf(entries: ReadonlyArray<readonly [string, unknown]>): Record<string, unknown> {
  const attributes: Record<string, unknown> = {};
  for (const [key, value] of entries) Object.defineProperty(attributes, key, { value, enumerable: true, writable: true, configurable: true });
  return attributes;
}

describe('attribute layouts', () => {
  it('rebuild the unflattened tree, collisions and odd keys included', () => {
    const cases: Array<ReadonlyArray<readonly [string, unknown]>> = [
      [],
      [['a', 1]],
      [['gen_ai.system', 'openai'], ['gen_ai.request.model', 'gpt-4o'], ['gen_ai.request.temperature', 0.2], ['input.value', '[{"a":1}]']],
      [['a.b', 1], ['a.b.c', 2]],
      [['a.b.c', 2], ['a.b', 1]],
      [['a', '{"x":1}'], ['a.y', 2]],
      [['x.y.z', 1], ['x', 2], ['x.y', 3]],
      [['__proto__', 'p'], ['constructor.name', 'c'], ['toString', 't'], ['a.__proto__.b', 1]],
      [['2', 'two'], ['b', 'b'], ['1', 'one'], ['a.1', 'x'], ['a.0', 'y']],
      [['', 'empty'], ['.', 'dot'], ['a.', 'trailing'], ['.a', 'leading'], ['a..b', 'double']],
    ];
    for (const entries of cases) expectSameTree(attributesOf(entries));
  });

  it('rebuild the unflattened tree for arbitrary key lists (property)', () => {
    const segment = fc.constantFrom('a', 'b', 'c', 'gen_ai', 'input', 'value', '0', '1', '__proto__', 'constructor', '');
    const key = fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => parts.join('.'));
    const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant('{"j":[1]}'), fc.constant('[]'));
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(key, value), { selector: ([k]) => k, maxLength: 14 }), (entries) => {
        expectSameTree(attributesOf(entries));
      }),
      { numRuns: 2000 },
    );
  });

  it('are reused for spans with the same keys and fill in each span its own values', () => {
    const first = layOut({ 'a.b': 1, 'input.value': '{"q": 1}', c: 'x' })!;
    const second = layOut({ 'a.b': 2, 'input.value': 'not json', c: 'y' })!;
    expect(second.layout).toBe(first.layout);
    expect(buildTree(second).tree.root).toEqual({ a: { b: 2 }, input: { value: 'not json' }, c: 'y' });
    // The JSON text a value was parsed from is kept (for the writer), and only then.
    expect(first.jsonTexts).toEqual([undefined, '{"q": 1}', undefined]);
    expect(second.jsonTexts).toEqual([undefined, undefined, undefined]);
    expect(layOut({ c: 'x', 'a.b': 1 })!.layout).not.toBe(first.layout);
  });

  it('leave spans with more than MAX_LAYOUT_KEYS attributes to ordinary unflattening', () => {
    const many = Object.fromEntries(Array.from({ length: MAX_LAYOUT_KEYS + 1 }, (_, i) => [`k.${i}`, i]));
    expect(layOut(many)).toBeUndefined();
    const enough = Object.fromEntries(Array.from({ length: MAX_LAYOUT_KEYS }, (_, i) => [`k.${i}`, i]));
    expectSameTree(enough);
  });

  it('stay right when the cache starts over (every span with keys of its own)', () => {
    for (let i = 0; i < 20_000; i++) expectSameTree({ [`unique.${i}.key`]: i, shared: 'x' });
  });
});
