/**
 * OTLP/protobuf: a decoder for `ExportTraceServiceRequest` and an encoder for
 * `ExportTraceServiceResponse`, written for just these messages rather than pulling in a protobuf
 * library. Field numbers are opentelemetry-proto's (`collector/trace/v1/trace_service.proto`,
 * `trace/v1/trace.proto`, `common/v1/common.proto`, `resource/v1/resource.proto`).
 *
 * Every read is bounds-checked against the end of the message that contains it, so a truncated
 * varint, a length past the end, a known field with the wrong wire type or `AnyValue`s nested
 * deeper than {@link MAX_ANY_VALUE_DEPTH} is a {@link MalformedOtlpError} (the route's 400), never
 * an exception from outside this file, a read out of bounds or a loop that does not advance. A body
 * that would decode to more than {@link DecodeBudget} allows stops with an
 * {@link OtlpTooLargeError} (the route's 413) as soon as it passes the limit.
 * Unknown fields are skipped by wire type, and a non-repeated message field that appears more than
 * once (two `resource`s in one `ResourceSpans`, two `status`es, an `AnyValue`'s `kvlist_value`) is
 * merged, as protobuf's encoding rules require: each decoder below takes what the earlier
 * occurrences decoded to and reads the next one into it (repeated fields concatenate, scalars:
 * the last wins).
 */
import { setOwn } from '../../mapping/json-values.js';
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
} from './types.js';

const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;
const WIRE_TYPE_NAMES = ['varint', 'fixed64', 'length-delimited', 'start-group', 'end-group', 'fixed32', 'invalid (6)', 'invalid (7)'];

const TWO_POW_32 = 0x1_0000_0000;
const MAX_SAFE_HIGH_WORD = 0x1f_ffff; // hi * 2^32 + lo stays exact below 2^53
const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A cursor over the body. Varints come back as two 32-bit words: JavaScript numbers hold 53 bits. */
class Reader {
  readonly bytes: Buffer;
  readonly view: DataView;
  pos = 0;
  /** High 32 bits of the last varint read (its low 32 bits are the return value). */
  high = 0;
  /** What the body may still decode to: each decoder below charges it before building its element. */
  readonly budget = new DecodeBudget();

