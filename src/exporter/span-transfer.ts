/**
 * How a span crosses to the delivery worker: one flat array per span, copied by the structured
 * clone of `postMessage`, turned back into a {@link SpanInput} on the worker.
 *
 * Why a flat array and not the `SpanInput` object itself: the clone's cost is per object and per
 * property, and on the application's thread every microsecond counts. Measured with the
 * benchmark's spans (Node 20, messages of 128 spans): copying `SpanInput` objects cost 3.7-4.1 µs
 * per span, these arrays 1.6-2.2 µs. Objects that many spans share (the resource's attributes,
 * the instrumentation scope) are referenced, so the clone writes them once per message.
 */
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import {
  kindFromJs,
  linksOf,
  parentSpanIdOf,
  readSpan,
  scopeOf,
  statusCodeName,
  type HrTime,
  type SpanAttributes,
  type SpanEventInput,
  type SpanInput,
  type SpanKindName,
  type SpanLinkInput,
  type StatusCodeName,
} from '../mapping/index.js';

/** A span as the worker receives it; positions are fixed by {@link encodeSpan}. */
export type SpanTransfer = [
  name: string,
  traceId: string,
  spanId: string,
  traceState: string | undefined,
  parentSpanId: string | undefined,
  kind: SpanKindName,
  startTime: HrTime,
  endTime: HrTime,
  statusCode: StatusCodeName,
  statusMessage: string | undefined,
  attributes: SpanAttributes,
  events: readonly SpanEventInput[],
  links: readonly SpanLinkInput[],
  resourceAttributes: SpanAttributes,
  scope: { readonly name: string; readonly version?: string | undefined },
  readNotes: readonly string[] | undefined,
];

/**
 * The span's fields in transfer form. Never throws: a span whose fields cannot be read goes the
 * mapping's salvage way ({@link readSpan}), with what failed in `readNotes`.
 */
export function encodeSpan(span: ReadableSpan): SpanTransfer {
  try {
    const context = span.spanContext();
    return [
      span.name,
      context.traceId,
      context.spanId,
      context.traceState?.serialize(),
      parentSpanIdOf(span),
      kindFromJs(span.kind),
      span.startTime,
      span.endTime,
      statusCodeName(span.status.code),
      span.status.message,
      span.attributes,
      span.events,
      linksOf(span.links),
      span.resource.attributes,
      scopeOf(span),
      undefined,
    ];
  } catch {
    const notes: string[] = [];
    return encodeInput(readSpan(span, notes), notes);
  }
}

/** A neutral span in transfer form, with `notes` about how it was read. */
export function encodeInput(input: SpanInput, notes: readonly string[] = input.readNotes ?? []): SpanTransfer {
  return [
    input.name,
    input.traceId,
    input.spanId,
    input.traceState,
    input.parentSpanId,
    input.kind,
    input.startTime,
    input.endTime,
    input.status.code,
    input.status.message,
    input.attributes,
    input.events,
    input.links,
    input.resource.attributes,
    input.scope,
    notes.length === 0 ? undefined : notes,
  ];
}

/**
 * The worker's side: the span the mapping reads. Optional slots are read with `?? undefined`:
 * after {@link toCloneable}'s JSON copy an absent value arrives as null.
 */
export function decodeSpan(transfer: SpanTransfer): SpanInput {
  const scope = transfer[14];
  return {
    name: transfer[0],
    traceId: transfer[1],
    spanId: transfer[2],
    traceState: transfer[3] ?? undefined,
    parentSpanId: transfer[4] ?? undefined,
    kind: transfer[5],
    startTime: transfer[6],
    endTime: transfer[7],
    status: { code: transfer[8], message: transfer[9] ?? undefined },
    attributes: transfer[10],
    events: transfer[11],
    links: transfer[12],
    resource: { attributes: transfer[13] },
    scope: { name: scope.name, version: scope.version ?? undefined },
    readNotes: transfer[15] ?? undefined,
  };
}

/**
 * `transfer` with every value the structured clone refuses (a function or symbol that an
 * instrumentation put where the SDK did not check) written as the text the mapping would make of
 * it anyway (SPEC §3). Should even that fail (a cycle through such a value), the span goes
 * without its attribute-bearing parts and with a note, like any span that cannot be read whole.
 */
export function toCloneable(transfer: SpanTransfer): SpanTransfer {
  try {
    return jsonSafeCopy(transfer);
  } catch (error) {
    const input = decodeSpan(transfer);
    const reason = error instanceof Error ? error.message : String(error);
    const note = `span: its attributes could not be copied to the delivery worker: ${reason}`;
    const bare: SpanInput = { ...input, attributes: {}, events: [], links: [], resource: { attributes: {} } };
    return jsonSafeCopy(encodeInput(bare, [...(input.readNotes ?? []), note]));
  }
}

function jsonSafeCopy(transfer: SpanTransfer): SpanTransfer {
  return JSON.parse(
    JSON.stringify(transfer, (_key, value: unknown) => {
      if (typeof value === 'bigint') return value.toString();
      if (typeof value === 'function' || typeof value === 'symbol') return String(value);
      if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
      if (ArrayBuffer.isView(value)) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64');
      return value;
    }),
  ) as SpanTransfer;
}
