/**
 * `POST /otel/v1/traces` over real HTTP against a real SQLite file (SPEC §2.7): bodies from the
 * official OTLP serializers and the official OTLP/HTTP exporter, the "same call whichever way it
 * travels" guarantee against the CallbridgeExporter, project choice, auth, partial success, and
 * hostile bodies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { BatchSpanProcessor, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { DECODED_BYTES, MAX_DECODED_BYTES_PER_REQUEST } from '../../src/server/otlp/index.js';
import { basicAuth, post, startTestServer, type Credentials, type TestServer } from '../helpers/server.js';
import {
  captureRichSpans,
  emitRichSpans,
  keyValue,
  lenField,
  providerWith,
  requestMessage,
  sendOtlp,
  spanMessage,
  stringValue,
  tag,
  varint,
  type OtlpSendOptions,
} from './otlp-fixtures.js';

const PATH = '/otel/v1/traces';
const DEV: Credentials = { username: 'dev', password: 'pw' };
const GUEST: Credentials = { username: 'guest', password: 'pw2' };
const TRACE = '0af7651916cd43dd8448eb211c80319c';
/** The exporter's `CompressionAlgorithm.GZIP`, without importing its (transitive) package. */
const GZIP = 'gzip' as NonNullable<NonNullable<ConstructorParameters<typeof OTLPTraceExporter>[0]>['compression']>;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ users: [{ username: 'guest', password: 'pw2', entities: ['guest-team'] }] });
});
afterAll(async () => {
  await server.close();
});

let counter = 0;
function project(entity = 'acme'): string {
  counter += 1;
  return `${entity}/otlp${counter}`;
}

const send = (body: Uint8Array | string, options: OtlpSendOptions & { readonly url?: string } = {}) => sendOtlp(options.url ?? server.url, body, options);

const protobufOf = (spans: ReadableSpan[]): Uint8Array => ProtobufTraceSerializer.serializeRequest(spans as never)!;
const jsonOf = (spans: ReadableSpan[]): Uint8Array => JsonTraceSerializer.serializeRequest(spans as never)!;

async function readCall(projectId: string, id: string): Promise<any> {
  const response = await post(server.url, '/call/read', { project_id: projectId, id });
  expect(response.status, response.text).toBe(200);
  return response.body.call;
}

/**
 * Whether `id`'s call reads the same from `direct` (written by CallbridgeExporter) and `viaOtlp`
 * (written over OTLP), but for the project and the writer, and its stored `otel_dump` too; the
 * two calls and the two dumps, for further checks.
 */
async function expectSameCallBothWays(direct: string, viaOtlp: string, id: string): Promise<{ call: any; dump: any }> {
  const [fromExporter, fromOtlp] = [await readCall(direct, id), await readCall(viaOtlp, id)];
  expect(fromExporter).not.toBeNull();
  for (const call of [fromExporter, fromOtlp]) {
    delete call.project_id;
    delete call.wb_user_id;
  }
  expect(fromOtlp).toEqual(fromExporter);
  // otel_dump is not in the read form: compare what is stored.
  const db = openSqlite(server.dbPath, { readonly: true });
  try {
    const dump = db.prepare('SELECT otel_dump FROM calls WHERE project_id = ? AND id = ?');
    const [fromExporterDump, fromOtlpDump] = [direct, viaOtlp].map((projectId) =>
      JSON.parse((dump.get(projectId, id) as { otel_dump: string }).otel_dump),
    );
    expect(fromOtlpDump).toEqual(fromExporterDump);
    return { call: fromExporter, dump: fromExporterDump };
  } finally {
    db.close();
  }
}

/** A provider sending each span through CallbridgeExporter (this tree's mapping, on the main thread), OTLP/HTTP and memory. */
function bothWays(direct: string, viaOtlp: string): { provider: ReturnType<typeof providerWith>; memory: InMemorySpanExporter } {
  const callbridge = new CallbridgeExporter({ baseUrl: server.url, projectId: direct, deliveryThread: 'main', ...DEV });
  const otlp = new OTLPTraceExporter({ url: server.url + PATH, headers: { Authorization: basicAuth(DEV), project_id: viaOtlp } });
  const memory = new InMemorySpanExporter();
  const provider = providerWith([new SimpleSpanProcessor(callbridge), new SimpleSpanProcessor(otlp), new SimpleSpanProcessor(memory)]);
  return { provider, memory };
}