  constructor(bytes: Uint8Array) {
    this.bytes = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Reads a varint that must end before `end`; returns its low 32 bits (unsigned). */
  varint(end: number): number {
    let low = 0;
    let high = 0;
    for (let index = 0; index < 10; index++) {
      if (this.pos >= end) throw this.malformed('truncated varint');
      const byte = this.bytes[this.pos++]!;
      const bits = byte & 0x7f;
      if (index < 4) low |= bits << (7 * index);
      else if (index === 4) {
        low |= bits << 28;
        high = bits >>> 4;
      } else high |= bits << (7 * index - 32);
      if (byte < 0x80) {
        this.high = high >>> 0;
        return low >>> 0;
      }
    }
    throw this.malformed('varint longer than 10 bytes');
  }

  /** Reads a length prefix and returns the end offset of the bytes it announces. */
  lengthEnd(end: number): number {
    const at = this.pos;
    const length = this.varint(end);
    if (this.high !== 0 || length > end - this.pos) {
      const declared = this.high === 0 ? String(length) : 'more than 2^32';
      throw new MalformedOtlpError(`length ${declared} at byte ${at} runs past the end of its message (byte ${end})`);
    }
    return this.pos + length;
  }

  /**
   * A string field, its bytes read as UTF-8 with U+FFFD for bytes that are none (the span is kept
   * rather than the whole request refused, as strict protobuf parsers would).
   */
  string(end: number): string {
    const stop = this.lengthEnd(end);
    const text = this.bytes.toString('utf8', this.pos, stop);
    this.pos = stop;
    return text;
  }

  /** Bytes as lowercase hex (ids). */
  hex(end: number): string {
    const stop = this.lengthEnd(end);
    const text = this.bytes.toString('hex', this.pos, stop);
    this.pos = stop;
    return text;
  }

  /** Bytes as a copy, so a value kept in an attribute does not pin the whole body. */
  copyBytes(end: number): Uint8Array {
    const stop = this.lengthEnd(end);
    const copy = new Uint8Array(this.bytes.subarray(this.pos, stop));
    this.pos = stop;
    return copy;
  }

  fixed64(end: number): bigint {
    this.need(8, end);
    const value = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return value;
  }

  double(end: number): number {
    this.need(8, end);
    const value = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return value;
  }

  /** Skips one field's value by its wire type. Groups (3, 4) never appear in OTLP: malformed. */
  skip(wireType: number, end: number): void {
    switch (wireType) {
      case VARINT:
        this.varint(end);
        return;
      case FIXED64:
        this.need(8, end);
        this.pos += 8;
        return;
      case LEN:
        this.pos = this.lengthEnd(end);
        return;
      case FIXED32:
        this.need(4, end);
        this.pos += 4;
        return;
      default:
        throw this.malformed(`unsupported wire type ${WIRE_TYPE_NAMES[wireType] ?? wireType}`);
    }
  }

  need(count: number, end: number): void {
    if (end - this.pos < count) throw this.malformed(`${count}-byte value runs past the end of its message (byte ${end})`);
  }

  malformed(problem: string): MalformedOtlpError {
    return new MalformedOtlpError(`${problem} at byte ${this.pos}`);
  }
}

/** A field tag: field number and wire type. */
interface Tag {
  field: number;
  wireType: number;
}

/**
 * Reads the fields of one message from the reader's position up to `end`, calling `onField` for
 * each; `onField` reads or skips the value. Checks that every field moved the cursor forward.
 */
function readFields(reader: Reader, end: number, onField: (tag: Tag) => void): void {
  const tag: Tag = { field: 0, wireType: 0 };
  while (reader.pos < end) {
    const at = reader.pos;
    const key = reader.varint(end);
    if (reader.high !== 0 || key >>> 3 === 0) throw new MalformedOtlpError(`invalid field tag at byte ${at}`);
    tag.field = key >>> 3;
    tag.wireType = key & 7;
    onField(tag);
  }
  if (reader.pos !== end) throw reader.malformed(`message overruns its length (ends at byte ${end})`);
}

/** Throws unless a known field arrived with the wire type its declaration gives it. */
function expectWireType(tag: Tag, expected: number, message: string, field: string, reader: Reader): void {
  if (tag.wireType !== expected) {
    throw new MalformedOtlpError(
      `${message}.${field} (field ${tag.field}) has wire type ${WIRE_TYPE_NAMES[tag.wireType] ?? tag.wireType}, ` +
        `expected ${WIRE_TYPE_NAMES[expected]} (before byte ${reader.pos})`,
    );
  }
}

/**
 * Decodes an OTLP/protobuf `ExportTraceServiceRequest`. Throws {@link MalformedOtlpError} for a
 * body that is not one, {@link OtlpTooLargeError} for one past {@link DecodeBudget}.
 *
 * @example
 * const request = decodeTraceRequestProtobuf(ProtobufTraceSerializer.serializeRequest(spans));
 * request.resourceSpans[0]?.scopeSpans[0]?.spans[0]?.name; // the first span's name
 */
export function decodeTraceRequestProtobuf(body: Uint8Array): OtlpTraceRequest {
  const reader = new Reader(body);
  const resourceSpans: OtlpResourceSpans[] = [];
  readFields(reader, body.byteLength, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'ExportTraceServiceRequest', 'resource_spans', reader);
      resourceSpans.push(decodeResourceSpans(reader, reader.lengthEnd(body.byteLength)));
    } else reader.skip(tag.wireType, body.byteLength);
  });
  return { resourceSpans };
}

function decodeResourceSpans(reader: Reader, end: number): OtlpResourceSpans {
  reader.budget.charge('resourceSpans');
  let resource: OtlpResource = { attributes: {}, droppedAttributesCount: 0 };
  const scopeSpans: OtlpScopeSpans[] = [];
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'ResourceSpans', 'resource', reader);
      resource = decodeResource(reader, reader.lengthEnd(end), resource);
    } else if (tag.field === 2) {
      expectWireType(tag, LEN, 'ResourceSpans', 'scope_spans', reader);
      scopeSpans.push(decodeScopeSpans(reader, reader.lengthEnd(end)));
    } else reader.skip(tag.wireType, end);
  });
  return { resource, scopeSpans };
}

