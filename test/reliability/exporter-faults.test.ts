/**
 * The exporter under faults (SPEC §4): real SDK spans, the real exporter and transport, the
 * scripted fault proxy of `test/exporter/fault-proxy.ts` in front of the real local server. After
 * each fault clears, every span is in the database exactly once or counted as dropped with the
 * right reason: sent = read back + dropped by reason, one row per id, `delivered` = read back.
 * The host process never hears an exception.
 */
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Attributes } from '@opentelemetry/api';
import type { CallbridgeExporter } from '../../src/exporter/index.js';
import { DROP_REASONS, type DropReason } from '../../src/batcher/stats.js';
import type { ExporterOptions } from '../../src/options.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls, startFaultProxy, type FaultProxy, type FaultProxyOptions } from '../exporter/fault-proxy.js';
import { emitSpans, providerFor, type EmittedSpan } from '../exporter/spans.js';
import { flushAll, testExporter } from '../exporter/test-exporter.js';
import { rowsPerCallId, watchHostProcess } from './support.js';

const PROJECT = 'acme/reliability';
let server: TestServer;
let proxy: FaultProxy | undefined;
let host: ReturnType<typeof watchHostProcess>;

beforeEach(async () => {
  host = watchHostProcess();
  server = await startTestServer();
});

afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
  await server.close();
  host.dispose();
  host.assertNone();
});

async function faultProxy(script: FaultProxyOptions['script'], extra: Partial<FaultProxyOptions> = {}): Promise<FaultProxy> {
  proxy = await startFaultProxy({ upstream: server.url, script, ...extra });
  return proxy;
}

function exporterFor(url: string, options: ExporterOptions = {}): CallbridgeExporter {
  return testExporter(server, PROJECT, url, { maxRetryMs: 30_000, maxBatchItems: 100, concurrency: 2, flushIntervalMs: 50, ...options });
}

/** Resolve once `condition` holds, checking every 20 ms (bounded by the test's timeout). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}

/**
 * The accounting of SPEC §4.1, checked against the database: every emitted span is stored once
 * or dropped, drops are exactly `expectedDrops` by reason, nothing stored that was not emitted.
 * Returns the ids read back.
 */
async function expectAccounted(
  exporter: CallbridgeExporter,
  emitted: readonly EmittedSpan[],
  expectedDrops: Partial<Record<DropReason, number>> = {},
): Promise<Set<string>> {
  const stats = exporter.stats();
  const calls = await readAllCalls(server.url, PROJECT, server);
  const readBack = new Set(calls.map((call) => call.id as string));
  const rows = rowsPerCallId(server.dbPath, PROJECT);
  expect([...rows.values()].filter((count) => count !== 1)).toEqual([]); // no duplicates
  expect(calls).toHaveLength(readBack.size);
  for (const call of calls) expect(typeof call.ended_at, `call ${call.id} lacks its end`).toBe('string');

  const emittedIds = new Set(emitted.map((span) => span.spanId));
  expect([...readBack].filter((id) => !emittedIds.has(id))).toEqual([]);
  const dropped = DROP_REASONS.reduce((sum, reason) => sum + stats.dropped[reason], 0);
  expect(stats.delivered).toBe(readBack.size);
  expect(readBack.size + dropped).toBe(emitted.length);
  for (const reason of DROP_REASONS) expect(stats.dropped[reason], `dropped.${reason}`).toBe(expectedDrops[reason] ?? 0);
  expect(stats).toMatchObject({ queued: 0, inFlight: 0, queuedBytes: 0 });
  return readBack;
}

interface FaultRun {
  readonly exporter: CallbridgeExporter;
  readonly emitted: EmittedSpan[];
  readonly stored: Set<string>;
}

/**
 * The run every fault shares: `count` spans through an exporter on the fault proxy, both flushes,
 * the accounting of {@link expectAccounted} (with `drops` expected), then the provider shut down.
 */
