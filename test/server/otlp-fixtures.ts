/**
 * Fixtures for the OTLP ingest tests: real SDK spans that exercise every part of the mapping, and
 * a minimal protobuf writer for hand-made (and hostile) bodies.
 */
import { SpanKind, SpanStatusCode, trace, ROOT_CONTEXT, type Attributes } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { basicAuth, type Credentials } from '../helpers/server.js';

/** Spans with inputs/outputs, usage, thread/turn, events, links, errors, kinds and a long name. */
export function emitRichSpans(provider: BasicTracerProvider): void {
  const tracer = provider.getTracer('otlp-test', '2.0.0');
  const root = tracer.startSpan('agent.run', {
    kind: SpanKind.SERVER,
    attributes: {
      'input.value': JSON.stringify({ question: 'why?', n: 3 }),
      'output.value': 'because',
      'wandb.display_name': 'Agent run',
      'wandb.thread_id': 'thread-1',
      'wandb.is_turn': true,
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 5,
      'llm.invocation_parameters': '{"temperature":0.5}',
      'tags.list': ['a', 'b'],
      'numbers.list': [1, 2.5, 3],
      'flags.ok': true,
      ratio: 0.25,
      big: 2 ** 40,
    },
  });
  const rootContext = trace.setSpan(ROOT_CONTEXT, root);
  const tool = tracer.startSpan(
    'tool.call',
    {
      kind: SpanKind.CLIENT,
      links: [{ context: root.spanContext(), attributes: { 'link.why': 'caused-by' } }],
      attributes: { 'gen_ai.system': 'openai', 'weave.span.kind': 'tool', inputs: '{"query":"x"}' },
    },
    rootContext,
  );
  tool.addEvent('progress', { 'progress.step': 2, 'progress.note': 'half' });
  tool.setStatus({ code: SpanStatusCode.OK });
  tool.end();
  const failing = tracer.startSpan('failing', { kind: SpanKind.PRODUCER }, rootContext);
  failing.recordException(new TypeError('boom'));
  failing.setStatus({ code: SpanStatusCode.ERROR });
  failing.end();
  const plain = tracer.startSpan('x'.repeat(200), { kind: SpanKind.CONSUMER, attributes: { 'some.key': 'v', 'some.other': 1 } }, rootContext);
  plain.end();
  root.end();
}

/** A provider whose spans carry `resource` attributes, with the given processors. */
export function providerWith(processors: SpanProcessor[], resource: Attributes = {}): BasicTracerProvider {
  return new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'otlp-test', ...resource }),
    spanProcessors: processors,
  });
}

/** The finished spans of {@link emitRichSpans}, captured in memory. */
export async function captureRichSpans(resource: Attributes = {}): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter();
  const provider = providerWith([new SimpleSpanProcessor(memory)], resource);
  emitRichSpans(provider);
  await provider.forceFlush();
  const spans = memory.getFinishedSpans().slice();
  await provider.shutdown();
  return spans;
}

// --- sending ----------------------------------------------------------------------------------

export interface OtlpSendOptions {
  /** @default 'application/x-protobuf' */
  readonly contentType?: string;
  readonly encoding?: string;
  /** The `project_id` header. */
  readonly projectId?: string;
  /** @default dev/pw; null sends no Authorization header. */
  readonly credentials?: Credentials | null;
}

export interface OtlpAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly bytes: Uint8Array;
  readonly text: string;
  /** The body parsed, or undefined when it is not JSON. */
  readonly json: any;
}

/** POST `body` to `baseUrl`'s `/otel/v1/traces`. */
export async function sendOtlp(baseUrl: string, body: Uint8Array | string, options: OtlpSendOptions = {}): Promise<OtlpAnswer> {
  const headers: Record<string, string> = { 'content-type': options.contentType ?? 'application/x-protobuf' };
  if (options.encoding !== undefined) headers['content-encoding'] = options.encoding;
  if (options.projectId !== undefined) headers.project_id = options.projectId;
  if (options.credentials !== null) headers.authorization = basicAuth(options.credentials ?? { username: 'dev', password: 'pw' });
  const response = await fetch(`${baseUrl}/otel/v1/traces`, { method: 'POST', headers, body });
  const bytes = new Uint8Array(await response.arrayBuffer());
  const text = Buffer.from(bytes).toString('utf8');
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, bytes, text, json };
}

// --- a minimal protobuf writer -----------------------------------------------------------------

/** A varint of a non-negative integer (bigint for values past 2^53). */
export function varint(value: number | bigint): number[] {
  let rest = BigInt(value);
  const bytes: number[] = [];
  while (rest >= 0x80n) {
    bytes.push(Number(rest & 0x7fn) | 0x80);
    rest >>= 7n;
  }
  bytes.push(Number(rest));
  return bytes;
}

/** {@link varint} as bytes to concatenate, for bodies too large to build as number lists. */
export const varintBytes = (value: number): Buffer => Buffer.from(varint(value));

export const tag = (field: number, wireType: number): number[] => varint((field << 3) | wireType);

/** A length-delimited field. */
export function lenField(field: number, payload: Uint8Array | number[] | string): number[] {
  const bytes = typeof payload === 'string' ? [...Buffer.from(payload, 'utf8')] : [...payload];
  return [...tag(field, 2), ...varint(bytes.length), ...bytes];
}

export const varintField = (field: number, value: number | bigint): number[] => [...tag(field, 0), ...varint(value)];

export function fixed64Field(field: number, value: bigint): number[] {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64LE(value);
  return [...tag(field, 1), ...bytes];
}

export interface HandSpan {
  readonly traceId?: string;
  readonly spanId?: string;
  readonly parentSpanId?: string;
  readonly name?: string;
  readonly attributes?: number[][];
}

/** A `Span` message; ids are hex text written as bytes. */
export function spanMessage(span: HandSpan): number[] {
  return [
    ...(span.traceId === undefined ? [] : lenField(1, Buffer.from(span.traceId, 'hex'))),
    ...(span.spanId === undefined ? [] : lenField(2, Buffer.from(span.spanId, 'hex'))),
    ...(span.parentSpanId === undefined ? [] : lenField(4, Buffer.from(span.parentSpanId, 'hex'))),
    ...lenField(5, span.name ?? 'hand'),
    ...fixed64Field(7, 1_767_323_045_123_456_789n),
    ...fixed64Field(8, 1_767_323_046_000_000_000n),
    ...(span.attributes ?? []).flatMap((keyValue) => lenField(9, keyValue)),
  ];
}

/** A `KeyValue` message with an already encoded `AnyValue`. */
export const keyValue = (key: string, anyValue: number[]): number[] => [...lenField(1, key), ...lenField(2, anyValue)];

/** An `ExportTraceServiceRequest` with one resource (given attributes) and one scope holding `spans`. */
export function requestMessage(spans: number[][], resourceAttributes: number[][] = []): Uint8Array {
  const resource = resourceAttributes.flatMap((attribute) => lenField(1, attribute));
  const scope = [...lenField(1, 'hand-scope')];
  const scopeSpans = [...lenField(1, scope), ...spans.flatMap((span) => lenField(2, span))];
  const resourceSpans = [...lenField(1, resource), ...lenField(2, scopeSpans)];
  return Uint8Array.from(lenField(1, resourceSpans));
}

/** `AnyValue{string_value}`. */
export const stringValue = (text: string): number[] => lenField(1, text);