/** A `Resource`, merged into `earlier` (its attributes object is reused). */
function decodeResource(reader: Reader, end: number, earlier: OtlpResource): OtlpResource {
  const { attributes } = earlier;
  let { droppedAttributesCount } = earlier;
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'Resource', 'attributes', reader);
      decodeKeyValue(reader, reader.lengthEnd(end), attributes, 0);
    } else if (tag.field === 2) {
      expectWireType(tag, VARINT, 'Resource', 'dropped_attributes_count', reader);
      droppedAttributesCount = reader.varint(end);
    } else reader.skip(tag.wireType, end);
  });
  return { attributes, droppedAttributesCount };
}

function decodeScopeSpans(reader: Reader, end: number): OtlpScopeSpans {
  reader.budget.charge('scopeSpans');
  let scope: OtlpScope = { name: '', version: '' };
  const spans: OtlpSpan[] = [];
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'ScopeSpans', 'scope', reader);
      scope = decodeScope(reader, reader.lengthEnd(end), scope);
    } else if (tag.field === 2) {
      expectWireType(tag, LEN, 'ScopeSpans', 'spans', reader);
      spans.push(decodeSpan(reader, reader.lengthEnd(end)));
    } else reader.skip(tag.wireType, end);
  });
  return { scope, spans };
}

/** An `InstrumentationScope`, merged into `earlier`. */
function decodeScope(reader: Reader, end: number, earlier: OtlpScope): OtlpScope {
  let { name, version } = earlier;
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'InstrumentationScope', 'name', reader);
      name = reader.string(end);
    } else if (tag.field === 2) {
      expectWireType(tag, LEN, 'InstrumentationScope', 'version', reader);
      version = reader.string(end);
    } else reader.skip(tag.wireType, end); // scope attributes: not part of the call (SPEC §3)
  });
  return { name, version };
}

function decodeSpan(reader: Reader, end: number): OtlpSpan {
  reader.budget.charge('span');
  let traceId = '';
  let spanId = '';
  let parentSpanId = '';
  let traceState = '';
  let name = '';
  let kind = 0;
  let startTimeUnixNano = 0n;
  let endTimeUnixNano = 0n;
  const attributes: OtlpAttributes = {};
  const events: OtlpEvent[] = [];
  const links: OtlpLink[] = [];
  let status: OtlpStatus = { code: 0, message: '' };
  readFields(reader, end, (tag) => {
    switch (tag.field) {
      case 1:
        expectWireType(tag, LEN, 'Span', 'trace_id', reader);
        traceId = reader.hex(end);
        return;
      case 2:
        expectWireType(tag, LEN, 'Span', 'span_id', reader);
        spanId = reader.hex(end);
        return;
      case 3:
        expectWireType(tag, LEN, 'Span', 'trace_state', reader);
        traceState = reader.string(end);
        return;
      case 4:
        expectWireType(tag, LEN, 'Span', 'parent_span_id', reader);
        parentSpanId = reader.hex(end);
        return;
      case 5:
        expectWireType(tag, LEN, 'Span', 'name', reader);
        name = reader.string(end);
        return;
      case 6:
        expectWireType(tag, VARINT, 'Span', 'kind', reader);
        kind = reader.varint(end) | 0; // an enum is an int32: keep the low word, signed
        return;
      case 7:
        expectWireType(tag, FIXED64, 'Span', 'start_time_unix_nano', reader);
        startTimeUnixNano = reader.fixed64(end);
        return;
      case 8:
        expectWireType(tag, FIXED64, 'Span', 'end_time_unix_nano', reader);
        endTimeUnixNano = reader.fixed64(end);
        return;
      case 9:
        expectWireType(tag, LEN, 'Span', 'attributes', reader);
        decodeKeyValue(reader, reader.lengthEnd(end), attributes, 0);
        return;
      case 11:
        expectWireType(tag, LEN, 'Span', 'events', reader);
        events.push(decodeEvent(reader, reader.lengthEnd(end)));
        return;
      case 13:
        expectWireType(tag, LEN, 'Span', 'links', reader);
        links.push(decodeLink(reader, reader.lengthEnd(end)));
        return;
      case 15:
        expectWireType(tag, LEN, 'Span', 'status', reader);
        status = decodeStatus(reader, reader.lengthEnd(end), status);
        return;
      default:
        // 10, 12, 14 (dropped counts), 16 (flags) and fields newer than this decoder.
        reader.skip(tag.wireType, end);
    }
  });
  return {
    traceId,
    spanId,
    parentSpanId,
    traceState,
    name,
    kind,
    startTimeUnixNano,
    endTimeUnixNano,
    attributes,
    events,
    links,
    status,
  };
}

