/**
 * The delivery worker forwards its `diag` lines to the application's thread. An application
 * logger that throws there must not throw out of the MessagePort 'message' listener as an
 * uncaught exception in the host (SPEC §4.12), at any level (`debug`/`verbose` included).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { killSpawned } from '../helpers/node-process.js';
import { runPackageScript } from '../helpers/package-script.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());
afterEach(killSpawned);

describe('never harms the host (SPEC §4.12): the worker thread', () => {
  it("an application diag logger whose debug() throws does not make an uncaught exception on the application's thread", async () => {
    const source = `
const { diag, DiagLogLevel } = await import('@opentelemetry/api');
const { BasicTracerProvider, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace-base');
const { CallbridgeExporter } = await import(process.env.CALLBRIDGE_ENTRY);
const uncaught = [];
process.on('uncaughtException', (error) => { uncaught.push(String(error && error.message)); });
let armed = false;
// A logger that throws from debug(): its own problem, which must not become the application's.
diag.setLogger({ error() {}, warn() {}, info() {}, verbose() {}, debug() { if (armed) throw new Error('debug logger threw'); } }, DiagLogLevel.ALL);
armed = true;
const exporter = new CallbridgeExporter({ baseUrl: process.env.SERVER_URL, projectId: 'acme/diag', username: 'dev', password: 'pw', deliveryThread: 'worker' });
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.getTracer('diag').startSpan('one').end();
await exporter.forceFlush();
await exporter.shutdown();
console.log(JSON.stringify({ uncaught, delivered: exporter.stats().delivered }));
`;
    const script = await runPackageScript(source, { SERVER_URL: server.url });
    expect(script.code).toBe(0);
    const result = JSON.parse(script.stdout.trim()) as { uncaught: string[]; delivered: number };
    expect(result.delivered).toBe(1);
    expect(result.uncaught).toEqual([]);
  });
});
