/**
 * The public lifecycle of `CallbridgeExporter` and `register()`: shutdown twice and
 * concurrently, flushes after and during a shutdown, export() after it, on both delivery threads.
 */
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleWithin } from '../../src/batcher/batcher.js';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { register } from '../../src/exporter/register.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';
import { endedSpans } from './spans.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/** A port nothing listens on (connection refused). */
async function closedPort(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

const exportNow = (exporter: CallbridgeExporter, count: number) =>
  new Promise<ExportResult>((resolve) => exporter.export(endedSpans(count), resolve));

for (const deliveryThread of ['main', 'worker'] as const) {
  describe(`CallbridgeExporter (${deliveryThread} thread)`, () => {
    it('shutdown twice and concurrently with flushes: all settle, once; flush and export after it behave', async () => {
      const project = `acme/lifecycle-shutdown-${deliveryThread}`;
      const exporter = new CallbridgeExporter({ baseUrl: server.url, projectId: project, username: server.username, password: server.password, deliveryThread, flushOnExit: false });
      expect((await exportNow(exporter, 4)).code).toBe(ExportResultCode.SUCCESS);
      const first = exporter.shutdown();
      // An export during the shutdown (not awaited) is refused and counted, not lost.
      expect((await exportNow(exporter, 2)).code).toBe(ExportResultCode.FAILED);
      expect(exporter.shutdown()).toBe(first);
      expect(await settleWithin(Promise.all([first, exporter.forceFlush(), exporter.shutdown()]), 15_000)).toBe(true);
      expect(await settleWithin(exporter.forceFlush(), 5_000)).toBe(true);
      expect((await exportNow(exporter, 1)).code).toBe(ExportResultCode.FAILED);
      expect(exporter.stats()).toMatchObject({ delivered: 4, queued: 0, inFlight: 0, dropped: { shutdown: 3 } });
      expect(await readAllCalls(server.url, project, server)).toHaveLength(4);
    });

    it('a forceFlush waiting on a service that is down ends with the shutdown that gives up on it', async () => {
      const exporter = new CallbridgeExporter({ baseUrl: await closedPort(), projectId: 'acme/lifecycle-down', deliveryThread, flushOnExit: false, shutdownTimeoutMs: 300 });
      await exportNow(exporter, 3);
      const flushing = exporter.forceFlush();
      await new Promise((resolve) => setTimeout(resolve, 300));
      await exporter.shutdown();
      expect(await settleWithin(flushing, 5_000)).toBe(true);
      expect(exporter.stats()).toMatchObject({ delivered: 0, queued: 0, inFlight: 0, dropped: { shutdown: 3 } });
    });
  });
}

describe('register()', () => {
  it.each(['direct', 'simple', 'batch'] as const)('%s processor: shutdown twice, concurrently with forceFlush, and a flush after it all settle', async (spanProcessor) => {
    const project = `acme/lifecycle-register-${spanProcessor}`;
    const tracing = register({ baseUrl: server.url, projectId: project, username: server.username, password: server.password, global: false, flushOnExit: false, deliveryThread: 'main', spanProcessor });
    const tracer = tracing.provider.getTracer('lifecycle test');
    for (let i = 0; i < 3; i++) tracer.startSpan(`s${i}`).end();
    const first = tracing.shutdown();
    expect(tracing.shutdown()).toBe(first);
    expect(await settleWithin(Promise.all([tracing.forceFlush(), first]), 15_000)).toBe(true);
    expect(await settleWithin(tracing.forceFlush(), 5_000)).toBe(true);
    tracer.startSpan('after').end();
    expect(tracing.exporter.stats()).toMatchObject({ delivered: 3, dropped: { shutdown: 1 } });
    expect(await readAllCalls(server.url, project, server)).toHaveLength(3);
  });
});
