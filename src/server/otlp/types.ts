/**
 * An OTLP `ExportTraceServiceRequest` as both decoders (protobuf and OTLP/JSON) produce it: the
 * shape of opentelemetry-proto's messages with values already in JavaScript form, and ids still
 * unchecked (`spans.ts` checks them per span, so one bad span does not sink the request).
 */

/** Attribute values by key, as `AnyValue`s decode (see {@link OtlpAttributes}). */
export type OtlpAttributes = Record<string, unknown>;

/** A 64-bit `*_unix_nano` time: bigint from protobuf, decimal text or a number from JSON. */
export type UnixNanos = bigint | string | number;

export interface OtlpTraceRequest {
  readonly resourceSpans: OtlpResourceSpans[];
}

export interface OtlpResourceSpans {
  readonly resource: OtlpResource;
  readonly scopeSpans: OtlpScopeSpans[];
}

export interface OtlpResource {
  /**
   * Values: string, boolean, number (int64 within ±2^53 and doubles), bigint (int64 beyond),
   * Uint8Array (bytes), arrays and plain objects (kvlist) of those, null (an empty AnyValue).
   */
  readonly attributes: OtlpAttributes;
  readonly droppedAttributesCount: number;
}

export interface OtlpScopeSpans {
  readonly scope: OtlpScope;
  readonly spans: OtlpSpan[];
}

export interface OtlpScope {
  readonly name: string;
  readonly version: string;
}

export interface OtlpSpan {
  /**
   * Ids as sent, lowercased: hex of the bytes (protobuf) or the hex text (JSON). Unchecked: may be
   * empty, all zeros, the wrong length, or (from JSON) not hex at all.
   */
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly traceState: string;
  readonly name: string;
  /** OTLP `SpanKind` number (0 = UNSPECIFIED). */
  readonly kind: number;
  readonly startTimeUnixNano: UnixNanos;
  readonly endTimeUnixNano: UnixNanos;
  readonly attributes: OtlpAttributes;
  readonly events: OtlpEvent[];
  readonly links: OtlpLink[];
  readonly status: OtlpStatus;
}

export interface OtlpEvent {
  readonly timeUnixNano: UnixNanos;
  readonly name: string;
  readonly attributes: OtlpAttributes;
  readonly droppedAttributesCount: number;
}

export interface OtlpLink {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceState: string;
  readonly attributes: OtlpAttributes;
  readonly droppedAttributesCount: number;
}

export interface OtlpStatus {
  /** OTLP `StatusCode` number (0 UNSET, 1 OK, 2 ERROR). */
  readonly code: number;
  readonly message: string;
}

/** What a partially accepted export answers (`ExportTracePartialSuccess`). */
export interface PartialSuccess {
  readonly rejectedSpans: number;
  readonly errorMessage: string;
}

/**
 * Nested `AnyValue`s (arrays and kvlists inside each other) deeper than this are refused: far
 * beyond any real attribute, and it keeps the recursive decoders' stack use bounded.
 */
export const MAX_ANY_VALUE_DEPTH = 32;

/** Thrown by the decoders for a body that is not a well-formed request; the route answers 400. */
export class MalformedOtlpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedOtlpError';
  }
}
