/**
 * `CallbridgeExporter` behind the application's own provider (NodeSDK-style: a
 * NodeTracerProvider registered globally, SimpleSpanProcessor), where `register()` is not used.
 */
import { context, propagation, trace as otelTrace } from '@opentelemetry/api';
import { NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { trace } from '../../src/trace/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

describe('an exporter behind the application\'s own provider', () => {
  it('ends a traced stream still open when the process has nothing left to run (exit flush) as unfinished, instead of losing its call', async () => {
    const project = 'acme/lifecycle-own-provider-exit';
    const exporter = new CallbridgeExporter({ baseUrl: server.url, projectId: project, username: server.username, password: server.password, deliveryThread: 'main' });
    const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    provider.register();
    try {
      const words = trace(async function* words() {
        yield 'first';
        yield 'second';
      });
      const stream = words();
      await stream.next();
      // What Node does when the event loop runs dry at the end of a script.
      process.emit('beforeExit', 0);
      await exporter.forceFlush();
      const calls = await readAllCalls(server.url, project, server);
      expect(calls).toHaveLength(1);
      expect(calls[0]).toMatchObject({ op_name: 'words', output: ['first'], attributes: { callbridge: { stream: { end: 'unfinished' } } } });
      void stream;
    } finally {
      await provider.shutdown();
      otelTrace.disable();
      context.disable();
      propagation.disable();
    }
  });
});
