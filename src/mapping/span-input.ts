/**
 * The neutral span shape the mapping reads (SPEC §3). Two producers fill it: the exporter, from an
 * OTel SDK `ReadableSpan` (via {@link fromReadableSpan}), and the server's OTLP ingest, from
 * decoded OTLP spans. Keeping the mapping on this shape means both paths give the same call.
 */
import type { Link } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';

/** `[seconds, nanoseconds]` since the Unix epoch, as OTel JS keeps span times. */
export type HrTime = readonly [number, number];

/** Span kind by name, as `otel_dump.kind` writes it. */
export type SpanKindName = 'INTERNAL' | 'SERVER' | 'CLIENT' | 'PRODUCER' | 'CONSUMER';

/** Status code by name, as `otel_dump.status.code` writes it. */
export type StatusCodeName = 'UNSET' | 'OK' | 'ERROR';

/**
 * Attribute values as they arrive: OTel attribute values (string, number, boolean, arrays of
 * those), plus what an OTLP decoder may produce (bytes, bigint, nested key-value lists as plain
 * objects). Anything that is not JSON is converted by the mapping, never rejected.
 */
export type SpanAttributes = Readonly<Record<string, unknown>>;

/** One span event. */
export interface SpanEventInput {
  readonly name: string;
  readonly time: HrTime;
  readonly attributes?: SpanAttributes | undefined;
  readonly droppedAttributesCount?: number | undefined;
}

/** One link to another span. */
export interface SpanLinkInput {
  readonly traceId: string;
  readonly spanId: string;
  /** W3C `tracestate` text; empty when none. */
  readonly traceState?: string | undefined;
  readonly attributes?: SpanAttributes | undefined;
  readonly droppedAttributesCount?: number | undefined;
}

/** Everything SPEC §3 needs from a finished span. */
export interface SpanInput {
  readonly name: string;
  /** 32 lowercase hex characters. */
  readonly traceId: string;
  /** 16 lowercase hex characters. */
  readonly spanId: string;
  /** W3C `tracestate` text; empty when none. */
  readonly traceState?: string | undefined;
  /** The parent's span id, or undefined for a root span. */
  readonly parentSpanId?: string | undefined;
  readonly kind: SpanKindName;
  readonly startTime: HrTime;
  readonly endTime: HrTime;
  readonly status: { readonly code: StatusCodeName; readonly message?: string | undefined };
  readonly attributes: SpanAttributes;
  readonly events: readonly SpanEventInput[];
  readonly links: readonly SpanLinkInput[];
  readonly resource: {
    readonly attributes: SpanAttributes;
    readonly droppedAttributesCount?: number | undefined;
  };
  readonly scope: { readonly name: string; readonly version?: string | undefined };
  /**
   * What went wrong while this input was read from a span, when that happened elsewhere (the
   * exporter reads spans on the application's thread and maps them on its delivery worker):
   * carried into `attributes._callbridge_mapping_error` like the mapping's own notes.
   */
  readonly readNotes?: readonly string[] | undefined;
}

// OTel JS numbers kinds from INTERNAL = 0; OTLP from UNSPECIFIED = 0 (see kindFromOtlp).
const JS_SPAN_KINDS: readonly SpanKindName[] = ['INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];
// OTel JS and OTLP agree on status codes: UNSET = 0, OK = 1, ERROR = 2.
const STATUS_CODES: readonly StatusCodeName[] = ['UNSET', 'OK', 'ERROR'];
const EMPTY_LINKS: readonly SpanLinkInput[] = [];

/** `otel_dump.kind` for an OTel JS `SpanKind` number (unknown values read as INTERNAL). */
export function kindFromJs(kind: number): SpanKindName {
  return JS_SPAN_KINDS[kind] ?? 'INTERNAL';
}

/** `otel_dump.kind` for an OTLP `Span.kind` number (UNSPECIFIED and unknown values read as INTERNAL). */
export function kindFromOtlp(kind: number | undefined): SpanKindName {
  return JS_SPAN_KINDS[(kind ?? 0) - 1] ?? 'INTERNAL';
}

/** `otel_dump.status.code` for an OTel JS or OTLP status code number (unknown values read as UNSET). */
export function statusCodeName(code: number | undefined): StatusCodeName {
  return STATUS_CODES[code ?? 0] ?? 'UNSET';
}

/** True for an OTel SDK `ReadableSpan` (as opposed to an already neutral {@link SpanInput}). */
export function isReadableSpan(span: SpanInput | ReadableSpan): span is ReadableSpan {
  return typeof (span as ReadableSpan).spanContext === 'function';
}

/**
 * What an OTel SDK 1.x `ReadableSpan` has where 2.x has `parentSpanContext` and
 * `instrumentationScope`: an exporter behind a 1.x provider is handed these.
 */
interface ReadableSpanV1 {
  readonly parentSpanId?: string | undefined;
  readonly instrumentationLibrary?: { readonly name: string; readonly version?: string | undefined } | undefined;
}

/** The parent's span id of an SDK 2.x span, or of a 1.x one (`parentSpanId`). */
export function parentSpanIdOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId ?? (span as ReadableSpan & ReadableSpanV1).parentSpanId;
}

/**
 * The instrumentation scope of an SDK 2.x span, or of a 1.x one (`instrumentationLibrary`): the
 * SDK's own object, which every span of a tracer shares (so a message to the delivery worker
 * copies it once).
 */
