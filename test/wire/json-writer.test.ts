/**
 * The JSON byte writer must write exactly what `JSON.stringify` writes (as UTF-8), whatever the
 * value: the exporter's request bodies are made with it.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { JsonWriter, WrittenValues, encodeConstant } from '../../src/wire/json-writer.js';

function written(write: (out: JsonWriter) => void, out = new JsonWriter()): string {
  out.begin();
  write(out);
  return Buffer.from(out.end()).toString('utf8');
}

/** What JSON.stringify gives, as the bytes a body would carry, decoded back. */
function stringified(value: unknown): string {
  return Buffer.from(JSON.stringify(value) ?? 'null', 'utf8').toString('utf8');
}

/** Any UTF-16 unit, lone surrogates included (fast-check's own string units stay well formed). */
const anyUnit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code));
const anyText = fc.oneof(fc.string({ unit: anyUnit, maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 }), fc.string());

describe('JsonWriter', () => {
  it('writes strings exactly as JSON.stringify does, for every UTF-16 unit', () => {
    const shared = new JsonWriter();
    for (let code = 0; code <= 0xffff; code++) {
      const text = `a${String.fromCharCode(code)}b`;
      expect(written((out) => out.string(text), shared)).toBe(stringified(text));
    }
    const edges = ['', '"', '\\', '\u0000\u001f\u007f\u0080', '\ud83d\ude00', '\ud83d', '\ude00\ud83d', '\ud83d\ud83d\ude00', 'é中😀', '\u2028\u2029'];
    for (const text of edges) expect(written((out) => out.string(text))).toBe(stringified(text));
    fc.assert(fc.property(anyText, (text) => written((out) => out.string(text)) === stringified(text)), { numRuns: 2000 });
  });

  it('keeps room for the rest of a string after escapes that take 6 bytes for one unit', () => {
    const SLAB = 256 * 1024;
    for (const [escapes, plain] of [[10, 5], [3, 1], [1, 0], [40, 2], [7, 9]] as const) {
      const text = '\u0001'.repeat(escapes) + 'x'.repeat(plain) + '\ud800'.repeat(escapes) + 'é'.repeat(plain);
      // Fill a fresh writer's first slab so that exactly the up-front reserve of 3 bytes per unit
      // (+2 quotes) is left: the escapes then need more than that.
      const out = new JsonWriter();
      const room = 3 * text.length + 2;
      out.begin();
      for (let filled = 0; filled < SLAB - room; filled += 1000) out.ascii('y'.repeat(Math.min(1000, SLAB - room - filled)));
      out.end();
      expect(written((writer) => writer.string(text), out)).toBe(stringified(text));
    }
  });

  it('writes numbers as JSON.stringify does, and non-finite numbers as null', () => {
    const numbers = [0, -0, 1, -1, 0.1, 0.2, 1 / 3, 1e21, 1e-7, 123456789012345680000, 5e-324, Number.MAX_VALUE, -Number.MAX_SAFE_INTEGER, Number.NaN, Infinity, -Infinity];
    for (const value of numbers) expect(written((out) => out.number(value))).toBe(stringified(value));
    fc.assert(fc.property(fc.double(), (value) => written((out) => out.number(value)) === stringified(value)), { numRuns: 2000 });
  });

  it('writes any JSON value as JSON.stringify does', () => {
    const value = fc.jsonValue({ maxDepth: 5 }) as fc.Arbitrary<unknown>;
    fc.assert(fc.property(value, (json) => written((out) => out.value(json)) === stringified(json)), { numRuns: 1000 });
    const objects = fc.dictionary(anyText, fc.oneof(anyText, fc.double(), fc.boolean(), fc.constant(null)), { maxKeys: 8 });
    fc.assert(fc.property(objects, (object) => written((out) => out.value(object)) === stringified(object)), { numRuns: 1000 });
  });

  it('follows JSON.stringify for what is not plain JSON data', () => {
    class Point {
      constructor(readonly x: number, readonly y: number) {}
    }
    const withToJson = { toJSON: () => ({ replaced: true }) };
    const nullPrototype = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    const values: unknown[] = [
      { skip: undefined, fn: () => 1, sym: Symbol('s'), kept: 1 },
      [undefined, () => 1, Symbol('s')],
      new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6)),
      new Point(1, 2),
      withToJson,
      { nested: withToJson },
      nullPrototype,
      new Map([['a', 1]]),
      { 1: 'one', b: 'b', 0: 'zero', __proto__: null },
      JSON.parse('{"__proto__": {"x": 1}, "a": [1, {"b": null}]}'),
    ];
    for (const value of values) expect(written((out) => out.value(value))).toBe(stringified(value));
    // JSON.stringify(undefined) is undefined: as a whole value the writer writes null.
    expect(written((out) => out.value(undefined))).toBe('null');
  });

  it('throws what JSON.stringify throws: a bigint, a cycle', () => {
    const out = new JsonWriter();
    expect(() => out.value({ big: 1n })).toThrow(TypeError);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => out.value(cyclic)).toThrow(TypeError);
  });

  it('copies a value the record already holds instead of writing it again', () => {
    const out = new JsonWriter();
    const parsed = JSON.parse('[{"role": "user", "content": "hi"}]') as unknown;
    const equalButOther = JSON.parse('[{"role": "user", "content": "hi"}]') as unknown;
    const long = `a long answer, ${'é'.repeat(30)}`;
    const short = 'short';
    out.begin();
    out.byte(0x5b);
    // The first element is written with a different spacing, to show the copy comes from the record.
    const from = out.recordLength;
    out.jsonText('[ {"role": "user", "content": "hi"} ]');
    const to = out.recordLength;
    out.comma();
    const longFrom = out.recordLength;
    out.string(long);
    const longTo = out.recordLength;
    out.comma();
    const written = new WrittenValues();
    written.note(parsed, from, to);
    written.note(long, longFrom, longTo);
    written.note(short, longFrom, longTo);
    out.value({ again: parsed, other: equalButOther, text: `${long}`, short }, written);
    out.byte(0x5d);
    const json = Buffer.from(out.end()).toString('utf8');
    expect(json).toBe(
      `[[ {"role": "user", "content": "hi"} ],${JSON.stringify(long)},{"again":[ {"role": "user", "content": "hi"} ],"other":${JSON.stringify(equalButOther)},"text":${JSON.stringify(long)},"short":"short"}]`,
    );
  });

  it('finds noted values in a long list as in a short one', () => {
    const written = new WrittenValues();
    const objects = Array.from({ length: 100 }, (_, i) => ({ i }));
    objects.forEach((object, i) => written.note(object, i, i + 1));
    written.note(objects[3], 50, 60);
    for (let i = 0; i < 100; i += 1) {
      const at = written.find(objects[i]);
      expect([written.fromAt(at), written.toAt(at)]).toEqual([i, i + 1]);
      written.note(`a string long enough to be noted, number ${i}`, 1000 + i, 2000 + i);
    }
    expect(written.find({ i: 3 })).toBe(-1);
    expect(written.toAt(written.find(`a string long enough to be noted, number ${7}`))).toBe(2007);
  });

  it('copies from a record that moved to a new slab half way', () => {
    const out = new JsonWriter();
    out.begin();
    out.string('x'.repeat(200_000));
    out.end();
    out.begin();
    out.byte(0x5b);
    const value = 'y'.repeat(50_000);
    out.string(value);
    const to = out.recordLength;
    out.comma();
    // The slab (256 KiB) cannot take a second copy: the record moves, positions stay valid.
    const written = new WrittenValues();
    written.note(value, 1, to);
    out.value(value, written);
    out.byte(0x5d);
    expect(Buffer.from(out.end()).toString()).toBe(JSON.stringify([value, value]));
  });

  it('copies constants, ASCII and JSON text as they are', () => {
    const piece = encodeConstant('{"mode":"start","note":"é"}');
    expect(written((out) => out.constant(piece))).toBe('{"mode":"start","note":"é"}');
    const long = encodeConstant(`"${'z'.repeat(100)}"`);
    expect(written((out) => out.constant(long))).toBe(`"${'z'.repeat(100)}"`);
    expect(written((out) => out.ascii('2026-01-02T03:04:05.123456Z'))).toBe('2026-01-02T03:04:05.123456Z');
    expect(written((out) => out.jsonText('{"a":"😀é"}'))).toBe('{"a":"😀é"}');
    expect(written((out) => (out.byte(0x5b), out.number(1), out.comma(), out.number(2), out.byte(0x5d)))).toBe('[1,2]');
  });

  it('keeps every earlier record intact across slabs, and records larger than a slab whole', () => {
    const out = new JsonWriter();
    const records: Array<{ view: Uint8Array; expected: string }> = [];
    for (let i = 0; i < 2000; i++) {
      const value = { i, text: `é${'x'.repeat(i % 700)}😀`, big: i % 500 === 0 ? 'y'.repeat(600_000) : null };
      out.begin();
      out.value(value);
      records.push({ view: out.end(), expected: JSON.stringify(value) });
    }
    for (const { view, expected } of records) expect(Buffer.from(view).toString('utf8')).toBe(expected);
  });

  it('forgets a record that failed half way', () => {
    const out = new JsonWriter();
    out.begin();
    out.value({ kept: 1 });
    const kept = out.end();
    out.begin();
    expect(() => out.value({ partial: 'x', bad: 1n })).toThrow(TypeError);
    out.discard();
    expect(out.recordLength).toBe(0);
    out.begin();
    out.value([2]);
    expect(Buffer.from(out.end()).toString()).toBe('[2]');
    expect(Buffer.from(kept).toString()).toBe('{"kept":1}');
  });
});
