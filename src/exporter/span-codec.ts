/**
 * How the exporter hands spans to the batcher: the mapping of SPEC §3 (run only when a batch is
 * built) and a cheap size guess for queue bounding (run in `export()`, so kept to a walk over the
 * attribute values without any JSON work).
 */
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { RecordCodec } from '../batcher/index.js';
import { toCompletedCall, toUpsertItems, writeCompletedCall, writeUpsertItems, type SpanInput } from '../mapping/index.js';

/** What the codec maps: an SDK span (main-thread delivery) or its copy (the delivery worker). */
export type ExportedSpan = ReadableSpan | SpanInput;

type Attributes = Readonly<Record<string, unknown>> | undefined;

/**
 * The fields the size guess reads, which a `ReadableSpan` and a `SpanInput` share. Names are typed
 * `unknown`: the SDK keeps what plain JavaScript gives it (`tracer.startSpan(404)`,
 * `span.addEvent(1)`), and the guess must stay a number for those too.
 */
interface SizedSpan {
  readonly name: unknown;
  readonly attributes: Attributes;
  readonly events: readonly { readonly name: unknown; readonly attributes?: Attributes }[];
  readonly links: readonly { readonly attributes?: Attributes }[];
  readonly resource: { readonly attributes: Attributes };
}

/**
 * What a span's two items cost besides its attribute values: ids, timestamps, the item envelopes
 * and the `otel_dump` skeleton. Measured at about 900 bytes for a span without attributes; rounded
 * up so the guess errs on the safe side.
 */
const SPAN_OVERHEAD_BYTES = 1024;
/** JSON bytes of a number or boolean, at most (`-1.2345678901234567e+308`). */
const SCALAR_BYTES = 24;
/**
 * Resource attributes are shared by every span of a provider (and by every span of one message to
 * the delivery worker, whose copy keeps that sharing): measure each attributes object once.
 */
const resourceBytesCache = new WeakMap<object, number>();

/** The codec the exporter gives the batcher: spans of one project. */
export function createSpanCodec(projectId: string): RecordCodec<ExportedSpan> {
  return {
    estimateBytes: estimateSpanBytes,
    toUpsertItems: (span) => toUpsertItems(span, projectId),
    // The JSON of toUpsertItems, written straight into the batch's bytes (mapping/call-json.ts).
    writeUpsertItems: (span, out) => writeUpsertItems(span, projectId, out),
    toCompletedCall: (span) => toCompletedCall(span, projectId),
    writeCompletedCall: (span, out) => writeCompletedCall(span, projectId, out),
  };
}

/**
 * Guess the JSON size of a span's call items without building them. Attribute values are counted
 * twice (they appear in `otel_dump` and again in `inputs`/`output`/`attributes`), events and
 * resource once. Strings count by UTF-16 length, which equals UTF-8 bytes for ASCII and matches
 * what the string costs in the JS heap otherwise; the batcher replaces the guess with the exact
 * size when it serialises the span.
 */
export function estimateSpanBytes(span: SizedSpan): number {
  let bytes = SPAN_OVERHEAD_BYTES + nameBytes(span.name) * 2;
  bytes += 2 * attributesBytes(span.attributes);
  for (const event of span.events) bytes += 64 + nameBytes(event.name) + attributesBytes(event.attributes);
  for (const link of span.links) bytes += 128 + attributesBytes(link.attributes);
  bytes += resourceBytes(span.resource);
  return bytes;
}

/** A name's length; one that is not a string (the mapping writes its text) counts as a scalar. */
function nameBytes(name: unknown): number {
  return typeof name === 'string' ? name.length : SCALAR_BYTES;
}

function resourceBytes(resource: SizedSpan['resource']): number {
  const attributes = resource.attributes;
  if (attributes === undefined) return 0;
  const known = resourceBytesCache.get(attributes);
  if (known !== undefined) return known;
  const bytes = attributesBytes(attributes);
  resourceBytesCache.set(attributes, bytes);
  return bytes;
}

function attributesBytes(attributes: Attributes): number {
  if (attributes === undefined) return 0;
  let bytes = 0;
  for (const key in attributes) bytes += key.length + 4 + valueBytes(attributes[key]);
  return bytes;
}

function valueBytes(value: unknown): number {
  if (typeof value === 'string') return value.length + 2;
  if (Array.isArray(value)) {
    let bytes = 2;
    for (const element of value) bytes += valueBytes(element) + 1;
    return bytes;
  }
  return SCALAR_BYTES;
}
