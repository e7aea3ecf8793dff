/**
 * The exporter and register() at their edges (SPEC §1, §4), end to end over real sockets: export()
 * and its callback, the counters adding up under mixed outcomes, 401/403, Retry-After (seconds and
 * HTTP date), odd answers (a 200 that is not JSON, HTML error pages, other 2xx), shutdown and
 * register()'s flush during an outage, an exit flush out of time in a process that goes on, option
 * validation, the environment (CALLBRIDGE_*, WF_TRACE_SERVER_URL/WANDB_API_KEY), huge spans, the
 * queue bound under a slow server, and the worker thread giving the main thread's results. Real
 * OTel SDK spans, and a scripted `node:http` server or the real local server.
 *
 * Main-thread delivery unless a test is about the worker (which runs the built dist/ files).
 */
import type http from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { flushBeforeExit } from '../../src/exporter/exporter.js';
import { findWorkerScript } from '../../src/exporter/worker-script.js';
import { register } from '../../src/exporter/register.js';
import { InvalidOptionError } from '../../src/errors.js';
import type { ExporterOptions } from '../../src/options.js';
import type { DeliveryStats } from '../../src/batcher/index.js';
import { startScriptedServer, type ScriptedServer } from '../client/scripted-server.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';
import { emitSpans, endedSpans, providerFor } from './spans.js';

const PROJECT = 'acme/edges';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  diag.disable();
  vi.unstubAllEnvs();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function total(stats: DeliveryStats): number {
  return stats.delivered + Object.values(stats.dropped).reduce((a, b) => a + b, 0);
}

/**
 * An exporter, quiet and with no exit hook, on the main thread unless `options` say otherwise;
 * shut down after the test.
 */
function quietExporter(url: string, options: ExporterOptions = {}): CallbridgeExporter {
  const exporter = new CallbridgeExporter({
    baseUrl: url,
    projectId: PROJECT,
    username: 'dev',
    password: 'pw',
    deliveryThread: 'main',
    logLevel: 'none',
    flushOnExit: false,
    requestTimeoutMs: 2000,
    maxRetryMs: 20_000,
    ...options,
  });
  cleanups.push(() => exporter.shutdown());
  return exporter;
}

interface ScriptedAnswer {
  readonly status: number;
  readonly body?: string;
  readonly headers?: Record<string, string>;
}

interface Seen {
  readonly index: number;
  readonly at: number;
  readonly path: string;
  readonly items: Array<Record<string, any>>;
  readonly raw: Buffer;
  /** What the script answered (0: no answer). */
  status: number;
}

/**
 * A scripted service: every request's body is parsed (`{"batch":[...]}`), and `script` decides the
 * answer. Answers carry JSON bodies unless the script gives one.
 */
