/**
 * Adding callbridge to an application that already sets OpenTelemetry up: `CallbridgeExporter` is
 * an ordinary `SpanExporter`, so it goes behind a span processor of your provider, next to the
 * exporters you have. Spans of every instrumentation, and of `trace()`, then become calls.
 *
 * Connection and project come from the environment here (CALLBRIDGE_BASE_URL, CALLBRIDGE_PROJECT,
 * CALLBRIDGE_USERNAME + CALLBRIDGE_PASSWORD or CALLBRIDGE_API_KEY); options would override them.
 */
import { SpanStatusCode, trace as otelTrace } from '@opentelemetry/api';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { CallbridgeExporter, trace } from 'callbridge';

const callbridge = new CallbridgeExporter({ projectId: process.env.CALLBRIDGE_PROJECT ?? 'acme/shop' });

const provider = new NodeTracerProvider({
  spanProcessors: [
    // ...the processors you already have stay here.
    new BatchSpanProcessor(callbridge),
  ],
});
provider.register(); // AsyncLocalStorage context, W3C propagation, global tracer provider

// A function wrapped with trace(): one call per invocation.
const priceCart = trace(
  async function priceCart(lines: Array<{ sku: string; quantity: number; unitPrice: number }>): Promise<number> {
    return lines.reduce((sum, line) => sum + line.quantity * line.unitPrice, 0);
  },
  { kind: 'tool' },
);

// Spans made with the plain OTel API...
const tracer = otelTrace.getTracer('checkout');
await tracer.startActiveSpan('checkout', async (span) => {
  try {
    span.setAttribute('input.value', 'cart-77');
    // ...and with trace(): the call below is a child of `checkout`.
    const total = await priceCart([{ sku: 'tea-01', quantity: 2, unitPrice: 6.5 }]);
    span.setAttribute('output.value', total);
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
  } finally {
    span.end();
  }
});

// Before the process ends, flush in this order: BatchSpanProcessor holds spans for up to 5 s and
// its flush only hands them to the exporter; the exporter's flush is what delivers them.
await provider.forceFlush();
await callbridge.forceFlush();
console.log(callbridge.stats()); // { delivered: 2, dropped: { ... all 0 }, ... }
await provider.shutdown(); // also shuts the exporter down
