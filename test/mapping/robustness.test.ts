import { afterAll, describe, expect, it } from 'vitest';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import {
  MAPPING_ERROR_ATTRIBUTE,
  kindFromOtlp,
  statusCodeName,
  toCallParts,
  toUpsertItems,
  type SpanInput,
} from '../../src/mapping/index.js';
import { createTracing, END_ISO, PROJECT, START_ISO, T0 } from './fixtures.js';

const tracing = createTracing();
afterAll(() => tracing.shutdown());

/** A span as the OTLP ingest would hand it over, decoded. */
function decodedSpan(overrides: Partial<SpanInput> = {}): SpanInput {
  return {
    name: 'decoded',
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331',
    parentSpanId: '00f067aa0ba902b7',
    traceState: 'vendor=1',
    kind: kindFromOtlp(2),
    startTime: [T0, 123_456_789],
    endTime: [T0 + 1, 5_000],
    status: { code: statusCodeName(0) },
    attributes: {},
    events: [],
    links: [],
    resource: { attributes: { 'service.name': 'ingest' }, droppedAttributesCount: 2 },
    scope: { name: 'otlp' },
    ...overrides,
  };
}

describe('spans from the OTLP ingest (SpanInput)', () => {
  it('maps a decoded span with bytes, bigint and key-value list values', () => {
    const span = decodedSpan({
      attributes: {
        'blob.data': new Uint8Array([104, 105]),
        'count.big': 12_345_678_901_234_567_890n,
        'kv.list': { inner: 1, deeper: { flag: true } },
        'arr.mixed': ['a', 2, null],
      },
      events: [{ name: 'e', time: [T0, 1_000], attributes: { n: 1 }, droppedAttributesCount: 1 }],
      links: [{ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: '00f067aa0ba902b7' }],
    });
    const tree = {
      blob: { data: 'aGk=' },
      count: { big: '12345678901234567890' },
      kv: { list: { inner: 1, deeper: { flag: true } } },
      arr: { mixed: ['a', 2, null] },
    };
    expect(toUpsertItems(span, PROJECT)).toEqual([
      {
        mode: 'start',
        req: {
          start: {
            project_id: PROJECT,
            id: 'b7ad6b7169203331',
            trace_id: '0af7651916cd43dd8448eb211c80319c',
            parent_id: '00f067aa0ba902b7',
            op_name: 'decoded',
            started_at: START_ISO,
            attributes: tree,
            inputs: {},
            otel_dump: {
              name: 'decoded',
              context: { trace_id: '0af7651916cd43dd8448eb211c80319c', span_id: 'b7ad6b7169203331', trace_state: 'vendor=1' },
              kind: 'SERVER',
              parent_id: '00f067aa0ba902b7',
              start_time: START_ISO,
              end_time: END_ISO,
              status: { code: 'UNSET', message: '' },
              attributes: tree,
              events: [{ name: 'e', timestamp: '2026-01-02T03:04:05.000001Z', attributes: { n: 1 }, dropped_attributes_count: 1 }],
              links: [
                {
                  trace_id: '0af7651916cd43dd8448eb211c80319c',
                  span_id: '00f067aa0ba902b7',
                  trace_state: '',
                  attributes: {},
                  dropped_attributes_count: 0,
                },
              ],
              resource: { attributes: { service: { name: 'ingest' } }, dropped_attributes_count: 2 },
              scope: { name: 'otlp', version: null },
            },
          },
        },
      },
      { mode: 'end', req: { end: { project_id: PROJECT, id: 'b7ad6b7169203331', ended_at: END_ISO, output: null, summary: {} } } },
    ]);
  });

  it('names OTLP kinds and status codes, reading unknown numbers as INTERNAL / UNSET', () => {
    expect([0, 1, 2, 3, 4, 5, 99].map(kindFromOtlp)).toEqual([
      'INTERNAL',
      'INTERNAL',
      'SERVER',
      'CLIENT',
      'PRODUCER',
      'CONSUMER',
      'INTERNAL',
    ]);
    expect([0, 1, 2, 7, undefined].map(statusCodeName)).toEqual(['UNSET', 'OK', 'ERROR', 'UNSET', 'UNSET']);
  });

  it('produces JSON that survives a round trip unchanged', () => {
    const span = decodedSpan({ attributes: { x: Number.NaN, y: [Number.POSITIVE_INFINITY], 'input.value': '{"a":[1,{"b":null}]}' } });
    const items = toUpsertItems(span, PROJECT);
    expect(JSON.parse(JSON.stringify(items))).toEqual(items);
    expect(items[0].req.start.otel_dump?.attributes).toEqual({ x: 'nan', y: ['inf'], input: { value: { a: [1, { b: null }] } } });
  });
});

