/**
 * Spans of an OpenTelemetry SDK 1.x provider (`@opentelemetry/sdk-trace-base` 1.30, installed as
 * `sdk-trace-base-v1`): their parent is `parentSpanId` and their scope `instrumentationLibrary`
 * where 2.x has `parentSpanContext` and `instrumentationScope`. An exporter behind a 1.x provider
 * must still give calls their parents and scopes, on both delivery threads.
 */
import { context, trace as otelTrace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from 'sdk-trace-base-v1';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { MAPPING_ERROR_ATTRIBUTE, toCallParts } from '../../src/mapping/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { readAllCalls } from './fault-proxy.js';

/** A 1.x processor's exporter type: the 2.x `ReadableSpan` the exporter declares differs in type only. */
type V1Exporter = ConstructorParameters<typeof SimpleSpanProcessor>[0];

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/** A root and a child from a 1.x provider whose spans go to `processor`. */
function emitTree(processor: SimpleSpanProcessor): { rootId: string; childId: string } {
  const provider = new BasicTracerProvider();
  provider.addSpanProcessor(processor);
  const tracer = provider.getTracer('sdk-v1-test', '1.2.3');
  const root = tracer.startSpan('root');
  const child = tracer.startSpan('child', { attributes: { 'input.value': 'hi' } }, otelTrace.setSpan(context.active(), root));
  child.end();
  root.end();
  return { rootId: root.spanContext().spanId, childId: child.spanContext().spanId };
}

describe('spans of an OpenTelemetry SDK 1.x provider', () => {
  it('map with their parent and scope, and without a mapping error', () => {
    const memory = new InMemorySpanExporter();
    const { rootId } = emitTree(new SimpleSpanProcessor(memory));
    const child = memory.getFinishedSpans().find((span) => span.name === 'child') as unknown as ReadableSpan;
    const { start } = toCallParts(child, 'acme/v1');
    expect(start.parent_id).toBe(rootId);
    expect(start.inputs).toEqual({ 'input.value': 'hi' });
    expect(start.attributes).not.toHaveProperty(MAPPING_ERROR_ATTRIBUTE);
    expect(start.otel_dump).toMatchObject({ parent_id: rootId, scope: { name: 'sdk-v1-test', version: '1.2.3' } });
  });

  for (const deliveryThread of ['main', 'worker'] as const) {
    it(`are delivered as a call tree by the exporter (${deliveryThread} thread)`, async () => {
      const project = `acme/sdk-v1-${deliveryThread}`;
      const exporter = new CallbridgeExporter({ baseUrl: server.url, projectId: project, username: 'dev', password: 'pw', deliveryThread });
      const { rootId, childId } = emitTree(new SimpleSpanProcessor(exporter as unknown as V1Exporter));
      await exporter.forceFlush();
      await exporter.shutdown();
      expect(exporter.stats()).toMatchObject({ delivered: 2, queued: 0 });
      const calls = await readAllCalls(server.url, project, server);
      const child = calls.find((call) => call.id === childId);
      expect(child).toMatchObject({ parent_id: rootId, op_name: 'child', inputs: { 'input.value': 'hi' } });
      expect(child!.attributes).not.toHaveProperty(MAPPING_ERROR_ATTRIBUTE);
      expect(calls.find((call) => call.id === rootId)).toMatchObject({ parent_id: null });
    });
  }
});
