/**
 * The OTLP decoders on their own: bodies from the official `@opentelemetry/otlp-transformer`
 * serializers decode to spans that map to exactly the calls the exporter maps the same SDK spans
 * to, and hostile protobuf bytes give a MalformedOtlpError (never another error, never a hang).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { toCallParts, type CallParts } from '../../src/mapping/index.js';
import {
  decodeTraceRequestJson,
  decodeTraceRequestProtobuf,
  encodeTraceResponseJson,
  encodeTraceResponseProtobuf,
  MalformedOtlpError,
  toResourceInput,
  toSpanInput,
  type OtlpTraceRequest,
} from '../../src/server/otlp/index.js';
import {
  captureRichSpans,
  fixed64Field,
  keyValue,
  lenField,
  requestMessage,
  spanMessage,
  stringValue,
  tag,
  varint,
  varintField,
} from './otlp-fixtures.js';

const PROJECT = 'acme/decode';
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';

/** Every span of a decoded request through the same mapping the exporter uses. */
function mapDecoded(request: OtlpTraceRequest): CallParts[] {
  const parts: CallParts[] = [];
  for (const resourceSpans of request.resourceSpans) {
    const resource = toResourceInput(resourceSpans.resource);
    for (const scopeSpans of resourceSpans.scopeSpans) {
      for (const span of scopeSpans.spans) {
        const converted = toSpanInput(span, resource, scopeSpans.scope);
        if (!converted.ok) throw new Error(converted.reason);
        parts.push(toCallParts(converted.span, PROJECT));
      }
    }
  }
  return parts;
}

function byId(parts: CallParts[]): Map<string, CallParts> {
  return new Map(parts.map((part) => [part.start.id!, part]));
}

/** The serializers are typed against `@opentelemetry/sdk-trace`, the base package re-exports it. */
const serialize = (serializer: { serializeRequest(spans: never): Uint8Array | undefined }, spans: ReadableSpan[]): Uint8Array =>
  serializer.serializeRequest(spans as never)!;

function decodeOne(bytes: number[] | Uint8Array): OtlpTraceRequest {
  return decodeTraceRequestProtobuf(Uint8Array.from(bytes));
}

describe('official serializer bodies map like the SDK spans they came from', () => {
  it.each([
    ['protobuf', (spans: ReadableSpan[]) => decodeTraceRequestProtobuf(serialize(ProtobufTraceSerializer, spans))],
    ['JSON', (spans: ReadableSpan[]) => decodeTraceRequestJson(serialize(JsonTraceSerializer, spans))],
  ])('%s: every call field, otel_dump included, equals the exporter mapping', async (_name, decode) => {
    const spans = await captureRichSpans({ 'deployment.environment': 'test', 'resource.count': 3 });
    expect(spans).toHaveLength(4);
    const decoded = byId(mapDecoded(decode(spans)));
    expect(decoded.size).toBe(spans.length);
    for (const span of spans) {
      const expected = toCallParts(span, PROJECT);
      // JSON round trip on both sides: what reaches the store is JSON.
      expect(JSON.parse(JSON.stringify(decoded.get(span.spanContext().spanId)))).toEqual(JSON.parse(JSON.stringify(expected)));
    }
  });

  it.each([
    ['protobuf', ProtobufTraceSerializer, decodeTraceRequestProtobuf],
    ['JSON', JsonTraceSerializer, decodeTraceRequestJson],
  ] as const)('%s: a tracer with an empty version gives the exporter\'s otel_dump.scope (version null)', async (_name, serializer, decode) => {
    const memory = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
    provider.getTracer('empty-version', '').startSpan('a').end();
    const spans = memory.getFinishedSpans().slice();
    await provider.shutdown();
    const [decoded] = mapDecoded(decode(serialize(serializer, spans)));
    const expected = toCallParts(spans[0]!, PROJECT);
    expect(decoded!.start.otel_dump).toEqual(expected.start.otel_dump);
    expect(expected.start.otel_dump!.scope).toEqual({ name: 'empty-version', version: null });
  });

  it('decodes the rich spans as expected (a spot check that the comparison above compares something)', async () => {
    const spans = await captureRichSpans();
    const calls = [...byId(mapDecoded(decodeTraceRequestProtobuf(serialize(ProtobufTraceSerializer, spans)))).values()];
    const root = calls.find((call) => call.start.op_name === 'agent.run')!;
    expect(root.start).toMatchObject({ display_name: 'Agent run', thread_id: 'thread-1', parent_id: null, inputs: { 'input.value': { question: 'why?', n: 3 } } });
    expect(root.end.summary).toEqual({ usage: { 'gpt-4o': { input_tokens: 12, output_tokens: 5, total_tokens: 17 } } });
    const failing = calls.find((call) => call.start.op_name === 'failing')!;
    expect(failing.end.exception).toBe('TypeError: boom');
    const tool = calls.find((call) => call.start.op_name === 'tool.call')!;
    expect(tool.start.otel_dump).toMatchObject({ kind: 'CLIENT', status: { code: 'OK' }, links: [{ span_id: root.start.id }] });
    expect(calls.find((call) => call.start.op_name.startsWith('xxxx'))!.start.op_name).toHaveLength(128);
  });
});

