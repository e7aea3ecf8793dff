/**
 * `toUpsertItemTexts` must give exactly the text of `JSON.stringify` over `toUpsertItems`: the
 * exporter sends the one, the server's OTLP ingest (and every other test) reasons about the other.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { SpanStatusCode, type Attributes } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { toUpsertItemTexts, toUpsertItems, type SpanInput } from '../../src/mapping/index.js';
import { PROJECT, START, END, createTracing } from './fixtures.js';

function expectSameText(span: SpanInput | ReadableSpan): void {
  const expected = toUpsertItems(span, PROJECT).map((item) => JSON.stringify(item));
  expect(toUpsertItemTexts(span, PROJECT)).toEqual(expected);
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

describe('toUpsertItemTexts (the text the exporter sends)', () => {
  it('is the JSON.stringify text for spans of every shape the SDK makes', async () => {
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
      ...HOSTILE_STRINGS.map((text, index) => ({ name: text || 'empty', attributes: { [`k${index}`]: text, 'input.value': text, [text || 'e']: text } })),
    ];
    for (const spec of cases) expectSameText(tracing.finish(spec).span);
    await tracing.shutdown();
  });

  it('is the JSON.stringify text when the resource is large, has dropped attributes, or differs between spans', async () => {
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

  it('is the JSON.stringify text for arbitrary attribute values (property)', async () => {
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
});