describe('a mapping never throws', () => {
  it('maps what it can of a span whose times are broken, and notes the rest', () => {
    const { start, end } = toCallParts(decodedSpan({ startTime: [Number.NaN, 0], attributes: { 'input.value': 'q' } }), PROJECT);
    expect(start.started_at).toBe('1970-01-01T00:00:00.000000Z');
    expect(end.ended_at).toBe(END_ISO);
    expect(start.inputs).toEqual({ 'input.value': 'q' });
    expect(start.attributes[MAPPING_ERROR_ATTRIBUTE]).toMatch(/^start time: /);
  });

  it('does not let the error note change otel_dump when attributes are the whole tree', () => {
    const { start } = toCallParts(decodedSpan({ endTime: [0, Number.NaN], attributes: { 'app.k': 'v' } }), PROJECT);
    expect(start.attributes).toEqual({ app: { k: 'v' }, [MAPPING_ERROR_ATTRIBUTE]: expect.stringMatching(/^end time: /) });
    expect(start.otel_dump?.attributes).toEqual({ app: { k: 'v' } });
  });

  it('survives malformed decoded spans (missing events, links, resource, status)', () => {
    const broken = {
      ...decodedSpan(),
      events: undefined,
      links: null,
      resource: undefined,
      status: undefined,
      attributes: { 'input.value': 'still here' },
    } as unknown as SpanInput;
    const { start, end } = toCallParts(broken, PROJECT);
    expect(start.id).toBe('b7ad6b7169203331');
    expect(start.inputs).toEqual({ 'input.value': 'still here' });
    expect(start).not.toHaveProperty('otel_dump');
    expect(start.attributes[MAPPING_ERROR_ATTRIBUTE]).toMatch(/otel_dump: .*exception: /);
    expect(end.exception).toBe('error');
  });

  it('maps a ReadableSpan whose getters throw', () => {
    const { span } = tracing.finish({ name: 'real', attributes: { 'input.value': 'kept' } });
    const hostile = Object.create(span as object, {
      links: {
        get() {
          throw new Error('links exploded');
        },
      },
      resource: {
        get() {
          throw new Error('resource exploded');
        },
      },
    }) as ReadableSpan;
    const { start, end } = toCallParts(hostile, PROJECT);
    expect(start.id).toBe(span.spanContext().spanId);
    expect(start.inputs).toEqual({ 'input.value': 'kept' });
    expect(start.started_at).toBe(START_ISO);
    expect(end.ended_at).toBe(END_ISO);
    expect(start.attributes[MAPPING_ERROR_ATTRIBUTE]).toBe('span: links exploded');
    expect(start.otel_dump).toMatchObject({ links: [], resource: { attributes: {} } });
  });

  it('maps a span with as many attributes as the SDK keeps (128), long values and deep keys', () => {
    const attributes: Record<string, string> = {};
    for (let i = 0; i < 120; i++) attributes[`k${i}.${'d.'.repeat(i % 40)}leaf`] = 'v'.repeat(i);
    attributes['big.json'] = JSON.stringify({ nested: Array.from({ length: 1000 }, (_, i) => i) });
    const { span } = tracing.finish({ attributes });
    const { start } = toCallParts(span, PROJECT);
    expect(start.attributes).not.toHaveProperty(MAPPING_ERROR_ATTRIBUTE);
    expect((start.attributes.big as { json: { nested: number[] } }).json.nested).toHaveLength(1000);
  });
});

describe('values from the SDK', () => {
  it('converts non-finite numbers and keeps colliding dotted keys flat', () => {
    const { span } = tracing.finish({
      attributes: { 'm.ratio': Number.NaN, 'm.limit': Number.POSITIVE_INFINITY, 'a.b': 1, 'a.b.c': 2, 'tags': ['x', 'y'] },
    });
    expect(toCallParts(span, PROJECT).start.attributes).toEqual({
      m: { ratio: 'nan', limit: 'inf' },
      a: { b: 1 },
      'a.b.c': 2,
      tags: ['x', 'y'],
    });
  });

  it('finds a curated key kept flat by a collision', () => {
    const { span } = tracing.finish({ attributes: { 'llm.model_name': 'm', 'llm.model_name.version': '2', 'gen_ai': 'x', 'gen_ai.system': 'flat' } });
    expect(toCallParts(span, PROJECT).start.attributes).toEqual({ model: 'm', system: 'flat' });
  });
});