describe('protobuf values', () => {
  function attributesOf(...anyValues: Array<[string, number[]]>) {
    const request = decodeOne(requestMessage([spanMessage({ traceId: TRACE, spanId: SPAN, attributes: anyValues.map(([key, value]) => keyValue(key, value)) })]));
    return request.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.attributes;
  }

  it('decodes every AnyValue kind, int64 beyond 2^53 as bigint and negatives exactly', () => {
    const doubleBytes = Buffer.alloc(8);
    doubleBytes.writeDoubleLE(-1.5);
    const attributes = attributesOf(
      ['s', stringValue('héllo')],
      ['t', varintField(2, 1)],
      ['f', varintField(2, 0)],
      ['i', varintField(3, 42)],
      ['neg', varintField(3, 2n ** 64n - 7n)],
      ['huge', varintField(3, 2n ** 62n + 1n)],
      ['min', varintField(3, 2n ** 63n)],
      ['d', [...tag(4, 1), ...doubleBytes]],
      ['bytes', lenField(7, [1, 2, 255])],
      ['arr', lenField(5, [...lenField(1, stringValue('a')), ...lenField(1, varintField(3, 1))])],
      ['kv', lenField(6, lenField(1, keyValue('inner', stringValue('x'))))],
      ['empty', []],
    );
    expect(attributes).toEqual({
      s: 'héllo',
      t: true,
      f: false,
      i: 42,
      neg: -7,
      huge: 2n ** 62n + 1n,
      min: -(2n ** 63n),
      d: -1.5,
      bytes: new Uint8Array([1, 2, 255]),
      arr: ['a', 1],
      kv: { inner: 'x' },
      empty: null,
    });
  });

  it('keeps a __proto__ key as an own attribute, without touching the prototype', () => {
    const attributes = attributesOf(['__proto__', stringValue('x')]);
    expect(Object.getPrototypeOf(attributes)).toBe(Object.prototype);
    expect(Object.hasOwn(attributes, '__proto__')).toBe(true);
  });

  it('reads 64-bit times exactly, beyond what a double holds', () => {
    const request = decodeOne(requestMessage([spanMessage({ traceId: TRACE, spanId: SPAN })]));
    expect(request.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.startTimeUnixNano).toBe(1_767_323_045_123_456_789n);
  });

  it('skips unknown fields of every wire type', () => {
    const unknown = [...varintField(99, 2n ** 63n), ...fixed64Field(98, 1n), ...lenField(97, 'x'), ...tag(96, 5), 1, 2, 3, 4];
    const body = [...unknown, ...requestMessage([[...spanMessage({ traceId: TRACE, spanId: SPAN }), ...unknown]])];
    const spans = decodeOne(body).resourceSpans[0]!.scopeSpans[0]!.spans;
    expect(spans).toHaveLength(1);
    expect(spans[0]!.spanId).toBe(SPAN);
  });

  it('decodes an empty body as an empty request', () => {
    expect(decodeOne([])).toEqual({ resourceSpans: [] });
  });

  it('merges a non-repeated message field sent twice, as protobuf requires (resource, scope, status, AnyValue)', () => {
    const kvlist = (...pairs: number[][]) => lenField(6, pairs.flatMap((pair) => lenField(1, pair)));
    const array = (...values: number[][]) => lenField(5, values.flatMap((value) => lenField(1, value)));
    const span = [
      ...spanMessage({
        traceId: TRACE,
        spanId: SPAN,
        attributes: [
          // One KeyValue whose value arrives twice: kvlists merge, arrays concatenate.
          [...lenField(1, 'kv'), ...lenField(2, kvlist(keyValue('a', stringValue('1')), keyValue('b', stringValue('old')))), ...lenField(2, kvlist(keyValue('b', stringValue('new'))))],
          [...lenField(1, 'list'), ...lenField(2, array(stringValue('x'))), ...lenField(2, array(stringValue('y')))],
          // A different oneof case replaces.
          [...lenField(1, 'replaced'), ...lenField(2, array(stringValue('x'))), ...lenField(2, stringValue('text'))],
        ],
      }),
      ...lenField(15, varintField(3, 2)),
      ...lenField(15, lenField(2, 'second status message')),
    ];
    const firstResource = [...lenField(1, keyValue('wandb.entity', stringValue('acme'))), ...varintField(2, 3)];
    const secondResource = lenField(1, keyValue('wandb.project', stringValue('merged')));
    const scopeSpans = [...lenField(1, [...lenField(1, 'scope-name'), ...lenField(2, '1.0')]), ...lenField(1, lenField(2, '2.0')), ...lenField(2, span)];
    const body = lenField(1, [...lenField(1, firstResource), ...lenField(2, scopeSpans), ...lenField(1, secondResource)]);
    const [resourceSpans] = decodeOne(body).resourceSpans;
    expect(resourceSpans!.resource).toEqual({ attributes: { 'wandb.entity': 'acme', 'wandb.project': 'merged' }, droppedAttributesCount: 3 });
    expect(resourceSpans!.scopeSpans[0]!.scope).toEqual({ name: 'scope-name', version: '2.0' });
    const decoded = resourceSpans!.scopeSpans[0]!.spans[0]!;
    expect(decoded.status).toEqual({ code: 2, message: 'second status message' });
    expect(decoded.attributes).toEqual({ kv: { a: '1', b: 'new' }, list: ['x', 'y'], replaced: 'text' });
  });
});