async function expectStored(projectId: string, spans: ReadableSpan[]): Promise<void> {
  for (const span of spans) {
    const call = await readCall(projectId, span.spanContext().spanId);
    expect(call).toMatchObject({ trace_id: span.spanContext().traceId, parent_id: span.parentSpanContext?.spanId ?? null, wb_user_id: 'dev' });
  }
}

describe('bodies from the official serializers', () => {
  it.each([
    ['protobuf', 'application/x-protobuf', protobufOf, false],
    ['protobuf, gzipped', 'application/x-protobuf', protobufOf, true],
    ['JSON', 'application/json', jsonOf, false],
    ['JSON, gzipped', 'application/json; charset=utf-8', jsonOf, true],
  ])('stores every span of a %s body and answers an empty response in kind', async (_name, contentType, encode, gzip) => {
    const projectId = project();
    const spans = await captureRichSpans();
    const raw = encode(spans);
    const response = await send(gzip ? gzipSync(raw) : raw, { contentType, projectId, ...(gzip ? { encoding: 'gzip' } : {}) });
    expect(response.status, response.text).toBe(200);
    if (contentType.includes('protobuf')) {
      expect(response.headers.get('content-type')).toBe('application/x-protobuf');
      expect(response.bytes).toHaveLength(0);
    } else {
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(response.json).toEqual({});
    }
    await expectStored(projectId, spans);
    const root = await readCall(projectId, spans.find((span) => span.name === 'agent.run')!.spanContext().spanId);
    expect(root).toMatchObject({ op_name: 'agent.run', display_name: 'Agent run', output: { 'output.value': 'because' } });
  });

  it('answers an empty request (no spans) with success and writes nothing', async () => {
    expect((await send(new Uint8Array(0))).status).toBe(200);
    expect((await send('{}', { contentType: 'application/json' })).json).toEqual({});
  });
});

describe('the same call whichever way it travels', () => {
  it('official OTLP/HTTP exporter and CallbridgeExporter give field-by-field equal calls', async () => {
    const direct = project();
    const viaOtlp = project();
    const callbridge = new CallbridgeExporter({ baseUrl: server.url, projectId: direct, ...DEV });
    const otlp = new OTLPTraceExporter({
      url: server.url + PATH,
      headers: { Authorization: basicAuth(DEV), project_id: viaOtlp },
      compression: GZIP,
    });
    const memory = new InMemorySpanExporter();
    const provider = providerWith(
      [new BatchSpanProcessor(callbridge), new BatchSpanProcessor(otlp), new SimpleSpanProcessor(memory)],
      { 'deployment.environment': 'ci' },
    );
    emitRichSpans(provider);
    await provider.forceFlush();
    const ids = memory.getFinishedSpans().map((span) => span.spanContext().spanId);
    await provider.shutdown();
    expect(ids).toHaveLength(4);
    for (const id of ids) await expectSameCallBothWays(direct, viaOtlp, id);
  });
});

