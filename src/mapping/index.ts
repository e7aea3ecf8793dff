/** Span -> call mapping (SPEC §3), shared by the exporter and the server's OTLP ingest. */
export { toCallParts, toUpsertItems, toCompletedCall, readSpan, MAPPING_ERROR_ATTRIBUTE } from './to-call.js';
export type { CallParts } from './to-call.js';
export { writeCompletedCall, writeUpsertItems } from './call-json.js';
export { fromReadableSpan, isReadableSpan, kindFromJs, kindFromOtlp, linksOf, parentSpanIdOf, scopeOf, statusCodeName } from './span-input.js';
export type {
  HrTime,
  SpanAttributes,
  SpanEventInput,
  SpanInput,
  SpanKindName,
  SpanLinkInput,
  StatusCodeName,
} from './span-input.js';
export { hrTimeFromUnixNanos, hrTimeToIso } from './timestamps.js';
export { toOpName, MAX_OP_NAME_LENGTH, MAX_DISPLAY_NAME_LENGTH } from './names.js';
export { toJsonValue } from './json-values.js';
export { unflattenAttributes } from './unflatten.js';
