/**
 * The end of the process for an exporter used without `register()` (src/exporter/exit-watch.ts):
 * a script that simply ends delivers what the exporter was given (behind `SimpleSpanProcessor`,
 * or `BatchSpanProcessor` after `provider.forceFlush()`, or of a global provider, which the exit
 * flush flushes first), unless `flushOnExit` is false; a
 * `process.exit()` that leaves spans behind says how many are lost; a stop signal is the
 * application's to handle (README: "Stop signals"). Child scripts run the built package against the
 * real local server, on both delivery threads.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { MAX_EXIT_FLUSH_ROUNDS } from '../../src/exporter/exit-watch.js';
import { InvalidOptionError } from '../../src/errors.js';
import { killSpawned, listeningUrl } from '../helpers/node-process.js';
import { runPackageScript, startPackageScript } from '../helpers/package-script.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());
afterEach(killSpawned);

interface ScriptOptions {
  readonly project: string;
  readonly deliveryThread: 'main' | 'worker';
  readonly processor: 'simple' | 'batch';
  /** Code run after the five spans have ended. */
  readonly then?: string;
  readonly exporterOptions?: string;
}

/** Five spans through `new CallbridgeExporter(...)` behind the application's own processor. */
function exporterScript({ project, deliveryThread, processor, then = '', exporterOptions = '' }: ScriptOptions): string {
  return `
const { NodeTracerProvider, SimpleSpanProcessor, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-node');
const { CallbridgeExporter } = await import(process.env.CALLBRIDGE_ENTRY);
const exporter = new CallbridgeExporter({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw', deliveryThread: '${deliveryThread}', ${exporterOptions} });
const provider = new NodeTracerProvider({ spanProcessors: [new ${processor === 'simple' ? 'SimpleSpanProcessor' : 'BatchSpanProcessor'}(exporter)] });
const tracer = provider.getTracer('exit-test');
for (let i = 0; i < 5; i++) tracer.startSpan('step-' + i).end();
process.on('exit', () => console.log(JSON.stringify(exporter.stats())));
${then}
`;
}

async function run(options: ScriptOptions) {
  const script = await runPackageScript(exporterScript(options), { SERVER_URL: server.url });
  expect(script.code).toBe(0);
  const stats = JSON.parse(script.stdout.trim().split('\n').at(-1)!) as ReturnType<CallbridgeExporter['stats']>;
  const stored = await readAllCalls(server.url, options.project, server);
  return { stats, stored: stored.length, stderr: script.stderr };
}

/** Five traced calls through `register({ ..., <options> })`, then `process.exit()` at once. */
function registerThenExit(project: string, options: string) {
  const source = `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
register({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw', ${options} });
for (let i = 0; i < 5; i++) trace(function hello(x) { return x; })(i);
process.exit(0);
`;
  return runPackageScript(source, { SERVER_URL: server.url });
}