async function scripted(script: (seen: Seen) => ScriptedAnswer | 'hang'): Promise<ScriptedServer & { seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = await startScriptedServer((req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => {
    let items: Array<Record<string, any>> = [];
    try {
      const parsed = JSON.parse(body.toString('utf8')) as { batch?: unknown[] };
      items = (parsed.batch ?? []) as Array<Record<string, any>>;
    } catch {
      items = [];
    }
    const entry: Seen = { index: seen.length, at: Date.now(), path: req.url ?? '', items, raw: body, status: 0 };
    seen.push(entry);
    const answer = script(entry);
    if (answer === 'hang') return;
    entry.status = answer.status;
    res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
    res.end(answer.body ?? (answer.status < 300 ? JSON.stringify({ res: items.map(() => ({})) }) : JSON.stringify({ reason: `scripted ${answer.status}` })));
  });
  cleanups.push(() => server.close());
  return Object.assign(server, { seen });
}

/** Span ids of the items a request carried (start items carry `start.id`, end items `end.id`). */
function idsOf(items: ReadonlyArray<Record<string, any>>): string[] {
  return items.map((item) => (item.req?.start?.id ?? item.req?.end?.id) as string);
}

function captureLog(level: DiagLogLevel = DiagLogLevel.WARN): { errors: string[]; warnings: string[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  diag.setLogger(
    { error: (m) => errors.push(m), warn: (m) => warnings.push(m), info: () => {}, debug: () => {}, verbose: () => {} },
    level,
  );
  return { errors, warnings };
}

function exportAll(exporter: CallbridgeExporter, spans: ReadableSpan[]): ExportResult[] {
  const results: ExportResult[] = [];
  exporter.export(spans, (result) => results.push(result));
  return results;
}

// ---------------------------------------------------------------------------------------------

describe('export() and its resultCallback', () => {
  it('export([]) answers SUCCESS once, sends nothing, and a flush after it resolves', async () => {
    const server = await scripted(() => ({ status: 200 }));
    const exporter = quietExporter(server.url);
    const results = exportAll(exporter, []);
    expect(results).toEqual([{ code: ExportResultCode.SUCCESS }]);
    await exporter.forceFlush();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(server.seen).toHaveLength(0);
    expect(exporter.stats()).toMatchObject({ queued: 0, inFlight: 0, delivered: 0, queuedBytes: 0, batchesSent: 0 });
  });

  it('answers each export() exactly once, also when the callback throws, and FAILED once after shutdown', async () => {
    const server = await scripted(() => ({ status: 200 }));
    const exporter = quietExporter(server.url);
    let calls = 0;
    exporter.export(endedSpans(3), () => {
      calls += 1;
      throw new Error('a callback that throws');
    });
    expect(calls).toBe(1);
    await exporter.forceFlush();
    expect(exporter.stats().delivered).toBe(3);
    await exporter.shutdown();
    const after = exportAll(exporter, endedSpans(2));
    expect(after).toHaveLength(1);
    expect(after[0]!.code).toBe(ExportResultCode.FAILED);
    const empty = exportAll(exporter, []);
    expect(empty).toHaveLength(1);
    const stats = exporter.stats();
    expect(stats.dropped.shutdown).toBe(2);
    expect(total(stats)).toBe(5);
  });
});

describe('counters add up (SPEC §4.1)', () => {
  it('delivered + dropped = exported; retried = requests sent again; batchesSent = 2xx answers, under mixed outcomes', async () => {
    let failures = 0;
    const server = await scripted((seen) => {
      if (seen.items.length === 0) return { status: 200 };
      // A poisoned span is refused with a reason (400), also inside a batch.
      if (seen.items.some((item) => item.req?.start?.op_name === 'poison' || item.req?.end?.attributes?.poison === true)) {
        return { status: 400, body: JSON.stringify({ reason: 'poisoned' }) };
      }
      // Batches over 40 items are too large (413): they are split.
      if (seen.items.length > 40) return { status: 413, body: JSON.stringify({ reason: 'Request too large' }) };
      // Every third request fails once with a retryable error.
      if (seen.index % 3 === 0 && failures < 10) {
        failures += 1;
        return { status: 503, headers: { 'retry-after': '0' } };
      }
      return { status: 200 };
    });
    const exporter = quietExporter(server.url, { maxBatchItems: 200 });
    const memory = new InMemorySpanExporter();
    const provider = providerFor(memory, 'simple');
    const tracer = provider.getTracer('edges');
    for (let i = 0; i < 150; i++) {
      const span = tracer.startSpan(i % 50 === 7 ? 'poison' : `span-${i}`);
      span.end();
    }
    const spans = memory.getFinishedSpans();
    exportAll(exporter, spans);
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(stats.dropped.rejected).toBe(3);
    expect(stats.delivered).toBe(147);
    expect(total(stats)).toBe(150);
    expect(stats).toMatchObject({ queued: 0, inFlight: 0, queuedBytes: 0 });
    const withItems = server.seen.filter((seen) => seen.items.length > 0);
    expect(stats.batchesSent).toBe(withItems.filter((seen) => seen.status === 200).length);
    expect(stats.retried).toBe(failures);
    // Every delivered span reached the server in a 200-answered request exactly once.
    const deliveredIds = withItems.filter((seen) => seen.status === 200).flatMap((seen) => idsOf(seen.items));
    expect(new Set(deliveredIds).size).toBe(147);
    expect(deliveredIds).toHaveLength(147 * 2);
  });
});

describe('401/403 (SPEC §4.8)', () => {
  it.each([401, 403])('%i: no retry, every span dropped as auth, one error naming the URL and user; flush and shutdown end at once', async (status) => {
    const server = await scripted(() => ({ status, body: JSON.stringify({ reason: status === 401 ? 'Unauthorized' : 'Forbidden' }) }));
    const { errors } = captureLog(DiagLogLevel.ERROR);
    const exporter = quietExporter(server.url, { maxBatchItems: 20, logLevel: 'error' });
    exportAll(exporter, endedSpans(25));
    await exporter.forceFlush();
    exportAll(exporter, endedSpans(5));
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(stats.dropped.auth).toBe(30);
    expect(total(stats)).toBe(30);
    expect(stats.retried).toBe(0);
    // One request per batch: 25 spans in batches of 10, then 5 spans.
    expect(server.seen).toHaveLength(4);
    const authErrors = errors.filter((line) => line.includes(server.url) && line.includes('"dev"'));
    expect(authErrors).toHaveLength(1);
    const started = Date.now();
    await exporter.shutdown();
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

describe('Retry-After (SPEC §4.5)', () => {
  it('waits at least the seconds a 503 asks for before sending the batch again', async () => {
    const server = await scripted((seen) => (seen.index === 0 ? { status: 503, headers: { 'retry-after': '1' } } : { status: 200 }));
    const exporter = quietExporter(server.url);
    exportAll(exporter, endedSpans(4));
    await exporter.forceFlush();
    expect(server.seen).toHaveLength(2);
    expect(server.seen[1]!.at - server.seen[0]!.at).toBeGreaterThanOrEqual(990);
    expect(exporter.stats()).toMatchObject({ delivered: 4, retried: 1, batchesSent: 1 });
  });

  it('waits until the HTTP date a 429 names', async () => {
    const server = await scripted((seen) =>
      seen.index === 0 ? { status: 429, headers: { 'retry-after': new Date(Date.now() + 2000).toUTCString() } } : { status: 200 },
    );
    const exporter = quietExporter(server.url);
    exportAll(exporter, endedSpans(2));
    await exporter.forceFlush();
    expect(server.seen).toHaveLength(2);
    // The date has a resolution of a second: at least 1 s later.
    expect(server.seen[1]!.at - server.seen[0]!.at).toBeGreaterThanOrEqual(1000);
    expect(exporter.stats()).toMatchObject({ delivered: 2, retried: 1 });
  });
});

describe('odd answers from the server', () => {
  it('a 200 whose body is not JSON counts as delivered, never re-sent', async () => {
    const server = await scripted(() => ({ status: 200, body: '<html>ok</html>' }));
    const exporter = quietExporter(server.url);
    exportAll(exporter, endedSpans(6));
    await exporter.forceFlush();
    expect(server.seen).toHaveLength(1);
    expect(exporter.stats()).toMatchObject({ delivered: 6, retried: 0, batchesSent: 1 });
  });

  it('a 503 with an HTML body is retried; a 400 with a body that is not JSON drops the span as rejected with that text', async () => {
    const server = await scripted((seen) => {
      if (seen.index === 0) return { status: 503, body: '<html>bad gateway</html>', headers: { 'content-type': 'text/html' } };
      return { status: 400, body: 'not json {', headers: { 'content-type': 'text/plain' } };
    });
    const { warnings } = captureLog();
    const exporter = quietExporter(server.url, { logLevel: 'warn' });
    exportAll(exporter, endedSpans(1));
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(stats).toMatchObject({ delivered: 0, retried: 1 });
    expect(stats.dropped.rejected).toBe(1);
    expect(warnings.some((line) => line.includes('rejected=1') && line.includes('not json {'))).toBe(true);
  });

  it('a 2xx other than 200 (202, 207) counts as delivered', async () => {
    const server = await scripted((seen) => ({ status: seen.index === 0 ? 202 : 207, body: '' }));
    const exporter = quietExporter(server.url, { maxBatchItems: 4 });
    exportAll(exporter, endedSpans(4));
    await exporter.forceFlush();
    expect(exporter.stats()).toMatchObject({ delivered: 4, batchesSent: 2 });
  });
});

describe('shutdown during an outage (SPEC §4.11)', () => {
  it('is bounded by shutdownTimeoutMs, drops what is left as shutdown, and a second call, a flush and a late export all settle', async () => {
    const server = await scripted(() => ({ status: 503 }));
    const exporter = quietExporter(server.url, { shutdownTimeoutMs: 500, maxBatchItems: 10 });
    exportAll(exporter, endedSpans(30));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const flushed = exporter.forceFlush();
    const started = Date.now();
    const first = exporter.shutdown();
    const second = exporter.shutdown();
    expect(second).toBe(first);
    await Promise.all([first, flushed]);
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(450);
    expect(took).toBeLessThan(2500);
    const results = exportAll(exporter, endedSpans(2));
    expect(results.map((result) => result.code)).toEqual([ExportResultCode.FAILED]);
    const stats = exporter.stats();
    expect(stats.dropped.shutdown).toBe(32);
    expect(total(stats)).toBe(32);
    expect(stats).toMatchObject({ queued: 0, inFlight: 0, queuedBytes: 0 });
  });

  it('with nothing to deliver after export errors, shutdown ends at once', async () => {
    const server = await scripted(() => ({ status: 400, body: JSON.stringify({ reason: 'nope' }) }));
    const exporter = quietExporter(server.url, { shutdownTimeoutMs: 5000 });
    exportAll(exporter, endedSpans(4));
    await exporter.forceFlush();
    const started = Date.now();
    await exporter.shutdown();
    expect(Date.now() - started).toBeLessThan(500);
    expect(exporter.stats().dropped.rejected).toBe(4);
  });
});

describe('register() during an outage', () => {
  it('forceFlush gives up after shutdownTimeoutMs; shutdown then does not wait again; every span counted', async () => {
    const server = await scripted(() => ({ status: 503 }));
    const tracing = register({
      baseUrl: server.url,
      projectId: PROJECT,
      username: 'dev',
      password: 'pw',
      global: false,
      flushOnExit: false,
      deliveryThread: 'main',
      logLevel: 'none',
      shutdownTimeoutMs: 400,
    });
    cleanups.push(() => tracing.shutdown());
    emitSpans(tracing.provider, 12);
    let started = Date.now();
    await tracing.forceFlush();
    const flushTook = Date.now() - started;
    expect(flushTook).toBeGreaterThanOrEqual(390);
    expect(flushTook).toBeLessThan(2000);
    started = Date.now();
    await tracing.shutdown();
    expect(Date.now() - started).toBeLessThan(300);
    const stats = tracing.exporter.stats();
    expect(total(stats)).toBe(12);
    expect(stats.dropped.shutdown).toBe(12);
    // A span ended after shutdown is counted too.
    tracing.provider.getTracer('late').startSpan('late').end();
    expect(total(tracing.exporter.stats())).toBe(13);
  });
});

describe('option validation (SPEC §1, STYLE practice 5)', () => {
  const base = { baseUrl: 'http://127.0.0.1:9', projectId: PROJECT, username: 'dev', password: 'pw', deliveryThread: 'main' as const, flushOnExit: false };
  const bad: Array<[string, unknown]> = [
    ['maxBatchItems', 1],
    ['maxBatchItems', 2.5],
    ['maxBatchBytes', 0],
    ['maxBatchBytes', 40 * 1024 * 1024],
    ['maxQueueBytes', -1],
    ['maxQueueBytes', '64MB'],
    ['flushIntervalMs', -1],
    ['flushIntervalMs', Number.NaN],
    ['concurrency', 0],
    ['concurrency', Number.POSITIVE_INFINITY],
    ['maxRetryMs', -5],
    ['shutdownTimeoutMs', 1.5],
    ['requestTimeoutMs', 0],
    ['connections', 0],
    ['backpressureMs', 5000],
    ['deliveryThread', 'both'],
    ['logLevel', 'loud'],
    ['flushOnExit', 'no'],
    ['projectId', 'no-slash'],
    ['baseUrl', 'ftp://example.com'],
  ];
  it.each(bad)('new CallbridgeExporter({ %s: %s }) throws a TypeError naming the option and the value', (option, value) => {
    let thrown: unknown;
    try {
      new CallbridgeExporter({ ...base, [option]: value } as ExporterOptions);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TypeError);
    expect(thrown).toBeInstanceOf(InvalidOptionError);
    const message = (thrown as Error).message;
    expect(message).toContain(option);
    expect(message).toContain(typeof value === 'string' ? value : String(value));
  });

  it.each([
    ['spanProcessor', 'fast'],
    ['global', 'yes'],
    ['flushOnExit', 0],
    ['maxQueueBytes', 0],
  ] as Array<[string, unknown]>)('register({ %s: %s }) throws a TypeError naming the option and the value', (option, value) => {
    let thrown: unknown;
    try {
      register({ ...base, global: false, [option]: value } as never);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TypeError);
    expect((thrown as Error).message).toContain(option);
    expect((thrown as Error).message).toContain(String(value));
  });
});

describe('the environment (SPEC §1)', () => {
  it('takes the URL, project and API key from CALLBRIDGE_* when no option is given, and delivers as user "api"', async () => {
    const server = await startTestServer({ users: [{ username: 'api', password: 'key-123', entities: ['acme'] }] });
    cleanups.push(() => server.close());
    vi.stubEnv('CALLBRIDGE_BASE_URL', `${server.url}/`);
    vi.stubEnv('CALLBRIDGE_PROJECT', 'acme/from-env');
    vi.stubEnv('CALLBRIDGE_API_KEY', 'key-123\n');
    vi.stubEnv('CALLBRIDGE_USERNAME', '');
    vi.stubEnv('CALLBRIDGE_PASSWORD', '');
    const exporter = new CallbridgeExporter({ deliveryThread: 'main', flushOnExit: false, logLevel: 'none' });
    cleanups.push(() => exporter.shutdown());
    exportAll(exporter, endedSpans(3));
    await exporter.forceFlush();
    expect(exporter.stats().delivered).toBe(3);
    const calls = await readAllCalls(server.url, 'acme/from-env', server);
    expect(calls).toHaveLength(3);
  });

  it('an explicit option wins over the environment', async () => {
    const server = await startTestServer();
    cleanups.push(() => server.close());
    vi.stubEnv('CALLBRIDGE_BASE_URL', 'http://127.0.0.1:9');
    vi.stubEnv('CALLBRIDGE_PROJECT', 'acme/wrong');
    vi.stubEnv('CALLBRIDGE_USERNAME', 'nobody');
    vi.stubEnv('CALLBRIDGE_PASSWORD', 'nothing');
    const exporter = quietExporter(server.url, { projectId: 'acme/explicit' });
    exportAll(exporter, endedSpans(2));
    await exporter.forceFlush();
    expect(exporter.stats().delivered).toBe(2);
    expect(await readAllCalls(server.url, 'acme/explicit', server)).toHaveLength(2);
  });

  it('WF_TRACE_SERVER_URL and WANDB_API_KEY serve users of the hosted service', async () => {
    const server = await startTestServer({ users: [{ username: 'api', password: 'wandb-key', entities: ['*'] }] });
    cleanups.push(() => server.close());
    vi.stubEnv('CALLBRIDGE_BASE_URL', '');
    vi.stubEnv('CALLBRIDGE_API_KEY', '');
    vi.stubEnv('CALLBRIDGE_USERNAME', '');
    vi.stubEnv('CALLBRIDGE_PASSWORD', '');
    vi.stubEnv('WF_TRACE_SERVER_URL', server.url);
    vi.stubEnv('WANDB_API_KEY', 'wandb-key');
    const exporter = new CallbridgeExporter({ projectId: 'acme/wandb', deliveryThread: 'main', flushOnExit: false, logLevel: 'none' });
    cleanups.push(() => exporter.shutdown());
    exportAll(exporter, endedSpans(2));
    await exporter.forceFlush();
    expect(exporter.stats().delivered).toBe(2);
  });
});

describe('spans with huge attributes', () => {
  it('a span with a 24 MiB attribute is cut to fit maxBatchBytes and stored; the queue bound is back to 0 after', async () => {
    const server = await startTestServer();
    cleanups.push(() => server.close());
    const exporter = quietExporter(server.url, { projectId: 'acme/huge', requestTimeoutMs: 20_000 });
    const memory = new InMemorySpanExporter();
    const tracer = providerFor(memory, 'simple').getTracer('edges');
    const span = tracer.startSpan('huge', { attributes: { 'input.value': 'x'.repeat(24 * 1024 * 1024), small: 'kept' } });
    span.end();
    tracer.startSpan('neighbour').end();
    exportAll(exporter, memory.getFinishedSpans());
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(stats).toMatchObject({ delivered: 2, queued: 0, inFlight: 0, queuedBytes: 0 });
    const calls = await readAllCalls(server.url, 'acme/huge', server);
    expect(calls).toHaveLength(2);
    const huge = calls.find((call) => call.op_name === 'huge')!;
    expect(String(huge.inputs['input.value'])).toContain('…[truncated');
    expect(String(huge.inputs['input.value']).length).toBeLessThan(5 * 1024 * 1024);
    expect(huge.attributes.small ?? huge.attributes.otel_dump?.attributes?.small ?? 'kept').toBe('kept');
  }, 60_000);

  it('a span with a huge attribute behind a server that answers 413 for bodies over 64 KiB: cut once, delivered; the others delivered whole', async () => {
    const server = await scripted((seen) => (seen.raw.length > 64 * 1024 ? { status: 413, body: JSON.stringify({ reason: 'Request too large' }) } : { status: 200 }));
    const exporter = quietExporter(server.url);
    const memory = new InMemorySpanExporter();
    const tracer = providerFor(memory, 'simple').getTracer('edges');
    for (let i = 0; i < 9; i++) tracer.startSpan(`small-${i}`).end();
    tracer.startSpan('big', { attributes: { 'input.value': 'y'.repeat(120 * 1024) } }).end();
    exportAll(exporter, memory.getFinishedSpans());
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(stats.delivered).toBe(10);
    expect(total(stats)).toBe(10);
    const delivered = server.seen.filter((seen) => seen.status === 200).flatMap((seen) => idsOf(seen.items));
    expect(new Set(delivered).size).toBe(10);
  });
});

describe('bounded memory under a slow server (SPEC §4.3)', () => {
  it.each(['main', 'worker'] as const)('%s thread: queued plus in-flight bytes never pass maxQueueBytes; what does not fit is counted as queue_full; all adds up', async (deliveryThread) => {
    // Answer each request 150 ms late.
    const slow = await startScriptedServer((_req, res, body) => {
      const items = (JSON.parse(body.toString('utf8')) as { batch: unknown[] }).batch;
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ res: items.map(() => ({})) }));
      }, 150);
    });
    cleanups.push(() => slow.close());
    const maxQueueBytes = 200 * 1024;
    const exporter = quietExporter(slow.url, { deliveryThread, maxQueueBytes, maxBatchItems: 50, concurrency: 2, backpressureMs: 0 });
    const memory = new InMemorySpanExporter();
    const tracer = providerFor(memory, 'simple').getTracer('edges');
    let peak = 0;
    let exported = 0;
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 100; i++) tracer.startSpan(`s-${round}-${i}`, { attributes: { 'input.value': 'z'.repeat(500) } }).end();
      const spans = memory.getFinishedSpans().slice();
      memory.reset();
      exported += spans.length;
      exportAll(exporter, spans);
      peak = Math.max(peak, exporter.stats().queuedBytes);
      for (let tick = 0; tick < 5; tick++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        peak = Math.max(peak, exporter.stats().queuedBytes);
      }
    }
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(peak).toBeLessThanOrEqual(maxQueueBytes);
    expect(stats.dropped.queue_full).toBeGreaterThan(0);
    expect(total(stats)).toBe(exported);
    expect(stats).toMatchObject({ queued: 0, inFlight: 0, queuedBytes: 0 });
  }, 30_000);
});

