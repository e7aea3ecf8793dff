/**
 * OTLP/JSON: the JSON encoding of `ExportTraceServiceRequest` / `ExportTraceServiceResponse`
 * (OTLP specification, "JSON Protobuf Encoding"): trace and span ids as hex text (base64 accepted),
 * enums as integers, 64-bit integers as decimal text or numbers, and field names in lowerCamelCase
 * (the proto's snake_case names are accepted too, as protobuf JSON parsers accept them).
 *
 * A body whose structure is not that of the message (a list where an object belongs, a number
 * where text belongs) is a {@link MalformedOtlpError} naming the path of the offending value.
 */
import { setOwn } from '../../mapping/json-values.js';
import { isUtf8Body, MAX_JSON_CONTAINERS, NOT_UTF8_REASON, opensTooManyContainers, utf8BodyText } from '../json-body-text.js';
import {
  DecodeBudget,
  MAX_ANY_VALUE_DEPTH,
  MalformedOtlpError,
  OtlpTooLargeError,
  type OtlpAttributes,
  type OtlpEvent,
  type OtlpLink,
  type OtlpResource,
  type OtlpResourceSpans,
  type OtlpScope,
  type OtlpScopeSpans,
  type OtlpSpan,
  type OtlpStatus,
  type OtlpTraceRequest,
  type PartialSuccess,
  type UnixNanos,
} from './types.js';

type JsonObject = Record<string, unknown>;

const SPAN_KIND_NAMES: Readonly<Record<string, number>> = {
  SPAN_KIND_UNSPECIFIED: 0,
  SPAN_KIND_INTERNAL: 1,
  SPAN_KIND_SERVER: 2,
  SPAN_KIND_CLIENT: 3,
  SPAN_KIND_PRODUCER: 4,
  SPAN_KIND_CONSUMER: 5,
};
const STATUS_CODE_NAMES: Readonly<Record<string, number>> = {
  STATUS_CODE_UNSET: 0,
  STATUS_CODE_OK: 1,
  STATUS_CODE_ERROR: 2,
};
const NON_FINITE_DOUBLES: Readonly<Record<string, number>> = {
  NaN: Number.NaN,
  Infinity: Number.POSITIVE_INFINITY,
  '-Infinity': Number.NEGATIVE_INFINITY,
};
const INTEGER_TEXT = /^-?\d{1,20}$/;
const UNSIGNED_INTEGER_TEXT = /^\d{1,20}$/;
const ENUM_NUMBER_TEXT = /^-?\d{1,10}$/;
/**
 * Base64 text in either alphabet, checked by characters only: the lengths are checked apart
 * ({@link isBase64}). A pattern that repeats 4-character groups backtracks one stack frame per
 * group, and overflowed V8's stack on ~4.5 M characters, far inside a 32 MiB body (a 500).
 */
const BASE64_STANDARD_CHARACTERS = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64_URL_SAFE_CHARACTERS = /^[A-Za-z0-9_-]*={0,2}$/;

/**
 * Decodes an OTLP/JSON `ExportTraceServiceRequest` from UTF-8 text, read as every JSON body is
 * (`../json-body-text.ts`: invalid UTF-8 refused, a byte order mark dropped). Throws
 * {@link MalformedOtlpError} for bytes that are not UTF-8, text that is not JSON or not that message,
 * and {@link OtlpTooLargeError} for one past {@link DecodeBudget}: `JSON.parse` makes no more
 * objects than the body has bytes, but the 3 bytes `{},` in a list of spans become kilobytes once
 * decoded and mapped, so the conversion below is charged as the protobuf decoder is.
 *
 * @example
 * const request = decodeTraceRequestJson(Buffer.from('{"resourceSpans":[]}'));
 * request.resourceSpans.length; // 0
 */