async function deliverThroughProxy(
  count: number,
  run: { exporter?: ExporterOptions; attributes?: (index: number) => Attributes; drops?: Partial<Record<DropReason, number>> } = {},
): Promise<FaultRun> {
  const exporter = exporterFor(proxy!.url, run.exporter);
  const provider = providerFor(exporter);
  const emitted = emitSpans(provider, count, run.attributes);
  await flushAll(provider, exporter);
  const stored = await expectAccounted(exporter, emitted, run.drops);
  await provider.shutdown();
  return { exporter, emitted, stored };
}

describe('exporter under faults: every span stored once or counted', () => {
  it('waits out refused connections (nothing listening) and delivers everything when the port opens', async () => {
    const { url } = await faultProxy(() => ({ kind: 'proxy' }));
    await proxy!.stopListening();
    const exporter = exporterFor(url);
    const provider = providerFor(exporter);
    const emitted = emitSpans(provider, 300);
    await provider.forceFlush();
    await until(() => exporter.stats().retried >= 2);
    expect(exporter.stats().delivered).toBe(0);
    await proxy!.listenAgain();
    await exporter.forceFlush();
    await expectAccounted(exporter, emitted);
    await provider.shutdown();
  });

  it('survives resets in the middle of the request body and in the middle of the answer after a commit', async () => {
    let midBody = 0;
    let afterCommit = 0;
    await faultProxy(
      () => (afterCommit++ < 3 ? { kind: 'reset-after-commit' } : { kind: 'proxy' }),
      { resetMidBody: () => midBody++ < 3 },
    );
    // Three uploads were cut mid-body and retried. Three batches were stored by the server and
    // their 200 cut mid-answer: the status says the write was committed, so they count as
    // delivered, not retried (a retry would only rewrite them).
    const { exporter } = await deliverThroughProxy(300, { attributes: (index) => ({ 'input.value': `padding ${index} `.repeat(40) }) });
    expect(proxy!.midBodyResets).toBe(3);
    expect(afterCommit).toBeGreaterThanOrEqual(3);
    expect(exporter.stats().retried).toBeGreaterThanOrEqual(3);
    expect(exporter.stats().retried).toBeLessThan(6);
  });

  it('rides out a run of 503s', async () => {
    await faultProxy((request) => (request.index < 6 ? { kind: 'status', status: 503, body: { reason: 'maintenance' } } : { kind: 'proxy' }));
    const { exporter } = await deliverThroughProxy(250);
    expect(exporter.stats().retried).toBeGreaterThanOrEqual(6);
  });

  it('obeys 429 with Retry-After in seconds and as an HTTP date', async () => {
    const retryAfter = ['1', new Date(Date.now() + 1000).toUTCString(), '0'];
    await faultProxy((request) => {
      const value = retryAfter[request.index];
      return value === undefined ? { kind: 'proxy' } : { kind: 'status', status: 429, headers: { 'retry-after': value } };
    });
    const { exporter } = await deliverThroughProxy(200);
    expect(exporter.stats().retried).toBeGreaterThanOrEqual(3);
  });

  it('retries answers slower than the timeout (stored by the server meanwhile) without duplicating', async () => {
    await faultProxy((request) => (request.index < 3 ? { kind: 'slow', delayMs: 1500 } : { kind: 'proxy' }));
    const { exporter } = await deliverThroughProxy(200, { exporter: { requestTimeoutMs: 400 } });
    expect(exporter.stats().retried).toBeGreaterThanOrEqual(3);
  });

  it('splits on 413 above a size, cuts an oversized span, drops a hopeless one as too_large', async () => {
    const LIMIT = 40_000;
    // Hopeless: refused whatever its size.
    await faultProxy((request) =>
      request.body.length > LIMIT || request.body.includes('HOPELESS')
        ? { kind: 'status', status: 413, body: { reason: 'Request too large' } }
        : { kind: 'proxy' },
    );
    const { emitted, stored } = await deliverThroughProxy(200, {
      attributes: (index) => {
        if (index === 20) return { 'input.value': 'c'.repeat(50_000) }; // ~100 KB as items: fits once cut to a quarter
        if (index === 120) return { 'input.value': 'h'.repeat(3_000_000), marker: 'HOPELESS' };
        return { 'input.value': `question ${index} `.repeat(30) };
      },
      drops: { too_large: 1 },
    });
    expect(stored.has(emitted[20]!.spanId)).toBe(true);
    expect(stored.has(emitted[120]!.spanId)).toBe(false);
    expect(proxy!.requests.some((request) => request.body.length > LIMIT)).toBe(true); // the fault did fire
  });

  it('isolates the poisoned items of a batch (400 and 422), delivering the rest', async () => {
    await faultProxy((request) => {
      if (request.body.includes('POISON-400')) return { kind: 'status', status: 400, body: { reason: 'poisoned item' } };
      if (request.body.includes('POISON-422')) {
        return { kind: 'status', status: 422, body: { detail: [{ type: 'value_error', loc: ['body', 'batch', 0], msg: 'bad', input: null }] } };
      }
      return { kind: 'proxy' };
    });
    const { emitted, stored } = await deliverThroughProxy(200, {
      attributes: (index) => (index === 17 ? { note: 'POISON-400' } : index === 163 ? { note: 'POISON-422' } : {}),
      drops: { rejected: 2 },
    });
    expect(stored.has(emitted[17]!.spanId) || stored.has(emitted[163]!.spanId)).toBe(false);
  });
});