function decodeEvent(reader: Reader, end: number): OtlpEvent {
  reader.budget.charge('event');
  let timeUnixNano = 0n;
  let name = '';
  const attributes: OtlpAttributes = {};
  let droppedAttributesCount = 0;
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, FIXED64, 'Span.Event', 'time_unix_nano', reader);
      timeUnixNano = reader.fixed64(end);
    } else if (tag.field === 2) {
      expectWireType(tag, LEN, 'Span.Event', 'name', reader);
      name = reader.string(end);
    } else if (tag.field === 3) {
      expectWireType(tag, LEN, 'Span.Event', 'attributes', reader);
      decodeKeyValue(reader, reader.lengthEnd(end), attributes, 0);
    } else if (tag.field === 4) {
      expectWireType(tag, VARINT, 'Span.Event', 'dropped_attributes_count', reader);
      droppedAttributesCount = reader.varint(end);
    } else reader.skip(tag.wireType, end);
  });
  return { timeUnixNano, name, attributes, droppedAttributesCount };
}

function decodeLink(reader: Reader, end: number): OtlpLink {
  reader.budget.charge('link');
  let traceId = '';
  let spanId = '';
  let traceState = '';
  const attributes: OtlpAttributes = {};
  let droppedAttributesCount = 0;
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'Span.Link', 'trace_id', reader);
      traceId = reader.hex(end);
    } else if (tag.field === 2) {
      expectWireType(tag, LEN, 'Span.Link', 'span_id', reader);
      spanId = reader.hex(end);
    } else if (tag.field === 3) {
      expectWireType(tag, LEN, 'Span.Link', 'trace_state', reader);
      traceState = reader.string(end);
    } else if (tag.field === 4) {
      expectWireType(tag, LEN, 'Span.Link', 'attributes', reader);
      decodeKeyValue(reader, reader.lengthEnd(end), attributes, 0);
    } else if (tag.field === 5) {
      expectWireType(tag, VARINT, 'Span.Link', 'dropped_attributes_count', reader);
      droppedAttributesCount = reader.varint(end);
    } else reader.skip(tag.wireType, end); // 6: flags
  });
  return { traceId, spanId, traceState, attributes, droppedAttributesCount };
}

/** A `Status`, merged into `earlier`. */
function decodeStatus(reader: Reader, end: number, earlier: OtlpStatus): OtlpStatus {
  let { code, message } = earlier;
  readFields(reader, end, (tag) => {
    if (tag.field === 2) {
      expectWireType(tag, LEN, 'Status', 'message', reader);
      message = reader.string(end);
    } else if (tag.field === 3) {
      expectWireType(tag, VARINT, 'Status', 'code', reader);
      code = reader.varint(end) | 0;
    } else reader.skip(tag.wireType, end); // 1: the deprecated code, reserved
  });
  return { code, message };
}

/** Decodes one `KeyValue` into `target` (a later duplicate key replaces an earlier one). */
function decodeKeyValue(reader: Reader, end: number, target: OtlpAttributes, depth: number): void {
  reader.budget.charge('keyValue');
  let key = '';
  let value: unknown = null;
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'KeyValue', 'key', reader);
      key = reader.string(end);
    } else if (tag.field === 2) {
      expectWireType(tag, LEN, 'KeyValue', 'value', reader);
      value = decodeAnyValue(reader, reader.lengthEnd(end), depth + 1, value);
    } else reader.skip(tag.wireType, end);
  });
  // A top-level attribute (depth 0) is unflattened and may be parsed as JSON text by the mapping.
  if (depth === 0) reader.budget.chargeAttribute(key, value);
  setOwn(target, key, value);
}

/**
 * One `AnyValue` as JavaScript: string, boolean, number, bigint (an int64 beyond ±2^53),
 * Uint8Array, array, plain object (kvlist), or null when no value is set. Merged into `earlier`
 * (an earlier occurrence of the same `KeyValue.value`) as protobuf merges a oneof: the last field
 * wins, except that an `array_value` or `kvlist_value` that follows one of its kind extends it.
 */