export function decodeTraceRequestJson(body: Uint8Array): OtlpTraceRequest {
  if (!isUtf8Body(body)) throw new MalformedOtlpError(NOT_UTF8_REASON);
  // Before the parse, which is where such a body costs (json-body-text.ts).
  if (opensTooManyContainers(body)) throw new OtlpTooLargeError(`more than ${MAX_JSON_CONTAINERS} objects and lists in one body`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8BodyText(body));
  } catch {
    throw new MalformedOtlpError('body is not valid JSON');
  }
  const root = objectAt(parsed, 'body');
  const budget = new DecodeBudget();
  return {
    resourceSpans: listAt(root, 'resourceSpans', 'resource_spans', 'body').map((item, index) =>
      decodeResourceSpans(item, `resourceSpans[${index}]`, budget),
    ),
  };
}

function decodeResourceSpans(value: unknown, path: string, budget: DecodeBudget): OtlpResourceSpans {
  budget.charge('resourceSpans');
  const object = objectAt(value, path);
  const resourceValue = field(object, 'resource', 'resource');
  const resource: OtlpResource =
    resourceValue === undefined
      ? { attributes: {}, droppedAttributesCount: 0 }
      : decodeResource(objectAt(resourceValue, `${path}.resource`), `${path}.resource`, budget);
  const scopeSpans = listAt(object, 'scopeSpans', 'scope_spans', path).map((item, scopeIndex) =>
    decodeScopeSpans(item, `${path}.scopeSpans[${scopeIndex}]`, budget),
  );
  return { resource, scopeSpans };
}

function decodeResource(object: JsonObject, path: string, budget: DecodeBudget): OtlpResource {
  return {
    attributes: attributesAt(object, 'attributes', 'attributes', path, budget),
    droppedAttributesCount: countAt(object, 'droppedAttributesCount', 'dropped_attributes_count', path),
  };
}

function decodeScopeSpans(value: unknown, path: string, budget: DecodeBudget): OtlpScopeSpans {
  budget.charge('scopeSpans');
  const object = objectAt(value, path);
  const scopeValue = field(object, 'scope', 'scope');
  let scope: OtlpScope = { name: '', version: '' };
  if (scopeValue !== undefined) {
    const scopeObject = objectAt(scopeValue, `${path}.scope`);
    scope = {
      name: stringAt(scopeObject, 'name', 'name', `${path}.scope`),
      version: stringAt(scopeObject, 'version', 'version', `${path}.scope`),
    };
  }
  const spans = listAt(object, 'spans', 'spans', path).map((item, spanIndex) => decodeSpan(item, `${path}.spans[${spanIndex}]`, budget));
  return { scope, spans };
}

function decodeSpan(value: unknown, path: string, budget: DecodeBudget): OtlpSpan {
  budget.charge('span');
  const object = objectAt(value, path);
  const statusValue = field(object, 'status', 'status');
  let status: OtlpStatus = { code: 0, message: '' };
  if (statusValue !== undefined) {
    const statusObject = objectAt(statusValue, `${path}.status`);
    status = {
      code: enumAt(statusObject, 'code', 'code', STATUS_CODE_NAMES, `${path}.status`),
      message: stringAt(statusObject, 'message', 'message', `${path}.status`),
    };
  }
  return {
    traceId: idAt(object, 'traceId', 'trace_id', path, 16),
    spanId: idAt(object, 'spanId', 'span_id', path, 8),
    parentSpanId: idAt(object, 'parentSpanId', 'parent_span_id', path, 8),
    traceState: stringAt(object, 'traceState', 'trace_state', path),
    name: stringAt(object, 'name', 'name', path),
    kind: enumAt(object, 'kind', 'kind', SPAN_KIND_NAMES, path),
    startTimeUnixNano: nanosAt(object, 'startTimeUnixNano', 'start_time_unix_nano', path),
    endTimeUnixNano: nanosAt(object, 'endTimeUnixNano', 'end_time_unix_nano', path),
    attributes: attributesAt(object, 'attributes', 'attributes', path, budget),
    events: listAt(object, 'events', 'events', path).map((item, index) => decodeEvent(item, `${path}.events[${index}]`, budget)),
    links: listAt(object, 'links', 'links', path).map((item, index) => decodeLink(item, `${path}.links[${index}]`, budget)),
    status,
  };
}

