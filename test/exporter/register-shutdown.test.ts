/**
 * `register()`'s span processors at and after shutdown: a span still open when `shutdown()` is
 * called, and ended after it, is counted as a `shutdown` drop (README: "Every span ends delivered
 * or counted"), whichever processor and delivery thread, against the real local server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleWithin } from '../../src/batcher/batcher.js';
import { register } from '../../src/exporter/register.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const SETUPS = ['direct', 'simple', 'batch'].flatMap((spanProcessor) =>
  ['main', 'worker'].map((deliveryThread) => [spanProcessor, deliveryThread] as ['direct' | 'simple' | 'batch', 'main' | 'worker']),
);

describe('register() after shutdown', () => {
  it.each(SETUPS)('%s processor, %s thread: spans open at shutdown and ended after it are counted as shutdown', async (spanProcessor, deliveryThread) => {
    const tracing = register({
      baseUrl: server.url,
      projectId: `acme/after-shutdown-${spanProcessor}-${deliveryThread}`,
      username: server.username,
      password: server.password,
      global: false,
      flushOnExit: false,
      spanProcessor,
      deliveryThread,
    });
    const tracer = tracing.provider.getTracer('after-shutdown');
    const open = Array.from({ length: 5 }, (_, index) => tracer.startSpan(`open-${index}`));
    tracer.startSpan('ended-before').end();
    await tracing.shutdown();
    for (const span of open) span.end();
    expect(await settleWithin(tracing.forceFlush(), 10_000)).toBe(true);
    expect(tracing.exporter.stats()).toMatchObject({ delivered: 1, queued: 0, inFlight: 0, dropped: { shutdown: 5 } });
  });
});
