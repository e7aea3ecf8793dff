/**
 * Flush, shutdown and export races against the real local server, on both delivery threads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExportResultCode } from '@opentelemetry/core';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { findWorkerScript } from '../../src/exporter/worker-script.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { endedSpans } from './spans.js';

let server: TestServer;
let project = 0;
beforeAll(async () => {
  expect(findWorkerScript()).toBeDefined();
  server = await startTestServer();
});
afterAll(() => server.close());

function exporter(deliveryThread: 'worker' | 'main', extra: Record<string, unknown> = {}): CallbridgeExporter {
  return new CallbridgeExporter({
    baseUrl: server.url,
    projectId: `acme/race-${deliveryThread}-${++project}`,
    username: server.username,
    password: server.password,
    deliveryThread,
    logLevel: 'none',
    flushOnExit: false,
    ...extra,
  });
}

function total(stats: ReturnType<CallbridgeExporter['stats']>): number {
  return stats.delivered + Object.values(stats.dropped).reduce((a, b) => a + b, 0);
}

describe.each(['main', 'worker'] as const)('%s thread', (thread) => {
  it('forceFlush and shutdown started together both end with everything delivered; a late export is FAILED and counted', async () => {
    const target = exporter(thread, { maxBatchItems: 20 });
    const spans = endedSpans(300);
    target.export(spans.slice(0, 150), () => {});
    const flushed = target.forceFlush();
    target.export(spans.slice(150), () => {});
    const shut = target.shutdown();
    const results: number[] = [];
    target.export(endedSpans(3), (result) => results.push(result.code));
    await Promise.all([flushed, shut]);
    const stats = target.stats();
    expect(results).toEqual([ExportResultCode.FAILED]);
    expect(stats.delivered).toBe(300);
    expect(stats.dropped.shutdown).toBe(3);
    expect(total(stats)).toBe(303);
    expect(stats.queued + stats.inFlight + stats.queuedBytes).toBe(0);
    // forceFlush after shutdown resolves.
    await target.forceFlush();
  });

  it('shutdown(0)-like timeout with a flush pending: every span is counted exactly once', async () => {
    const target = exporter(thread, { shutdownTimeoutMs: 0, maxBatchItems: 10 });
    const spans = endedSpans(200);
    target.export(spans, () => {});
    const flushed = target.forceFlush();
    await target.shutdown();
    await flushed;
    // Late reports from the worker (if any) must not change the totals.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const stats = target.stats();
    expect(total(stats)).toBe(200);
    expect(stats.queued + stats.inFlight).toBe(0);
  });
});
