/**
 * The exporter's delivery guarantees over real HTTP (SPEC §4): real SDK spans, the real
 * transport, a scripted fault proxy in front of the real local server, and the database read back
 * through `/calls/stream_query` to prove every span arrived exactly once.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { settleWithin } from '../../src/batcher/batcher.js';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { flushBeforeExit } from '../../src/exporter/exporter.js';
import { InvalidOptionError } from '../../src/errors.js';
import type { ExporterOptions } from '../../src/options.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls, startFaultProxy, type FaultAction, type FaultProxy, type ProxiedRequest } from './fault-proxy.js';
import { emitSpans, endedSpans, providerFor } from './spans.js';
import { flushAll, testExporter } from './test-exporter.js';

const PROJECT = 'acme/delivery';
let server: TestServer;
let proxy: FaultProxy | undefined;
let errors: string[];

beforeEach(async () => {
  server = await startTestServer();
  errors = [];
  diag.setLogger(
    { error: (message) => errors.push(message), warn: () => {}, info: () => {}, debug: () => {}, verbose: () => {} },
    DiagLogLevel.ERROR,
  );
});

afterEach(async () => {
  diag.disable();
  await proxy?.close();
  proxy = undefined;
  await server.close();
});

/** From now on, the `diag` warnings (in place of the errors-only logger every test starts with). */
function captureWarnings(): string[] {
  const warnings: string[] = [];
  diag.disable();
  diag.setLogger({ error: () => {}, warn: (message) => warnings.push(message), info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.WARN);
  return warnings;
}

function exporterFor(url: string, options: ExporterOptions = {}): CallbridgeExporter {
  return testExporter(server, PROJECT, url, { maxRetryMs: 20_000, ...options });
}

async function proxied(script: (request: ProxiedRequest) => FaultAction, early413OverBytes?: number): Promise<FaultProxy> {
  proxy = await startFaultProxy({ upstream: server.url, script, early413OverBytes });
  return proxy;
}

async function storedIds(): Promise<string[]> {
  return (await readAllCalls(server.url, PROJECT, server)).map((call) => call.id as string);
}

describe('delivery through faults (SPEC §4.5, §4.10)', () => {
  it('rides out 503 runs, 429 + Retry-After, resets, hangs and 502s: every span stored exactly once', async () => {
    const faults: FaultAction[] = [
      { kind: 'status', status: 503 },
      { kind: 'status', status: 503 },
      { kind: 'status', status: 503 },
      { kind: 'status', status: 429, headers: { 'retry-after': '1' } },
      { kind: 'reset' },
      { kind: 'hang' },
      { kind: 'status', status: 502 },
    ];
    const { url } = await proxied((request) => faults[request.index] ?? { kind: 'proxy' });
    const exporter = exporterFor(url, { maxBatchItems: 100, concurrency: 2 });
    const provider = providerFor(exporter);
    const emitted = emitSpans(provider, 300);
    await flushAll(provider, exporter);
    const stats = exporter.stats();
    expect(stats).toMatchObject({ delivered: 300, queued: 0, inFlight: 0 });
    expect(Object.values(stats.dropped).every((count) => count === 0)).toBe(true);
    expect(stats.retried).toBeGreaterThanOrEqual(faults.length);
    const ids = await storedIds();
    expect(ids).toHaveLength(300);
    expect(new Set(ids)).toEqual(new Set(emitted.map((span) => span.spanId)));
    await provider.shutdown();
  });

  it('gives up after maxRetryMs on a server that stays down, counting retries_exhausted', async () => {
    const { url } = await proxied(() => ({ kind: 'status', status: 503 }));
    const exporter = exporterFor(url, { maxRetryMs: 300 });
    const provider = providerFor(exporter);
    emitSpans(provider, 20);
    await flushAll(provider, exporter);
    expect(exporter.stats()).toMatchObject({ delivered: 0, dropped: { retries_exhausted: 20 } });
    await provider.shutdown();
  });
});

describe('bounded memory (SPEC §4.3)', () => {
  for (const deliveryThread of ['main', 'worker'] as const) {
    it(`${deliveryThread} thread: a span whose names are numbers (plain JS) leaves the bound in force`, async () => {
      const { url } = await proxied(() => ({ kind: 'status', status: 503 }));
      const maxQueueBytes = 200_000;
      const exporter = exporterFor(url, { deliveryThread, maxQueueBytes, backpressureMs: 0, shutdownTimeoutMs: 200 });
      const provider = providerFor(exporter, 'simple');
      // The SDK keeps both as numbers; the size guess once became NaN, and the held bytes with it.
      const numeric = provider.getTracer('plain-js').startSpan(404 as unknown as string);
      numeric.addEvent(1 as unknown as string);
      numeric.end();
      // About 3.5 KB each: 200 of them are over three times the bound.
      emitSpans(provider, 200, () => ({ 'input.value': 'x'.repeat(1000) }));
      const stats = exporter.stats();
      expect(Number.isFinite(stats.queuedBytes)).toBe(true);
      expect(stats.queuedBytes).toBeLessThanOrEqual(maxQueueBytes);
      expect(stats.dropped.queue_full).toBeGreaterThan(0);
      await provider.shutdown();
      const final = exporter.stats();
      expect(final.dropped.queue_full + final.dropped.shutdown).toBe(201);
    });

    it(`${deliveryThread} thread: one span guessed larger than the whole bound is cut to a batch and delivered, not dropped`, async () => {
      const exporter = exporterFor(server.url, { deliveryThread, maxQueueBytes: 1024 * 1024, maxBatchBytes: 256 * 1024 });
      const provider = providerFor(exporter, 'simple');
      // Its guess (attribute values count twice) is ~1.4 MB; once cut, it takes at most a batch.
      const [big] = emitSpans(provider, 1, () => ({ 'input.value': 'y'.repeat(700_000) }));
      await flushAll(provider, exporter);
      expect(exporter.stats()).toMatchObject({ delivered: 1, dropped: { queue_full: 0, too_large: 0 } });
      const calls = await readAllCalls(server.url, PROJECT, server);
      const call = calls.find((candidate) => candidate.id === big!.spanId);
      expect(JSON.stringify(call?.inputs)).toMatch(/…\[truncated \d+ bytes\]/);
      await provider.shutdown();
    });
  }
});

describe('413 (SPEC §4.6)', () => {
  it('splits on an early 413, cuts one oversized span, drops a hopeless one; all others stored once', async () => {
    // Hopeless: refused whatever its size (cut to the size the batcher learns, it would fit).
    const { url } = await proxied(
      (request) => (request.body.includes('HOPELESS') ? { kind: 'status', status: 413, body: { reason: 'Request too large' } } : { kind: 'proxy' }),
      60_000,
    );
    const exporter = exporterFor(url);
    const provider = providerFor(exporter);
    const emitted = emitSpans(provider, 200, (index) => {
      if (index === 50) return { 'input.value': 'g'.repeat(100_000) };
      if (index === 150) return { 'input.value': 'h'.repeat(2_000_000), marker: 'HOPELESS' };
      return { 'input.value': `question ${index} `.repeat(20) };
    });
    await flushAll(provider, exporter);
    expect(proxy!.earlyRejections).toBeGreaterThan(0);
    expect(exporter.stats()).toMatchObject({ delivered: 199, dropped: { too_large: 1 } });
    const calls = await readAllCalls(server.url, PROJECT, server);
    expect(calls).toHaveLength(199);
    const cut = calls.find((call) => call.id === emitted[50]!.spanId)!;
    expect(JSON.stringify(cut.inputs)).toMatch(/…\[truncated \d+ bytes\]/);
    expect(calls.some((call) => call.id === emitted[150]!.spanId)).toBe(false);
    await provider.shutdown();
  });
});

describe('a proxy in front with a body limit below maxBatchBytes (nginx: 1 MiB by default)', () => {
  it.each(['main', 'worker'] as const)('costs splits for the first batch only: later batches are built to fit (%s thread)', async (deliveryThread) => {
    // Refused once read, as nginx does (it reads on after its early answer, so the client sees it).
    let refused = 0;
    const { url } = await proxied((request) => {
      if (request.body.length <= 100_000) return { kind: 'proxy' };
      refused += 1;
      return { kind: 'status', status: 413, body: { reason: 'Request Entity Too Large' } };
    });
    const exporter = exporterFor(url, { maxBatchItems: 1000, deliveryThread });
    const provider = providerFor(exporter);
    const first = emitSpans(provider, 300, (index) => ({ 'input.value': `question ${index} `.repeat(20) }));
    await flushAll(provider, exporter);
    const refusedAtFirst = refused;
    expect(refusedAtFirst).toBeGreaterThan(0);
    const later = emitSpans(provider, 600, (index) => ({ 'input.value': `question ${index} `.repeat(20) }));
    await flushAll(provider, exporter);
    expect(refused).toBe(refusedAtFirst);
    expect(exporter.stats()).toMatchObject({ delivered: 900, dropped: { too_large: 0 } });
    expect(new Set(await storedIds())).toEqual(new Set([...first, ...later].map((span) => span.spanId)));
    await provider.shutdown();
  });
});

describe('400 isolation (SPEC §4.7)', () => {
  it('delivers everything but the poisoned span, dropped as rejected', async () => {
    const { url } = await proxied((request) =>
      request.body.includes('POISON')
        ? { kind: 'status', status: 400, body: { reason: 'poisoned item' } }
        : { kind: 'proxy' },
    );
    const exporter = exporterFor(url);
    const provider = providerFor(exporter);
    const emitted = emitSpans(provider, 100, (index) => (index === 37 ? { note: 'POISON' } : {}));
    await flushAll(provider, exporter);
    expect(exporter.stats()).toMatchObject({ delivered: 99, dropped: { rejected: 1 } });
    const ids = new Set(await storedIds());
    expect(ids.size).toBe(99);
    expect(ids.has(emitted[37]!.spanId)).toBe(false);
    await provider.shutdown();
  });
});

describe('401/403 (SPEC §4.8)', () => {
  it('drops as auth without retrying and logs one error naming the URL and user', async () => {
    const exporter = exporterFor(server.url, { password: 'wrong', maxBatchItems: 10 });
    const provider = providerFor(exporter);
    emitSpans(provider, 50);
    await flushAll(provider, exporter);
    expect(exporter.stats()).toMatchObject({ delivered: 0, retried: 0, dropped: { auth: 50 } });
    const authErrors = errors.filter((message) => message.includes('refused the credentials'));
    expect(authErrors).toHaveLength(1);
    expect(authErrors[0]).toContain(server.url);
    expect(authErrors[0]).toContain('"dev"');
    await provider.shutdown();
  });

  it('says that no username is set, and where to set credentials, when none are', async () => {
    const anonymous = new CallbridgeExporter({ baseUrl: server.url, projectId: PROJECT, username: '', password: '', deliveryThread: 'main' });
    const provider = providerFor(anonymous);
    emitSpans(provider, 3);
    await flushAll(provider, anonymous);
    expect(anonymous.stats()).toMatchObject({ delivered: 0, dropped: { auth: 3 } });
    expect(errors).toEqual([expect.stringMatching(new RegExp(`^callbridge: ${server.url} needs credentials and no username is set \\(HTTP 401\\): set the username/password or apiKey options, or CALLBRIDGE_USERNAME/CALLBRIDGE_PASSWORD or CALLBRIDGE_API_KEY`))]);
    await provider.shutdown();
  });

  it('drops as auth on 403 (entity not granted)', async () => {
    const restricted = await startTestServer({ users: [{ username: 'guest', password: 'pw2', entities: ['other'] }] });
    try {
      const guest = new CallbridgeExporter({ baseUrl: restricted.url, projectId: PROJECT, username: 'guest', password: 'pw2' });
      const provider = providerFor(guest);
      emitSpans(provider, 5);
      await flushAll(provider, guest);
      expect(guest.stats()).toMatchObject({ delivered: 0, dropped: { auth: 5 } });
      expect(errors).toEqual([
        `callbridge: ${restricted.url} denied user "guest" access to project ${PROJECT} (HTTP 403); spans are dropped as auth until the user is granted the project's entity`,
      ]);
      await provider.shutdown();
    } finally {
      await restricted.close();
    }
  });
});

describe('complete mode (SPEC §4.9)', () => {
  it('switches to /v2/{entity}/{project}/calls/complete and stores every span', async () => {
    await server.close();
    server = await startTestServer({ completeMode: true });
    const { url } = await proxied(() => ({ kind: 'proxy' }));
    const exporter = exporterFor(url, { maxBatchItems: 40 });
    const provider = providerFor(exporter);
    const first = emitSpans(provider, 30);
    await flushAll(provider, exporter);
    const second = emitSpans(provider, 50);
    await flushAll(provider, exporter);
    const paths = proxy!.requests.map((request) => request.path);
    // Batches already in flight when the first answer came are refused too; after the switch, only v2.
    const firstComplete = paths.indexOf('/v2/acme/delivery/calls/complete');
    expect(firstComplete).toBeGreaterThan(0);
    expect(paths.slice(0, firstComplete).every((path) => path === '/call/upsert_batch')).toBe(true);
    expect(paths.slice(firstComplete).every((path) => path === '/v2/acme/delivery/calls/complete')).toBe(true);
    expect(exporter.stats()).toMatchObject({ delivered: 80, dropped: { rejected: 0 } });
    const calls = await readAllCalls(server.url, PROJECT, server);
    expect(new Set(calls.map((call) => call.id))).toEqual(new Set([...first, ...second].map((span) => span.spanId)));
    expect(calls.every((call) => typeof call.ended_at === 'string')).toBe(true);
    await provider.shutdown();
  });
});

describe('the SpanExporter contract (SPEC §1, §4.11)', () => {
  it('works behind SimpleSpanProcessor', async () => {
    const exporter = exporterFor(server.url);
    const provider = providerFor(exporter, 'simple');
    const emitted = emitSpans(provider, 25);
    await flushAll(provider, exporter);
    expect(new Set(await storedIds())).toEqual(new Set(emitted.map((span) => span.spanId)));
    await provider.shutdown();
  });

  it('answers FAILED after shutdown and counts the spans as shutdown drops; shutdown is idempotent', async () => {
    const exporter = exporterFor(server.url);
    const provider = providerFor(exporter);
    emitSpans(provider, 3);
    await flushAll(provider, exporter);
    await Promise.all([exporter.shutdown(), exporter.shutdown()]);
    const result = await new Promise<ExportResult>((resolve) => exporter.export(endedSpans(2), resolve));
    expect(result.code).toBe(ExportResultCode.FAILED);
    expect(exporter.stats()).toMatchObject({ delivered: 3, dropped: { shutdown: 2 } });
    await exporter.shutdown();
  });

  for (const deliveryThread of ['main', 'worker'] as const) {
    it(`${deliveryThread} thread: settles an undefined span (export([undefined]) from plain JS) like any other`, async () => {
      const exporter = exporterFor(server.url, { deliveryThread });
      exporter.export([undefined as unknown as ReadableSpan, ...endedSpans(2)], () => {});
      expect(await settleWithin(exporter.forceFlush(), 10_000)).toBe(true);
      expect(exporter.stats()).toMatchObject({ delivered: 2, queued: 0, inFlight: 0, queuedBytes: 0, dropped: { rejected: 1 } });
      await exporter.shutdown();
    });
  }

  it('bounds shutdown by shutdownTimeoutMs when the service hangs, dropping what is left as shutdown', async () => {
    const { url } = await proxied(() => ({ kind: 'hang' }));
    const exporter = exporterFor(url, { requestTimeoutMs: 60_000, shutdownTimeoutMs: 200 });
    const provider = providerFor(exporter);
    emitSpans(provider, 40);
        await provider.shutdown();
    const stats = exporter.stats();
    expect(stats.dropped.shutdown).toBe(40);
    expect(stats).toMatchObject({ delivered: 0, inFlight: 0, queued: 0 });
  }, 40_000);

  for (const deliveryThread of ['main', 'worker'] as const) {
    it(`exit flush (${deliveryThread} thread): counts what is still in backoff at its deadline, though the flush it was given ended first`, async () => {
      // The SDK ends a provider's flush at its own timeout, which can pass before ours: a flush
      // that returns at once stands for it. The span is then still in a 10 s backoff.
      const { url } = await proxied(() => ({ kind: 'status', status: 503, headers: { 'retry-after': '10' } }));
      const warnings = captureWarnings();
      const exporter = exporterFor(url, { deliveryThread, shutdownTimeoutMs: 300 });
      const provider = providerFor(exporter, 'simple');
      emitSpans(provider, 1);
      await vi.waitFor(() => expect(proxy!.requests.length).toBe(1), { timeout: 10_000 });
      await flushBeforeExit(exporter, async () => {});
      expect(exporter.stats()).toMatchObject({ delivered: 0, inFlight: 0, queued: 0, dropped: { shutdown: 1 } });
      // The outage when it began (once), then the drop with the failure that caused it.
      expect(warnings).toEqual([
        `callbridge: ${url} did not take a batch (HTTP 503: scripted 503); retrying with backoff, each batch for up to 20000 ms`,
        'callbridge: dropped spans: shutdown=1 (last: the shutdown timeout passed while retrying (last failure: HTTP 503: scripted 503))',
      ]);
    }, 20_000);
  }

  it('sends a batch answered 404 (a baseUrl with a wrong path) once, not in halves, and says so once with the URL', async () => {
    const { url } = await proxied(() => ({ kind: 'status', status: 404 }));
    const exporter = exporterFor(`${url}/traces`, { deliveryThread: 'main' });
    const provider = providerFor(exporter);
    emitSpans(provider, 40);
    await flushAll(provider, exporter);
    emitSpans(provider, 10);
    await flushAll(provider, exporter);
    expect(exporter.stats()).toMatchObject({ delivered: 0, dropped: { rejected: 50 } });
    expect(proxy!.requests.length).toBe(2);
    expect(errors).toEqual([
      `callbridge: POST ${url}/traces/call/upsert_batch answered HTTP 404 (scripted 404): is baseUrl the root URL of the service (no path after it)?; its spans are dropped as rejected`,
    ]);
    await exporter.shutdown();
  });

  it('reports a failing service at most once per interval, however failures and successes alternate', async () => {
    // Every other request is refused with a 429 whose Retry-After is 0: each batch fails once, then gets through.
    let seen = 0;
    const { url } = await proxied(() => (seen++ % 2 === 0 ? { kind: 'status', status: 429, headers: { 'retry-after': '0' } } : { kind: 'proxy' }));
    const warnings = captureWarnings();
    const exporter = exporterFor(url, { deliveryThread: 'main', maxBatchItems: 2, concurrency: 1 });
    const provider = providerFor(exporter);
    emitSpans(provider, 20);
    await flushAll(provider, exporter);
    expect(exporter.stats()).toMatchObject({ delivered: 20 });
    expect(exporter.stats().retried).toBeGreaterThanOrEqual(5);
    expect(warnings.filter((line) => line.includes('did not take a batch'))).toHaveLength(1);
    await exporter.shutdown();
  });

  it('reports drops when a flush is done, not only at the next interval', async () => {
    const warnings = captureWarnings();
    // Room for about one span: the rest of the burst is dropped as queue_full.
    const exporter = exporterFor(server.url, { maxQueueBytes: 4096, deliveryThread: 'main' });
    const provider = providerFor(exporter, 'simple');
    emitSpans(provider, 20);
    await exporter.forceFlush();
    const dropped = exporter.stats().dropped.queue_full;
    expect(dropped).toBeGreaterThan(0);
    expect(warnings).toEqual([expect.stringMatching(new RegExp(`^callbridge: dropped spans: queue_full=${dropped}\\b`))]);
    // More drops and another flush within the interval: no second report yet (an app that flushes
    // per request must not log per request); shutdown reports what is left.
    emitSpans(provider, 20);
    await exporter.forceFlush();
    expect(exporter.stats().dropped.queue_full).toBeGreaterThan(dropped);
    expect(warnings).toHaveLength(1);
    await exporter.shutdown();
    expect(warnings).toEqual([warnings[0], expect.stringMatching(/^callbridge: dropped spans: queue_full=\d+/)]);
  });

  it('rejects bad options at construction with InvalidOptionError', () => {
    expect(() => new CallbridgeExporter({ baseUrl: server.url, projectId: 'no-slash' })).toThrow(InvalidOptionError);
    expect(() => new CallbridgeExporter({ projectId: PROJECT, maxBatchBytes: 64 * 1024 * 1024 })).toThrow(/maxBatchBytes/);
    expect(() => new CallbridgeExporter({ projectId: PROJECT, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => new CallbridgeExporter({ projectId: PROJECT, baseUrl: 'ftp://x' })).toThrow(/baseUrl/);
  });
});
