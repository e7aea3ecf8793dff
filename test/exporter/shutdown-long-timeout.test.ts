/**
 * shutdownTimeoutMs accepted by validation (up to 2^31-1) must not make shutdown give up at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { findWorkerScript } from '../../src/exporter/worker-script.js';
import { MAX_TIMER_MS } from '../../src/options.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { endedSpans } from './spans.js';

let server: TestServer;
beforeAll(async () => {
  expect(findWorkerScript()).toBeDefined();
  server = await startTestServer();
});
afterAll(() => server.close());

function exporter(deliveryThread: 'worker' | 'main', shutdownTimeoutMs: number): CallbridgeExporter {
  return new CallbridgeExporter({
    baseUrl: server.url,
    projectId: `acme/delivery-${deliveryThread}-${shutdownTimeoutMs}`,
    username: server.username,
    password: server.password,
    deliveryThread,
    shutdownTimeoutMs,
    logLevel: 'none',
    flushOnExit: false,
  });
}

async function exportAndShutdown(target: CallbridgeExporter, count: number) {
  const spans = endedSpans(count);
  // Let the worker load first, so the spans are posted to it (not delivered here at shutdown).
  target.export(spans.slice(0, 1), () => {});
  await target.forceFlush();
  target.export(spans.slice(1), () => {});
  await target.shutdown();
  return target.stats();
}

describe('shutdown with the largest accepted shutdownTimeoutMs', () => {
  for (const thread of ['main', 'worker'] as const) {
    it(`delivers everything (${thread} thread) rather than dropping it as shutdown at once`, async () => {
      const stats = await exportAndShutdown(exporter(thread, MAX_TIMER_MS), 500);
      expect(stats.dropped.shutdown).toBe(0);
      expect(stats.delivered).toBe(500);
      expect(stats.queued + stats.inFlight).toBe(0);
    });
  }
});