describe('the exit flush (SPEC §4.11)', () => {
  it.each(['main', 'worker'] as const)(
    '%s thread: one that runs out of time during an outage counts what it held, and does not shut the exporter for a process that goes on',
    async (deliveryThread) => {
      let down = false;
      const server = await scripted(() => (down ? { status: 503 } : { status: 200 }));
      const exporter = quietExporter(server.url, { deliveryThread, shutdownTimeoutMs: 300 });
      // Delivered first: a worker is then up, and what follows is held in it.
      exportAll(exporter, endedSpans(1));
      await exporter.forceFlush();
      down = true;
      exportAll(exporter, endedSpans(2));
      const started = Date.now();
      await flushBeforeExit(exporter, async () => {});
      expect(Date.now() - started).toBeLessThan(2000);
      // What was held at the deadline is counted (the process was expected to end)...
      expect(exporter.stats()).toMatchObject({ delivered: 1, queued: 0, inFlight: 0, dropped: { shutdown: 2 } });
      // ...but a `beforeExit` listener kept the process going (Node allows it), and the service is back.
      down = false;
      const results = exportAll(exporter, endedSpans(3));
      await exporter.forceFlush();
      expect(results.map((result) => result.code)).toEqual([ExportResultCode.SUCCESS]);
      expect(exporter.stats()).toMatchObject({ delivered: 4, dropped: { shutdown: 2 } });
    },
  );
});

