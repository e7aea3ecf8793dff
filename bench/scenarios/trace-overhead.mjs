/**
 * Scenario e: what `trace(fn)` costs per call over a bare `tracer.startActiveSpan`.
 *
 * `provider: true` registers a NodeTracerProvider globally (AsyncLocalStorage context, as
 * `register()` would) whose only processor drops every span, so export cost is not measured;
 * `provider: false` leaves the global API a no-op. Variants, each in its own process:
 *   plain  the function itself (the loop's own cost),
 *   bare   tracer.startActiveSpan(name, span => { fn(...); span.end() }),
 *   trace  trace(fn) from the built package;
 * and, to tell where trace()'s time goes (context only, not part of the target):
 *   bare-attrs       bare, with the two attributes trace() writes (inputs JSON text, output)
 *                    built inline: what capturing costs on the SDK's span by itself,
 *   trace-nocapture  trace(fn, { captureInputs: false, captureOutput: false }): the wrapper alone.
 * ns/call is the median over rounds after a warm-up; the loop accumulates results so the JIT
 * cannot drop the calls.
 */
import { trace as otelTrace } from '@opentelemetry/api';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { median } from '../lib/stats.mjs';
import { importCallbridge } from '../lib/dist.mjs';

/** Accepts every span and keeps none. */
const discardingProcessor = {
  onStart() {},
  onEnd() {},
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};

function add(a, b) {
  return a + b;
}

async function makeCall(variant) {
  if (variant === 'plain') return add;
  if (variant === 'bare') {
    const tracer = otelTrace.getTracer('bench');
    return (a, b) =>
      tracer.startActiveSpan('add', (span) => {
        const result = add(a, b);
        span.end();
        return result;
      });
  }
  if (variant === 'bare-attrs') {
    const tracer = otelTrace.getTracer('bench');
    return (a, b) =>
      tracer.startActiveSpan('add', (span) => {
        span.setAttribute('inputs', `{"a":${a},"b":${b}}`);
        const result = add(a, b);
        span.setAttribute('output', result);
        span.end();
        return result;
      });
  }
  if (variant === 'trace') {
    const { trace } = await importCallbridge();
    return trace(add);
  }
  if (variant === 'trace-nocapture') {
    const { trace } = await importCallbridge();
    return trace(add, { captureInputs: false, captureOutput: false });
  }
  throw new Error(`unknown variant ${variant}`);
}

export async function traceOverhead(variant, { provider, calls, rounds }) {
  if (provider) new NodeTracerProvider({ spanProcessors: [discardingProcessor] }).register();
  const call = await makeCall(variant);
  let sink = 0;
  const round = () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < calls; i++) sink += call(i, 1);
    return Number(process.hrtime.bigint() - t0) / calls;
  };
  round();
  round();
  const perCall = [];
  for (let r = 0; r < rounds; r++) perCall.push(round());
  return { nsPerCall: median(perCall), rounds: perCall, checksum: sink };
}
