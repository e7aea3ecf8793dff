/**
 * Decoded OTLP spans -> the mapping's neutral {@link SpanInput} (SPEC §2.7, §3), so a span
 * ingested over OTLP becomes the same call as the same span sent by the exporter. A span whose ids
 * cannot identify a call is not converted: the caller reports it in `partial_success`.
 */
import {
  hrTimeFromUnixNanos,
  kindFromOtlp,
  statusCodeName,
  type SpanInput,
  type SpanLinkInput,
} from '../../mapping/index.js';
import { clip } from '../quote.js';
import type { OtlpLink, OtlpResource, OtlpScope, OtlpSpan } from './types.js';

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
const ALL_ZEROS = /^0+$/;
/** OTel's invalid span id (`INVALID_SPANID`): 8 zero bytes. */
const INVALID_SPAN_ID = '0000000000000000';

/** A converted span, or why it could not be. */
export type SpanConversion = { readonly ok: true; readonly span: SpanInput } | { readonly ok: false; readonly reason: string };

/**
 * Converts one decoded span. `resource` is shared by the spans of one `ResourceSpans` (the mapping
 * caches its unflattened form per object).
 *
 * Ids follow opentelemetry-proto: a trace id is 16 bytes and a span id 8 bytes, and an id of any
 * other length or of all zeros is invalid. A root span has no parent: `parent_span_id` empty, or
 * 8 zero bytes, OTel's invalid span id, which some exporters write for "none" (old .NET and C++
 * SDKs, OpenCensus bridges). Rejecting it would lose the trace's root; the hosted service reads it
 * as no parent too (wandb/weave#7126).
 *
 * @example
 * const result = toSpanInput(decodedSpan, resource, scope);
 * if (result.ok) toCallParts(result.span, 'acme/demo');
 */
export function toSpanInput(span: OtlpSpan, resource: SpanInput['resource'], scope: OtlpScope): SpanConversion {
  const problem =
    idProblem(span.traceId, TRACE_ID, 'trace_id', 16) ??
    idProblem(span.spanId, SPAN_ID, 'span_id', 8) ??
    (hasParent(span) ? idProblem(span.parentSpanId, SPAN_ID, 'parent_span_id', 8) : undefined);
  if (problem !== undefined) return { ok: false, reason: problem };
  return {
    ok: true,
    span: {
      name: span.name,
      traceId: span.traceId,
      spanId: span.spanId,
      traceState: span.traceState,
      parentSpanId: hasParent(span) ? span.parentSpanId : undefined,
      kind: kindFromOtlp(span.kind),
      startTime: hrTimeFromUnixNanos(span.startTimeUnixNano),
      endTime: hrTimeFromUnixNanos(span.endTimeUnixNano),
      status: { code: statusCodeName(span.status.code), message: span.status.message },
      attributes: span.attributes,
      events: span.events.map((event) => ({
        name: event.name,
        time: hrTimeFromUnixNanos(event.timeUnixNano),
        attributes: event.attributes,
        droppedAttributesCount: event.droppedAttributesCount,
      })),
      links: span.links.map(toLinkInput),
      resource,
      // proto3 cannot tell an empty version from none: the mapping writes both as null.
      scope: { name: scope.name, version: scope.version },
    },
  };
}

/** The mapping's resource view of a decoded resource (one object per `ResourceSpans`). */
export function toResourceInput(resource: OtlpResource): SpanInput['resource'] {
  return { attributes: resource.attributes, droppedAttributesCount: resource.droppedAttributesCount };
}

/** How a rejected span is named in `error_message`. */
export function describeSpan(span: OtlpSpan): string {
  // Clipped: hostile names and ids would make the message as large as the body.
  return `name=${JSON.stringify(clip(span.name, 64))} trace_id=${JSON.stringify(clip(span.traceId, 64))} span_id=${JSON.stringify(clip(span.spanId, 64))}`;
}

function toLinkInput(link: OtlpLink): SpanLinkInput {
  return {
    traceId: link.traceId,
    spanId: link.spanId,
    traceState: link.traceState,
    attributes: link.attributes,
    droppedAttributesCount: link.droppedAttributesCount,
  };
}

/** False for a root span: no parent id, or the invalid (all-zero) span id. */
function hasParent(span: OtlpSpan): boolean {
  return span.parentSpanId !== '' && span.parentSpanId !== INVALID_SPAN_ID;
}

function idProblem(id: string, shape: RegExp, field: string, bytes: number): string | undefined {
  if (id === '') return `${field} is missing`;
  if (!shape.test(id)) return `${field} must be ${bytes} bytes (${bytes * 2} hex characters)`;
  if (ALL_ZEROS.test(id)) return `${field} is all zeros`;
  return undefined;
}
