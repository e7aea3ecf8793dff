/** Real OTel SDK spans for exporter tests: a provider around a processor, and nested traces. */
import { ROOT_CONTEXT, trace, type Attributes, type Context, type TracerProvider } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';

export function providerFor(exporter: SpanExporter, processor: 'batch' | 'simple' = 'batch'): BasicTracerProvider {
  return new BasicTracerProvider({
    spanProcessors: [
      processor === 'batch'
        ? // A queue as large as any test's burst: the processor must not be what loses spans.
          new BatchSpanProcessor(exporter, { maxQueueSize: 20_000, maxExportBatchSize: 1000, scheduledDelayMillis: 20 })
        : new SimpleSpanProcessor(exporter),
    ],
  });
}

export interface EmittedSpan {
  readonly spanId: string;
  readonly traceId: string;
  readonly parentId: string | undefined;
  readonly name: string;
}

/**
 * End `count` spans in traces of `perTrace` spans: a root, and children nested three deep under
 * it. `attributes(i)` adds attributes to span i.
 */
export function emitSpans(
  provider: TracerProvider,
  count: number,
  attributes: (index: number) => Attributes = () => ({}),
  perTrace = 10,
): EmittedSpan[] {
  const tracer = provider.getTracer('callbridge-test', '1.0.0');
  const emitted: EmittedSpan[] = [];
  let chain: Array<{ context: Context; spanId: string }> = [];
  for (let index = 0; index < count; index += 1) {
    if (index % perTrace === 0) chain = [];
    const parent = chain[Math.min(chain.length - 1, 2)];
    const name = parent === undefined ? `root-${index}` : `step-${index % perTrace}`;
    const span = tracer.startSpan(name, { attributes: { 'test.index': index, ...attributes(index) } }, parent?.context ?? ROOT_CONTEXT);
    const spanContext = span.spanContext();
    emitted.push({ spanId: spanContext.spanId, traceId: spanContext.traceId, parentId: parent?.spanId, name });
    if (chain.length < 3) chain.push({ context: trace.setSpan(ROOT_CONTEXT, span), spanId: spanContext.spanId });
    span.end();
  }
  return emitted;
}

/** `count` ended spans (as `emitSpans` makes them), to hand to an exporter's `export()` directly. */
export function endedSpans(count: number): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  emitSpans(providerFor(memory, 'simple'), count);
  return memory.getFinishedSpans();
}