describe('the same call whichever way it travels, for spans at the edges of the mapping', () => {
  it('deep JSON text, astral names, an empty scope version: equal calls, none lost', async () => {
    const direct = project();
    const viaOtlp = project();
    const { provider, memory } = bothWays(direct, viaOtlp);
    const tracer = provider.getTracer('edge-scope', '');
    const deep = `${'['.repeat(600)}${']'.repeat(600)}`;
    tracer.startSpan('deep', { attributes: { 'input.value': deep, other: 'x' } }).end();
    tracer.startSpan(`model call ${'🤖'.repeat(80)}`, { attributes: { 'wandb.display_name': '日本😀'.repeat(300) } }).end();
    await provider.forceFlush();
    const ids = memory.getFinishedSpans().map((span) => span.spanContext().spanId);
    await provider.shutdown();
    expect(ids).toHaveLength(2);
    const deepText = await expectSameCallBothWays(direct, viaOtlp, ids[0]!);
    const named = await expectSameCallBothWays(direct, viaOtlp, ids[1]!);
    for (const { dump } of [deepText, named]) expect(dump.scope).toEqual({ name: 'edge-scope', version: null });
    expect(deepText.call.inputs).toEqual({ 'input.value': deep });
    expect(deepText.call.attributes._callbridge_mapping_error).toMatch(/^input\.value: JSON text nested deeper than 495 levels/);
    expect(named.call.op_name).toBe(`model call ${'🤖'.repeat(80)}`);
    expect(named.call.display_name).toBe('日本😀'.repeat(300));
  });

  it('indexed gen_ai.prompt.N.* keys: stored as a list on either way, the stored otel_dump keeps them indexed', async () => {
    const direct = project();
    const viaOtlp = project();
    const { provider, memory } = bothWays(direct, viaOtlp);
    provider
      .getTracer('opentelemetry.instrumentation.openai', '0.40.0')
      .startSpan('openai.chat', {
        attributes: {
          'gen_ai.system': 'openai',
          'gen_ai.request.model': 'gpt-4o-mini',
          'gen_ai.prompt.0.role': 'user',
          'gen_ai.prompt.0.content': 'Weather in Amsterdam?',
          'gen_ai.prompt.1.role': 'assistant',
          'gen_ai.prompt.1.content': 'Cloudy.',
          'gen_ai.completion.0.content': 'Still cloudy.',
        },
      })
      .end();
    await provider.forceFlush();
    const [span] = memory.getFinishedSpans();
    await provider.shutdown();
    const id = span!.spanContext().spanId;

    const { call, dump } = await expectSameCallBothWays(direct, viaOtlp, id);
    expect(call.inputs).toEqual({
      'gen_ai.prompt': [
        { role: 'user', content: 'Weather in Amsterdam?' },
        { role: 'assistant', content: 'Cloudy.' },
      ],
    });
    expect(call.output).toEqual({ 'gen_ai.completion': [{ content: 'Still cloudy.' }] });
    expect(dump.attributes.gen_ai.prompt).toEqual({
      0: { role: 'user', content: 'Weather in Amsterdam?' },
      1: { role: 'assistant', content: 'Cloudy.' },
    });
  });
});

describe('project', () => {
  const resourceProject = (entity: string, name: string) => [
    keyValue('wandb.entity', stringValue(entity)),
    keyValue('wandb.project', stringValue(name)),
  ];
  const oneSpan = (spanId: string) => [spanMessage({ traceId: TRACE, spanId })];

  it('comes from the resource attributes wandb.entity + wandb.project, before the header', async () => {
    const fromHeader = project();
    const response = await send(requestMessage(oneSpan('00000000000000a1'), resourceProject('acme', 'from-resource')), { projectId: fromHeader });
    expect(response.status, response.text).toBe(200);
    expect(await readCall('acme/from-resource', '00000000000000a1')).toMatchObject({ op_name: 'hand' });
    expect(await readCall(fromHeader, '00000000000000a1')).toBeNull();
  });

  it('comes from a resource sent in two parts (protobuf merges a message field that appears twice)', async () => {
    const [entity, projectName] = resourceProject('acme', 'two-part-resource').map((attribute) => lenField(1, attribute));
    const scopeSpans = [...lenField(1, lenField(1, 'scope')), ...lenField(2, spanMessage({ traceId: TRACE, spanId: '00000000000000a5' }))];
    const body = Uint8Array.from(lenField(1, [...lenField(1, entity!), ...lenField(1, projectName!), ...lenField(2, scopeSpans)]));
    const response = await send(body);
    expect(response.status, response.text).toBe(200);
    expect(await readCall('acme/two-part-resource', '00000000000000a5')).toMatchObject({ op_name: 'hand' });
  });

  it('comes from the project_id header when the resource names none', async () => {
    const projectId = project();
    expect((await send(requestMessage(oneSpan('00000000000000a2')), { projectId })).status).toBe(200);
    expect(await readCall(projectId, '00000000000000a2')).toMatchObject({ trace_id: TRACE });
  });

  it('is a 400 when neither names one, and for a malformed project id', async () => {
    const none = await send(requestMessage(oneSpan('00000000000000a3')));
    expect(none.status).toBe(400);
    expect(none.json.reason).toMatch(/wandb\.entity.*project_id/);
    expect((await send(requestMessage(oneSpan('00000000000000a3')), { projectId: 'no-slash' })).status).toBe(400);
  });

  it('is authorized: 401 without credentials, 403 for an entity not granted (header or resource)', async () => {
    const body = requestMessage(oneSpan('00000000000000a4'));
    const anonymous = await send(body, { projectId: project(), credentials: null });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Basic realm="callbridge"');
    expect((await send(body, { projectId: project(), credentials: { username: 'dev', password: 'wrong' } })).status).toBe(401);
    expect((await send(body, { projectId: 'acme/x', credentials: GUEST })).status).toBe(403);
    const viaResource = requestMessage(oneSpan('00000000000000a4'), resourceProject('acme', 'guarded'));
    expect((await send(viaResource, { projectId: 'guest-team/ok', credentials: GUEST })).status).toBe(403);
    expect(await readCall('acme/guarded', '00000000000000a4')).toBeNull();
    const allowed = await send(body, { projectId: 'guest-team/ok', credentials: GUEST });
    expect(allowed.status).toBe(200);
    const response = await post(server.url, '/call/read', { project_id: 'guest-team/ok', id: '00000000000000a4' }, GUEST);
    expect(response.body.call.wb_user_id).toBe('guest');
  });
});