describe('an exporter of your own provider, when the script ends', () => {
  for (const deliveryThread of ['main', 'worker'] as const) {
    it(`delivers what it was given behind SimpleSpanProcessor (${deliveryThread} thread)`, async () => {
      const result = await run({ project: `acme/exit-simple-${deliveryThread}`, deliveryThread, processor: 'simple' });
      expect(result).toMatchObject({ stored: 5, stats: { delivered: 5, queued: 0, inFlight: 0 }, stderr: '' });
    });

    it(`delivers behind BatchSpanProcessor once the provider is flushed (${deliveryThread} thread)`, async () => {
      const result = await run({ project: `acme/exit-batch-${deliveryThread}`, deliveryThread, processor: 'batch', then: 'await provider.forceFlush();' });
      expect(result).toMatchObject({ stored: 5, stats: { delivered: 5, queued: 0 }, stderr: '' });
    });

    it(`delivers what a global provider's BatchSpanProcessor still buffers, as with NodeSDK (${deliveryThread} thread)`, async () => {
      // Registered globally and never flushed: the buffer would wait for its 5 s timer, unref'd.
      const result = await run({ project: `acme/exit-global-batch-${deliveryThread}`, deliveryThread, processor: 'batch', then: 'provider.register();' });
      expect(result).toMatchObject({ stored: 5, stats: { delivered: 5, queued: 0 }, stderr: '' });
    });
  }

  it('delivers what the worker holds for an exporter the application no longer references (worker thread, after a GC)', async () => {
    const script = await runPackageScript(
      `
const { NodeTracerProvider, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace-node');
const { CallbridgeExporter } = await import(process.env.CALLBRIDGE_ENTRY);
async function traceAndForget() {
  const exporter = new CallbridgeExporter({ baseUrl: process.env.SERVER_URL, projectId: 'acme/exit-gc', username: 'dev', password: 'pw', deliveryThread: 'worker' });
  const tracer = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('gc');
  tracer.startSpan('first').end();
  await exporter.forceFlush(); // the worker is loaded
  for (let i = 0; i < 5; i++) tracer.startSpan('step-' + i).end();
  await new Promise((resolve) => setTimeout(resolve, 50)); // posted to the worker and acknowledged
}
await traceAndForget();
globalThis.gc();
`,
      { SERVER_URL: server.url },
      ['--expose-gc'],
    );
    expect(script).toMatchObject({ code: 0, stderr: '' });
    expect(await readAllCalls(server.url, 'acme/exit-gc', server)).toHaveLength(6);
  });

  it('with flushOnExit: false, delivers nothing and says that the spans are lost', async () => {
    const result = await run({ project: 'acme/exit-off', deliveryThread: 'main', processor: 'simple', exporterOptions: 'flushOnExit: false' });
    expect(result).toMatchObject({ stored: 0, stats: { delivered: 0, queued: 5 } });
    expect(result.stderr.trim()).toBe(
      'callbridge: the process exited with 5 spans not yet delivered; they are lost (await forceFlush() or shutdown() before the process ends)',
    );
  });
});

