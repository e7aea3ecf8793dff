/**
 * The schema-guided body reader (verbatim-body.ts) on `call/upsert_batch` bodies: what it reads
 * must be what the parsed path would see (apart from free-form values kept as text), and it must
 * answer null, never a different value, for anything it does not read exactly.
 */
import fc from 'fast-check';
import { Type } from 'typebox';
import { Value } from 'typebox/value';
import { describe, expect, it } from 'vitest';
import { createVerbatimBodyReader } from '../../src/server/verbatim-body.js';
import { VerbatimJson } from '../../src/server/verbatim-json.js';
import { CallUpsertBatchReqSchema } from '../../src/wire/calls.js';

const readUpsert = createVerbatimBodyReader(CallUpsertBatchReqSchema);
const read = (text: string): unknown => readUpsert(Buffer.from(text, 'utf8'));

const START = {
  project_id: 'acme/demo',
  id: '00000000000000a1',
  trace_id: '0123456789abcdef0123456789abcdef',
  op_name: 'answer',
  started_at: '2026-01-02T03:04:05.000100Z',
  attributes: { model: 'gpt-4o', params: { temperature: 0.2, max_tokens: 512 } },
  inputs: { question: 'why?', history: [1, 'two', null, true] },
  otel_dump: { name: 'answer' },
  wb_run_step: 3,
};
const END = { project_id: 'acme/demo', id: '00000000000000a1', ended_at: '2026-01-02T03:04:06Z', summary: { usage: {} }, output: 'because' };
const BATCH = { batch: [{ mode: 'start', req: { start: START } }, { mode: 'end', req: { end: END } }] };

/** The value with every VerbatimJson parsed back. */
function materialize(value: unknown): unknown {
  if (value instanceof VerbatimJson) return JSON.parse(value.text);
  if (Array.isArray(value)) return value.map(materialize);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, materialize(inner)]));
  }
  return value;
}

interface SchemaLike {
  properties?: Record<string, SchemaLike>;
  items?: SchemaLike;
  anyOf?: SchemaLike[];
}

/** `value` with only the fields `schema` names (the reader drops the others, which nothing reads). */
function project(schema: SchemaLike, value: unknown): unknown {
  if (schema.anyOf !== undefined) {
    const branch = schema.anyOf.find((b) => b.properties !== undefined || b.items !== undefined);
    return branch === undefined ? value : project(branch, value);
  }
  if (schema.items !== undefined && Array.isArray(value)) return value.map((item) => project(schema.items as SchemaLike, item));
  if (schema.properties !== undefined && typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const properties = schema.properties;
    return Object.fromEntries(
      Object.entries(value).filter(([key]) => key in properties).map(([key, inner]) => [key, project(properties[key] as SchemaLike, inner)]),
    );
  }
  return value;
}

