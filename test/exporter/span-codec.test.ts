import { describe, expect, it } from 'vitest';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Attributes } from '@opentelemetry/api';
import { createSpanCodec, estimateSpanBytes } from '../../src/exporter/index.js';

function endedSpans(cases: Attributes[]) {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
  const tracer = provider.getTracer('codec-test');
  for (const attributes of cases) {
    const span = tracer.startSpan('op', { attributes });
    span.addEvent('tick', { n: 1 });
    span.end();
  }
  return memory.getFinishedSpans();
}

describe('span codec', () => {
  it('guesses the JSON size of ASCII spans within a small factor of the real size', () => {
    const codec = createSpanCodec('acme/demo');
    const spans = endedSpans([
      {},
      { 'input.value': 'x'.repeat(1000), 'output.value': 'y'.repeat(500) },
      { a: 1, b: 'two', list: ['p', 'q'], 'gen_ai.usage.input_tokens': 3 },
      { 'input.value': 'z'.repeat(200_000) },
    ]);
    for (const span of spans) {
      const actual = codec.toUpsertItems(span).reduce<number>((sum, item) => sum + Buffer.byteLength(JSON.stringify(item)), 0);
      const guess = estimateSpanBytes(span);
      expect(guess / actual).toBeGreaterThan(0.8);
      expect(guess / actual).toBeLessThan(1.6);
    }
  });

  it('guesses a finite size for names the SDK kept as numbers (startSpan(404), addEvent(1) in plain JS)', () => {
    const memory = new InMemorySpanExporter();
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] }).getTracer('codec-test');
    const span = tracer.startSpan(404 as unknown as string);
    span.addEvent(1 as unknown as string);
    span.end();
    const [numeric] = memory.getFinishedSpans();
    expect(typeof numeric!.name).toBe('number');
    expect(Number.isFinite(estimateSpanBytes(numeric!))).toBe(true);
    expect(estimateSpanBytes(numeric!)).toBeGreaterThan(0);
  });

  it('maps to a start and an end item, or to one completed call, of the configured project', () => {
    const codec = createSpanCodec('acme/demo');
    const [span] = endedSpans([{}]);
    const items = codec.toUpsertItems(span!) as Array<{ mode: string; req: Record<string, { project_id: string; id: string }> }>;
    expect(items.map((item) => item.mode)).toEqual(['start', 'end']);
    expect(items[0]!.req.start!.project_id).toBe('acme/demo');
    expect(items[1]!.req.end!.id).toBe(span!.spanContext().spanId);
    expect(codec.toCompletedCall(span!)).toMatchObject({ project_id: 'acme/demo', id: span!.spanContext().spanId });
  });
});