describe('partial success', () => {
  const badSpans = [
    spanMessage({ traceId: TRACE, spanId: '00000000000000b1', name: 'good' }),
    spanMessage({ traceId: TRACE, name: 'no-span-id' }),
    spanMessage({ traceId: TRACE.slice(0, 30), spanId: '00000000000000b2', name: 'short-trace' }),
    spanMessage({ traceId: '0'.repeat(32), spanId: '00000000000000b3', name: 'zero-trace' }),
    spanMessage({ traceId: TRACE, spanId: '00000000000000b4', parentSpanId: 'abcd', name: 'bad-parent' }),
    spanMessage({ traceId: TRACE, spanId: '00000000000000b5', name: 'long-display', attributes: [keyValue('wandb.display_name', stringValue('d'.repeat(5000)))] }),
  ];

  it('protobuf: rejects the spans that cannot be calls, writes the rest, answers in protobuf', async () => {
    const projectId = project();
    const response = await send(requestMessage(badSpans), { projectId });
    expect(response.status).toBe(200);
    const decoded = ProtobufTraceSerializer.deserializeResponse(response.bytes) as { partialSuccess: { rejectedSpans: number; errorMessage: string } };
    expect(decoded.partialSuccess.rejectedSpans).toBe(4);
    expect(decoded.partialSuccess.errorMessage).toContain('name="no-span-id"');
    expect(decoded.partialSuccess.errorMessage).toMatch(/span_id is missing.*trace_id must be 16 bytes.*trace_id is all zeros/);
    expect(decoded.partialSuccess.errorMessage).toContain('parent_span_id must be 8 bytes');
    expect(await readCall(projectId, '00000000000000b1')).toMatchObject({ op_name: 'good' });
    // A display name past the limit is cut by the mapping, not rejected.
    expect((await readCall(projectId, '00000000000000b5')).display_name.length).toBeLessThanOrEqual(1024);
    for (const id of ['00000000000000b2', '00000000000000b3', '00000000000000b4']) expect(await readCall(projectId, id)).toBeNull();
  });

  it('takes an all-zero parent_span_id (OTel\'s "no id") as a root, in protobuf and JSON', async () => {
    const projectId = project();
    const zeros = '0'.repeat(16);
    const protobuf = await send(
      requestMessage([
        spanMessage({ traceId: TRACE, spanId: '00000000000000e1', parentSpanId: zeros, name: 'root-pb' }),
        spanMessage({ traceId: TRACE, spanId: '00000000000000e2', parentSpanId: '00000000000000e1', name: 'child' }),
      ]),
      { projectId },
    );
    expect(protobuf.status).toBe(200);
    expect(protobuf.bytes).toHaveLength(0);
    const json = await send(
      JSON.stringify({
        resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId: '00000000000000e3', parentSpanId: zeros, name: 'root-json' }] }] }],
      }),
      { contentType: 'application/json', projectId },
    );
    expect(json.status).toBe(200);
    expect(json.json).toEqual({});
    const roots = await post(server.url, '/calls/stream_query', { project_id: projectId, filter: { trace_roots_only: true } });
    expect(roots.status, roots.text).toBe(200);
    const rootNames = roots.text.trim().split('\n').map((line) => JSON.parse(line).op_name as string);
    expect(rootNames.sort()).toEqual(['root-json', 'root-pb']);
    expect(await readCall(projectId, '00000000000000e2')).toMatchObject({ parent_id: '00000000000000e1' });
    const db = openSqlite(server.dbPath, { readonly: true });
    try {
      const dump = db.prepare('SELECT otel_dump FROM calls WHERE project_id = ? AND id = ?').get(projectId, '00000000000000e1') as { otel_dump: string };
      expect(JSON.parse(dump.otel_dump).parent_id).toBeNull();
    } finally {
      db.close();
    }
    // Still rejected: an all-zero span id or trace id, and a zero parent of the wrong length.
    const bad = await send(
      requestMessage([
        spanMessage({ traceId: TRACE, spanId: zeros, name: 'zero-span' }),
        spanMessage({ traceId: TRACE, spanId: '00000000000000e4', parentSpanId: '00000000', name: 'short-zero-parent' }),
      ]),
      { projectId },
    );
    const decoded = ProtobufTraceSerializer.deserializeResponse(bad.bytes) as { partialSuccess: { rejectedSpans: number; errorMessage: string } };
    expect(decoded.partialSuccess.rejectedSpans).toBe(2);
    expect(decoded.partialSuccess.errorMessage).toMatch(/span_id is all zeros.*parent_span_id must be 8 bytes/);
  });

  it('JSON: answers partialSuccess in OTLP/JSON and lists at most 20 reasons', async () => {
    const projectId = project();
    const spans = Array.from({ length: 25 }, (_, index) => ({ traceId: TRACE, spanId: 'zz', name: `bad${index}` }));
    spans.push({ traceId: TRACE, spanId: '00000000000000c1', name: 'good' });
    const response = await send(JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans }] }] }), { contentType: 'application/json', projectId });
    expect(response.status).toBe(200);
    expect(response.json.partialSuccess.rejectedSpans).toBe('25');
    const message: string = response.json.partialSuccess.errorMessage;
    expect(message.split('Rejected span')).toHaveLength(21);
    expect(message.endsWith('; ...')).toBe(true);
    expect(await readCall(projectId, '00000000000000c1')).toMatchObject({ op_name: 'good' });
  });
});

