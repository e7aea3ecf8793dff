/**
 * Delivery on the exporter's worker thread (`deliveryThread: 'worker'`, the default on two or more
 * cores), against the real local server: the calls are the ones main-thread delivery makes, the
 * counters are exact after a flush, the queue bound holds on the application's side, hostile
 * attribute values cross the thread boundary, and a worker that cannot start or dies loses nothing
 * silently. The worker script is the built `dist/export-worker.js` (npm test builds first).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { copyFile, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { diag, DiagLogLevel, SpanStatusCode, type DiagLogger } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createBatcher } from '../../src/batcher/index.js';
import { createTransport } from '../../src/client/transport.js';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { createSpanCodec } from '../../src/exporter/span-codec.js';
import { WorkerDelivery } from '../../src/exporter/worker-delivery.js';
import { findWorkerScript } from '../../src/exporter/worker-script.js';
import { InvalidOptionError } from '../../src/errors.js';
import { resolveExporterOptions, type ExporterOptions } from '../../src/options.js';
import { killSpawned, listeningUrl, spawnNode } from '../helpers/node-process.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';
import { emitSpans, providerFor } from './spans.js';
import { flushAll } from './test-exporter.js';

let server: TestServer;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  expect(findWorkerScript(), 'dist/export-worker.js is missing: run the build first (npm test does)').toBeDefined();
  server = await startTestServer();
});
afterAll(() => server.close());
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  diag.disable();
  killSpawned();
});

function exporterFor(projectId: string, options: ExporterOptions = {}): CallbridgeExporter {
  const exporter = new CallbridgeExporter({
    baseUrl: server.url,
    projectId,
    username: server.username,
    password: server.password,
    deliveryThread: 'worker',
    ...options,
  });
  cleanups.push(() => exporter.shutdown());
  return exporter;
}

/** A span processor that hands each ended span straight to `add` (as register()'s `direct` does). */
function directTo(add: (span: ReadableSpan) => void): SpanProcessor {
  return {
    onStart: () => {},
    onEnd: add,
    forceFlush: async () => {},
    shutdown: async () => {},
  };
}

/** Spans that use every part of the mapping: events, links, trace state, an error, a resource. */
function emitVariedSpans(processor: SpanProcessor, count: number): void {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'worker-test', 'deployment.environment': 'test' }),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('varied', '2.1.0');
  const linked = tracer.startSpan('linked');
  linked.end();
  for (let i = 0; i < count; i++) {
    const span = tracer.startSpan(`op-${i % 7}`, {
      attributes: {
        'gen_ai.system': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': i + 1,
        'input.value': JSON.stringify({ question: `q${i}`, list: [1, 2, 3] }),
        'output.value': `answer ${i} ✓`,
        'tags.list': ['a', 'b'],
        'flag.on': i % 2 === 0,
      },
      links: [
        {
          context: { ...linked.spanContext(), traceState: new TraceState('vendor=x') },
          attributes: { 'link.kind': 'follows' },
        },
      ],
    });
    span.addEvent('step', { 'step.index': i });
    if (i % 5 === 0) span.setStatus({ code: SpanStatusCode.ERROR, message: `failed ${i}` });
    span.end();
  }
}