describe.runIf(findWorkerScript() !== undefined)('worker thread and main thread give the same results', () => {
  /** The counters right after `export()`, and once flushed and shut down. */
  async function run(
    deliveryThread: 'main' | 'worker',
    url: string,
    spans: ReadableSpan[],
    options: ExporterOptions = {},
  ): Promise<{ atExport: DeliveryStats; final: DeliveryStats }> {
    const exporter = quietExporter(url, { deliveryThread, ...options });
    exportAll(exporter, spans);
    const atExport = exporter.stats();
    await exporter.forceFlush();
    await exporter.shutdown();
    return { atExport, final: exporter.stats() };
  }

  it('with 400s for poisoned spans, 413s for large batches and retried 503s', async () => {
    const answers = new Map<string, number>();
    const server = await scripted((seen) => {
      if (seen.items.some((item) => item.req?.start?.op_name === 'poison')) return { status: 400, body: JSON.stringify({ reason: 'poisoned' }) };
      if (seen.items.length > 30) return { status: 413 };
      const key = idsOf(seen.items).join();
      if (!answers.has(key)) {
        answers.set(key, 1);
        if (seen.index % 4 === 1) return { status: 503, headers: { 'retry-after': '0' } };
      }
      return { status: 200 };
    });
    const memory = new InMemorySpanExporter();
    const tracer = providerFor(memory, 'simple').getTracer('edges');
    for (let i = 0; i < 120; i++) tracer.startSpan(i % 40 === 3 ? 'poison' : `s-${i}`).end();
    const spans = memory.getFinishedSpans();
    const { final: main } = await run('main', server.url, spans, { maxBatchItems: 200 });
    const { final: worker } = await run('worker', server.url, spans, { maxBatchItems: 200 });
    expect(worker.delivered).toBe(main.delivered);
    expect(worker.dropped).toEqual(main.dropped);
    expect(main.delivered).toBe(117);
    expect(main.dropped.rejected).toBe(3);
  }, 30_000);

  it('with a bound too small for a burst: the same queue_full count at export() and the same totals', async () => {
    const server = await scripted(() => ({ status: 200 }));
    const spans = endedSpans(200);
    const main = await run('main', server.url, spans, { maxQueueBytes: 40_000, backpressureMs: 0 });
    const worker = await run('worker', server.url, spans, { maxQueueBytes: 40_000, backpressureMs: 0 });
    expect(main.atExport.dropped.queue_full).toBeGreaterThan(0);
    expect(worker.atExport.dropped.queue_full).toBe(main.atExport.dropped.queue_full);
    expect(worker.final.delivered).toBe(main.final.delivered);
    expect(total(worker.final)).toBe(200);
    expect(total(main.final)).toBe(200);
  }, 30_000);

  it('with a 401: every span dropped as auth on both', async () => {
    const server = await scripted(() => ({ status: 401, body: JSON.stringify({ reason: 'Unauthorized' }) }));
    const spans = endedSpans(50);
    const { final: main } = await run('main', server.url, spans);
    const { final: worker } = await run('worker', server.url, spans);
    expect(main.dropped.auth).toBe(50);
    expect(worker.dropped.auth).toBe(50);
    expect(worker.retried).toBe(0);
  }, 30_000);
});