function decodeEvent(value: unknown, path: string, budget: DecodeBudget): OtlpEvent {
  budget.charge('event');
  const object = objectAt(value, path);
  return {
    timeUnixNano: nanosAt(object, 'timeUnixNano', 'time_unix_nano', path),
    name: stringAt(object, 'name', 'name', path),
    attributes: attributesAt(object, 'attributes', 'attributes', path, budget),
    droppedAttributesCount: countAt(object, 'droppedAttributesCount', 'dropped_attributes_count', path),
  };
}

function decodeLink(value: unknown, path: string, budget: DecodeBudget): OtlpLink {
  budget.charge('link');
  const object = objectAt(value, path);
  return {
    traceId: idAt(object, 'traceId', 'trace_id', path, 16),
    spanId: idAt(object, 'spanId', 'span_id', path, 8),
    traceState: stringAt(object, 'traceState', 'trace_state', path),
    attributes: attributesAt(object, 'attributes', 'attributes', path, budget),
    droppedAttributesCount: countAt(object, 'droppedAttributesCount', 'dropped_attributes_count', path),
  };
}

/** A `repeated KeyValue` as an object (a later duplicate key replaces an earlier one). */
function attributesAt(object: JsonObject, camel: string, snake: string, path: string, budget: DecodeBudget): OtlpAttributes {
  return keyValues(listAt(object, camel, snake, path), `${path}.${camel}`, 0, budget);
}

function keyValues(list: unknown[], path: string, depth: number, budget: DecodeBudget): OtlpAttributes {
  const attributes: OtlpAttributes = {};
  list.forEach((item, index) => {
    budget.charge('keyValue');
    const itemPath = `${path}[${index}]`;
    const keyValue = objectAt(item, itemPath);
    const rawValue = field(keyValue, 'value', 'value');
    const value = rawValue === undefined ? null : anyValue(rawValue, `${itemPath}.value`, depth + 1, budget);
    const key = stringAt(keyValue, 'key', 'key', itemPath);
    // A top-level attribute (depth 0) is unflattened and may be parsed as JSON text by the mapping;
    // the body's own brace count misses JSON text written with `\u007b` escapes.
    if (depth === 0) budget.chargeAttribute(key, value);
    setOwn(attributes, key, value);
  });
  return attributes;
}

/** One `AnyValue` as JavaScript (see the protobuf decoder for the shapes); `{}` is null. */
function anyValue(value: unknown, path: string, depth: number, budget: DecodeBudget): unknown {
  if (depth > MAX_ANY_VALUE_DEPTH) throw new MalformedOtlpError(`${path}: AnyValue nested deeper than ${MAX_ANY_VALUE_DEPTH} levels`);
  const object = objectAt(value, path);
  let raw: unknown;
  if ((raw = field(object, 'stringValue', 'string_value')) !== undefined) {
    if (typeof raw !== 'string') throw wrongType(`${path}.stringValue`, 'a string', raw);
    return raw;
  }
  if ((raw = field(object, 'boolValue', 'bool_value')) !== undefined) {
    if (typeof raw !== 'boolean') throw wrongType(`${path}.boolValue`, 'a boolean', raw);
    return raw;
  }
  if ((raw = field(object, 'intValue', 'int_value')) !== undefined) return int64(raw, `${path}.intValue`);
  if ((raw = field(object, 'doubleValue', 'double_value')) !== undefined) return double(raw, `${path}.doubleValue`);
  if ((raw = field(object, 'arrayValue', 'array_value')) !== undefined) {
    const arrayPath = `${path}.arrayValue`;
    return listAt(objectAt(raw, arrayPath), 'values', 'values', arrayPath).map((item, index) => {
      budget.charge('arrayValue');
      return anyValue(item, `${arrayPath}.values[${index}]`, depth + 1, budget);
    });
  }
  if ((raw = field(object, 'kvlistValue', 'kvlist_value')) !== undefined) {
    const listPath = `${path}.kvlistValue`;
    return keyValues(listAt(objectAt(raw, listPath), 'values', 'values', listPath), `${listPath}.values`, depth, budget);
  }
  if ((raw = field(object, 'bytesValue', 'bytes_value')) !== undefined) {
    // Node's base64 decoder skips what is not base64: `"!!!!"` would be stored as no bytes.
    // Bytes as protobuf JSON parsers take them: either alphabet, padded or not.
    if (typeof raw !== 'string' || !isBase64(raw, { urlSafe: true, unpadded: true })) throw wrongType(`${path}.bytesValue`, 'base64 text', raw);
    return new Uint8Array(Buffer.from(raw, 'base64'));
  }
  return null;
}

