/**
 * The span processors of the application's own global provider that still hold spans for one
 * exporter, so that its exit flush can flush them (exporter.ts): NodeSDK puts its `traceExporter`
 * behind a BatchSpanProcessor it makes itself, whose buffer waits for an unref'd timer.
 *
 * Read from the SDK's internals, as no API exposes them (1.x and 2.x: the provider's
 * `[_]activeSpanProcessor`, its `_spanProcessors`, each one's `_exporter` and `_finishedSpans`):
 * when they change, or the provider is not an SDK one, none are found and nothing is flushed.
 */
import { trace as otelTrace } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';

/** A processor as this module reads it. */
interface Processor {
  forceFlush(): Promise<void>;
}

/**
 * The global provider's processors exporting to `exporter` that hold spans: a buffer that can be
 * read and is not empty, or one that cannot be read when `unknownDue`. Never throws.
 */
export function globalProcessorsHoldingSpansFor(exporter: SpanExporter, unknownDue: boolean): Processor[] {
  try {
    const global = otelTrace.getTracerProvider() as { getDelegate?: () => unknown };
    const provider = (typeof global.getDelegate === 'function' ? global.getDelegate() : global) as Record<string, unknown>;
    const active = (provider._activeSpanProcessor ?? provider.activeSpanProcessor) as { _spanProcessors?: unknown } | undefined;
    const processors: unknown[] = Array.isArray(active?._spanProcessors) ? active._spanProcessors : [];
    return processors.filter(
      (processor): processor is Processor =>
        typeof processor === 'object' &&
        processor !== null &&
        (processor as { _exporter?: unknown })._exporter === exporter &&
        typeof (processor as { forceFlush?: unknown }).forceFlush === 'function' &&
        holdsSpans(processor, unknownDue),
    );
  } catch {
    return [];
  }
}

function holdsSpans(processor: object, unknownDue: boolean): boolean {
  const buffer = (processor as { _finishedSpans?: unknown })._finishedSpans;
  return Array.isArray(buffer) ? buffer.length > 0 : unknownDue;
}
