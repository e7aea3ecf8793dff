/**
 * `writeUpsertItems` must write the JSON of `toUpsertItems`, and `writeCompletedCall` that of
 * `toCompletedCall`: the exporter sends the one, the server's OTLP ingest (and every other test)
 * reasons about the other. Byte for byte, except that an attribute value that was JSON text is
 * written as that text (the same value, the instrumentation's own spacing).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { SpanStatusCode, context, trace, type Attributes } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { fromReadableSpan, toCompletedCall, toUpsertItems, writeCompletedCall, writeUpsertItems, type SpanInput } from '../../src/mapping/index.js';
import { layOut } from '../../src/mapping/attribute-layout.js';
import { JsonWriter } from '../../src/wire/json-writer.js';
import { PROJECT, START, END, createTracing } from './fixtures.js';

const writer = new JsonWriter();

function writtenItems(span: SpanInput | ReadableSpan): string {
  writer.begin();
  writeUpsertItems(span, PROJECT, writer);
  return Buffer.from(writer.end()).toString('utf8');
}

function writtenCompletedCall(span: SpanInput | ReadableSpan): string {
  writer.begin();
  writeCompletedCall(span, PROJECT, writer);
  return Buffer.from(writer.end()).toString('utf8');
}

/** Both writers against JSON.stringify of the object mapping: upsert items and the completed call. */
function expectSameText(span: SpanInput | ReadableSpan): void {
  const hasJsonText = layOut(span.attributes)?.jsonTexts.some((text) => text !== undefined) ?? false;
  const pairs: Array<[written: string, expected: string]> = [
    [writtenItems(span), toUpsertItems(span, PROJECT).map((item) => JSON.stringify(item)).join(',')],
    [writtenCompletedCall(span), JSON.stringify(toCompletedCall(span, PROJECT))],
  ];
  for (const [written, expected] of pairs) {
    if (!hasJsonText) {
      expect(written).toBe(expected);
      continue;
    }
    // The same JSON value (a round trip through JSON.stringify normalises what JSON.parse reads
    // past a double, such as 1e400, as the reference text has it).
    const reparsed = JSON.parse(JSON.stringify(JSON.parse(`[${written}]`))) as unknown;
    expect(reparsed).toEqual(JSON.parse(`[${expected}]`));
  }
}

const HOSTILE_STRINGS = [
  '',
  'plain',
  'quote " and backslash \\',
  'controls \u0000\u0001\b\f\n\r\t\u001f',
  'lone surrogates \ud800 and \udfff',
  'astral 😀 and é and 中文',
  '"callbridge-resource-0123456789abcdef01234567"',
  'callbridge-resource-',
  '\u2028\u2029',
  '{"json": "text", "n": [1, 2.5, -0, 1e300]}',
  '[{"role":"user","content":"hi \\"there\\""}]',
  '{not json',
];

