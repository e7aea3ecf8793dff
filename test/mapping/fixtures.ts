/**
 * Real OTel SDK spans for the mapping tests: a BasicTracerProvider with an InMemorySpanExporter
 * behind a SimpleSpanProcessor, with deterministic ids and a fixed resource so that whole call
 * items can be written out as literals.
 */
import { context, trace, type Attributes, type Link, type SpanKind, type SpanStatus, type HrTime } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';

export const PROJECT = 'acme/demo';
/** 2026-01-02T03:04:05Z */
export const T0 = 1_767_323_045;
export const START: HrTime = [T0, 123_456_789];
export const END: HrTime = [T0 + 1, 5_000];
export const START_ISO = '2026-01-02T03:04:05.123456Z';
export const END_ISO = '2026-01-02T03:04:06.000005Z';

export const RESOURCE_DUMP = {
  attributes: { service: { name: 'mapping-tests', version: '1.2.3' }, deployment: { environment: 'test' } },
  dropped_attributes_count: 0,
};
export const SCOPE_DUMP = { name: 'callbridge-tests', version: '0.1.0' };

export interface SpanSpec {
  name?: string;
  kind?: SpanKind;
  attributes?: Attributes;
  parent?: ReadableSpanHandle;
  events?: Array<{ name: string; attributes?: Attributes; time: HrTime }>;
  links?: Link[];
  status?: SpanStatus;
  /** Passed to `span.recordException` (as instrumentations do on failure). */
  exception?: Error;
  start?: HrTime;
  end?: HrTime;
}

/** A started span that can be used as a parent for the next one. */
export interface ReadableSpanHandle {
  readonly spanId: string;
  readonly traceId: string;
  readonly context: ReturnType<typeof trace.setSpan>;
}

/** A tracer whose spans get ids 1, 2, 3, ... (trace ids likewise), so expectations are literal. */
export function createTracing() {
  let nextSpan = 0;
  let nextTrace = 0;
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': 'mapping-tests',
      'service.version': '1.2.3',
      'deployment.environment': 'test',
    }),
    idGenerator: {
      generateSpanId: () => (++nextSpan).toString(16).padStart(16, '0'),
      generateTraceId: () => (++nextTrace).toString(16).padStart(32, '0'),
    },
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('callbridge-tests', '0.1.0');

  /** Starts and ends one span, returning its handle and the ReadableSpan the exporter got. */
  function finish(spec: SpanSpec = {}): { span: ReadableSpan; handle: ReadableSpanHandle } {
    const parentContext = spec.parent?.context ?? context.active();
    const span = tracer.startSpan(
      spec.name ?? 'step',
      { kind: spec.kind, attributes: spec.attributes, links: spec.links, startTime: spec.start ?? START },
      parentContext,
    );
    for (const event of spec.events ?? []) span.addEvent(event.name, event.attributes, event.time);
    if (spec.exception) span.recordException(spec.exception, START);
    if (spec.status) span.setStatus(spec.status);
    span.end(spec.end ?? END);
    const finished = exporter.getFinishedSpans();
    const readable = finished[finished.length - 1]!;
    const spanContext = span.spanContext();
    return {
      span: readable,
      handle: { spanId: spanContext.spanId, traceId: spanContext.traceId, context: trace.setSpan(context.active(), span) },
    };
  }

  return { finish, shutdown: () => provider.shutdown() };
}

/** The `otel_dump` of a plain INTERNAL span made by `finish` with the default times. */
export function dumpOf(fields: {
  name: string;
  spanId: string;
  traceId: string;
  parentId?: string | null;
  attributes: Record<string, unknown>;
  kind?: string;
  status?: { code: string; message: string };
  events?: unknown[];
  links?: unknown[];
}): Record<string, unknown> {
  return {
    name: fields.name,
    context: { trace_id: fields.traceId, span_id: fields.spanId, trace_state: '' },
    kind: fields.kind ?? 'INTERNAL',
    parent_id: fields.parentId ?? null,
    start_time: START_ISO,
    end_time: END_ISO,
    status: fields.status ?? { code: 'UNSET', message: '' },
    attributes: fields.attributes,
    events: fields.events ?? [],
    links: fields.links ?? [],
    resource: RESOURCE_DUMP,
    scope: SCOPE_DUMP,
  };
}
