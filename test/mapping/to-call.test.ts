import { afterAll, describe, expect, it } from 'vitest';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { toCallParts, toCompletedCall, toUpsertItems } from '../../src/mapping/index.js';
import { createTracing, dumpOf, END_ISO, PROJECT, START_ISO, T0 } from './fixtures.js';

const tracing = createTracing();
afterAll(() => tracing.shutdown());

describe('toUpsertItems on a plain span', () => {
  it('gives a start item then an end item carrying every field of SPEC §3', () => {
    const { span } = tracing.finish({
      name: 'load-config',
      attributes: { 'app.region': 'eu', 'app.retries': 3, 'app.cached': true },
    });
    const spanId = span.spanContext().spanId;
    const traceId = span.spanContext().traceId;
    const tree = { app: { region: 'eu', retries: 3, cached: true } };

    expect(toUpsertItems(span, PROJECT)).toEqual([
      {
        mode: 'start',
        req: {
          start: {
            project_id: PROJECT,
            id: spanId,
            trace_id: traceId,
            parent_id: null,
            op_name: 'load-config',
            started_at: START_ISO,
            // No known convention matched: the call keeps all span attributes.
            attributes: tree,
            inputs: {},
            otel_dump: dumpOf({ name: 'load-config', spanId, traceId, attributes: tree }),
          },
        },
      },
      {
        mode: 'end',
        req: { end: { project_id: PROJECT, id: spanId, ended_at: END_ISO, output: null, summary: {} } },
      },
    ]);
    expect(spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it('writes the span kind, trace state and microsecond times into otel_dump', () => {
    const { span } = tracing.finish({
      name: 'GET /items',
      kind: SpanKind.SERVER,
      start: [T0, 999_999_999],
      end: [T0 + 2, 1_999],
    });
    const { start, end } = toCallParts(span, PROJECT);
    expect(start.started_at).toBe('2026-01-02T03:04:05.999999Z');
    expect(end.ended_at).toBe('2026-01-02T03:04:07.000001Z');
    expect(start.otel_dump).toMatchObject({
      kind: 'SERVER',
      start_time: '2026-01-02T03:04:05.999999Z',
      end_time: '2026-01-02T03:04:07.000001Z',
    });
    for (const kind of [SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.INTERNAL]) {
      const made = tracing.finish({ kind }).span;
      expect(toCallParts(made, PROJECT).start.otel_dump?.kind).toBe(SpanKind[kind]);
    }
  });

  it('links nested spans by parent id within one trace', () => {
    const root = tracing.finish({ name: 'root' });
    const child = tracing.finish({ name: 'child', parent: root.handle });
    const grandchild = tracing.finish({ name: 'grandchild', parent: child.handle });
    const [rootCall, childCall, grandchildCall] = [root, child, grandchild].map(
      ({ span }) => toCallParts(span, PROJECT).start,
    );
    expect(rootCall!.parent_id).toBeNull();
    expect(childCall!.parent_id).toBe(root.handle.spanId);
    expect(grandchildCall!.parent_id).toBe(child.handle.spanId);
    expect(new Set([rootCall!.trace_id, childCall!.trace_id, grandchildCall!.trace_id]).size).toBe(1);
    expect(grandchildCall!.otel_dump?.parent_id).toBe(child.handle.spanId);
  });
});

describe('events and links', () => {
  it('dumps events with their times and unflattened attributes, and links with their ids', () => {
    const target = tracing.finish({ name: 'target' });
    const { span } = tracing.finish({
      name: 'with-events',
      events: [
        { name: 'cache.miss', attributes: { 'cache.key': 'k1', 'cache.layer': '{"tier":2}' }, time: [T0, 500_000_000] },
        { name: 'retry', time: [T0, 600_000_123] },
      ],
      links: [
        {
          context: { traceId: target.handle.traceId, spanId: target.handle.spanId, traceFlags: 1 },
          attributes: { 'link.reason': 'follows' },
        },
      ],
    });
    const spanId = span.spanContext().spanId;
    const traceId = span.spanContext().traceId;
    expect(toCallParts(span, PROJECT).start.otel_dump).toEqual(
      dumpOf({
        name: 'with-events',
        spanId,
        traceId,
        attributes: {},
        events: [
          {
            name: 'cache.miss',
            timestamp: '2026-01-02T03:04:05.500000Z',
            attributes: { cache: { key: 'k1', layer: { tier: 2 } } },
            dropped_attributes_count: 0,
          },
          { name: 'retry', timestamp: '2026-01-02T03:04:05.600000Z', attributes: {}, dropped_attributes_count: 0 },
        ],
        links: [
          {
            trace_id: target.handle.traceId,
            span_id: target.handle.spanId,
            trace_state: '',
            attributes: { link: { reason: 'follows' } },
            dropped_attributes_count: 0,
          },
        ],
      }),
    );
  });
});

describe('error spans', () => {
  it('uses the status message as the exception', () => {
    const { span } = tracing.finish({ status: { code: SpanStatusCode.ERROR, message: 'boom: disk full' } });
    const { start, end } = toCallParts(span, PROJECT);
    expect(end.exception).toBe('boom: disk full');
    expect(start.otel_dump?.status).toEqual({ code: 'ERROR', message: 'boom: disk full' });
  });

  it('falls back to "<type>: <message>" of the first exception event when the message is empty', () => {
    const { span } = tracing.finish({
      status: { code: SpanStatusCode.ERROR },
      events: [
        { name: 'log', attributes: { 'exception.type': 'NotThisOne' }, time: [T0, 1] },
        { name: 'exception', attributes: { 'exception.type': 'TypeError', 'exception.message': 'x is undefined' }, time: [T0, 2] },
        { name: 'exception', attributes: { 'exception.type': 'Later', 'exception.message': 'ignored' }, time: [T0, 3] },
      ],
    });
    expect(toCallParts(span, PROJECT).end.exception).toBe('TypeError: x is undefined');
  });

  it('writes "error" when there is neither a message nor an exception event', () => {
    const { span } = tracing.finish({ status: { code: SpanStatusCode.ERROR, message: '' } });
    const { end } = toCallParts(span, PROJECT);
    expect(end).toEqual({ project_id: PROJECT, id: span.spanContext().spanId, ended_at: END_ISO, output: null, summary: {}, exception: 'error' });
  });

  it('uses whichever half of an exception event exists', () => {
    const onlyMessage = tracing.finish({
      status: { code: SpanStatusCode.ERROR },
      events: [{ name: 'exception', attributes: { 'exception.message': 'no type here' }, time: [T0, 1] }],
    });
    expect(toCallParts(onlyMessage.span, PROJECT).end.exception).toBe('no type here');
  });

  it('reads the event that span.recordException() writes', () => {
    const { span } = tracing.finish({ status: { code: SpanStatusCode.ERROR }, exception: new RangeError('too far') });
    expect(toCallParts(span, PROJECT).end.exception).toBe('RangeError: too far');
  });

  it('leaves exception out for OK and UNSET spans, even with exception events', () => {
    const { span } = tracing.finish({
      status: { code: SpanStatusCode.OK, message: 'fine' },
      events: [{ name: 'exception', attributes: { 'exception.type': 'Handled' }, time: [T0, 1] }],
    });
    const { start, end } = toCallParts(span, PROJECT);
    expect(end).not.toHaveProperty('exception');
    expect(start.otel_dump?.status).toEqual({ code: 'OK', message: '' });
  });
});

describe('toCompletedCall', () => {
  it('merges the start and end parts into one record', () => {
    const { span } = tracing.finish({
      name: 'answer',
      attributes: { 'input.value': 'q?', 'output.value': 'a!', 'wandb.wb_run_step_end': 7 },
      status: { code: SpanStatusCode.ERROR, message: 'late' },
    });
    const spanId = span.spanContext().spanId;
    const traceId = span.spanContext().traceId;
    const tree = { input: { value: 'q?' }, output: { value: 'a!' }, wandb: { wb_run_step_end: 7 } };
    expect(toCompletedCall(span, PROJECT)).toEqual({
      project_id: PROJECT,
      id: spanId,
      trace_id: traceId,
      parent_id: null,
      op_name: 'answer',
      started_at: START_ISO,
      ended_at: END_ISO,
      attributes: {},
      inputs: { 'input.value': 'q?' },
      output: { 'output.value': 'a!' },
      summary: {},
      exception: 'late',
      wb_run_step_end: 7,
      otel_dump: dumpOf({ name: 'answer', spanId, traceId, attributes: tree, status: { code: 'ERROR', message: 'late' } }),
    });
  });
});