describe('writeUpsertItems (the JSON the exporter sends)', () => {
  it('writes the JSON of the items for spans of every shape the SDK makes', async () => {
    const tracing = createTracing();
    const cases: Array<Parameters<typeof tracing.finish>[0]> = [
      {},
      { name: 'x'.repeat(300), attributes: { 'input.value': '{"q": 1}', 'output.value': 'a' } },
      {
        attributes: {
          'gen_ai.system': 'openai',
          'gen_ai.request.model': 'gpt-4o',
          'gen_ai.request.temperature': 0.2,
          'gen_ai.usage.input_tokens': 3,
          'gen_ai.usage.output_tokens': 4,
          'session.id': 's-1',
          'wandb.display_name': 'shown',
          'wandb.is_turn': true,
          'wandb.wb_run_id': 'run',
          'wandb.wb_run_step': 2,
          'wandb.wb_run_step_end': 3,
          'wandb.attributes': '{"env":"prod","__proto__":{"x":1}}',
          'input.value': '[{"role":"user","content":"hi"}]',
          'output.value': '{"text":"hello"}',
        },
      },
      { attributes: { a: 1, 'a.b': 2, 'a.b.c': 3, list: ['x', 'y'], nums: [1, 2, Number.NaN], flag: false } },
      { attributes: { inputs: '{"x": 1}', outputs: '[1, 2]', __proto__: 'odd', constructor: 'c' } as Attributes },
      {
        events: [{ name: 'tick', attributes: { n: 1, 'k.v': 'w' }, time: START }],
        status: { code: SpanStatusCode.ERROR, message: '' },
        exception: new TypeError('boom "quoted"'),
      },
      { status: { code: SpanStatusCode.OK }, kind: 2 },
      // Enough attributes (with long values, repeated ones) for the lookups of written parts to use a map.
      {
        attributes: {
          ...Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`attr.${i % 10}.k${i}`, i % 3 === 0 ? i : `${'v'.repeat(30)}${i % 7}`])),
          'input.value': `${'v'.repeat(30)}1`,
          'output.value': `${'v'.repeat(30)}2`,
          'gen_ai.system': `${'v'.repeat(30)}3`,
        },
      },
      ...HOSTILE_STRINGS.map((text, index) => ({ name: text || 'empty', attributes: { [`k${index}`]: text, 'input.value': text, [text || 'e']: text } })),
    ];
    for (const spec of cases) expectSameText(tracing.finish(spec).span);
    await tracing.shutdown();
  });

  it('writes the JSON of the items when the resource is large, has dropped attributes, or differs between spans', async () => {
    const spans: ReadableSpan[] = [];
    for (const dropped of [0, 0, 3]) {
      const memory = new InMemorySpanExporter();
      const provider = new BasicTracerProvider({
        resource: resourceFromAttributes(
          Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`host.attr${i}.name`, `value "${i}" \u0001 ${dropped}`])),
        ),
        spanProcessors: [new SimpleSpanProcessor(memory)],
      });
      const tracer = provider.getTracer('scope "x"', dropped === 0 ? undefined : '1.0');
      for (let i = 0; i < 3; i += 1) tracer.startSpan(`span ${i}`, { attributes: { i } }).end();
      spans.push(...memory.getFinishedSpans());
      await provider.shutdown();
    }
    // The same resource object reached twice (cache hit), and a hand-built span's own resource.
    for (const span of [...spans, ...spans]) expectSameText(span);
    const handBuilt: SpanInput = {
      name: 'ingested',
      traceId: '0'.repeat(31) + '1',
      spanId: '0'.repeat(15) + '1',
      kind: 'SERVER',
      startTime: START,
      endTime: END,
      status: { code: 'UNSET' },
      attributes: { bytes: new Uint8Array([1, 2, 3]), big: 12n, nested: { a: { b: [1, { c: 'd' }] } } },
      events: [],
      links: [{ traceId: 'f'.repeat(32), spanId: 'e'.repeat(16), attributes: { l: 1 } }],
      resource: { attributes: { 'service.name': 'otlp' }, droppedAttributesCount: 2 },
      scope: { name: 'decoder' },
    };
    expectSameText(handBuilt);
    expectSameText(handBuilt);
  });

  it('writes an empty scope version as null, as OTLP ingest (protobuf cannot tell it from none) stores it', async () => {
    const memory = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
    provider.getTracer('empty-version', '').startSpan('a').end();
    provider.getTracer('no-version').startSpan('b').end();
    for (const span of memory.getFinishedSpans()) {
      expectSameText(span);
      const [start] = JSON.parse(`[${writtenItems(span)}]`) as Array<{ req: Record<string, any> }>;
      const [completed] = JSON.parse(`[${writtenCompletedCall(span)}]`) as Array<Record<string, any>>;
      for (const call of [start!.req.start, completed!, toUpsertItems(span, PROJECT)[0].req.start]) {
        expect(call.otel_dump.scope).toEqual({ name: span.instrumentationScope.name, version: null });
      }
    }
    await provider.shutdown();
  });

  it('writes the JSON of the items for arbitrary attribute values (property)', async () => {
    const tracing = createTracing();
    const scalar = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.double(),
      fc.integer(),
      fc.boolean(),
      fc.json().map((text) => text),
    );
    const value = fc.oneof(scalar, fc.array(fc.oneof(fc.string({ unit: 'binary' }), fc.double()), { maxLength: 4 }));
    const key = fc.oneof(
      fc.constantFrom('input.value', 'output.value', 'gen_ai.request.model', 'gen_ai.usage.input_tokens', 'a.b', 'a.b.c', 'inputs'),
      fc.string({ unit: 'binary', maxLength: 12 }),
    );
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 12 }), fc.string({ unit: 'binary', maxLength: 40 }), (attributes, name) => {
        expectSameText(tracing.finish({ name, attributes: attributes as Attributes }).span);
      }),
      { numRuns: 300 },
    );
    await tracing.shutdown();
  });

  it('writes an attribute that was JSON text as that text, in otel_dump and in inputs or output', async () => {
    const tracing = createTracing();
    const prompt = '[ {"role": "user", "content": "hi é"},\n  {"n": 12345678901234567890} ]';
    const answer = '{"text": "ok", "score": 1e400}';
    const written = writtenItems(
      tracing.finish({ attributes: { 'input.value': prompt, 'output.value': answer, 'gen_ai.system': 'openai' } }).span,
    );
    const [start, end] = JSON.parse(`[${written}]`) as Array<{ req: Record<string, any> }>;
    // Twice in the start item (otel_dump.attributes and inputs), once more in the end item (output).
    expect(written.split(prompt)).toHaveLength(3);
    expect(written.split(answer)).toHaveLength(3);
    expect(start!.req.start.inputs['input.value'][0].content).toBe('hi é');
    expect(end!.req.end.output['output.value'].text).toBe('ok');
    // A JSON text with a lone surrogate has no UTF-8 form: written from its value, escaped.
    const lone = '["\ud800 raw"]';
    const loneWritten = writtenItems(tracing.finish({ attributes: { 'input.value': lone } }).span);
    expect(loneWritten).not.toContain(lone);
    expect(loneWritten).toContain('\\ud800 raw');
    await tracing.shutdown();
  });

  it('keeps JSON text nested deeper than the server stores as text, with a note, identically on either path', async () => {
    const tracing = createTracing();
    // MAX_JSON_DEPTH (500) - 3 (otel_dump.events[i].attributes) - 2 segments of `input.value`.
    const bound = 495;
    const nested = (depth: number, leaf = '1') => `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;
    const extra = Object.fromEntries(Array.from({ length: 130 }, (_, i) => [`extra.${i}`, i]));
    for (const deep of [nested(bound + 1), nested(3000)]) {
      const sdkSpan = tracing.finish({ attributes: { 'input.value': deep, 'gen_ai.system': 'openai' } }).span;
      // The SDK keeps 128 attributes: a span with more (the object path) is built by hand.
      const handBuilt: SpanInput = { ...fromReadableSpan(sdkSpan), attributes: { ...sdkSpan.attributes, ...extra } };
      for (const span of [sdkSpan, handBuilt]) {
        expectSameText(span);
        const [start] = JSON.parse(`[${writtenItems(span)}]`) as Array<{ req: Record<string, any> }>;
        expect(start!.req.start.inputs['input.value']).toBe(deep);
        expect(start!.req.start.otel_dump.attributes.input.value).toBe(deep);
        expect(start!.req.start.attributes._callbridge_mapping_error).toBe(
          `input.value: JSON text nested deeper than ${bound} levels, kept as text`,
        );
      }
    }
    await tracing.shutdown();
  });

  it('parses JSON text up to the bound on either path, where the writer recurses into it (below its own limit)', async () => {
    const tracing = createTracing();
    const bound = 495;
    // A lone surrogate: the text has no UTF-8 form, so the writer writes the value, recursing.
    for (const leaf of ['1', '"\ud800"']) {
      const deep = `${'['.repeat(bound)}${leaf}${']'.repeat(bound)}`;
      const sdkSpan = tracing.finish({ attributes: { 'input.value': deep, 'gen_ai.system': 'openai' } }).span;
      const handBuilt: SpanInput = {
        ...fromReadableSpan(sdkSpan),
        attributes: { ...sdkSpan.attributes, ...Object.fromEntries(Array.from({ length: 130 }, (_, i) => [`extra.${i}`, i])) },
      };
      for (const span of [sdkSpan, handBuilt]) {
        expectSameText(span);
        const [start] = JSON.parse(`[${writtenItems(span)}]`) as Array<{ req: Record<string, any> }>;
        expect(JSON.stringify(start!.req.start.inputs['input.value'])).toBe(JSON.stringify(JSON.parse(deep)));
        expect(start!.req.start.attributes._callbridge_mapping_error).toBeUndefined();
      }
    }
    await tracing.shutdown();
  });

  it('writes ids in lowercase when a custom IdGenerator makes uppercase ones (SPEC §2.1 takes only lowercase)', async () => {
    const exporter = new InMemorySpanExporter();
    let next = 0xabc;
    const provider = new BasicTracerProvider({
      idGenerator: {
        generateTraceId: () => 'ABCDEF0123456789ABCDEF0123456789',
        generateSpanId: () => (next++).toString(16).toUpperCase().padStart(16, '0'),
      },
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    const tracer = provider.getTracer('ids');
    const linked = tracer.startSpan('linked');
    linked.end();
    const root = tracer.startSpan('root');
    tracer.startSpan('child', { links: [{ context: linked.spanContext() }] }, trace.setSpan(context.active(), root)).end();
    root.end();
    const [, child] = exporter.getFinishedSpans();
    expect(child!.spanContext().spanId).toBe('0000000000000ABE');
    const asInput = fromReadableSpan(child!);
    for (const span of [child!, asInput]) {
      expectSameText(span);
      const [start] = JSON.parse(`[${writtenItems(span)}]`) as Array<{ req: Record<string, any> }>;
      expect(start!.req.start).toMatchObject({
        id: '0000000000000abe',
        trace_id: 'abcdef0123456789abcdef0123456789',
        parent_id: '0000000000000abd',
        otel_dump: {
          context: { trace_id: 'abcdef0123456789abcdef0123456789', span_id: '0000000000000abe' },
          parent_id: '0000000000000abd',
          links: [{ trace_id: 'abcdef0123456789abcdef0123456789', span_id: '0000000000000abc' }],
        },
      });
    }
    // The input given is not changed.
    expect(asInput.spanId).toBe('0000000000000ABE');
    await provider.shutdown();
  });
});
