/**
 * End to end: a real NodeTracerProvider + BatchSpanProcessor + CallbridgeExporter making 10 000
 * spans in nested traces, delivered to the real local server and read back, once with the server
 * up and once with it down for the first seconds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpanStatusCode, context, trace } from '@opentelemetry/api';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { startServer, type RunningServer } from '../../src/server/index.js';
import { startTestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';
import { emitSpans, type EmittedSpan } from './spans.js';

const PROJECT = 'acme/e2e';
const SPANS = 10_000;
const CREDENTIALS = { username: 'dev', password: 'pw' } as const;
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function setup(baseUrl: string) {
  const exporter = new CallbridgeExporter({ baseUrl, projectId: PROJECT, ...CREDENTIALS, maxRetryMs: 60_000 });
  const provider = new NodeTracerProvider({
    spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: SPANS * 2, maxExportBatchSize: 512, scheduledDelayMillis: 50 })],
  });
  cleanups.push(() => provider.shutdown());
  return { exporter, provider };
}

/** Spans with attributes the mapping reads, so the read-back can check mapped fields. */
function emitMeaningfulSpans(provider: NodeTracerProvider): EmittedSpan[] {
  return emitSpans(provider, SPANS, (index) => ({
    'input.value': JSON.stringify({ question: `q${index}` }),
    'output.value': `answer ${index}`,
    'gen_ai.request.model': 'gpt-4o',
    'gen_ai.usage.input_tokens': (index % 100) + 1,
    'gen_ai.usage.output_tokens': 7,
  }));
}