/** A thread's nice value: field 19 of /proc/self/task/<tid>/stat, counted after the `(name)`. */
async function niceOfThread(tid: string): Promise<number> {
  const stat = await readFile(`/proc/self/task/${tid}/stat`, 'utf8').catch(() => '');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

/** How many threads this process has (Linux); elsewhere 0, which compares equal to itself. */
async function threadsOfThisProcess(): Promise<number> {
  return process.platform === 'linux' ? (await readdir('/proc/self/task')).length : 0;
}

async function threadsWithNice(nice: number): Promise<number> {
  const nices = await Promise.all((await readdir('/proc/self/task')).map(niceOfThread));
  return nices.filter((value) => value === nice).length;
}

/** A call as it reads back, without what differs between two projects. */
function comparable(call: Record<string, any>): Record<string, any> {
  const { project_id: _project, ...rest } = call;
  return rest;
}

describe('deliveryThread: worker', () => {
  it('stores the same calls as main-thread delivery, and its counters are exact after a flush', async () => {
    const viaWorker = exporterFor('acme/worker-same', { deliveryThread: 'worker' });
    const viaMain = exporterFor('acme/main-same', { deliveryThread: 'main' });
    emitVariedSpans(
      directTo((span) => {
        viaWorker.export([span], () => {});
        viaMain.export([span], () => {});
      }),
      120,
    );
    await Promise.all([viaWorker.forceFlush(), viaMain.forceFlush()]);

    expect(viaWorker.stats()).toMatchObject({ delivered: 121, queued: 0, queuedBytes: 0, inFlight: 0 });
    expect(Object.values(viaWorker.stats().dropped).every((count) => count === 0)).toBe(true);
    const credentials = { username: server.username, password: server.password };
    const fromWorker = (await readAllCalls(server.url, 'acme/worker-same', credentials)).map(comparable);
    const fromMain = (await readAllCalls(server.url, 'acme/main-same', credentials)).map(comparable);
    expect(fromWorker).toHaveLength(121);
    const byId = (calls: Array<Record<string, any>>) => [...calls].sort((a, b) => String(a.id).localeCompare(String(b.id)));
    expect(byId(fromWorker)).toEqual(byId(fromMain));
    const failed = fromWorker.find((call) => call.op_name === 'op-0');
    expect(failed?.exception).toBe('failed 0');
    expect(failed?.attributes).toMatchObject({ system: 'openai', model: 'gpt-4o' });
  });

  it('delivers thousands of SDK spans behind BatchSpanProcessor, each once', async () => {
    const exporter = exporterFor('acme/worker-many');
    const provider = providerFor(exporter);
    cleanups.push(() => provider.shutdown());
    const emitted = emitSpans(provider, 3000, (i) => ({ 'output.value': `out ${i}` }));
    await flushAll(provider, exporter);
    const calls = await readAllCalls(server.url, 'acme/worker-many', { username: 'dev', password: 'pw' });
    expect(new Set(calls.map((call) => call.id)).size).toBe(3000);
    expect(new Set(calls.map((call) => call.id))).toEqual(new Set(emitted.map((span) => span.spanId)));
    expect(exporter.stats()).toMatchObject({ delivered: 3000, queued: 0, inFlight: 0, queuedBytes: 0 });
  });

  it('bounds memory on the application thread: a burst past maxQueueBytes is dropped and counted', async () => {
    const maxQueueBytes = 256 * 1024;
    const exporter = exporterFor('acme/worker-bound', { maxQueueBytes });
    let peakQueuedBytes = 0;
    emitVariedSpans(
      directTo((span) => {
        exporter.export([span], () => {});
        peakQueuedBytes = Math.max(peakQueuedBytes, exporter.stats().queuedBytes);
      }),
      2000,
    );
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(peakQueuedBytes).toBeLessThanOrEqual(maxQueueBytes);
    expect(stats.dropped.queue_full).toBeGreaterThan(0);
    expect(stats.delivered + stats.dropped.queue_full).toBe(2001);
    const calls = await readAllCalls(server.url, 'acme/worker-bound', { username: 'dev', password: 'pw' });
    expect(calls).toHaveLength(stats.delivered);
  });

  it('copies attribute values the structured clone refuses as text, like the mapping writes them', async () => {
    const exporter = exporterFor('acme/worker-hostile');
    const provider = new BasicTracerProvider({
      spanProcessors: [
        directTo((span) => {
          // An instrumentation that writes into the attributes object behind the SDK's checks.
          const attributes = span.attributes as Record<string, unknown>;
          attributes['hostile.fn'] = function secret() {};
          attributes['hostile.big'] = 12345678901234567890n;
          exporter.export([span], () => {});
        }),
      ],
    });
    const span = provider.getTracer('t').startSpan('hostile', { attributes: { 'plain.value': 'kept' } });
    span.end();
    await exporter.forceFlush();
    expect(exporter.stats().delivered).toBe(1);
    const [call] = await readAllCalls(server.url, 'acme/worker-hostile', { username: 'dev', password: 'pw' });
    expect(call?.attributes).toMatchObject({ plain: { value: 'kept' }, hostile: { big: '12345678901234567890' } });
    expect(String(call?.attributes.hostile.fn)).toContain('secret');
  });

  it('copies as text only the span the clone refuses, not its neighbours in the same message', async () => {
    const viaWorker = exporterFor('acme/worker-neighbour', { deliveryThread: 'worker' });
    const viaMain = exporterFor('acme/main-neighbour', { deliveryThread: 'main' });
    const tracer = new BasicTracerProvider({
      spanProcessors: [
        directTo((span) => {
          viaMain.export([span], () => {});
          // An instrumentation that put a function into the second span's attributes.
          if (span.name === 'hostile') (span.attributes as Record<string, unknown>)['hostile.fn'] = () => 1;
        }),
      ],
    }).getTracer('t');
    const plain = tracer.startSpan('plain', { attributes: { score: Number.NaN, loss: Number.NEGATIVE_INFINITY } });
    plain.end();
    const hostile = tracer.startSpan('hostile');
    hostile.end();
    // One export, so one message to the worker, which the clone refuses as a whole.
    viaWorker.export([plain as unknown as ReadableSpan, hostile as unknown as ReadableSpan], () => {});
    await Promise.all([viaWorker.forceFlush(), viaMain.forceFlush()]);
    expect(viaWorker.stats()).toMatchObject({ delivered: 2 });
    const credentials = { username: server.username, password: server.password };
    const plainCall = async (projectId: string) =>
      comparable((await readAllCalls(server.url, projectId, credentials)).find((call) => call.op_name === 'plain')!);
    expect(await plainCall('acme/worker-neighbour')).toEqual(await plainCall('acme/main-neighbour'));
  });

  it("forwards the worker's diag lines to the application's logger (one clear error on 401)", async () => {
    const lines: string[] = [];
    const record = (message: string) => lines.push(message);
    const logger: DiagLogger = { error: record, warn: record, info: record, debug: () => {}, verbose: () => {} };
    diag.setLogger(logger, DiagLogLevel.INFO);
    const exporter = exporterFor('acme/worker-auth', { password: 'wrong' });
    emitVariedSpans(directTo((span) => exporter.export([span], () => {})), 3);
    await exporter.forceFlush();
    expect(exporter.stats().dropped.auth).toBe(4);
    expect(lines.some((line) => line.includes(server.url) && line.includes('dev'))).toBe(true);
  });

  it('answers FAILED after shutdown and counts those spans; shutdown is idempotent', async () => {
    const exporter = exporterFor('acme/worker-closed');
    const tracer = new BasicTracerProvider({ spanProcessors: [directTo((span) => exporter.export([span], () => {}))] }).getTracer('t');
    tracer.startSpan('before').end();
    const first = exporter.shutdown();
    expect(exporter.shutdown()).toBe(first);
    await first;
    const results: number[] = [];
    const late = new BasicTracerProvider().getTracer('t').startSpan('late');
    late.end();
    exporter.export([late as unknown as ReadableSpan], (result) => results.push(result.code));
    expect(results).toEqual([1]);
    expect(exporter.stats()).toMatchObject({ delivered: 1, dropped: { shutdown: 1 } });
  });

  it.runIf(process.platform === 'linux')('runs the worker below the priority of the application thread (nice +10)', async () => {
    const before = await threadsWithNice(10);
    const exporter = exporterFor('acme/worker-nice');
    emitVariedSpans(directTo((span) => exporter.export([span], () => {})), 1);
    await exporter.forceFlush();
    expect(await threadsWithNice(10)).toBe(before + 1);
    expect(await niceOfThread(String(process.pid))).toBe(0);
  });

  it('keeps delivering while the producer never lets the event loop turn (a loop of awaits without I/O)', async () => {
    // The service in a process of its own: one in this process would not answer while the loop
    // below starves it. Batches of 100 spans, so that the worker sends well within the bound.
    const cli = join(import.meta.dirname, '..', '..', 'dist', 'cli', 'main.js');
    const service = spawnNode([cli, 'serve', '--port', '0', '--db', ':memory:', '--user', 'dev:pw']);
    const url = await listeningUrl(service, /callbridge listening on (http:\/\/\S+)\n/);
    const exporter = exporterFor('acme/worker-starved', { baseUrl: url, username: 'dev', password: 'pw', maxQueueBytes: 4 * 1024 * 1024, maxBatchItems: 100 });
    const processor = directTo((span) => exporter.export([span], () => {}));
    const provider = new BasicTracerProvider({ spanProcessors: [processor] });
    const tracer = provider.getTracer('starved');
    const prompt = 'p'.repeat(500);
    // Microtasks only, as in an evaluation loop whose scorer does no I/O: ~7 MB of spans (as
    // counted against the bound) for a 4 MiB bound, made slower than the worker delivers them
    // even while other test files hold the cores (~500 µs of work each). The first spans start the
    // worker: it is started, and its `ready` read, from inside the loop.
    for (let i = 0; i < 3000; i++) {
      const span = tracer.startSpan('score', { attributes: { 'input.value': prompt, 'output.value': i } });
      for (const until = performance.now() + 0.5; performance.now() < until; );
      span.end();
      await Promise.resolve();
    }
    const deliveredDuringLoop = exporter.stats().delivered;
    await exporter.forceFlush();
    // Before, nothing was posted or acknowledged until the loop ended: 1176 were dropped as
    // queue_full. Now none on an idle machine; a few at most while other tests hold the cores.
    const { delivered, dropped } = exporter.stats();
    expect(delivered + dropped.queue_full).toBe(3000);
    expect(deliveredDuringLoop).toBeGreaterThan(0);
    expect(dropped.queue_full).toBeLessThan(150);
  });

  it('after shutdown, a flush starts no worker and keeps the counters', async () => {
    const exporter = exporterFor('acme/worker-after-shutdown');
    emitVariedSpans(directTo((span) => exporter.export([span], () => {})), 2);
    await exporter.forceFlush();
    await exporter.shutdown();
    const before = await threadsOfThisProcess();
    await exporter.forceFlush();
    expect(exporter.stats()).toMatchObject({ delivered: 3, queued: 0 });
    expect(await threadsOfThisProcess()).toBe(before);
  });

  it('rejects an unknown deliveryThread at construction', () => {
    expect(() => exporterFor('acme/x', { deliveryThread: 'gpu' as 'main' })).toThrow(InvalidOptionError);
    expect(() => exporterFor('acme/x', { deliveryThread: 'gpu' as 'main' })).toThrow(/deliveryThread/);
  });
});

describe('a delivery worker that fails', () => {
  const fixture = (name: string) => pathToFileURL(join(import.meta.dirname, '..', 'fixtures', name));

  function deliveryWith(workerScript: URL, projectId: string, readyTimeoutMs?: number, extra: ExporterOptions = {}): WorkerDelivery {
    const options = resolveExporterOptions({ baseUrl: server.url, projectId, username: 'dev', password: 'pw', ...extra });
    const delivery = new WorkerDelivery({
      options,
      workerScript,
      createFallback: () => createBatcher({ ...options, transport: createTransport(options), codec: createSpanCodec(projectId) }),
      readyTimeoutMs,
    });
    cleanups.push(() => delivery.shutdown());
    return delivery;
  }

  function silenceDiag(): string[] {
    const errors: string[] = [];
    diag.setLogger({ error: (m) => errors.push(m), warn: () => {}, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.ERROR);
    return errors;
  }

  it('that cannot start: every span is delivered on the application thread instead', async () => {
    const errors = silenceDiag();
    const delivery = deliveryWith(fixture('worker-fails-to-load.mjs'), 'acme/worker-noload');
    emitVariedSpans(directTo((span) => delivery.add(span)), 40);
    await delivery.forceFlush();
    expect(delivery.stats()).toMatchObject({ delivered: 41, queued: 0, inFlight: 0 });
    const calls = await readAllCalls(server.url, 'acme/worker-noload', { username: 'dev', password: 'pw' });
    expect(calls).toHaveLength(41);
    expect(errors.filter((line) => line.includes('delivery worker'))).toHaveLength(1);
    expect(errors[0]).toMatch(/cannot start/);
  });

  it('that is still loading at exit: the exit flush delivers on the application thread without waiting', async () => {
    // A ready timeout far beyond the test's own: only delivery on this thread can end in time.
    const delivery = deliveryWith(fixture('worker-never-ready.mjs'), 'acme/worker-loading', 120_000);
    emitVariedSpans(directTo((span) => delivery.add(span)), 11);
    await new Promise((resolve) => setTimeout(resolve, 100)); // the worker has started meanwhile
    delivery.settleForExit();
    await delivery.forceFlush();
    expect(delivery.stats()).toMatchObject({ delivered: 12, queued: 0, inFlight: 0 });
    expect(await readAllCalls(server.url, 'acme/worker-loading', { username: 'dev', password: 'pw' })).toHaveLength(12);
  });

  it('that is never ready: given up after its ready timeout, like one that cannot start', async () => {
    const errors = silenceDiag();
    const delivery = deliveryWith(fixture('worker-never-ready.mjs'), 'acme/worker-never-ready', 300);
    emitVariedSpans(directTo((span) => delivery.add(span)), 7);
    await delivery.forceFlush(); // waits for `ready`, then for the delivery that replaces the worker
    expect(delivery.stats()).toMatchObject({ delivered: 8, queued: 0, dropped: { shutdown: 0 } });
    expect(errors.filter((line) => line.includes('delivery worker'))).toEqual([expect.stringMatching(/was not ready within 300 ms/)]);
  });

  it('that is still loading at exit: spans ended after the exit began and flushes already waiting do not wait for it', async () => {
    const delivery = deliveryWith(fixture('worker-never-ready.mjs'), 'acme/worker-loading-late', 120_000);
    emitVariedSpans(directTo((span) => delivery.add(span)), 3);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const waiting = delivery.forceFlush(); // waits for the worker, as any flush does
    delivery.settleForExit();
    await waiting;
    // As behind BatchSpanProcessor: its buffer reaches the exporter after the exit began.
    emitVariedSpans(directTo((span) => delivery.add(span)), 4);
    await delivery.forceFlush();
    expect(delivery.stats()).toMatchObject({ delivered: 9, queued: 0 });
  });

  it('keeps maxQueueBytes across what the exit flush moved here and the delivery that replaces the worker', async () => {
    const maxQueueBytes = 64 * 1024;
    const delivery = deliveryWith(fixture('worker-never-ready.mjs'), 'acme/worker-bound', 300, { maxQueueBytes });
    const errors = silenceDiag();
    emitVariedSpans(directTo((span) => delivery.add(span)), 59);
    await new Promise((resolve) => setTimeout(resolve, 100)); // the worker has started meanwhile
    delivery.settleForExit(); // what waits now waits for delivery on this thread
    await vi.waitFor(() => expect(errors.some((line) => /was not ready within 300 ms/.test(line))).toBe(true));
    emitVariedSpans(directTo((span) => delivery.add(span)), 199);
    expect(delivery.stats().queuedBytes).toBeLessThanOrEqual(maxQueueBytes);
    expect(delivery.stats().dropped.queue_full).toBeGreaterThan(0);
    await delivery.forceFlush();
  });

  it('that is still loading at shutdown: what waits is delivered here and the worker stopped', async () => {
    const delivery = deliveryWith(fixture('worker-never-ready.mjs'), 'acme/worker-loading-shutdown', 120_000);
    emitVariedSpans(directTo((span) => delivery.add(span)), 5);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await delivery.shutdown();
    expect(delivery.stats()).toMatchObject({ delivered: 6, queued: 0, dropped: { shutdown: 0 } });
  });

  it('that never answers: shutdown still ends after its timeout plus a grace, counting what it held', async () => {
    const delivery = deliveryWith(fixture('worker-never-answers.mjs'), 'acme/worker-wedged');
    emitVariedSpans(directTo((span) => delivery.add(span)), 14);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(delivery.stats()).toMatchObject({ queued: 15, delivered: 0 });
    const flushing = delivery.forceFlush(); // never answered by this worker
    await delivery.shutdown(100);
    await flushing; // ends with the shutdown that gave up on it
    expect(delivery.stats()).toMatchObject({ queued: 0, queuedBytes: 0, inFlight: 0, dropped: { shutdown: 15 } });
  });

  it('that dies holding spans: those count as shutdown drops, later spans are delivered', async () => {
    const errors = silenceDiag();
    const delivery = deliveryWith(fixture('worker-dies-after-ack.mjs'), 'acme/worker-dies');
    emitVariedSpans(directTo((span) => delivery.add(span)), 9);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(delivery.stats().dropped.shutdown).toBe(10);
    expect(errors.some((line) => /delivery worker .*stopped.*10 spans/.test(line))).toBe(true);

    emitVariedSpans(directTo((span) => delivery.add(span)), 19);
    await delivery.forceFlush();
    expect(delivery.stats()).toMatchObject({ delivered: 20, queued: 0, dropped: { shutdown: 10 } });
    const calls = await readAllCalls(server.url, 'acme/worker-dies', { username: 'dev', password: 'pw' });
    expect(calls).toHaveLength(20);
  });
});

describe('the worker script', () => {
  // The worker starts without the application's preloads, a module resolver such as Yarn PnP's
  // among them, so it must not need one: its dependencies are in its own file. Loaded from a
  // directory with no node_modules above it, each form gets as far as its check that it runs in
  // a worker thread, which comes after every import.
  it.each([
    { name: 'export-worker.js', load: (path: string) => `await import(${JSON.stringify(pathToFileURL(path).href)})` },
    { name: 'export-worker.cjs', load: (path: string) => `(await import('node:module')).createRequire(import.meta.url)(${JSON.stringify(path)})` },
  ])('$name loads with no node_modules to resolve from', async ({ name, load }) => {
    const dir = await mkdtemp(join(tmpdir(), 'callbridge-worker-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const copy = join(dir, name);
    await copyFile(new URL(name, findWorkerScript()), copy);
    const probe = `try { ${load(copy)}; console.log('loaded on the main thread?'); } catch (error) { console.log(error.message); }`;
    const child = spawnNode(['--input-type=module', '-e', probe], { NODE_PATH: '' });
    await child.exited();
    expect(child.stdout().trim()).toBe('callbridge: export-worker must be started as a worker thread');
  });
});