describe('createVerbatimBodyReader', () => {
  it('reads a batch: named fields as values, free-form ones as the text that arrived', () => {
    const body = read(JSON.stringify(BATCH)) as { batch: Array<{ req: { start?: Record<string, unknown>; end?: Record<string, unknown> } }> };
    const start = body.batch[0]?.req.start as Record<string, unknown>;
    expect(start.op_name).toBe('answer');
    expect(start.wb_run_step).toBe(3);
    expect(start.attributes).toEqual(new VerbatimJson(JSON.stringify(START.attributes)));
    expect(start.inputs).toEqual(new VerbatimJson(JSON.stringify(START.inputs)));
    const end = body.batch[1]?.req.end as Record<string, unknown>;
    expect(end.output).toEqual(new VerbatimJson('"because"'));
    expect(materialize(body)).toEqual(BATCH);
  });

  it('drops fields a part does not name, as nothing reads them, and reads null free-form values as null', () => {
    const start = { ...START, custom: { any: ['thing'] }, otel_dump: null };
    const end = { ...END, output: null, note: 1 };
    const body = materialize(read(JSON.stringify({ batch: [{ mode: 'start', req: { start } }, { req: { end }, mode: 'end' }] })));
    expect(body).toEqual({ batch: [{ mode: 'start', req: { start: { ...START, otel_dump: null } } }, { mode: 'end', req: { end: { ...END, output: null } } }] });
  });

  it('takes whitespace around the envelope and the named fields, and decodes their escapes and UTF-8', () => {
    const start = { ...START, op_name: 'say "hi"\n', display_name: 'é 漢 😀', attributes: { text: 'é 漢 😀' } };
    const text = JSON.stringify({ batch: [{ mode: 'start', req: { start } }] }, (key, value) => value, 0)
      .replace('{"batch":', ' {\n "batch" : ')
      .replace('"op_name":', '"op_name" :\t');
    const body = read(`${text}\r\n`) as { batch: Array<{ req: { start: Record<string, unknown> } }> };
    expect(body).not.toBeNull();
    const read0 = body.batch[0]?.req.start as Record<string, unknown>;
    expect(read0.op_name).toBe('say "hi"\n');
    expect(read0.display_name).toBe('é 漢 😀');
    expect(read0.attributes).toEqual(new VerbatimJson('{"text":"é 漢 😀"}'));
  });

  it.each([
    ['a schema error: a missing field', JSON.stringify({ batch: [{ mode: 'start', req: { start: { ...START, op_name: undefined } } }] })],
    ['a schema error: a wrong type', JSON.stringify({ batch: [{ mode: 'start', req: { start: { ...START, op_name: 5 } } }] })],
    ['a schema error: a list where an object goes', JSON.stringify({ batch: [{ mode: 'start', req: { start: { ...START, attributes: [1] } } }] })],
    ['a schema error: a fraction where an integer goes', JSON.stringify({ batch: [{ mode: 'start', req: { start: { ...START, wb_run_step: 1.5 } } }] })],
    ['a schema error: an extra key in a closed envelope', JSON.stringify({ batch: [], extra: 1 })],
    ['a schema error: an extra key in an item', JSON.stringify({ batch: [{ mode: 'end', req: { end: END }, x: 1 }] })],
    ['a schema error: not an object', '[]'],
    ['an integer spelled as a fraction', JSON.stringify(BATCH).replace('"wb_run_step":3', '"wb_run_step":3.0')],
    ['a repeated named field (JSON.parse keeps the last)', JSON.stringify(BATCH).replace('"op_name":"answer"', '"op_name":"a","op_name":"answer"')],
    ['a repeated envelope field', '{"batch":[],"batch":[]}'],
    ['a __proto__ key in a part', JSON.stringify(BATCH).replace('"op_name":', '"__proto__":{"x":1},"op_name":')],
    ['a __proto__ key in a free-form value', JSON.stringify(BATCH).replace('"model":', '"__proto__":{},"model":')],
    ['a constructor key in the envelope', '{"constructor":{"prototype":{}},"batch":[]}'],
    ['whitespace inside a free-form value', JSON.stringify(BATCH).replace('"model":"gpt-4o"', '"model": "gpt-4o"')],
    ['whitespace inside an ignored value', JSON.stringify({ batch: [{ mode: 'end', req: { end: { ...END, extra: [1] } } }] }).replace('[1]', '[ 1 ]')],
    ['a non-canonical number in a free-form value', JSON.stringify(BATCH).replace('0.2', '0.20')],
    ['a byte order mark', `\ufeff${JSON.stringify(BATCH)}`],
    ['trailing bytes', `${JSON.stringify(BATCH)}x`],
    ['a second value', `${JSON.stringify(BATCH)} {}`],
    ['a truncated body', JSON.stringify(BATCH).slice(0, -3)],
    ['an empty body', ''],
    ['an unknown literal', '{"batch":nul}'],
  ])('leaves %s to the parsed path', (_what, text) => {
    expect(read(text)).toBeNull();
  });

  it('reads exactly what the parsed path would see, or leaves the body to it (generated bodies)', () => {
    let readCount = 0;
    fc.assert(
      fc.property(upsertBodyText, (text) => {
        const body = read(text);
        if (body === null) return;
        readCount += 1;
        const parsed: unknown = JSON.parse(text);
        expect(Value.Check(CallUpsertBatchReqSchema, parsed)).toBe(true);
        expect(materialize(body)).toEqual(project(CallUpsertBatchReqSchema as SchemaLike, parsed));
      }),
      { numRuns: 3000 },
    );
    // The property says little if hardly any body is read.
    expect(readCount).toBeGreaterThan(300);
  });

  it('refuses to build a reader for schemas it cannot read exactly', () => {
    expect(() => createVerbatimBodyReader(Type.String())).toThrow(/object with properties/);
    expect(() => createVerbatimBodyReader(Type.Object({ a: Type.String({ minLength: 1 }) }))).toThrow(/"minLength" at body\.a/);
    expect(() => createVerbatimBodyReader(Type.Object({ a: Type.Literal('x') }))).toThrow(/"const"/);
    expect(() => createVerbatimBodyReader(Type.Object({ a: Type.Union([Type.String(), Type.String()]) }))).toThrow(/two anyOf branches/);
    expect(() => createVerbatimBodyReader(Type.Object({ a: Type.Record(Type.String(), Type.String()) }))).toThrow(/patternProperties|unsupported/);
    expect(() => createVerbatimBodyReader(Type.Object({ a: Type.Unsafe({ properties: { b: {} } }) }))).toThrow(/keywords without a type/);
    // Keys are matched by their bytes, one bit each in a mask of the fields seen.
    expect(() => createVerbatimBodyReader(Type.Object({ 'say "hi"': Type.String() }))).toThrow(/needs escapes/);
    const many = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`f${i}`, Type.String()]));
    expect(() => createVerbatimBodyReader(Type.Object(many))).toThrow(/more than 31 properties/);
  });

  it('reads the other shapes it supports: numbers, booleans, lists, free-form objects and values', () => {
    const reader = createVerbatimBodyReader(
      Type.Object({ n: Type.Number(), b: Type.Boolean(), list: Type.Array(Type.Integer()), free: Type.Record(Type.String(), Type.Unknown()), any: Type.Unknown() }, { additionalProperties: false }),
    );
    const body = reader(Buffer.from('{"n":-1.5,"b":false,"list":[1,2],"free":{"x":[true]},"any":[null]}'));
    expect(body).toEqual({ n: -1.5, b: false, list: [1, 2], free: new VerbatimJson('{"x":[true]}'), any: new VerbatimJson('[null]') });
    expect(reader(Buffer.from('{"n":1,"b":0,"list":[],"free":{},"any":1}'))).toBeNull();
  });
});

