/**
 * `register()` against the real local server: spans reach it as calls, `global: false` leaves the
 * OTel globals alone, shutdown removes what register installed, and a short script that ends
 * without calling shutdown loses nothing (a child process running the built package).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { trace as otelTrace } from '@opentelemetry/api';
import type { ProxyTracerProvider } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbridgeExporter } from '../../src/exporter/exporter.js';
import { register, type RegisterOptions } from '../../src/exporter/register.js';
import type { ExporterOptions } from '../../src/options.js';
import { InvalidOptionError } from '../../src/errors.js';
import { trace } from '../../src/trace/index.js';
import { startFaultProxy, type FaultAction, type FaultProxy, type FaultProxyOptions, type ProxiedRequest } from '../exporter/fault-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

async function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Basic ${Buffer.from(`${server.username}:${server.password}`).toString('base64')}`,
    },
    body: JSON.stringify(body),
  });
}

async function readCall(projectId: string, id: string): Promise<Record<string, unknown> | null> {
  const response = await post('/call/read', { project_id: projectId, id });
  expect(response.status).toBe(200);
  return ((await response.json()) as { call: Record<string, unknown> | null }).call;
}

async function queryCalls(projectId: string): Promise<Array<Record<string, unknown>>> {
  const response = await post('/calls/stream_query', { project_id: projectId });
  expect(response.status).toBe(200);
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const globalDelegate = () => (otelTrace.getTracerProvider() as ProxyTracerProvider).getDelegate();

describe('register()', () => {
  it('with global: false delivers spans of its own provider and leaves the globals alone', async () => {
    // Exporters and register() share one exit listener per event, added once per process.
    await new CallbridgeExporter({ projectId: 'acme/local', deliveryThread: 'main' }).shutdown();
    const listenersBefore = { beforeExit: process.listenerCount('beforeExit'), exit: process.listenerCount('exit') };
    const listenerCounts = () => ({ beforeExit: process.listenerCount('beforeExit'), exit: process.listenerCount('exit') });
    const tracing = register({
      baseUrl: server.url,
      projectId: 'acme/local',
      username: server.username,
      password: server.password,
      global: false,
    });
    expect(globalDelegate()).not.toBe(tracing.provider);
    expect(listenerCounts()).toEqual(listenersBefore);

    const span = tracing.provider.getTracer('test').startSpan('hello');
    span.setAttribute('inputs', JSON.stringify({ question: 'why' }));
    span.setAttribute('output', 'because');
    span.end();
    await tracing.forceFlush();

    const call = await readCall('acme/local', span.spanContext().spanId);
    expect(call).toMatchObject({ op_name: 'hello', inputs: { question: 'why' }, output: 'because' });
    expect(tracing.exporter.stats().delivered).toBeGreaterThanOrEqual(1);

    await tracing.shutdown();
    await tracing.shutdown(); // idempotent
    expect(listenerCounts()).toEqual(listenersBefore);
  });

  it('registers globally by default, so trace() calls arrive as calls; shutdown unregisters', async () => {
    const tracing = register({ baseUrl: server.url, projectId: 'acme/global', username: 'dev', password: 'pw' });
    expect(globalDelegate()).toBe(tracing.provider);
    const inner = trace(async function inner(n: number) {
      return n + 1;
    });
    const outer = trace(async function outer(n: number) {
      return inner(n);
    }, { kind: 'agent' });
    expect(await outer(1)).toBe(2);
    await tracing.forceFlush();

    const calls = await queryCalls('acme/global');
    const byName = new Map(calls.map((call) => [call.op_name, call]));
    expect(byName.get('outer')).toMatchObject({ inputs: { n: 1 }, output: 2, parent_id: null, attributes: { kind: 'agent' } });
    expect(byName.get('inner')).toMatchObject({ inputs: { n: 1 }, output: 2, parent_id: byName.get('outer')?.id });

    await tracing.shutdown();
    expect(globalDelegate()).not.toBe(tracing.provider);
  });

  it('works with the SDK processors too', async () => {
    for (const spanProcessor of ['simple', 'batch'] as const) {
      const projectId = `acme/${spanProcessor}`;
      const tracing = register({ baseUrl: server.url, projectId, username: 'dev', password: 'pw', global: false, spanProcessor });
      tracing.provider.getTracer('t').startSpan(`via-${spanProcessor}`).end();
      await tracing.forceFlush();
      expect((await queryCalls(projectId)).map((call) => call.op_name)).toEqual([`via-${spanProcessor}`]);
      await tracing.shutdown();
    }
  });

  it('rejects bad options when called, naming the option', () => {
    const base = { baseUrl: server.url, projectId: 'acme/x', global: false } as const;
    expect(() => register({ ...base, spanProcessor: 'fast' as 'direct' })).toThrow(InvalidOptionError);
    expect(() => register({ ...base, global: 'yes' as unknown as boolean })).toThrow(/`global`/);
    expect(() => register({ ...base, projectId: 'no-slash' })).toThrow(/`projectId`/);
  });

  it('refuses an unknown option, naming the one it most likely meant, before sending anywhere', () => {
    const base = { projectId: 'acme/x', global: false, username: 'dev', password: 'pw' } as const;
    expect(() => register({ ...base, baseURL: server.url } as RegisterOptions)).toThrow(/^Unknown option `baseURL` \(did you mean `baseUrl`\?\)$/);
    expect(() => register({ ...base, baseUrl: server.url, span_processor: 'batch' } as RegisterOptions)).toThrow(/did you mean `spanProcessor`/);
    expect(() => new CallbridgeExporter({ ...base, baseUrl: server.url, global: false } as ExporterOptions)).toThrow(/`global` here: it is an option of register\(\)/);
    // register()'s own options, and any option left undefined, are fine.
    const tracing = register({ ...base, baseUrl: server.url, spanProcessor: 'simple', flushOnExit: undefined, logLevel: undefined });
    return tracing.shutdown();
  });

  it('refuses a projectId that is not text, which would otherwise fail on the delivery thread', () => {
    const base = { baseUrl: server.url, global: false, username: 'dev', password: 'pw', deliveryThread: 'worker' } as const;
    expect(() => register({ ...base, projectId: ['acme/x'] as unknown as string })).toThrow(/`projectId` to be an "entity\/project" string/);
    expect(() => new CallbridgeExporter({ ...base, projectId: { toString: () => 'acme/x' } as unknown as string })).toThrow(InvalidOptionError);
    expect(() => new CallbridgeExporter(null as unknown as ExporterOptions)).toThrow(/`options` to be an object, got null$/);
    expect(() => register(null as never)).toThrow(/`options` to be an object, got null$/);
    expect(() => register('acme/x' as never)).toThrow(InvalidOptionError);
  });
});

describe('a short script that ends without shutdown()', () => {
  const entry = join(import.meta.dirname, '..', '..', 'dist', 'index.js');
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'callbridge-exit-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  /**
   * Run `source` as a script of its own that imports the built package (`CALLBRIDGE_ENTRY`) and
   * sends to `serverUrl` (`SERVER_URL`); killed after 20 s, so a script that hangs fails the test.
   */
  async function runScript(name: string, source: string, serverUrl: string): Promise<{ code: number | null; output: string; ms: number }> {
    expect(existsSync(entry), `${entry} is missing: run the build first (npm test does)`).toBe(true);
    const script = join(dir, name);
    await writeFile(script, source);
    const started = Date.now();
    const child = spawn(process.execPath, [script], {
      env: { ...process.env, CALLBRIDGE_ENTRY: pathToFileURL(entry).href, SERVER_URL: serverUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    clearTimeout(killer);
    return { code, output: output.trim(), ms: Date.now() - started };
  }

  /** A service that is down for a while: every request gets 503 and a minute's Retry-After. */
  async function withUnavailableService(use: (url: string, requests: () => number) => Promise<void>): Promise<void> {
    const unavailable: FaultAction = { kind: 'status', status: 503, headers: { 'retry-after': '60' }, body: { reason: 'maintenance' } };
    await withScriptedService(() => unavailable, (proxy) => use(proxy.url, () => proxy.requests.length));
  }

  /** The real server behind a fault proxy that answers as `script` says, for the length of `use`. */
  async function withScriptedService(script: FaultProxyOptions['script'], use: (proxy: FaultProxy) => Promise<void>): Promise<void> {
    const proxy = await startFaultProxy({ upstream: server.url, script });
    try {
      await use(proxy);
    } finally {
      await proxy.close();
    }
  }

  /**
   * A script that registers with the given `options` (JS object members after the project and
   * credentials), makes one traced call, then runs `then`.
   */
  function oneCallScript(project: string, options: string, then: string): string {
    return `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw', ${options} });
trace(function hello(x) { return x + 1; })(1);
${then}
`;
  }

  const lastLine = (output: string) => JSON.parse(output.split('\n').at(-1)!) as Record<string, unknown>;

  it('loses nothing and exits on its own (beforeExit flush)', async () => {
    const run = await runScript(
      'script.mjs',
      `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/exit', username: 'dev', password: 'pw' });
const work = trace(async function work(n) {
  await new Promise((resolve) => setTimeout(resolve, 1));
  return n * 2;
});
for (let i = 0; i < 50; i++) await work(i);
console.log('done');
`,
      server.url,
    );
    expect({ code: run.code, output: run.output }).toEqual({ code: 0, output: 'done' });

    const calls = await queryCalls('acme/exit');
    expect(calls).toHaveLength(50);
    expect(calls.every((call) => call.op_name === 'work' && call.ended_at !== null)).toBe(true);
    expect(new Set(calls.map((call) => (call.inputs as { n: number }).n)).size).toBe(50);
  });

  it.each([
    ['shutdown()', 'await tracing.shutdown();'],
    ['the end of the script (exit flush)', ''],
  ])('ends a traced stream or async call still open at %s as unfinished, with what was read, instead of losing its call', async (when, end) => {
    const project = `acme/unfinished-${end === '' ? 'exit' : 'shutdown'}`;
    const run = await runScript(
      `unfinished-${end === '' ? 'exit' : 'shutdown'}.mjs`,
      `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw' });
const words = trace(async function* words() { yield 'first'; yield 'second'; });
const unread = trace(async function* unread() { yield 'never'; });
// Both kept referenced: neither is collected (which would end it as abandoned).
globalThis.halfRead = words();
await globalThis.halfRead.next();
globalThis.neverRead = unread();
// An async call still waiting when the tracing ends (kept referenced, or it would be abandoned).
const waiting = trace(async function waiting(question) { await new Promise(() => {}); return question; });
globalThis.pending = waiting('anyone?');
${end}
console.log('done');
`,
      server.url,
    );
    expect(run.code, when).toBe(0);
    const calls = await queryCalls(project);
    const byName = Object.fromEntries(calls.map((call) => [call.op_name, call]));
    expect(byName.waiting).toMatchObject({ inputs: { question: 'anyone?' }, output: null, attributes: { callbridge: { stream: { end: 'unfinished' } } } });
    expect((byName.waiting as { ended_at: unknown }).ended_at).not.toBeNull();
    expect(byName.words).toMatchObject({ output: ['first'], attributes: { callbridge: { stream: { end: 'unfinished' } } } });
    // An empty list reads back as null, as every empty output does (README).
    expect(byName.unread).toMatchObject({ output: null, attributes: { callbridge: { stream: { end: 'unfinished' } } } });
    expect((byName.words as { ended_at: unknown }).ended_at).not.toBeNull();
  });

  it('with flushOnExit: false, flushes nothing and says how many spans are lost', async () => {
    const run = await runScript(
      'no-exit-flush.mjs',
      `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/no-exit-flush', username: 'dev', password: 'pw', flushOnExit: false, deliveryThread: 'main' });
const work = trace(function work(n) { return n; });
for (let i = 0; i < 3; i++) work(i);
console.log('done');
`,
      server.url,
    );
    expect(run.code).toBe(0);
    expect(run.output).toBe(
      'done\ncallbridge: the process exited with 3 spans not yet delivered; they are lost (await forceFlush() or shutdown() before the process ends)',
    );
    expect(await queryCalls('acme/no-exit-flush')).toHaveLength(0);
  });

  it('counts a span stuck in a long backoff as dropped (shutdown) after shutdownTimeoutMs, and exits', async () => {
    await withUnavailableService(async (url, requests) => {
      const run = await runScript(
        'stuck.mjs',
        oneCallScript('acme/stuck', `shutdownTimeoutMs: 1500`, `
process.on('exit', () => console.log(JSON.stringify(tracing.exporter.stats())));
`),
        url,
      );
      // Without the exit flush's deadline it would hang for the Retry-After and be killed.
      expect(run.code).toBe(0);
      expect(lastLine(run.output)).toMatchObject({ delivered: 0, queued: 0, inFlight: 0, queuedBytes: 0, dropped: { shutdown: 1 } });
      expect(requests()).toBe(1);
    });
  });

  // 'batch worker' is the case that lost the span: the provider's flush returns once
  // BatchSpanProcessor has handed its spans over, so only the exporter's flush held the process,
  // for shutdownTimeoutMs; the worker's request was then still on the wire, the loop ran dry and
  // the exit flush dropped the span.
  it.each(['direct main', 'direct worker', 'simple main', 'simple worker', 'batch main', 'batch worker'])(
    'lets forceFlush() wait for a service slower than shutdownTimeoutMs, and delivers (%s)',
    async (setup) => {
      const [processor, thread] = setup.split(' ');
      const slow = await startFaultProxy({ upstream: server.url, script: () => ({ kind: 'slow', delayMs: 1500 }) });
      try {
        const project = `acme/slow-${processor}-${thread}`;
        const run = await runScript(
          `slow-${processor}-${thread}.mjs`,
          oneCallScript(project, `shutdownTimeoutMs: 500, spanProcessor: '${processor}', deliveryThread: '${thread}'`, `
await tracing.forceFlush();
console.log(JSON.stringify(tracing.exporter.stats()));
`),
          slow.url,
        );
        // A flush is done when the spans are. Bounding the provider's flush by shutdownTimeoutMs
        // cut it short with "flush failed" and a span in flight, or dropped (worker thread).
        expect(run.code).toBe(0);
        expect(run.output).not.toContain('flush failed');
        expect(lastLine(run.output)).toMatchObject({ delivered: 1, inFlight: 0, queued: 0 });
        expect(await queryCalls(project)).toHaveLength(1);
      } finally {
        await slow.close();
      }
    },
  );

  /**
   * A script with a plain exporter (no register(): no SDK flush timer keeps the process alive,
   * only the exporter's own flush does) behind a SimpleSpanProcessor: `options` on top of the
   * project and credentials, `spans` spans ended with `spanOptions` (a JS expression that may use
   * `i`), then `end` (the script's last lines).
   */
  function plainExporterScript(project: string, options: Record<string, unknown>, spans: number, end: string, spanOptions = '{}'): string {
    return `
const { createRequire } = await import('node:module');
const { BasicTracerProvider, SimpleSpanProcessor } = createRequire(process.env.CALLBRIDGE_ENTRY)('@opentelemetry/sdk-trace-base');
const { CallbridgeExporter } = await import(process.env.CALLBRIDGE_ENTRY);
const exporter = new CallbridgeExporter({ baseUrl: process.env.SERVER_URL, projectId: ${JSON.stringify(project)}, username: 'dev', password: 'pw', ...${JSON.stringify(options)} });
const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('plain');
for (let i = 0; i < ${spans}; i++) tracer.startSpan('step', ${spanOptions}).end();
${end}
`;
  }

  // On the worker thread the hold of a flush used to end between two requests once
  // shutdownTimeoutMs had passed, and the exit flush dropped the batches not yet sent.
  it.each(['main', 'worker'])(
    "lets an exporter's forceFlush() deliver batch after batch from a service slower than shutdownTimeoutMs (%s thread)",
    async (thread) => {
      await withScriptedService(() => ({ kind: 'slow', delayMs: 300 }), async ({ url }) => {
        const project = `acme/slow-batches-${thread}`;
        // 500 spans per request, one request at a time: four requests of 300 ms against a 500 ms
        // hold, each batch built (a few ms) after the answer to the one before.
        const script = plainExporterScript(
          project,
          { shutdownTimeoutMs: 500, concurrency: 1, deliveryThread: thread },
          2000,
          'await exporter.forceFlush();\nconsole.log(JSON.stringify(exporter.stats()));',
          "{ attributes: { 'input.value': JSON.stringify({ question: 'q'.repeat(200), i }) } }",
        );
        const run = await runScript(`slow-batches-${thread}.mjs`, script, url);
        expect(run.code).toBe(0);
        expect(lastLine(run.output)).toMatchObject({ delivered: 2000, batchesSent: 4, queued: 0, inFlight: 0, dropped: { shutdown: 0 } });
        expect(await queryCalls(project)).toHaveLength(2000);
      });
    },
  );

  // The hold past shutdownTimeoutMs is for delivery, not for backoffs: with two requests at a time,
  // one answered 503 with a 20 s Retry-After and the other delivered, only the backoff is left,
  // and the process goes (the exit flush counts the span that waited) as on the main thread.
  it.each(['main', 'worker'])("does not hold the process for one batch's long backoff once the rest is delivered (%s thread)", async (thread) => {
    const firstLimited = ({ index }: ProxiedRequest): FaultAction =>
      index === 0 ? { kind: 'status', status: 503, headers: { 'retry-after': '20' } } : { kind: 'slow', delayMs: 200 };
    await withScriptedService(firstLimited, async ({ url }) => {
      const script = plainExporterScript(
        `acme/backoff-left-${thread}`,
        { shutdownTimeoutMs: 500, maxBatchItems: 10, concurrency: 2, deliveryThread: thread },
        10,
        "void exporter.forceFlush();\nprocess.on('exit', () => console.log(JSON.stringify(exporter.stats())));",
      );
      const run = await runScript(`backoff-left-${thread}.mjs`, script, url);
      expect(run.code).toBe(0);
      expect(run.ms).toBeLessThan(10_000);
      expect(lastLine(run.output)).toMatchObject({ delivered: 5, queued: 0, inFlight: 0, dropped: { shutdown: 5 } });
    });
  });

  // A slow service that recovers from one failure: the report of the answer that ended the outage
  // used to say "not sending, still retrying" for a moment, and the process went in the middle of
  // the flush. The application itself stays alive until 600 ms after the 503, so that the first
  // backoff (an unref'd timer; at most 500 ms, as Retry-After: 0 does not shorten it) does not end
  // the process on either thread, and not after: from then on only the flush holds it, while the
  // slow answers come.
  it.each(['main', 'worker'])('lets a flush past its hold go on after a slow service recovers from a failure (%s thread)', async (thread) => {
    const firstFails = ({ index }: ProxiedRequest): FaultAction =>
      index === 0 ? { kind: 'status', status: 503, headers: { 'retry-after': '0' } } : { kind: 'slow', delayMs: 300 };
    await withScriptedService(firstFails, async ({ url }) => {
      const project = `acme/recovering-${thread}`;
      const script = plainExporterScript(
        project,
        { shutdownTimeoutMs: 250, maxBatchItems: 10, concurrency: 1, deliveryThread: thread },
        40,
        [
          'const untilRetried = setInterval(() => exporter.stats().retried > 0 && (clearInterval(untilRetried), setTimeout(() => {}, 600)), 5);',
          'await exporter.forceFlush();',
          'console.log(JSON.stringify(exporter.stats()));',
        ].join('\n'),
      );
      const run = await runScript(`recovering-${thread}.mjs`, script, url);
      expect(run.code).toBe(0);
      expect(lastLine(run.output)).toMatchObject({ delivered: 40, queued: 0, inFlight: 0, dropped: { shutdown: 0 } });
      expect(await queryCalls(project)).toHaveLength(40);
    });
  });

  it.each(['main', 'worker'])(
    'stops an awaited forceFlush() after shutdownTimeoutMs while the service is down, saying how many spans wait (%s thread)',
    async (thread) => {
      await withUnavailableService(async (url) => {
        const run = await runScript(
          `flush-while-down-${thread}.mjs`,
          oneCallScript('acme/flush-down', `shutdownTimeoutMs: 500, deliveryThread: '${thread}'`, `
await tracing.forceFlush();
const { queued, inFlight } = tracing.exporter.stats();
console.log('after forceFlush', queued + inFlight);
process.on('exit', () => console.log(JSON.stringify(tracing.exporter.stats())));
`),
          url,
        );
        expect(run.code).toBe(0);
        expect(run.output).toContain(
          'callbridge: forceFlush() stopped waiting after 500 ms (shutdownTimeoutMs) with 1 span not yet delivered; they stay queued',
        );
        expect(run.output).toContain('after forceFlush 1');
        // Not the SDK's own words for its flush timeout.
        expect(run.output).not.toContain('did not completed');
        // The exit flush then counts it.
        expect(lastLine(run.output)).toMatchObject({ delivered: 0, queued: 0, inFlight: 0, dropped: { shutdown: 1 } });
      });
    },
  );

  // The bound is 3 s; the second wait is measured inside the script, against half of it.
  it.each(['main', 'worker'])(
    'does not wait again at shutdown() or exit for a service a forceFlush() gave up on, while it stays down (%s thread)',
    async (thread) => {
      await withUnavailableService(async (url) => {
        for (const [name, end] of [
          ['shutdown', 'await tracing.shutdown();'],
          ['exit', "process.on('exit', () => console.log('after exit flush', Math.round(performance.now() - gaveUpAt)));"],
        ] as const) {
          const run = await runScript(
            `no-second-wait-${name}-${thread}.mjs`,
            oneCallScript('acme/down-twice', `shutdownTimeoutMs: 3000, deliveryThread: '${thread}'`, `
await tracing.forceFlush();
const gaveUpAt = performance.now();
${end}
if (${name === 'shutdown'}) console.log('after shutdown', Math.round(performance.now() - gaveUpAt));
process.on('exit', () => console.log(JSON.stringify(tracing.exporter.stats())));
`),
            url,
          );
          expect(run.code).toBe(0);
          expect(run.output).toContain('forceFlush() stopped waiting after 3000 ms');
          const waited = Number(new RegExp(`after ${name === 'shutdown' ? 'shutdown' : 'exit flush'} (\\d+)`).exec(run.output)?.[1]);
          expect(waited).toBeLessThan(1500);
          expect(lastLine(run.output)).toMatchObject({ delivered: 0, queued: 0, inFlight: 0, dropped: { shutdown: 1 } });
        }
      });
    },
    30_000,
  );

  it.each(['main', 'worker'])(
    'keeps an awaited forceFlush() waiting for a slow answer to a retry, past shutdownTimeoutMs (%s thread)',
    async (thread) => {
      // One 503, then answers that take 1.5 s. The retry leaves within 500 ms (the first backoff), so
      // at the 700 ms bound it is on the wire: the service is slow, not down.
      const failsOnceThenSlow = ({ index }: ProxiedRequest): FaultAction =>
        index === 0 ? { kind: 'status', status: 503, headers: { 'retry-after': '0' } } : { kind: 'slow', delayMs: 1500 };
      await withScriptedService(failsOnceThenSlow, async ({ url }) => {
        const project = `acme/flush-slow-retry-${thread}`;
        const run = await runScript(
          `flush-slow-retry-${thread}.mjs`,
          oneCallScript(project, `shutdownTimeoutMs: 700, deliveryThread: '${thread}'`, `
await tracing.forceFlush();
console.log(JSON.stringify(tracing.exporter.stats()));
`),
          url,
        );
        expect(run.code).toBe(0);
        expect(run.output).not.toContain('stopped waiting');
        expect(lastLine(run.output)).toMatchObject({ delivered: 1, queued: 0, inFlight: 0 });
        expect(await queryCalls(project)).toHaveLength(1);
      });
    },
  );

  it('finishes an awaited shutdown() while the service is down (main thread), counting the span', async () => {
    await withUnavailableService(async (url) => {
      const run = await runScript(
        'shutdown-while-down.mjs',
        oneCallScript('acme/down', `shutdownTimeoutMs: 1000, deliveryThread: 'main'`, `
await tracing.shutdown();
console.log(JSON.stringify(tracing.exporter.stats()));
`),
        url,
      );
      // The process used to end during the backoff, with shutdown() never returning (exit code 13:
      // a top-level await left unsettled) and the span not counted.
      expect(run.code).toBe(0);
      expect(lastLine(run.output)).toMatchObject({ delivered: 0, queued: 0, inFlight: 0, dropped: { shutdown: 1 } });
    });
  });

  it.each(['main', 'worker'])('reports at exit the drops made since the last report (%s thread)', async (thread) => {
    // The first flush reports its drops; the next ones come less than an interval (10 s) later, so
    // only the exit can report them: the interval's timer never fires in a script that ends.
    const run = await runScript(
      `exit-drops-${thread}.mjs`,
      `
const { createRequire } = await import('node:module');
const api = createRequire(process.env.CALLBRIDGE_ENTRY)('@opentelemetry/api');
api.diag.setLogger(new api.DiagConsoleLogger(), api.DiagLogLevel.WARN);
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: 'acme/exit-drops', username: 'dev', password: 'pw', maxQueueBytes: 4096, deliveryThread: '${thread}' });
const hello = trace(function hello(x) { return x + 1; });
for (let i = 0; i < 20; i++) hello(i);
await tracing.exporter.forceFlush();
for (let i = 0; i < 20; i++) hello(i);
process.on('exit', () => console.log(JSON.stringify(tracing.exporter.stats().dropped)));
`,
      server.url,
    );
    expect(run.code).toBe(0);
    const reported = [...run.output.matchAll(/callbridge: dropped spans: queue_full=(\d+)/g)].map((match) => Number(match[1]));
    expect(reported).toHaveLength(2);
    expect(reported[0]! + reported[1]!).toBe(lastLine(run.output).queue_full);
  });

  it('does not hold the process for the retries of a flush left waiting (worker thread), and still counts the span', async () => {
    await withUnavailableService(async (url) => {
      // The flush is started and not awaited: the script ends while it waits out a minute's backoff.
      const run = await runScript(
        'flush-left-waiting.mjs',
        oneCallScript('acme/waiting', `shutdownTimeoutMs: 1000, deliveryThread: 'worker'`, `
void tracing.exporter.forceFlush().then(() => console.log('flushed'));
process.on('exit', () => console.log(JSON.stringify(tracing.exporter.stats())));
`),
        url,
      );
      // Held for the Retry-After (then maxRetryMs) before a flush's hold was bounded: killed at 20 s.
      expect(run.code).toBe(0);
      // The flush's hold (1 s), then the exit flush's (1 s), and the worker's start: well under the backoff.
      expect(run.ms).toBeLessThan(15_000);
      expect(lastLine(run.output)).toMatchObject({ delivered: 0, queued: 0, inFlight: 0, dropped: { shutdown: 1 } });
    });
  });
});
