/**
 * The context our own HTTP requests run in: tracing suppressed (SPEC §4.12), so an undici or http
 * instrumentation makes no spans about exporting.
 *
 * The key is the one `@opentelemetry/core`'s `isTracingSuppressed` reads, which every
 * instrumentation checks: `createContextKey` of the API is `Symbol.for(description)`, so the same
 * description gives the same key in every copy and version of core. Not imported from core because
 * the delivery worker needs nothing else from it, and loading core there costs ~20 ms of the
 * worker's start (measured: 19.9-21.2 ms after the API is loaded). The batcher's test holds this
 * key to core's own `isTracingSuppressed`.
 */
import { createContextKey, type Context } from '@opentelemetry/api';

const SUPPRESS_TRACING_KEY = createContextKey('OpenTelemetry SDK Context Key SUPPRESS_TRACING');

export function suppressTracing(context: Context): Context {
  return context.setValue(SUPPRESS_TRACING_KEY, true);
}