describe('malformed protobuf', () => {
  const nested = (depth: number): number[] => {
    let value = stringValue('leaf');
    for (let level = 0; level < depth; level++) value = lenField(5, lenField(1, value));
    return value;
  };

  it.each<[string, number[], RegExp]>([
    ['a truncated varint', [0x0a, 0x80], /truncated varint/],
    ['a truncated tag', [0x80], /truncated varint/],
    ['a varint longer than 10 bytes', [...tag(50, 0), ...Array<number>(11).fill(0xff)], /longer than 10 bytes/],
    ['a length past the end', [0x0a, 0x05, 0x01], /runs past the end/],
    ['a huge declared length', [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f], /runs past the end/],
    ['a 64-bit declared length', [0x0a, ...varint(2n ** 63n)], /more than 2\^32.*runs past the end/],
    ['a known field with the wrong wire type', [...varintField(1, 1)], /resource_spans.*wire type varint, expected length-delimited/],
    ['a nested field with the wrong wire type', [...requestMessage([[...varintField(5, 1)]])], /Span\.name.*wire type varint/],
    ['a start-group wire type', [...tag(50, 3)], /unsupported wire type start-group/],
    ['wire type 7', [...tag(50, 7)], /unsupported wire type/],
    ['field number 0', [0x02, 0x00], /invalid field tag/],
    ['a fixed64 cut short', [...tag(50, 1), 1, 2, 3], /8-byte value runs past/],
    ['a fixed32 cut short', [...tag(50, 5), 1], /4-byte value runs past/],
    ['a child longer than its parent', [...lenField(1, [...lenField(2, []).slice(0, 1), 0x05])], /runs past the end/],
    ['AnyValues nested too deep', [...requestMessage([spanMessage({ traceId: TRACE, spanId: SPAN, attributes: [keyValue('deep', nested(40))] })])], /nested deeper than 32/],
  ])('rejects %s', (_name, bytes, message) => {
    expect(() => decodeOne(bytes)).toThrow(MalformedOtlpError);
    expect(() => decodeOne(bytes)).toThrow(message);
  });

  it('accepts AnyValues nested within the limit', () => {
    const request = decodeOne(requestMessage([spanMessage({ traceId: TRACE, spanId: SPAN, attributes: [keyValue('deep', nested(15))] })]));
    let value: unknown = request.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.attributes.deep;
    for (let level = 0; level < 15; level++) value = (value as unknown[])[0];
    expect(value).toBe('leaf');
  });

  it('throws only MalformedOtlpError for arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        try {
          decodeTraceRequestProtobuf(bytes);
        } catch (error) {
          if (!(error instanceof MalformedOtlpError)) throw error;
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('throws only MalformedOtlpError for mutated and truncated real bodies', async () => {
    const body = serialize(ProtobufTraceSerializer, await captureRichSpans());
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat({ max: body.length - 1 }), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
        fc.nat({ max: body.length }),
        (edits, cut) => {
          const mutated = Uint8Array.from(body.subarray(0, Math.max(cut, 1)));
          for (const [at, byte] of edits) if (at < mutated.length) mutated[at] = byte;
          try {
            decodeTraceRequestProtobuf(mutated);
          } catch (error) {
            if (!(error instanceof MalformedOtlpError)) throw error;
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('OTLP/JSON', () => {
  const span = (extra: Record<string, unknown>) =>
    Buffer.from(JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId: SPAN, name: 'n', ...extra }] }] }] }));

  it('accepts snake_case names, intValue as text or number, enum names and special doubles', () => {
    const body = Buffer.from(
      JSON.stringify({
        resource_spans: [
          {
            scope_spans: [
              {
                spans: [
                  {
                    trace_id: TRACE.toUpperCase(),
                    span_id: SPAN,
                    kind: 'SPAN_KIND_SERVER',
                    start_time_unix_nano: '1767323045123456789',
                    end_time_unix_nano: 1767323046000000000,
                    status: { code: 'STATUS_CODE_ERROR', message: 'bad' },
                    attributes: [
                      { key: 'a', value: { int_value: '9007199254740993' } },
                      { key: 'b', value: { intValue: 7 } },
                      { key: 'c', value: { doubleValue: 'NaN' } },
                      { key: 'd', value: { bytesValue: 'AQI=' } },
                      { key: 'e', value: { kvlistValue: { values: [{ key: 'x', value: { boolValue: true } }] } } },
                      { key: 'f', value: { arrayValue: { values: [{ stringValue: 's' }, {}] } } },
                      { key: 'g' },
                    ],
                  },
                ],
              },
            ],
          },
        ],
      }),
    );
    const decoded = decodeTraceRequestJson(body).resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
    expect(decoded).toMatchObject({ traceId: TRACE, kind: 2, startTimeUnixNano: '1767323045123456789', status: { code: 2, message: 'bad' } });
    expect(decoded.attributes).toEqual({
      a: 9007199254740993n,
      b: 7,
      c: Number.NaN,
      d: new Uint8Array([1, 2]),
      e: { x: true },
      f: ['s', null],
      g: null,
    });
  });

  it('accepts ids as base64 (generic protobuf JSON printers) as well as hex', () => {
    const body = span({ traceId: Buffer.from(TRACE, 'hex').toString('base64'), spanId: Buffer.from(SPAN, 'hex').toString('base64'), parentSpanId: '' });
    expect(decodeTraceRequestJson(body).resourceSpans[0]!.scopeSpans[0]!.spans[0]).toMatchObject({ traceId: TRACE, spanId: SPAN, parentSpanId: '' });
    // A hex id is never read as base64, even when it would decode.
    const hexLooksBase64 = 'abcdabcdabcdabcd';
    expect(decodeTraceRequestJson(span({ spanId: hexLooksBase64 })).resourceSpans[0]!.scopeSpans[0]!.spans[0]!.spanId).toBe(hexLooksBase64);
  });

  it.each<[string, Buffer, RegExp]>([
    ['text that is not JSON', Buffer.from('{"resourceSpans": ['), /not valid JSON/],
    ['a list at the top', Buffer.from('[]'), /body: expected an object, got a list/],
    ['resourceSpans not a list', Buffer.from('{"resourceSpans": {}}'), /resourceSpans: expected a list/],
    ['a numeric name', span({ name: 5 }), /spans\[0\]\.name: expected a string, got number/],
    ['a negative time', span({ startTimeUnixNano: -1 }), /startTimeUnixNano/],
    ['a time past 64 bits', span({ startTimeUnixNano: '99999999999999999999' }), /startTimeUnixNano/],
    ['an int beyond int64', span({ attributes: [{ key: 'a', value: { intValue: '9223372036854775808' } }] }), /outside the int64 range/],
    ['a fractional int', span({ attributes: [{ key: 'a', value: { intValue: 1.5 } }] }), /intValue: expected an integer/],
    // Numbers are held to the ranges their text forms are.
    ['an int number beyond int64', span({ attributes: [{ key: 'a', value: { intValue: 1e20 } }] }), /outside the int64 range/],
    ['a time number past 64 bits', span({ startTimeUnixNano: 1e20 }), /startTimeUnixNano/],
    ['bytes that are not base64', span({ attributes: [{ key: 'a', value: { bytesValue: '!!!!' } }] }), /bytesValue: expected base64 text/],
  ])('rejects %s', (_name, body, message) => {
    expect(() => decodeTraceRequestJson(body)).toThrow(MalformedOtlpError);
    expect(() => decodeTraceRequestJson(body)).toThrow(message);
  });

  it('rejects AnyValues nested too deep without exhausting the stack', () => {
    // Built as text: JSON.stringify itself would overflow the stack on this value.
    const depth = 100_000;
    const value = `${'{"arrayValue":{"values":['.repeat(depth)}{"stringValue":"leaf"}${']}}'.repeat(depth)}`;
    const body = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"${TRACE}","spanId":"${SPAN}","attributes":[{"key":"deep","value":${value}}]}]}]}]}`;
    expect(() => decodeTraceRequestJson(Buffer.from(body))).toThrow(/nested deeper than 32/);
  });
});

describe('responses', () => {
  it('are empty when everything was accepted', () => {
    expect(encodeTraceResponseProtobuf(undefined)).toHaveLength(0);
    expect(encodeTraceResponseJson(undefined)).toBe('{}');
  });

  it('carry partial_success readable by the official deserializers', () => {
    const partial = { rejectedSpans: 300, errorMessage: 'Rejected span (é): bad' };
    expect(ProtobufTraceSerializer.deserializeResponse(encodeTraceResponseProtobuf(partial))).toEqual({ partialSuccess: partial });
    expect(JsonTraceSerializer.deserializeResponse(Buffer.from(encodeTraceResponseJson(partial)))).toEqual({
      partialSuccess: { rejectedSpans: '300', errorMessage: partial.errorMessage },
    });
  });
});
