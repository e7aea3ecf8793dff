/**
 * `otel_dump`: the span as received, kept on the call (SPEC §3), and the call's `exception` text.
 */
import type { SpanEventInput, SpanInput, SpanLinkInput } from './span-input.js';
import { hrTimeToIso } from './timestamps.js';
import { unflattenAttributes, type AttributeTree } from './unflatten.js';

// A provider's resource is one object shared by all its spans (the SDK memoizes its attributes),
// so its dump is made once, not once per span: by the attributes object, then by dropped count.
// Weak: resources come and go with providers, and OTLP ingest decodes a fresh one per request.
const resourceCache = new WeakMap<object, Map<number, ResourceDump>>();
/** Distinct dropped counts kept per resource: a resource whose count keeps changing is dumped each time. */
const MAX_DROPPED_COUNTS_PER_RESOURCE = 8;
const EMPTY_ATTRIBUTES: Readonly<Record<string, unknown>> = {};

/** `otel_dump.resource`. */
export interface ResourceDump {
  readonly attributes: Record<string, unknown>;
  readonly dropped_attributes_count: number;
}

/**
 * Builds `otel_dump` for a span whose attributes are already unflattened (`attributes`) and whose
 * times are already formatted. Values nested in it may be shared with the call's other fields and
 * with other spans' dumps (the resource): treat the result as read-only.
 */
export function buildOtelDump(
  span: SpanInput,
  attributes: AttributeTree,
  startTime: string,
  endTime: string,
  notes: string[],
): Record<string, unknown> {
  return {
    name: span.name,
    context: { trace_id: span.traceId, span_id: span.spanId, trace_state: span.traceState ?? '' },
    kind: span.kind,
    parent_id: span.parentSpanId ?? null,
    start_time: startTime,
    end_time: endTime,
    status: { code: span.status.code, message: span.status.message ?? '' },
    attributes: attributes.root,
    events: span.events.length === 0 ? [] : span.events.map((event, index) => dumpEventNoting(event, index, notes)),
    links: span.links.length === 0 ? [] : span.links.map(dumpLink),
    resource: dumpResource(span.resource),
    scope: { name: span.scope.name, version: scopeVersion(span.scope) },
  };
}

/**
 * `otel_dump.scope.version`: null for a tracer without a version, and for an empty one too:
 * protobuf cannot tell `''` from absent, so OTLP ingest never sees an empty version, and the same
 * span must give the same call whichever way it travels (SPEC §3).
 */
export function scopeVersion(scope: SpanInput['scope']): string | null {
  return scope.version || null;
}

/** One entry of `otel_dump.events`. Throws for a time that cannot be written. */
export function dumpEvent(event: SpanEventInput): Record<string, unknown> {
  return eventDump(event, hrTimeToIso(event.time));
}

/**
 * One entry of `otel_dump.events`; a time that cannot be written (`addEvent` given an invalid
 * Date) is null, and noted, so the span's other events and its dump are kept.
 */
function dumpEventNoting(event: SpanEventInput, index: number, notes: string[]): Record<string, unknown> {
  let timestamp: string | null;
  try {
    timestamp = hrTimeToIso(event.time);
  } catch (error) {
    notes.push(`otel_dump.events[${index}].timestamp: ${error instanceof Error ? error.message : String(error)}`);
    timestamp = null;
  }
  return eventDump(event, timestamp);
}

function eventDump(event: SpanEventInput, timestamp: string | null): Record<string, unknown> {
  return {
    name: event.name,
    timestamp,
    attributes: unflattenAttributes(event.attributes).root,
    dropped_attributes_count: event.droppedAttributesCount ?? 0,
  };
}

/** One entry of `otel_dump.links`. */
export function dumpLink(link: SpanLinkInput): Record<string, unknown> {
  return {
    trace_id: link.traceId,
    span_id: link.spanId,
    trace_state: link.traceState ?? '',
    attributes: unflattenAttributes(link.attributes).root,
    dropped_attributes_count: link.droppedAttributesCount ?? 0,
  };
}

/**
 * `otel_dump.resource`: one object per provider resource (and dropped count), the same object for
 * every span of it, so a writer may cache its JSON by identity. Read-only.
 */
export function dumpResource(resource: SpanInput['resource']): ResourceDump {
  const attributes = resource.attributes ?? EMPTY_ATTRIBUTES;
  const dropped = resource.droppedAttributesCount ?? 0;
  let byDropped = resourceCache.get(attributes);
  if (byDropped === undefined) {
    byDropped = new Map();
    resourceCache.set(attributes, byDropped);
  }
  let dump = byDropped.get(dropped);
  if (dump === undefined) {
    dump = { attributes: unflattenAttributes(attributes).root, dropped_attributes_count: dropped };
    if (byDropped.size < MAX_DROPPED_COUNTS_PER_RESOURCE) byDropped.set(dropped, dump);
  }
  return dump;
}

/**
 * The call's `exception` (SPEC §3): for an ERROR status its message; if that is empty,
 * `<exception.type>: <exception.message>` of the first `exception` event; else `"error"`.
 * Undefined when the status is not ERROR.
 */
export function exceptionText(span: SpanInput): string | undefined {
  if (span.status.code !== 'ERROR') return undefined;
  const message = span.status.message;
  if (typeof message === 'string' && message.length > 0) return message;
  for (const event of span.events) {
    if (event.name !== 'exception') continue;
    const type = nonEmptyText(event.attributes?.['exception.type']);
    const detail = nonEmptyText(event.attributes?.['exception.message']);
    if (type !== undefined && detail !== undefined) return `${type}: ${detail}`;
    const either = type ?? detail;
    if (either !== undefined) return either;
    break;
  }
  return 'error';
}

function nonEmptyText(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
