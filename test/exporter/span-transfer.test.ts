/**
 * The span's transfer form to the delivery worker: what arrives is what the mapping would have
 * read from the span itself, after a real structured clone, including spans that cannot be read
 * whole and values the clone refuses.
 */
import { describe, expect, it } from 'vitest';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { decodeSpan, encodeSpan, toCloneable } from '../../src/exporter/span-transfer.js';
import { fromReadableSpan, toUpsertItems } from '../../src/mapping/index.js';

function endedSpans(make: (tracer: ReturnType<BasicTracerProvider['getTracer']>) => void): ReadableSpan[] {
  const ended: ReadableSpan[] = [];
  const collect: SpanProcessor = { onStart: () => {}, onEnd: (span) => ended.push(span), forceFlush: async () => {}, shutdown: async () => {} };
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'svc' }), spanProcessors: [collect] });
  make(provider.getTracer('scope', '3.2.1'));
  return ended;
}

describe('span transfer', () => {
  it('round-trips every field through a real structured clone', () => {
    const [linked, span] = endedSpans((tracer) => {
      const first = tracer.startSpan('first');
      first.end();
      const second = tracer.startSpan('second', {
        kind: SpanKind.CLIENT,
        attributes: { 'a.b': 1, 'input.value': '{"x":[1,2]}', list: ['p', 'q'] },
        links: [{ context: { ...first.spanContext(), traceState: new TraceState('k=v') }, attributes: { l: true } }],
      });
      second.addEvent('exception', { 'exception.type': 'E', 'exception.message': 'boom' });
      second.setStatus({ code: SpanStatusCode.ERROR, message: 'bad' });
      second.end();
    });
    expect(linked).toBeDefined();
    const arrived = decodeSpan(structuredClone(encodeSpan(span!)));
    expect(arrived).toEqual({ ...fromReadableSpan(span!), readNotes: undefined });
    expect(toUpsertItems(arrived, 'acme/p')).toEqual(toUpsertItems(span!, 'acme/p'));
  });

  it('carries the note of a span that could not be read whole', () => {
    const [span] = endedSpans((tracer) => tracer.startSpan('broken', { attributes: { keep: 'me' } }).end());
    Object.defineProperty(span, 'instrumentationScope', {
      get() {
        throw new Error('scope getter failed');
      },
    });
    const arrived = decodeSpan(structuredClone(encodeSpan(span!)));
    expect(arrived.readNotes).toEqual(['span: scope getter failed']);
    const [start] = toUpsertItems(arrived, 'acme/p') as Array<{ req: { start: { attributes: Record<string, unknown> } } }>;
    expect(start!.req.start.attributes._callbridge_mapping_error).toContain('scope getter failed');
  });

  it('writes values the clone refuses as text, and keeps absent fields absent', () => {
    const [span] = endedSpans((tracer) => tracer.startSpan('odd').end());
    const transfer = encodeSpan(span!);
    transfer[10] = { fn: () => 1, big: 10n, nan: Number.NaN, bytes: new Uint8Array([1, 2, 3]), ok: 'yes' };
    expect(() => structuredClone(transfer)).toThrow();
    const arrived = decodeSpan(structuredClone(toCloneable(transfer)));
    expect(arrived.attributes).toEqual({ fn: '() => 1', big: '10', nan: 'NaN', bytes: 'AQID', ok: 'yes' });
    expect(arrived.parentSpanId).toBeUndefined();
    expect(arrived.traceState).toBeUndefined();
    expect(arrived.readNotes).toBeUndefined();
  });

  it('sends a span whose values cannot be written at all without them, with a note', () => {
    const [span] = endedSpans((tracer) => tracer.startSpan('cyclic').end());
    const transfer = encodeSpan(span!);
    const cyclic: Record<string, unknown> = { fn: () => 1 };
    cyclic.self = cyclic;
    transfer[10] = cyclic;
    const arrived = decodeSpan(structuredClone(toCloneable(transfer)));
    expect(arrived.attributes).toEqual({});
    expect(arrived.readNotes?.[0]).toMatch(/could not be copied to the delivery worker/);
    expect(arrived.name).toBe('cyclic');
  });
});