const ID = fc.constantFrom('00000000000000a1', '00000000000000a2', 'ABC', '0123456789abcdef0123456789abcdef');
/** Values that fit a field, and values that do not. */
const scalarish = fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
const freeForm = fc.oneof(
  { weight: 3, arbitrary: fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
);
const maybe = <T>(arbitrary: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary }, { weight: 1, arbitrary: scalarish });

const startPart = fc.record(
  {
    project_id: maybe(fc.constant('acme/p')),
    id: maybe(ID),
    trace_id: maybe(ID),
    op_name: maybe(fc.string({ maxLength: 10 })),
    started_at: maybe(fc.constant('2026-01-02T03:04:05Z')),
    attributes: freeForm,
    inputs: freeForm,
    otel_dump: fc.oneof(freeForm, fc.constant(null)),
    wb_run_step: maybe(fc.integer()),
    custom: fc.jsonValue({ maxDepth: 2 }),
  },
  { requiredKeys: ['attributes', 'inputs'] },
);
const endPart = fc.record(
  {
    project_id: maybe(fc.constant('acme/p')),
    id: maybe(ID),
    ended_at: maybe(fc.constant('2026-01-02T03:04:06Z')),
    summary: freeForm,
    output: fc.jsonValue({ maxDepth: 3 }),
    exception: maybe(fc.string({ maxLength: 5 })),
    wb_run_step_end: maybe(fc.integer()),
  },
  { requiredKeys: ['summary'] },
);
const item = fc.oneof(
  { weight: 4, arbitrary: startPart.map((start) => ({ mode: 'start', req: { start } })) },
  { weight: 4, arbitrary: endPart.map((end) => ({ mode: 'end', req: { end } })) },
  { weight: 1, arbitrary: fc.record({ mode: scalarish, req: fc.record({ start: startPart, end: endPart }, { requiredKeys: [] }) }, { requiredKeys: [] }) },
);
/** Bodies as an exporter writes them, pretty-printed, or with a field repeated. */
const upsertBodyText = fc
  .tuple(fc.array(item, { maxLength: 4 }), fc.constantFrom('compact', 'compact', 'compact', 'pretty', 'repeat'))
  .map(([batch, style]) => {
    const body = { batch };
    if (style === 'pretty') return JSON.stringify(body, null, 1);
    const text = JSON.stringify(body);
    return style === 'repeat' ? text.replace('"op_name":', '"op_name":"x","op_name":') : text;
  });