/** An int64: decimal text or an integral number; a number when exact, else a bigint. */
function int64(raw: unknown, path: string): number | bigint {
  if (typeof raw === 'number' && Number.isInteger(raw)) {
    // Held to the range as the text is; 2^63 itself passes, as int64's largest value written as
    // a JSON number reads as 2^63.
    if (Math.abs(raw) > 2 ** 63) throw new MalformedOtlpError(`${path}: ${raw} is outside the int64 range`);
    return raw;
  }
  if (typeof raw === 'string' && INTEGER_TEXT.test(raw)) {
    const value = BigInt(raw);
    if (value !== BigInt.asIntN(64, value)) throw new MalformedOtlpError(`${path}: ${raw} is outside the int64 range`);
    return Number.isSafeInteger(Number(value)) ? Number(value) : value;
  }
  throw wrongType(path, 'an integer (number or decimal text)', raw);
}

/** A double: a number, or the text `NaN`, `Infinity`, `-Infinity` or a decimal number. */
function double(raw: unknown, path: string): number {
  if (typeof raw === 'number') return raw;
  if (typeof raw === 'string') {
    if (Object.hasOwn(NON_FINITE_DOUBLES, raw)) return NON_FINITE_DOUBLES[raw]!;
    const parsed = raw.trim() === '' ? Number.NaN : Number(raw);
    if (!Number.isNaN(parsed)) return parsed;
  }
  throw wrongType(path, 'a number', raw);
}

/** A fixed64 time: decimal text or a non-negative integral number; absent means 0. */
function nanosAt(object: JsonObject, camel: string, snake: string, path: string): UnixNanos {
  const raw = field(object, camel, snake);
  if (raw === undefined) return 0;
  // A number is held to the fixed64 range as the text is (2^64 passes: the largest fixed64
  // written as a JSON number reads as 2^64).
  if (typeof raw === 'number' && Number.isInteger(raw) && raw >= 0 && raw <= 2 ** 64) return raw;
  if (typeof raw === 'string' && UNSIGNED_INTEGER_TEXT.test(raw) && BigInt(raw) < 2n ** 64n) return raw;
  throw wrongType(`${path}.${camel}`, 'nanoseconds as decimal text or a non-negative integer', raw);
}

/**
 * An id as lowercase hex. OTLP/JSON sends hex; generic protobuf JSON printers (Python's
 * `MessageToJson`, Go's `protojson`) send bytes as base64, so base64 text that decodes to exactly
 * `bytes` bytes is accepted too (the lengths cannot be confused: 16 bytes are 32 hex characters or
 * 24 base64 ones). Anything else is passed on as sent; `spans.ts` rejects it.
 */
function idAt(object: JsonObject, camel: string, snake: string, path: string, bytes: number): string {
  const text = stringAt(object, camel, snake, path);
  if (text.length !== bytes * 2 && isBase64(text, { urlSafe: false, unpadded: false })) {
    const decoded = Buffer.from(text, 'base64');
    if (decoded.length === bytes) return decoded.toString('hex');
  }
  return text.toLowerCase();
}

/**
 * Whether `text` is base64: the standard alphabet (or, with `urlSafe`, the URL-safe one), padded
 * with `=` to a multiple of 4 characters (or, with `unpadded`, also without its padding). Linear
 * in the text, whatever its length.
 */