describe('bounded memory during a long outage (SPEC §4.3)', () => {
  it('keeps queued bytes under maxQueueBytes, counts queue_full, keeps the heap flat, then delivers what it kept', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const MAX_QUEUE_BYTES = 2 * 1024 * 1024;
    let outage = true;
    await faultProxy(() => (outage ? { kind: 'status', status: 503 } : { kind: 'proxy' }));
    const exporter = exporterFor(proxy!.url, { maxQueueBytes: MAX_QUEUE_BYTES, maxBatchItems: 200 });
    const provider = providerFor(exporter, 'simple');

    let peakQueuedBytes = 0;
    const sample = (): void => {
      peakQueuedBytes = Math.max(peakQueuedBytes, exporter.stats().queuedBytes);
    };
    const sampler = setInterval(sample, 5);
    const padding = (index: number) => ({ 'input.value': `outage span ${index} `.repeat(60) }); // ~1.2 KB each
    const emitted: EmittedSpan[] = [];
    const emitRound = (count: number): void => {
      for (let done = 0; done < count; done += 100) {
        emitted.push(...emitSpans(provider, 100, padding));
        sample();
      }
    };

    // First fill the queue to its bound, then keep producing ten times as much.
    emitRound(3_000);
    gc();
    const heapAtBound = process.memoryUsage().heapUsed;
    let peakHeap = heapAtBound;
    for (let round = 0; round < 10; round += 1) {
      emitRound(3_000);
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
    }
    clearInterval(sampler);
    const duringOutage = exporter.stats();
    expect(peakQueuedBytes).toBeGreaterThan(MAX_QUEUE_BYTES / 2);
    expect(peakQueuedBytes).toBeLessThanOrEqual(MAX_QUEUE_BYTES);
    expect(duringOutage.dropped.queue_full).toBeGreaterThan(emitted.length / 2);
    expect(duringOutage.delivered).toBe(0);
    // 33 000 spans of ~1.2 KB (40 MB of JSON) went through; what stays is bounded by the queue.
    expect(peakHeap - heapAtBound).toBeLessThan(16 * 1024 * 1024);
    if (process.env.CALLBRIDGE_RELIABILITY_FIGURES) {
      console.info(
        `outage: sent=${emitted.length} queue_full=${duringOutage.dropped.queue_full} peakQueuedBytes=${peakQueuedBytes} ` +
          `heapAtBound=${heapAtBound} peakHeap=${peakHeap} rss=${process.memoryUsage().rss}`,
      );
    }

    outage = false;
    await exporter.forceFlush();
    await expectAccounted(exporter, emitted, { queue_full: duringOutage.dropped.queue_full });
    await provider.shutdown();
  }, 60_000);
});
