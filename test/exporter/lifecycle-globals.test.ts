/**
 * What `register()` installs globally, and what its `shutdown()` removes. An application
 * that set up its own context manager and propagator (but no tracer provider) before register()
 * keeps them: register() cannot install its own over them, so its shutdown must not remove them.
 */
import { context, createContextKey, diag, DiagLogLevel, propagation, ROOT_CONTEXT, trace as otelTrace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../../src/exporter/register.js';
import { trace } from '../../src/trace/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());
afterEach(() => {
  otelTrace.disable();
  context.disable();
  propagation.disable();
  diag.disable();
});

const KEY = createContextKey('lifecycle test');
const contextWorks = (): boolean => context.with(ROOT_CONTEXT.setValue(KEY, 1), () => context.active().getValue(KEY)) === 1;

describe('register() and globals it did not install', () => {
  it("leaves the application's own context manager and propagator registered after shutdown()", async () => {
    const project = 'acme/lifecycle-globals';
    expect(context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())).toBe(true);
    expect(propagation.setGlobalPropagator(new W3CTraceContextPropagator())).toBe(true);
    const errors: string[] = [];
    diag.setLogger({ error: (message) => errors.push(message), warn: () => {}, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.ERROR);

    const tracing = register({ baseUrl: server.url, projectId: project, username: server.username, password: server.password, deliveryThread: 'main', flushOnExit: false });
    // The provider is global (its spans come through trace()); the application's context manager is used.
    expect(trace(function hello(x: number) { return x; })(1)).toBe(1);
    await tracing.forceFlush();
    expect(await readAllCalls(server.url, project, server)).toHaveLength(1);
    await tracing.shutdown();

    expect(contextWorks()).toBe(true);
    expect(propagation.fields()).toEqual(['traceparent', 'tracestate']);
    // Nothing said about duplicate registrations: register() did not try to replace what was there.
    expect(errors).toEqual([]);
  });

  it('still removes everything it installed itself', async () => {
    const tracing = register({ projectId: 'acme/lifecycle-globals-own', deliveryThread: 'main', flushOnExit: false });
    expect(contextWorks()).toBe(true);
    expect(propagation.fields()).toContain('traceparent');
    await tracing.shutdown();
    expect(contextWorks()).toBe(false);
    expect(propagation.fields()).toEqual([]);
    expect((otelTrace.getTracerProvider() as unknown as { getDelegate(): unknown }).getDelegate()).not.toBe(tracing.provider);
  });

  it('removes the context manager and propagator it installed also when another provider kept the global slot', async () => {
    const theirs = new NodeTracerProvider();
    expect(otelTrace.setGlobalTracerProvider(theirs)).toBe(true);
    const tracing = register({ projectId: 'acme/lifecycle-globals-beside', deliveryThread: 'main', flushOnExit: false, logLevel: 'none' });
    expect(contextWorks()).toBe(true);
    await tracing.shutdown();
    expect(contextWorks()).toBe(false);
    expect(propagation.fields()).toEqual([]);
    expect((otelTrace.getTracerProvider() as unknown as { getDelegate(): unknown }).getDelegate()).toBe(theirs);
  });

  it('a register() after another one was shut down takes the globals: trace() calls reach the new one', async () => {
    const connection = { baseUrl: server.url, username: server.username, password: server.password, deliveryThread: 'main' as const, flushOnExit: false };
    const hello = trace(function hello(x: number) { return x; });
    const first = register({ ...connection, projectId: 'acme/lifecycle-again-1' });
    hello(1);
    await first.shutdown();
    const second = register({ ...connection, projectId: 'acme/lifecycle-again-2' });
    hello(2);
    await second.shutdown();
    expect((await readAllCalls(server.url, 'acme/lifecycle-again-1', server)).map((call) => call.inputs)).toEqual([{ x: 1 }]);
    expect((await readAllCalls(server.url, 'acme/lifecycle-again-2', server)).map((call) => call.inputs)).toEqual([{ x: 2 }]);
  });
});