describe('hostile and wrong requests', () => {
  it.each<[string, number[]]>([
    ['a truncated varint', [0x0a, 0x80]],
    ['a length past the end', [0x0a, 0x05, 0x01]],
    ['a huge declared length', [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]],
    ['a wrong wire type', [0x08, 0x01]],
    ['deep nesting', [...requestMessage([spanMessage({ traceId: TRACE, spanId: '00000000000000d1', attributes: [keyValue('d', Array.from({ length: 40 }).reduce<number[]>((value) => lenField(5, lenField(1, value)), stringValue('x')))] })])]],
  ])('answers 400 for protobuf with %s, naming the problem', async (_name, bytes) => {
    const response = await send(Uint8Array.from(bytes), { projectId: project() });
    expect(response.status).toBe(400);
    expect(response.json.reason).toMatch(/^Malformed OTLP\/protobuf body: /);
  });

  it('answers 400 for malformed JSON and malformed gzip', async () => {
    const json = await send('{"resourceSpans": [', { contentType: 'application/json', projectId: project() });
    expect(json.status).toBe(400);
    expect(json.json.reason).toMatch(/Malformed OTLP\/json body/);
    const gzip = await send(Uint8Array.from([0x1f, 0x8b, 1, 2, 3]), { encoding: 'gzip', projectId: project() });
    expect(gzip.status).toBe(400);
    expect(gzip.json.reason).toBe('Malformed gzip body');
  });

  it('reads JSON bodies as every route does: 400 for invalid UTF-8 (gzipped or not), a byte order mark dropped', async () => {
    const projectId = project();
    const body = (spanId: string, name: string) =>
      JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId, name }] }] }] });
    const [before, after] = body('00000000000000f1', '\u0000').split('\\u0000') as [string, string];
    const invalid = Buffer.concat([Buffer.from(before), Buffer.from([0x6e, 0xff, 0x6d]), Buffer.from(after)]);
    for (const [bytes, encoding] of [[invalid, undefined], [gzipSync(invalid), 'gzip']] as const) {
      const response = await send(bytes, { contentType: 'application/json', projectId, ...(encoding ? { encoding } : {}) });
      expect(response.status).toBe(400);
      expect(response.json.reason).toMatch(/not valid UTF-8/);
    }
    expect(await readCall(projectId, '00000000000000f1')).toBeNull();
    // The other routes say the same of the same bytes.
    const elsewhere = await fetch(`${server.url}/call/read`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: basicAuth(DEV) },
      body: invalid,
    });
    expect(elsewhere.status).toBe(400);
    expect(((await elsewhere.json()) as { reason: string }).reason).toMatch(/not valid UTF-8/);

    const withMark = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body('00000000000000f2', 'marked'))]);
    const marked = await send(withMark, { contentType: 'application/json', projectId });
    expect(marked.status, marked.text).toBe(200);
    expect(await readCall(projectId, '00000000000000f2')).toMatchObject({ op_name: 'marked' });
  });

  it('answers 413 for a gzip bomb and for a body over the limit', async () => {
    const small = await startTestServer({ maxBodyBytes: 256 * 1024 });
    try {
      const bomb = gzipSync(Buffer.alloc(16 * 1024 * 1024));
      expect(bomb.length).toBeLessThan(256 * 1024);
      const exploded = await send(bomb, { url: small.url, encoding: 'gzip', projectId: project() });
      expect(exploded.status).toBe(413);
      expect(exploded.json).toEqual({ reason: 'Request too large' });
      const large = await send(new Uint8Array(300 * 1024), { url: small.url, projectId: project() });
      expect(large.status).toBe(413);
      // The content type is checked before the body is read: a wrong one is a 415 whatever its size.
      const wrongType = await send(new Uint8Array(300 * 1024), { url: small.url, contentType: 'text/plain', projectId: project() });
      expect(wrongType.status).toBe(415);
    } finally {
      await small.close();
    }
  });

  it.each([
    ['text/plain', 'hello'],
    ['application/octet-stream', 'x'],
    ['multipart/form-data; boundary=x', '--x--'],
  ])('answers 415 for a %s body', async (contentType, body) => {
    const response = await send(body, { contentType, projectId: project() });
    expect(response.status).toBe(415);
    expect(response.json.reason).toMatch(/application\/x-protobuf or application\/json/);
  });

  it('answers 415 for an unsupported Content-Encoding', async () => {
    const response = await send(new Uint8Array(0), { encoding: 'br', projectId: project() });
    expect(response.status).toBe(415);
    expect(response.json.reason).toMatch(/Content-Encoding "br"/);
  });

  it('keeps protobuf bodies out of every other route', async () => {
    const response = await fetch(`${server.url}/call/read`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf', authorization: basicAuth(DEV) },
      body: new Uint8Array([1, 2, 3]),
    });
    expect(response.status).toBe(415);
  });
});