describe('process.exit() with spans not delivered', () => {
  for (const deliveryThread of ['main', 'worker'] as const) {
    it(`says how many are lost, once (${deliveryThread} thread; exporter or register())`, async () => {
      const one = await run({ project: `acme/exit-one-${deliveryThread}`, deliveryThread, processor: 'simple', then: "await exporter.forceFlush(); tracer.startSpan('last').end(); process.exit(0);" });
      expect(one.stderr.trim()).toMatch(/^callbridge: the process exited with 1 span not yet delivered; it is lost \(/);

      const bare = await run({ project: `acme/exit-now-${deliveryThread}`, deliveryThread, processor: 'simple', then: 'process.exit(0);' });
      expect(bare.stderr.trim()).toMatch(/^callbridge: the process exited with 5 spans not yet delivered; they are lost \(.*\)$/);

      const registered = await registerThenExit('acme/exit-register', `deliveryThread: '${deliveryThread}'`);
      expect(registered.stderr.trim()).toMatch(/^callbridge: the process exited with 5 spans not yet delivered; they are lost/);
    });
  }

  it("counts what register()'s BatchSpanProcessor still buffered, which never reached the exporter", async () => {
    const script = await registerThenExit('acme/exit-batch-register', "spanProcessor: 'batch'");
    expect(script.stderr.trim()).toMatch(/^callbridge: the process exited with 5 ended spans that never reached the exporter \(in the BatchSpanProcessor's buffer/);
  });

  it('says so after a shutdown() that was not awaited, too', async () => {
    const result = await run({ project: 'acme/exit-unawaited', deliveryThread: 'worker', processor: 'simple', then: 'void exporter.shutdown(); process.exit(0);' });
    expect(result.stderr.trim()).toMatch(/^callbridge: the process exited with 5 spans not yet delivered; they are lost/);
  });

  it('reads the worker\'s last reports first: spans it delivered while the loop was blocked are not called lost', async () => {
    const result = await run({
      project: 'acme/exit-blocked',
      deliveryThread: 'worker',
      processor: 'simple',
      exporterOptions: 'flushIntervalMs: 200',
      // A flush first, so the worker is loaded; then 5 spans it has (50 ms) but sends only
      // 200 ms later, while this thread spins and cannot read its reports.
      then: `
await exporter.forceFlush();
for (let i = 0; i < 5; i++) tracer.startSpan('late-' + i).end();
await new Promise((resolve) => setTimeout(resolve, 50));
const spinUntil = Date.now() + 700;
while (Date.now() < spinUntil);
process.exit(0);`,
    });
    expect(result).toMatchObject({ stored: 10, stderr: '' });
  });

  it('calls spans in a request with no answer yet possibly lost, not lost', async () => {
    // A service that reads requests and never answers: the span stays in flight.
    const silent = createServer((request) => request.resume());
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const script = await runPackageScript(
        exporterScript({
          project: 'acme/exit-in-flight',
          deliveryThread: 'main',
          processor: 'simple',
          exporterOptions: 'flushIntervalMs: 0',
          then: "await new Promise((resolve) => setTimeout(resolve, 300)); tracer.startSpan('queued').end(); process.exit(0);",
        }),
        { SERVER_URL: `http://127.0.0.1:${(silent.address() as AddressInfo).port}` },
      );
      expect(script.stderr.trim()).toMatch(
        /^callbridge: the process exited with 6 spans not confirmed delivered \(5 in requests still in flight\); they may be lost \(/,
      );
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('says nothing when everything was flushed first', async () => {
    const result = await run({ project: 'acme/exit-flushed', deliveryThread: 'worker', processor: 'simple', then: 'await exporter.forceFlush(); process.exit(0);' });
    expect(result).toMatchObject({ stored: 5, stderr: '' });
  });
});

interface ServiceOptions {
  readonly project: string;
  /** More `register()` options, as source text. */
  readonly options?: string;
  /** Run after the five traced calls, before the process reports that it runs. */
  readonly then?: string;
}

/**
 * A process that runs like a service until it is stopped: five traced calls through `register()`
 * (their batch waits for its interval, 1 s by default), then a timer that keeps it alive.
 */
function startService({ project, options = '', then = '' }: ServiceOptions) {
  const source = `
const { register, trace } = await import(process.env.CALLBRIDGE_ENTRY);
const tracing = register({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw', ${options} });
for (let i = 0; i < 5; i++) trace(function hello(x) { return x; })(i);
${then}
globalThis.keepAlive = setInterval(() => {}, 1000);
console.log('running');
`;
  return startPackageScript(source, { SERVER_URL: server.url });
}

/** Start `service`, send it `signal` once it runs, and wait for it to end. */
async function stopService(service: ServiceOptions, signal: NodeJS.Signals) {
  const child = startService(service);
  await listeningUrl(child, /^(running)$/m);
  child.child.kill(signal);
  const exit = await child.exited();
  return { ...exit, stderr: child.stderr() };
}

describe('a stop signal, handled as the README shows', () => {
  for (const deliveryThread of ['main', 'worker'] as const) {
    it(`with the README's handler (shutdown(), then exit), delivers what waits (${deliveryThread} thread)`, async () => {
      const project = `acme/signal-handler-${deliveryThread}`;
      const stopped = await stopService(
        {
          project,
          options: `deliveryThread: '${deliveryThread}', shutdownTimeoutMs: 5000`,
          then: "process.once('SIGTERM', () => { void tracing.shutdown().finally(() => process.exit(143)); });",
        },
        'SIGTERM',
      );
      expect(stopped).toMatchObject({ code: 143, signal: null, stderr: '' });
      expect(await readAllCalls(server.url, project, server)).toHaveLength(5);
    });
  }
});

describe('the exit watch', () => {
  it('adds one beforeExit and one exit listener for any number of exporters, none for signals, and checks flushOnExit', async () => {
    const events = ['beforeExit', 'exit', 'SIGTERM', 'SIGINT'] as const;
    const before = events.map((event) => process.listenerCount(event));
    const exporters = Array.from({ length: 20 }, () => new CallbridgeExporter({ projectId: 'acme/watch', deliveryThread: 'main' }));
    const after = events.map((event) => process.listenerCount(event));
    expect(after[0]).toBeLessThanOrEqual(before[0]! + 1);
    expect(after[1]).toBeLessThanOrEqual(before[1]! + 1);
    // Signals stay the application's: a listener would change whether and how it stops on them.
    expect(after.slice(2)).toEqual(before.slice(2));
    await Promise.all(exporters.map((exporter) => exporter.shutdown()));
    expect(() => new CallbridgeExporter({ projectId: 'acme/watch', flushOnExit: 'yes' as unknown as boolean })).toThrow(InvalidOptionError);
  });
});

describe("the exit flush of an exporter behind a global provider's BatchSpanProcessor", () => {
  it("flushes only the processors that export to it, not the application's other exporters", async () => {
    const project = 'acme/exit-global-others';
    const source = `
const { NodeTracerProvider, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-node');
const { CallbridgeExporter } = await import(process.env.CALLBRIDGE_ENTRY);
const exporter = new CallbridgeExporter({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw' });
const other = { export(spans, done) { console.log('other exporter got ' + spans.length); done({ code: 0 }); }, shutdown: async () => {} };
const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(other), new BatchSpanProcessor(exporter)] });
provider.register();
const tracer = provider.getTracer('exit-test');
for (let i = 0; i < 5; i++) tracer.startSpan('step-' + i).end();
process.on('exit', () => console.log(JSON.stringify(exporter.stats())));
`;
    const script = await runPackageScript(source, { SERVER_URL: server.url });
    expect(script.code).toBe(0);
    expect(script.stdout).not.toContain('other exporter got');
    expect(JSON.parse(script.stdout.trim().split('\n').at(-1)!)).toMatchObject({ delivered: 5 });
    expect(await readAllCalls(server.url, project, server)).toHaveLength(5);
  });

  it("delivers a span the application's own beforeExit work ends after the first exit flush", async () => {
    const project = 'acme/exit-global-late';
    const source = `
const { NodeTracerProvider, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-node');
const { CallbridgeExporter } = await import(process.env.CALLBRIDGE_ENTRY);
const exporter = new CallbridgeExporter({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw' });
const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
provider.register();
const tracer = provider.getTracer('exit-test');
let cleanedUp = false;
process.on('beforeExit', () => {
  if (cleanedUp) return;
  cleanedUp = true;
  setTimeout(() => tracer.startSpan('cleanup').end(), 10);
});
`;
    const script = await runPackageScript(source, { SERVER_URL: server.url });
    expect(script).toMatchObject({ code: 0, stderr: '' });
    expect((await readAllCalls(server.url, project, server)).map((call) => call.op_name)).toEqual(['cleanup']);
  });

  it("lets the process exit when the application's own beforeExit work makes a span every time", async () => {
    const project = 'acme/exit-global-every-round';
    const source = `
const { NodeTracerProvider, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-node');
const { CallbridgeExporter } = await import(process.env.CALLBRIDGE_ENTRY);
let rounds = 0;
let tracer;
// No guard: without an exit flush the process exits after one round, the span unsent.
process.on('beforeExit', () => tracer.startSpan('round-' + ++rounds).end());
const exporter = new CallbridgeExporter({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw' });
const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
provider.register();
tracer = provider.getTracer('exit-test');
process.on('exit', () => console.log(rounds));
`;
    const script = await runPackageScript(source, { SERVER_URL: server.url });
    expect(script.code).toBe(0);
    const rounds = Number(script.stdout.trim());
    expect(rounds).toBeGreaterThan(1);
    expect(rounds).toBeLessThanOrEqual(MAX_EXIT_FLUSH_ROUNDS + 1);
    expect((await readAllCalls(server.url, project, server)).length).toBeGreaterThanOrEqual(rounds - 1);
  });

  it('flushes a global OpenTelemetry SDK 1.x provider too', async () => {
    const project = 'acme/exit-global-v1';
    const source = `
const { BasicTracerProvider, BatchSpanProcessor } = await import('sdk-trace-base-v1');
const { CallbridgeExporter } = await import(process.env.CALLBRIDGE_ENTRY);
const exporter = new CallbridgeExporter({ baseUrl: process.env.SERVER_URL, projectId: '${project}', username: 'dev', password: 'pw' });
const provider = new BasicTracerProvider();
provider.addSpanProcessor(new BatchSpanProcessor(exporter));
provider.register();
const tracer = provider.getTracer('exit-test');
for (let i = 0; i < 3; i++) tracer.startSpan('step-' + i).end();
`;
    const script = await runPackageScript(source, { SERVER_URL: server.url });
    expect(script).toMatchObject({ code: 0, stderr: '' });
    expect(await readAllCalls(server.url, project, server)).toHaveLength(3);
  });
});