function decodeAnyValue(reader: Reader, end: number, depth: number, earlier: unknown): unknown {
  if (depth > MAX_ANY_VALUE_DEPTH) throw reader.malformed(`AnyValue nested deeper than ${MAX_ANY_VALUE_DEPTH} levels`);
  let value = earlier;
  readFields(reader, end, (tag) => {
    switch (tag.field) {
      case 1:
        expectWireType(tag, LEN, 'AnyValue', 'string_value', reader);
        value = reader.string(end);
        return;
      case 2:
        expectWireType(tag, VARINT, 'AnyValue', 'bool_value', reader);
        value = (reader.varint(end) | reader.high) !== 0;
        return;
      case 3: {
        expectWireType(tag, VARINT, 'AnyValue', 'int_value', reader);
        const low = reader.varint(end);
        value = int64FromWords(low, reader.high);
        return;
      }
      case 4:
        expectWireType(tag, FIXED64, 'AnyValue', 'double_value', reader);
        value = reader.double(end);
        return;
      case 5:
        expectWireType(tag, LEN, 'AnyValue', 'array_value', reader);
        value = decodeArrayValue(reader, reader.lengthEnd(end), depth, Array.isArray(value) ? value : []);
        return;
      case 6:
        expectWireType(tag, LEN, 'AnyValue', 'kvlist_value', reader);
        value = decodeKeyValueList(reader, reader.lengthEnd(end), depth, isKeyValueList(value) ? value : {});
        return;
      case 7:
        expectWireType(tag, LEN, 'AnyValue', 'bytes_value', reader);
        value = reader.copyBytes(end);
        return;
      default:
        reader.skip(tag.wireType, end);
    }
  });
  return value;
}

/** An `ArrayValue`'s values, appended to `values`. */
function decodeArrayValue(reader: Reader, end: number, depth: number, values: unknown[]): unknown[] {
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'ArrayValue', 'values', reader);
      reader.budget.charge('arrayValue');
      values.push(decodeAnyValue(reader, reader.lengthEnd(end), depth + 1, null));
    } else reader.skip(tag.wireType, end);
  });
  return values;
}

/** A `KeyValueList`'s members, added to `values`. */
function decodeKeyValueList(reader: Reader, end: number, depth: number, values: OtlpAttributes): OtlpAttributes {
  readFields(reader, end, (tag) => {
    if (tag.field === 1) {
      expectWireType(tag, LEN, 'KeyValueList', 'values', reader);
      decodeKeyValue(reader, reader.lengthEnd(end), values, depth);
    } else reader.skip(tag.wireType, end);
  });
  return values;
}

/** Whether a decoded `AnyValue` came from a `kvlist_value`: the only plain objects it decodes to. */
function isKeyValueList(value: unknown): value is OtlpAttributes {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/** A two's-complement int64 from its 32-bit words: a number when exact, else a bigint. */
function int64FromWords(low: number, high: number): number | bigint {
  if (high <= MAX_SAFE_HIGH_WORD) return high * TWO_POW_32 + low;
  const value = BigInt.asIntN(64, (BigInt(high) << 32n) | BigInt(low));
  return value >= MIN_SAFE && value <= MAX_SAFE ? Number(value) : value;
}

/**
 * Encodes an OTLP/protobuf `ExportTraceServiceResponse`: empty when everything was accepted (the
 * OTLP spec asks servers to leave `partial_success` unset then), else `partial_success` (field 1)
 * with `rejected_spans` (1) and `error_message` (2).
 *
 * @example
 * encodeTraceResponseProtobuf({ rejectedSpans: 1, errorMessage: 'bad id' }); // <Buffer 0a 0a 08 01 12 06 ...>
 */
export function encodeTraceResponseProtobuf(partialSuccess: PartialSuccess | undefined): Buffer {
  if (partialSuccess === undefined) return Buffer.alloc(0);
  const message = Buffer.from(partialSuccess.errorMessage, 'utf8');
  const inner = Buffer.concat([
    Buffer.from([(1 << 3) | VARINT]),
    encodeVarint(partialSuccess.rejectedSpans),
    Buffer.from([(2 << 3) | LEN]),
    encodeVarint(message.byteLength),
    message,
  ]);
  return Buffer.concat([Buffer.from([(1 << 3) | LEN]), encodeVarint(inner.byteLength), inner]);
}

/** A non-negative integer (below 2^53) as a varint. */
function encodeVarint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}