describe('what one request may decode to', () => {
  /** `count` empty length-delimited fields numbered `field`: 2 bytes each, however many objects they decode to. */
  const emptyFields = (field: number, count: number): Buffer => Buffer.alloc(count * 2, Buffer.from([...tag(field, 2), 0]));
  /** A length-delimited field around a payload too large for the fixtures' number arrays. */
  const lenBuffer = (field: number, payload: Buffer): Buffer => Buffer.concat([Buffer.from([...tag(field, 2), ...varint(payload.length)]), payload]);
  /** One `ResourceSpans` whose one `ScopeSpans` holds `spans` (encoded `Span`s, one after another). */
  const requestOfSpans = (spans: Buffer): Buffer => lenBuffer(1, lenBuffer(2, spans));
  const validSpan = (spanId: string): Buffer => lenBuffer(2, Buffer.from(spanMessage({ traceId: TRACE, spanId })));
  /** One more than the budget holds of `element`, so that a body of them alone is past it. */
  const pastBudget = (element: keyof typeof DECODED_BYTES): number => Math.floor(MAX_DECODED_BYTES_PER_REQUEST / DECODED_BYTES[element]) + 1;
  const TOO_LARGE = new RegExp(`^Request too large: it would decode to more than ${MAX_DECODED_BYTES_PER_REQUEST / 1_000_000} MB`);

  it('takes as many bare spans as the budget holds, and answers 413 naming the limit past it, before writing anything', async () => {
    const projectId = project();
    const spansThatFit = Math.floor((MAX_DECODED_BYTES_PER_REQUEST - DECODED_BYTES.resourceSpans - DECODED_BYTES.scopeSpans) / DECODED_BYTES.span);
    expect(spansThatFit).toBeGreaterThan(4 * 8192); // far above the collector's default batch
    // A collector's default batch of LLM spans (which flatten messages into dozens of attributes)
    // fits: the collector does not split a batch refused with 413.
    expect(8192 * (DECODED_BYTES.span + 60 * DECODED_BYTES.keyValue + 2 * DECODED_BYTES.event)).toBeLessThan(MAX_DECODED_BYTES_PER_REQUEST);
    const atLimit = requestOfSpans(Buffer.concat([validSpan('00000000000000e1'), emptyFields(2, spansThatFit - 1)]));
    const accepted = await send(gzipSync(atLimit), { encoding: 'gzip', projectId });
    expect(accepted.status, accepted.text.slice(0, 200)).toBe(200);
    expect(await readCall(projectId, '00000000000000e1')).toMatchObject({ op_name: 'hand' });

    // The p12 shape: a small gzip of empty spans, here one past the limit after a valid span.
    const pastLimit = requestOfSpans(Buffer.concat([validSpan('00000000000000e2'), emptyFields(2, spansThatFit)]));
    const refused = await send(gzipSync(pastLimit), { encoding: 'gzip', projectId });
    expect(refused.status).toBe(413);
    expect(refused.json.reason).toMatch(TOO_LARGE);
    expect(await readCall(projectId, '00000000000000e2')).toBeNull();
  });

  const oneSpanWith = (fields: Buffer): Buffer =>
    requestOfSpans(lenBuffer(2, Buffer.concat([Buffer.from(spanMessage({ traceId: TRACE, spanId: '00000000000000e3' })), fields])));
  const arrayAttribute = (values: Buffer): Buffer => lenBuffer(9, lenBuffer(2, lenBuffer(5, values)));
  it.each<[string, () => Buffer]>([
    ['empty ResourceSpans', () => emptyFields(1, pastBudget('resourceSpans'))],
    ['empty ScopeSpans', () => lenBuffer(1, emptyFields(2, pastBudget('scopeSpans')))],
    ['attributes of one span', () => oneSpanWith(emptyFields(9, pastBudget('keyValue')))],
    ['events of one span', () => oneSpanWith(emptyFields(11, pastBudget('event')))],
    ['links of one span', () => oneSpanWith(emptyFields(13, pastBudget('link')))],
    ['values of one array attribute', () => oneSpanWith(arrayAttribute(emptyFields(1, pastBudget('arrayValue'))))],
    ['members of one kvlist attribute', () => oneSpanWith(lenBuffer(9, lenBuffer(2, lenBuffer(6, emptyFields(1, pastBudget('keyValue'))))))],
  ])('answers 413 for a protobuf body that decodes past the budget: %s', async (_name, body) => {
    const projectId = project();
    const response = await send(gzipSync(body()), { encoding: 'gzip', projectId });
    expect(response.status, response.text.slice(0, 200)).toBe(413);
    expect(response.json.reason).toMatch(TOO_LARGE);
    expect(await readCall(projectId, '00000000000000e3')).toBeNull();
  });

  /** An OTLP/JSON request whose one span list is `spans` (JSON texts, joined). */
  const jsonOfSpans = (spans: string): string => `{"resourceSpans":[{"scopeSpans":[{"spans":[${spans}]}]}]}`;
  const emptyObjects = (count: number): string => Array.from({ length: count }, () => '{}').join(',');
  it.each<[string, () => string]>([
    ['spans', () => jsonOfSpans(emptyObjects(pastBudget('span')))],
    ['events', () => jsonOfSpans(`{"events":[${emptyObjects(pastBudget('event'))}]}`)],
    ['array values', () => jsonOfSpans(`{"attributes":[{"key":"a","value":{"arrayValue":{"values":[${emptyObjects(pastBudget('arrayValue'))}]}}}]}`)],
  ])('applies the same budget to OTLP/JSON: 413 for too many %s', async (_name, body) => {
    const response = await send(gzipSync(body()), { contentType: 'application/json', encoding: 'gzip', projectId: project() });
    expect(response.status, response.text.slice(0, 200)).toBe(413);
    expect(response.json.reason).toMatch(TOO_LARGE);
  });
});