async function expectAllStored(url: string, emitted: readonly EmittedSpan[]): Promise<void> {
  const calls = await readAllCalls(url, PROJECT, CREDENTIALS);
  expect(calls).toHaveLength(emitted.length);
  const byId = new Map(calls.map((call) => [call.id as string, call]));
  expect(byId.size).toBe(emitted.length);
  for (const index of [0, 1, 2, 3, 9, 10, 4321, emitted.length - 1]) {
    const span = emitted[index]!;
    const call = byId.get(span.spanId)!;
    expect(call).toMatchObject({
      id: span.spanId,
      trace_id: span.traceId,
      parent_id: span.parentId ?? null,
      op_name: span.name,
      // SPEC §3: `{<key>: value}` of the first input/output key found.
      output: { 'output.value': `answer ${index}` },
      wb_user_id: 'dev',
    });
    expect(call.inputs).toEqual({ 'input.value': { question: `q${index}` } });
    expect(call.summary.usage['gpt-4o']).toMatchObject({ input_tokens: (index % 100) + 1, output_tokens: 7, total_tokens: (index % 100) + 8 });
    expect(call.started_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(typeof call.ended_at).toBe('string');
  }
}

describe('end to end with the OTel SDK', () => {
  it('delivers 10 000 spans in nested traces, each stored once with its mapped fields', async () => {
    const server = await startTestServer();
    cleanups.push(() => server.close());
    const { exporter, provider } = setup(server.url);
    const emitted = emitMeaningfulSpans(provider);
    await provider.forceFlush();
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(stats).toMatchObject({ delivered: SPANS, queued: 0, inFlight: 0, queuedBytes: 0 });
    expect(Object.values(stats.dropped).every((count) => count === 0)).toBe(true);
    await expectAllStored(server.url, emitted);
  });

  it('delivers all 10 000 when the server is down for the first seconds, none duplicated', async () => {
    const port = await reservePort();
    const baseUrl = `http://127.0.0.1:${port}`;
    const { exporter, provider } = setup(baseUrl);
    const emitted = emitMeaningfulSpans(provider);
    await provider.forceFlush();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(exporter.stats().delivered).toBe(0);
    const dir = await mkdtemp(join(tmpdir(), 'callbridge-e2e-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const server: RunningServer = await startServer({
      port,
      host: '127.0.0.1',
      dbPath: join(dir, 'late.db'),
      users: [{ ...CREDENTIALS, entities: ['*'] }],
    });
    cleanups.push(() => server.close());
    await exporter.forceFlush();
    const stats = exporter.stats();
    expect(stats).toMatchObject({ delivered: SPANS, queued: 0, inFlight: 0 });
    expect(stats.retried).toBeGreaterThan(0);
    expect(Object.values(stats.dropped).every((count) => count === 0)).toBe(true);
    await expectAllStored(server.url, emitted);
  }, 90_000);

  it('records an error status as the call exception', async () => {
    const server = await startTestServer();
    cleanups.push(() => server.close());
    const { exporter, provider } = setup(server.url);
    const span = provider.getTracer('t').startSpan('fails');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'it broke' });
    span.end();
    await provider.forceFlush();
    await exporter.forceFlush();
    const [call] = await readAllCalls(server.url, PROJECT, CREDENTIALS);
    expect(call).toMatchObject({ id: span.spanContext().spanId, exception: 'it broke' });
  });

  it('delivers spans whose values hold __proto__ or constructor keys, as data', async () => {
    const server = await startTestServer();
    cleanups.push(() => server.close());
    const { exporter, provider } = setup(server.url);
    const span = provider.getTracer('t').startSpan('about javascript', {
      attributes: {
        'input.value': '{"__proto__":{"polluted":1},"constructor":{"prototype":{"x":1}}}',
        'wandb.attributes': '{"__proto__":{"p":1},"k":2}',
        '__proto__.x': 'flat key',
      },
    });
    span.end();
    await provider.forceFlush();
    await exporter.forceFlush();
    expect(exporter.stats()).toMatchObject({ delivered: 1, dropped: { rejected: 0 } });
    const [call] = await readAllCalls(server.url, PROJECT, CREDENTIALS);
    expect(JSON.stringify(call!.inputs)).toBe('{"input.value":{"__proto__":{"polluted":1},"constructor":{"prototype":{"x":1}}}}');
    // The span as received comes back as attributes.otel_span; the call's own attributes before it.
    const { otel_span: received, ...attributes } = call!.attributes as Record<string, unknown>;
    expect(JSON.stringify(attributes)).toBe('{"__proto__":{"p":1},"k":2}');
    expect(received).toMatchObject({ name: 'about javascript' });
    expect(JSON.stringify((received as { attributes: unknown }).attributes)).toContain('"__proto__":{"x":"flat key"}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('delivers spans whose custom IdGenerator makes uppercase ids, under the same ids in lowercase', async () => {
    const server = await startTestServer();
    cleanups.push(() => server.close());
    const exporter = new CallbridgeExporter({ baseUrl: server.url, projectId: PROJECT, ...CREDENTIALS });
    let next = 0xf0;
    const provider = new NodeTracerProvider({
      idGenerator: {
        generateTraceId: () => 'ABCDEF0123456789ABCDEF0123456789',
        generateSpanId: () => (next++).toString(16).toUpperCase().padStart(16, 'A'),
      },
      spanProcessors: [new BatchSpanProcessor(exporter)],
    });
    cleanups.push(() => provider.shutdown());
    const tracer = provider.getTracer('t');
    const root = tracer.startSpan('root');
    tracer.startSpan('child', {}, trace.setSpan(context.active(), root)).end();
    root.end();
    await provider.forceFlush();
    await exporter.forceFlush();
    expect(exporter.stats()).toMatchObject({ delivered: 2, dropped: { rejected: 0 } });
    const calls = await readAllCalls(server.url, PROJECT, CREDENTIALS);
    const ids = calls.map(({ id, trace_id, parent_id }) => ({ id, trace_id, parent_id }));
    expect(ids.sort((a, b) => String(a.id).localeCompare(String(b.id)))).toEqual([
      { id: 'aaaaaaaaaaaaaaf0', trace_id: 'abcdef0123456789abcdef0123456789', parent_id: null },
      { id: 'aaaaaaaaaaaaaaf1', trace_id: 'abcdef0123456789abcdef0123456789', parent_id: 'aaaaaaaaaaaaaaf0' },
    ]);
  });
});

/** A free port on loopback, released so the late server can take it. */
async function reservePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}