function isBase64(text: string, { urlSafe, unpadded }: { readonly urlSafe: boolean; readonly unpadded: boolean }): boolean {
  if (!BASE64_STANDARD_CHARACTERS.test(text) && !(urlSafe && BASE64_URL_SAFE_CHARACTERS.test(text))) return false;
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  // 4 characters carry 3 bytes; a last group of 2 or 3 carries 1 or 2, one of 1 carries nothing.
  const lastGroup = (text.length - padding) % 4;
  if (padding > 0) return lastGroup === 4 - padding;
  return lastGroup === 0 || (unpadded && lastGroup !== 1);
}

/**
 * An enum: its number, or its name as protobuf JSON parsers also accept, or its number as decimal
 * text as Python's `json_format` accepts (read as 0 before, a `"code": "2"` lost the span's
 * error). Unknown names read as 0.
 */
function enumAt(object: JsonObject, camel: string, snake: string, names: Readonly<Record<string, number>>, path: string): number {
  const raw = field(object, camel, snake);
  if (raw === undefined) return 0;
  if (typeof raw === 'number' && Number.isInteger(raw)) return raw;
  if (typeof raw === 'string') {
    if (Object.hasOwn(names, raw)) return names[raw]!;
    return ENUM_NUMBER_TEXT.test(raw) ? Number(raw) | 0 : 0; // an enum is an int32
  }
  throw wrongType(`${path}.${camel}`, 'an enum number', raw);
}

/** A uint32 count: a non-negative integral number (or its decimal text); absent means 0. */
function countAt(object: JsonObject, camel: string, snake: string, path: string): number {
  const raw = field(object, camel, snake);
  if (raw === undefined) return 0;
  const value = typeof raw === 'string' && UNSIGNED_INTEGER_TEXT.test(raw) ? Number(raw) : raw;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 0xffff_ffff) return value;
  throw wrongType(`${path}.${camel}`, 'a non-negative integer', raw);
}

function stringAt(object: JsonObject, camel: string, snake: string, path: string): string {
  const raw = field(object, camel, snake);
  if (raw === undefined) return '';
  if (typeof raw !== 'string') throw wrongType(`${path}.${camel}`, 'a string', raw);
  return raw;
}

function listAt(object: JsonObject, camel: string, snake: string, path: string): unknown[] {
  const raw = field(object, camel, snake);
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw wrongType(`${path === 'body' ? '' : `${path}.`}${camel}`, 'a list', raw);
  return raw;
}

function objectAt(value: unknown, path: string): JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw wrongType(path, 'an object', value);
  return value as JsonObject;
}

/** A field by its lowerCamelCase or snake_case name; null (protobuf JSON's "default") reads as absent. */
function field(object: JsonObject, camel: string, snake: string): unknown {
  const value = Object.hasOwn(object, camel) ? object[camel] : Object.hasOwn(object, snake) ? object[snake] : undefined;
  return value === null ? undefined : value;
}

function wrongType(path: string, expected: string, value: unknown): MalformedOtlpError {
  const actual = value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value;
  return new MalformedOtlpError(`${path}: expected ${expected}, got ${actual}`);
}

/**
 * The OTLP/JSON `ExportTraceServiceResponse`: `{}` when everything was accepted, else
 * `{"partialSuccess": {"rejectedSpans": "<n>", "errorMessage": "..."}}` (lowerCamelCase names and
 * the int64 as decimal text, as the protobuf JSON mapping writes them).
 *
 * @example
 * encodeTraceResponseJson(undefined); // '{}'
 */
export function encodeTraceResponseJson(partialSuccess: PartialSuccess | undefined): string {
  if (partialSuccess === undefined) return '{}';
  return JSON.stringify({
    partialSuccess: {
      rejectedSpans: String(partialSuccess.rejectedSpans),
      errorMessage: partialSuccess.errorMessage,
    },
  });
}
