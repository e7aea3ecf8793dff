/**
 * An OTLP `ExportTraceServiceRequest` as both decoders (protobuf and OTLP/JSON) produce it: the
 * shape of opentelemetry-proto's messages with values already in JavaScript form, and ids still
 * unchecked (`spans.ts` checks them per span, so one bad span does not sink the request).
 */
import { MAX_JSON_CONTAINERS } from '../json-body-text.js';

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

/**
 * About how many bytes of memory each element of a request takes once decoded, mapped to a call
 * and written: peak RSS of the server per element, measured with bodies of nothing but that
 * element in its cheapest form (an empty event is 2 bytes of protobuf and 1.2 KB of objects and
 * JSON text by the time its call is written; a key-value the most with distinct keys in one
 * object; an array value with doubles, whose JSON text is long).
 */
export const DECODED_BYTES = {
  resourceSpans: 250,
  scopeSpans: 250,
  span: 4000,
  event: 1200,
  link: 800,
  keyValue: 400,
  arrayValue: 250,
  /** A dot of an attribute key past {@link FREE_KEY_DOTS}: unflattening makes an object of each segment. */
  keySegment: 120,
} as const;

/**
 * Dots an attribute key may have before each further one is charged as a `keySegment`. Real keys
 * have far fewer (OpenInference's deepest, `llm.input_messages.0.message.contents.0.message_content.image.image.url`,
 * has 9), so their batches cost what they did; a hostile key of millions of dots, a few KB of
 * gzip, would otherwise be unflattened into millions of nested objects (1.2 GB from 20 KB).
 */
export const FREE_KEY_DOTS = 16;

const OPEN_BRACE = 0x7b; // '{'
const OPEN_BRACKET = 0x5b; // '['

/** An element of a request that {@link DecodeBudget} charges. */
export type DecodedElement = keyof typeof DECODED_BYTES;

/**
 * What one request may decode to, in {@link DECODED_BYTES}. The body limit bounds bytes, not
 * objects: without this, 31 KB of gzip inflating to 16 M empty spans took 4.7 GB and aborted the
 * server, and a plain 29 MiB body of 1 M spans with ids peaked at 2.4 GB. At this bound a request
 * holds 80 000 spans without attributes (OTel SDKs export 512 per request by default), or a
 * collector's default batch of 8192 spans with up to ~80 attributes each (LLM instrumentations
 * flatten messages into dozens: a collector does not split a batch refused with 413, so its
 * default batch must fit), while the worst body of each element kind peaks at about twice the
 * 200 MB measured at half this bound.
 */
export const MAX_DECODED_BYTES_PER_REQUEST = 320_000_000;

/** Thrown by the decoders once a request passes {@link MAX_DECODED_BYTES_PER_REQUEST}; the route answers 413. */
export class OtlpTooLargeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OtlpTooLargeError';
  }
}

/**
 * What one request has decoded so far. Each decoder charges an element before building it, so a
 * request past {@link MAX_DECODED_BYTES_PER_REQUEST} stops with an {@link OtlpTooLargeError} while
 * what it built is still within that bound.
 */
export class DecodeBudget {
  private bytes = 0;
  private jsonContainers = 0;

  charge(element: DecodedElement): void {
    this.bytes += DECODED_BYTES[element];
    if (this.bytes > MAX_DECODED_BYTES_PER_REQUEST) {
      throw new OtlpTooLargeError(
        `it would decode to more than ${MAX_DECODED_BYTES_PER_REQUEST / 1_000_000} MB, the limit per OTLP request ` +
          `(estimated at ${DECODED_BYTES.span} bytes per span, ${DECODED_BYTES.event} per event, ${DECODED_BYTES.link} per link, ` +
          `${DECODED_BYTES.keyValue} per attribute, ${DECODED_BYTES.arrayValue} per array value, ${DECODED_BYTES.keySegment} per ` +
          `attribute key dot past the first ${FREE_KEY_DOTS}); send fewer spans per request`,
      );
    }
  }

  /**
   * Charges one attribute of a span, event, link or resource (not a kvlist member: the mapping
   * neither unflattens nor parses those) for what the shared mapping makes of it beyond its
   * decoded value (SPEC §3): a dotted key is unflattened into one object per segment, and a string
   * that starts with `{` or `[` is parsed as JSON. Neither is in the element charges above, so a
   * few KB of gzip held one key of millions of dots, or one JSON text of millions of objects
   * (26 KB of gzip took the server to 1.2 GB and 7 s), that the mapping then built. The JSON texts
   * of one request may open at most MAX_JSON_CONTAINERS objects and lists, as one JSON body may
   * (`../json-body-text.ts`): the same span sent as OTLP/JSON was already refused for its braces.
   */
  chargeAttribute(key: string, value: unknown): void {
    if (key.length > FREE_KEY_DOTS) {
      let dots = 0;
      for (let at = key.indexOf('.'); at !== -1; at = key.indexOf('.', at + 1)) {
        if (++dots > FREE_KEY_DOTS) this.charge('keySegment');
      }
    }
    if (typeof value !== 'string' || value.length < 2) return;
    const first = value.charCodeAt(0);
    if (first !== OPEN_BRACE && first !== OPEN_BRACKET) return;
    let opened = this.jsonContainers;
    for (let i = 0; i < value.length; i++) {
      const code = value.charCodeAt(i);
      if ((code === OPEN_BRACE || code === OPEN_BRACKET) && ++opened > MAX_JSON_CONTAINERS) {
        throw new OtlpTooLargeError(`its JSON text attributes open more than ${MAX_JSON_CONTAINERS} objects and lists`);
      }
    }
    this.jsonContainers = opened;
  }
}
