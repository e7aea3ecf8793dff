/**
 * A short outage in which the service's front resets connections while the request body is still
 * arriving (a restarting backend behind a TCP proxy). SPEC §4.5 retries resets until `maxRetryMs`;
 * SPEC §4.6 keeps strings whole unless the server refuses the size. Two resets in a row during an
 * upload could also be an early 413 whose answer was lost; a large span must not be cut (or
 * dropped as too_large) for an outage: it is delivered whole once the outage ends.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { diag } from '@opentelemetry/api';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls, startFaultProxy, type FaultProxy } from './fault-proxy.js';
import { providerFor } from './spans.js';
import { testExporter } from './test-exporter.js';

const PROJECT = 'acme/upload-resets';
let server: TestServer;
let proxy: FaultProxy | undefined;

beforeEach(async () => {
  server = await startTestServer();
  diag.setLogger({ error() {}, warn() {}, info() {}, debug() {}, verbose() {} });
});

afterEach(async () => {
  diag.disable();
  await proxy?.close();
  proxy = undefined;
  await server.close();
});

describe('resets during the upload in a transient outage (SPEC §4.5, §4.6)', () => {
  // Worker thread: there the reset shows as `write ECONNRESET` (5 runs of 5 when found); on the
  // main thread it showed as `read ECONNRESET`, which is retried as the network error it is.
  it.each(['worker'] as const)(
    '%s thread: a large span is retried and delivered whole once the outage ends, not cut and dropped as too_large',
    async (deliveryThread) => {
      const outageEndsAt = Date.now() + 6000;
      proxy = await startFaultProxy({
        upstream: server.url,
        script: () => ({ kind: 'proxy' }),
        // The front resets every connection whose body starts arriving during the outage.
        resetMidBody: () => Date.now() < outageEndsAt,
      });
      const exporter = testExporter(server, PROJECT, proxy.url, { deliveryThread, maxRetryMs: 30_000, requestTimeoutMs: 5000 });
      const provider = providerFor(exporter, 'simple');
      const prompt = 'p'.repeat(2_000_000);
      const span = provider.getTracer('resets').startSpan('llm', { attributes: { 'input.value': prompt } });
      span.end();
      await exporter.forceFlush();
      const stats = exporter.stats();
      await exporter.shutdown();
      expect(proxy.midBodyResets).toBeGreaterThan(0);
      expect(stats).toMatchObject({ delivered: 1, dropped: { too_large: 0, retries_exhausted: 0 } });
      const calls = await readAllCalls(server.url, PROJECT, server);
      expect(calls).toHaveLength(1);
      expect(JSON.stringify(calls[0]!.inputs)).not.toContain('truncated');
    },
    60_000,
  );
});
