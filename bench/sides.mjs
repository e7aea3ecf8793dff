/**
 * The sides a benchmark compares, each built the way its users would build it:
 *
 * - `none`:       a NodeTracerProvider with no processor (the cost of making spans at all).
 * - `otlp`:       the official OTLP/HTTP JSON exporter behind BatchSpanProcessor with every default.
 * - `otlp-tuned`: the same, configured not to lose spans: a queue larger than the run, a bigger
 *                 batch, and `concurrencyLimit` raised so forceFlush's parallel batches are not refused.
 * - `callbridge`: `register()` from the built package, not installed globally (its default
 *                 `deliveryThread: 'auto'`: a delivery worker on this 2-core machine).
 * - `callbridge-main`: the same with `deliveryThread: 'main'` (mapping, JSON and HTTP on the
 *                 application's thread).
 * - `callbridge-tuned`: the same with `maxQueueBytes` raised to hold the whole burst.
 *
 * `createSide(name, sinkUrl)` returns `{ tracer, provider, flush(), shutdown(), stats() }`.
 */
import { NodeTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BENCH_PROJECT, BENCH_USER } from './lib/constants.mjs';
import { importCallbridge } from './lib/dist.mjs';

export const SIDES = ['otlp', 'otlp-tuned', 'callbridge'];

/**
 * callbridge's counterpart of `otlp-tuned`: a queue bound large enough for the whole burst
 * (the default 64 MiB holds about 30 k of these spans). Not in the default table; run it with
 * `node bench/child.mjs burst callbridge-tuned '{"sinkUrl": ..., "spans": 200000}'`.
 */
export const CALLBRIDGE_TUNED = { maxQueueBytes: 1024 * 1024 * 1024 };

/** OTLP settings that lose nothing in a 200 k-span burst (see README: how they were chosen). */
export const OTLP_TUNED = { maxQueueSize: 1_000_000, maxExportBatchSize: 512, concurrencyLimit: 1000 };

/** Build side `name` exporting to `sinkUrl` (callbridge writes to `projectId`). */
export async function createSide(name, sinkUrl, { projectId = BENCH_PROJECT } = {}) {
  switch (name) {
    case 'none': {
      const provider = new NodeTracerProvider();
      return wrapProvider(provider);
    }
    case 'otlp': {
      const exporter = new OTLPTraceExporter({ url: `${sinkUrl}/v1/traces` });
      const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
      return wrapProvider(provider);
    }
    case 'otlp-tuned': {
      const exporter = new OTLPTraceExporter({ url: `${sinkUrl}/v1/traces`, concurrencyLimit: OTLP_TUNED.concurrencyLimit });
      const processor = new BatchSpanProcessor(exporter, {
        maxQueueSize: OTLP_TUNED.maxQueueSize,
        maxExportBatchSize: OTLP_TUNED.maxExportBatchSize,
      });
      const provider = new NodeTracerProvider({ spanProcessors: [processor] });
      return wrapProvider(provider);
    }
    case 'callbridge':
    case 'callbridge-main':
    case 'callbridge-tuned': {
      const { register } = await importCallbridge();
      const queue = name === 'callbridge-tuned' ? CALLBRIDGE_TUNED : {};
      const thread = name === 'callbridge-main' ? { deliveryThread: 'main' } : {};
      const tracing = register({ baseUrl: sinkUrl, projectId, ...BENCH_USER, global: false, ...queue, ...thread });
      return {
        tracer: tracing.provider.getTracer('bench'),
        provider: tracing.provider,
        flush: () => tracing.forceFlush(),
        shutdown: () => tracing.shutdown(),
        stats: () => (typeof tracing.exporter?.stats === 'function' ? tracing.exporter.stats() : undefined),
      };
    }
    default:
      throw new Error(`unknown side ${name}`);
  }
}

function wrapProvider(provider) {
  return {
    tracer: provider.getTracer('bench'),
    provider,
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
    stats: () => undefined,
  };
}