export function scopeOf(span: ReadableSpan): SpanInput['scope'] {
  return span.instrumentationScope ?? (span as ReadableSpan & ReadableSpanV1).instrumentationLibrary ?? NO_SCOPE;
}

/**
 * Views an OTel SDK `ReadableSpan` (2.x, or 1.x: {@link parentSpanIdOf}, {@link scopeOf}) as a
 * {@link SpanInput}. Cheap: attributes, events and times are referenced, not copied; only links
 * are re-shaped.
 *
 * @example
 * const input = fromReadableSpan(readableSpan);
 * input.spanId; // '00f067aa0ba902b7'
 */
export function fromReadableSpan(span: ReadableSpan): SpanInput {
  const context = span.spanContext();
  return {
    name: span.name,
    traceId: context.traceId,
    spanId: context.spanId,
    traceState: context.traceState?.serialize(),
    parentSpanId: parentSpanIdOf(span),
    kind: kindFromJs(span.kind),
    startTime: span.startTime,
    endTime: span.endTime,
    status: { code: statusCodeName(span.status.code), message: span.status.message },
    attributes: span.attributes,
    events: span.events,
    links: linksOf(span.links),
    resource: { attributes: span.resource.attributes },
    scope: scopeOf(span),
  };
}

/**
 * Reads what can be read of a `ReadableSpan` whose adapter threw (a getter that throws, a field of
 * the wrong type): each field on its own, with an empty stand-in for the ones that fail, so the
 * span is still sent with what could be mapped.
 */
export function salvageReadableSpan(span: ReadableSpan): SpanInput {
  const context = attempt(() => span.spanContext(), undefined);
  return {
    name: attempt(() => String(span.name), ''),
    traceId: attempt(() => String(context?.traceId ?? ''), ''),
    spanId: attempt(() => String(context?.spanId ?? ''), ''),
    traceState: attempt(() => context?.traceState?.serialize(), undefined),
    parentSpanId: attempt(() => parentSpanIdOf(span), undefined),
    kind: attempt(() => JS_SPAN_KINDS[span.kind] ?? 'INTERNAL', 'INTERNAL'),
    startTime: attempt(() => span.startTime, ZERO_TIME),
    endTime: attempt(() => span.endTime, ZERO_TIME),
    status: attempt(() => ({ code: statusCodeName(span.status.code), message: span.status.message }), UNSET_STATUS),
    attributes: attempt(() => span.attributes ?? {}, {}),
    events: attempt(() => (Array.isArray(span.events) ? span.events : []), []),
    links: attempt(() => linksOf(span.links), EMPTY_LINKS),
    resource: { attributes: attempt(() => span.resource.attributes, {}) },
    scope: attempt(() => scopeOf(span), NO_SCOPE),
  };
}

/**
 * The span with its ids in lowercase. OTel JS accepts hex ids in either case (`isValidSpanId` is
 * case-insensitive), so a custom `IdGenerator` may make uppercase ones; the service takes only
 * lowercase (SPEC §2.1) and would reject the call. The same span is returned when nothing needs
 * changing, which is every span of the SDK's own generator.
 *
 * @example
 * withLowercaseIds(input).spanId; // '00f067aa0ba902b7' for an input with '00F067AA0BA902B7'
 */
export function withLowercaseIds(input: SpanInput): SpanInput {
  if (
    !hasUppercase(input.traceId) &&
    !hasUppercase(input.spanId) &&
    !hasUppercase(input.parentSpanId) &&
    !(Array.isArray(input.links) && input.links.some(linkHasUppercase))
  ) {
    return input;
  }
  return {
    ...input,
    traceId: lowercase(input.traceId),
    spanId: lowercase(input.spanId),
    parentSpanId: lowercase(input.parentSpanId),
    links: Array.isArray(input.links)
      ? input.links.map((link) =>
          linkHasUppercase(link) ? { ...link, traceId: lowercase(link.traceId), spanId: lowercase(link.spanId) } : link,
        )
      : input.links,
  };
}

const UPPERCASE = /[A-Z]/;

// Ids of another type are left alone: the mapping notes them where it turns them into text.
function hasUppercase(id: unknown): boolean {
  return typeof id === 'string' && UPPERCASE.test(id);
}

function linkHasUppercase(link: SpanLinkInput): boolean {
  return hasUppercase(link?.traceId) || hasUppercase(link?.spanId);
}

function lowercase<T>(id: T): T {
  return (typeof id === 'string' ? id.toLowerCase() : id) as T;
}

/** Links re-shaped: their ids live in a `SpanContext`, the neutral shape keeps them flat. */
export function linksOf(links: readonly Link[]): readonly SpanLinkInput[] {
  if (links.length === 0) return EMPTY_LINKS;
  const converted = new Array<SpanLinkInput>(links.length);
  for (let i = 0; i < links.length; i++) {
    const link = links[i]!;
    converted[i] = {
      traceId: link.context.traceId,
      spanId: link.context.spanId,
      traceState: link.context.traceState?.serialize(),
      attributes: link.attributes,
      droppedAttributesCount: link.droppedAttributesCount,
    };
  }
  return converted;
}

const ZERO_TIME: HrTime = [0, 0];
const NO_SCOPE: SpanInput['scope'] = { name: '' };
const UNSET_STATUS = { code: 'UNSET', message: '' } as const;

function attempt<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}
