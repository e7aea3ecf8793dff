/**
 * `POST /otel/v1/traces` (SPEC §2.7, §3) at its edges, over real sockets: the inflation bound of
 * gzipped protobuf, text that is not well-formed (lone surrogates, protobuf strings that are not
 * UTF-8), header tokens in any case, bodies of the wrong shape or type, partial success, parents
 * that arrive after their children, projects, numbers and base64 held to their protobuf types,
 * and the mapping of the less common attribute shapes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isUtf8 } from 'node:buffer';
import { gzipSync } from 'node:zlib';
import { defaultSqliteDriver, openSqlite } from '../../src/server/store/sqlite.js';
import { PROTOBUF_INFLATION } from '../../src/server/routes/otlp.js';
import { basicAuth, post, startTestServer, type Credentials, type TestServer } from '../helpers/server.js';
import { fixed64Field, lenField, requestMessage, sendOtlp, spanMessage, type OtlpSendOptions } from './otlp-fixtures.js';

/** The SQLite driver the test server runs on (node:sqlite on Node 24). */
const DRIVER = defaultSqliteDriver();

const PATH = '/otel/v1/traces';
const DEV: Credentials = { username: 'dev', password: 'pw' };
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const START_NS = '1767323045123456789';
const END_NS = '1767323046987654321';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

let counter = 0;
function project(): string {
  counter += 1;
  return `otlp-edges/p${counter}`;
}

/** `sendOtlp` to this file's server (or `url`), as OTLP/JSON unless told otherwise. */
const send = (body: Uint8Array | string, options: OtlpSendOptions & { readonly url?: string } = {}) =>
  sendOtlp(options.url ?? server.url, body, { contentType: 'application/json', ...options });

/** An OTLP/JSON request of one resource (attributes as OTLP KeyValues) and one scope of `spans`. */
function jsonRequest(spans: unknown[], resourceAttributes: unknown[] = [], scope: unknown = { name: 'edges', version: '1.0' }): string {
  return JSON.stringify({ resourceSpans: [{ resource: { attributes: resourceAttributes }, scopeSpans: [{ scope, spans }] }] });
}

/** A JSON span with defaults. */
function jsonSpan(spanId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { traceId: TRACE, spanId, name: `span-${spanId}`, kind: 1, startTimeUnixNano: START_NS, endTimeUnixNano: END_NS, ...extra };
}

const kv = (key: string, value: unknown) => ({ key, value });
const str = (stringValue: string) => ({ stringValue });

async function readCall(projectId: string, id: string): Promise<any> {
  const response = await post(server.url, '/call/read', { project_id: projectId, id });
  expect(response.status, response.text).toBe(200);
  return response.body.call;
}

function readDump(projectId: string, id: string): any {
  const db = openSqlite(server.dbPath, { readonly: true });
  try {
    const row = db.prepare('SELECT otel_dump FROM calls WHERE project_id = ? AND id = ?').get(projectId, id) as { otel_dump: string } | undefined;
    return row === undefined ? undefined : JSON.parse(row.otel_dump);
  } finally {
    db.close();
  }
}

async function sendJsonOk(projectId: string, spans: unknown[], resourceAttributes: unknown[] = []) {
  const response = await send(jsonRequest(spans, resourceAttributes), { projectId });
  expect(response.status, response.text).toBe(200);
  return response;
}

/** Calls of a stream query's answer (JSON lines), by op name. */
const opNames = (text: string) => text.split('\n').filter(Boolean).map((line) => JSON.parse(line).op_name as string);

/** A protobuf varint at `at` of `bytes`: its value and where the next field starts. */
function varintAt(bytes: Uint8Array, at: number): [value: number, next: number] {
  let value = 0;
  let shift = 0;
  let index = at;
  for (;;) {
    const byte = bytes[index++] as number;
    value += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return [value, index];
    shift += 7;
  }
}

describe('OTLP ingest at the edges', () => {
  it(`reads a gzipped protobuf body that inflates to ${PROTOBUF_INFLATION}x the body limit exactly, unknown fields skipped; one byte more is a 413`, async () => {
    const limit = 64 * 1024;
    const small = await startTestServer({ maxBodyBytes: limit });
    try {
      // Field 2 of ExportTraceServiceRequest, a varint 0: a field the decoder does not know.
      const unknownFields = Buffer.alloc(PROTOBUF_INFLATION * limit);
      for (let i = 0; i < unknownFields.length; i += 2) unknownFields[i] = 0x10;
      const atLimit = await send(gzipSync(unknownFields), { url: small.url, projectId: project(), encoding: 'gzip', contentType: 'application/x-protobuf' });
      expect(atLimit.status, atLimit.text).toBe(200);
      expect(atLimit.bytes).toHaveLength(0); // an ExportTraceServiceResponse with nothing to say
      const past = await send(gzipSync(Buffer.concat([unknownFields, Buffer.from([0x10])])), {
        url: small.url,
        projectId: project(),
        encoding: 'gzip',
        contentType: 'application/x-protobuf',
      });
      expect(past.status).toBe(413);
    } finally {
      await small.close();
    }
  });

  it('stores a lone surrogate in a text field as U+FFFDs and keeps it inside inputs, answering valid UTF-8 (OTLP/JSON and call/start alike)', async () => {
    const pid = project();
    await sendJsonOk(pid, [jsonSpan('00000000000000d1', { name: 'a\ud800b', attributes: [kv('input.value', str('x\udc00y'))] })]);
    const started = await post(server.url, '/call/start', {
      start: { project_id: pid, id: '00000000000000d2', trace_id: TRACE, op_name: 'a\ud800b', started_at: '2026-01-01T00:00:00Z', attributes: {}, inputs: { x: 'x\udc00y' } },
    });
    expect(started.status, started.text).toBe(200);
    for (const [id, inputs] of [['00000000000000d1', { 'input.value': 'x\udc00y' }], ['00000000000000d2', { x: 'x\udc00y' }]] as const) {
      const response = await fetch(`${server.url}/call/read`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: basicAuth(DEV) },
        body: JSON.stringify({ project_id: pid, id }),
      });
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(isUtf8(bytes)).toBe(true);
      const { call } = JSON.parse(bytes.toString('utf8'));
      // Replacement characters (README): better-sqlite3 writes the surrogate as 3 bytes, each read
      // back as a U+FFFD; node:sqlite (Node 24) writes one U+FFFD.
      expect(call).toMatchObject({ op_name: DRIVER === 'node:sqlite' ? 'a\ufffdb' : 'a\ufffd\ufffd\ufffdb', inputs });
    }
  });

  it('reads a protobuf string that is not UTF-8 with U+FFFD for its bad bytes, keeping the span', async () => {
    // A decision (README): an OTLP/JSON body that is not UTF-8 is refused whole, as every JSON body is.
    const pid = project();
    const span = [
      ...lenField(1, Buffer.from(TRACE, 'hex')),
      ...lenField(2, Buffer.from('00000000000000c1', 'hex')),
      ...lenField(5, Uint8Array.from([0x61, 0xff, 0x62])),
      ...fixed64Field(7, 1n),
      ...fixed64Field(8, 2n),
    ];
    const res = await send(requestMessage([span]), { projectId: pid, contentType: 'application/x-protobuf' });
    expect(res.status, res.text).toBe(200);
    expect((await readCall(pid, '00000000000000c1')).op_name).toBe('a\ufffdb');
  });

  it('takes the coding and the media type in any case', async () => {
    const pid = project();
    const res = await send(gzipSync(jsonRequest([jsonSpan('00000000000000c2')])), { projectId: pid, encoding: 'GZIP', contentType: 'Application/JSON; Charset=UTF-8' });
    expect(res.status, res.text).toBe(200);
    expect((await readCall(pid, '00000000000000c2')).op_name).toBe('span-00000000000000c2');
  });

  it('answers 400 for bodies of the wrong shape, 415 without a content type, 401 before 415, and 404 for a GET', async () => {
    const pid = project();
    expect(await send('{"resourceSpans": {}}', { projectId: pid })).toMatchObject({ status: 400, json: { reason: 'Malformed OTLP/json body: resourceSpans: expected a list, got object' } });
    const jsonAsProtobuf = await send(jsonRequest([jsonSpan('00000000000000c4')]), { projectId: pid, contentType: 'application/x-protobuf' });
    expect(jsonAsProtobuf.status).toBe(400);
    expect(jsonAsProtobuf.json.reason).toMatch(/^Malformed OTLP\/protobuf body/);
    // An empty protobuf body is an empty request; an empty JSON body is no JSON.
    expect(await send('', { projectId: pid })).toMatchObject({ status: 400, json: { reason: 'Malformed OTLP/json body: body is not valid JSON' } });
    expect((await send(new Uint8Array(0), { projectId: pid, contentType: 'application/x-protobuf' })).status).toBe(200);
    const untyped = await fetch(server.url + PATH, { method: 'POST', headers: { authorization: basicAuth(DEV), project_id: pid }, body: new Uint8Array(0) });
    expect(untyped.status).toBe(415);
    expect((await send('x', { projectId: pid, credentials: null, contentType: 'text/plain' })).status).toBe(401);
    expect((await fetch(server.url + PATH, { headers: { authorization: basicAuth(DEV) } })).status).toBe(404);
  });

  it('counts every rejected protobuf span in partial_success, however many', async () => {
    // Spans without a span id cannot be calls.
    const rejected = Array.from({ length: 300 }, () => spanMessage({ traceId: TRACE, name: 'x' }));
    const res = await send(requestMessage(rejected), { projectId: project(), contentType: 'application/x-protobuf' });
    expect(res.status).toBe(200);
    // ExportTraceServiceResponse: field 1 (partial_success), whose field 1 is rejected_spans.
    expect(res.bytes[0]).toBe(0x0a);
    const [, partialSuccessAt] = varintAt(res.bytes, 1);
    expect(res.bytes[partialSuccessAt]).toBe(0x08);
    expect(varintAt(res.bytes, partialSuccessAt + 1)[0]).toBe(300);
  });

  it('links a child that arrived first, in another request, to its parent', async () => {
    const pid = project();
    await sendJsonOk(pid, [jsonSpan('00000000000000ca', { parentSpanId: '00000000000000c9', name: 'child' })]);
    await sendJsonOk(pid, [jsonSpan('00000000000000c9', { name: 'parent' })]);
    expect(opNames((await post(server.url, '/calls/stream_query', { project_id: pid, filter: { trace_roots_only: true } })).text)).toEqual(['parent']);
    expect(opNames((await post(server.url, '/calls/stream_query', { project_id: pid, filter: { parent_ids: ['00000000000000c9'] } })).text)).toEqual(['child']);
  });

  it('refuses a resource project with a space, and reads the project_id header as HTTP trims it', async () => {
    const pid = project();
    const spaced = await send(jsonRequest([jsonSpan('00000000000000cb')], [kv('wandb.entity', str('edges')), kv('wandb.project', str('ws '))]), { projectId: pid });
    expect(spaced).toMatchObject({ status: 400, json: { reason: 'Invalid project_id "edges/ws ": expected "entity/project"' } });
    expect((await send(jsonRequest([jsonSpan('00000000000000cc')]), { projectId: ` ${pid} ` })).status).toBe(200);
    expect((await readCall(pid, '00000000000000cc')).op_name).toBe('span-00000000000000cc');
  });

  it('reads enum names it does not know as 0 (kind unspecified, status unset), keeping the status message', async () => {
    const pid = project();
    await sendJsonOk(pid, [jsonSpan('00000000000000cd', { kind: 'SPAN_KIND_BOGUS', status: { code: 'STATUS_CODE_BOGUS', message: 'm' } })]);
    expect(readDump(pid, '00000000000000cd')).toMatchObject({ kind: 'INTERNAL', status: { code: 'UNSET', message: 'm' } });
    expect((await readCall(pid, '00000000000000cd')).exception).toBeNull();
  });

  it('holds numbers and base64 to their protobuf types, as their text forms are: 400 past int64 or fixed64, or for bytes that are not base64', async () => {
    const pid = project();
    for (const [spanId, extra, reason] of [
      ['00000000000000b1', { attributes: [kv('b', { bytesValue: '!!!!' })] }, /bytesValue: expected base64 text/],
      ['00000000000000b2', { attributes: [kv('i', { intValue: 1e20 })] }, /intValue: 100000000000000000000 is outside the int64 range/],
      ['00000000000000b3', { startTimeUnixNano: 1e20 }, /startTimeUnixNano: expected nanoseconds/],
    ] as const) {
      const res = await send(jsonRequest([jsonSpan(spanId, extra)]), { projectId: pid });
      expect(res.status, res.text).toBe(400);
      expect(res.json.reason).toMatch(reason);
    }
    // At the edges of the ranges, as JSON numbers read them; bytes unpadded or URL-safe.
    await sendJsonOk(pid, [
      jsonSpan('00000000000000bf', {
        endTimeUnixNano: 18446744073709551615,
        attributes: [kv('max', { intValue: 9223372036854775807 }), kv('min', { intValue: -9223372036854775808 }), kv('u', { bytesValue: '-_8' }), kv('p', { bytesValue: 'AQ' })],
      }),
    ]);
    expect(readDump(pid, '00000000000000bf')).toMatchObject({ end_time: '2554-07-21T23:34:33.709552Z', attributes: { max: 2 ** 63, min: -(2 ** 63), u: '+/8=', p: 'AQ==' } });
  });

  it('checks base64 of any length in linear time: a 6 M-character bytesValue is stored, a 6 M-character trace id is a rejected span, never a 500', async () => {
    const pid = project();
    const big = 'QUJD'.repeat(1_500_000);
    await sendJsonOk(pid, [jsonSpan('00000000000000e1', { attributes: [kv('blob', { bytesValue: big }), kv('note', str('kept'))] })]);
    expect(readDump(pid, '00000000000000e1').attributes.note).toBe('kept');
    const res = await send(jsonRequest([jsonSpan('00000000000000e2', { traceId: 'A'.repeat(6_000_000) })]), { projectId: pid });
    expect(res.status, res.text.slice(0, 300)).toBe(200);
    expect(res.json).toMatchObject({ partialSuccess: { rejectedSpans: '1' } });
    // Lengths as base64 has them: a last group of 1 character carries no byte; padding fills a group.
    for (const [bytesValue, ok] of [['AQID', true], ['AQI', true], ['AQ', true], ['A', false], ['AQ=', false], ['AQI==', false], ['AQ==', true], ['AQI=', true], ['AQIDBA==', true], ['-_-_', true], ['+/-_', false]] as const) {
      const answer = await send(jsonRequest([jsonSpan('00000000000000e3', { attributes: [kv('b', { bytesValue })] })]), { projectId: pid });
      expect(answer.status, `${bytesValue}: ${answer.text}`).toBe(ok ? 200 : 400);
    }
  });

  it('stores the later of two spans with one id in one request; keeps NUL in a name and an empty name as sent', async () => {
    const pid = project();
    await sendJsonOk(pid, [jsonSpan('00000000000000b4', { name: 'first' }), jsonSpan('00000000000000b4', { name: 'second' })]);
    expect((await readCall(pid, '00000000000000b4')).op_name).toBe('second');
    await sendJsonOk(pid, [jsonSpan('00000000000000b6', { name: 'a\u0000b' }), jsonSpan('00000000000000b7', { name: '' })]);
    expect((await readCall(pid, '00000000000000b6')).op_name).toBe('a\u0000b');
    expect((await readCall(pid, '00000000000000b7')).op_name).toBe('');
  });

  it('maps kvlists, bytes, int64 text, NaN and mixed lists as SPEC §3 says', async () => {
    const pid = project();
    await sendJsonOk(pid, [
      jsonSpan('00000000000000b8', {
        attributes: [
          kv('wandb.attributes', { kvlistValue: { values: [kv('team', str('x')), kv('n', { intValue: '3' })] } }),
          kv('input', { kvlistValue: { values: [kv('q', str('why')), kv('k.dot', str('v'))] } }),
          kv('bytes', { bytesValue: 'AQID' }),
          kv('big', { intValue: '-9223372036854775808' }),
          kv('nan', { doubleValue: 'NaN' }),
          kv('arr', { arrayValue: { values: [str('a'), { intValue: 1 }, { kvlistValue: { values: [kv('x', { boolValue: true })] } }, {}] } }),
        ],
      }),
    ]);
    const call = await readCall(pid, '00000000000000b8');
    // `input` (an object) is the inputs itself; wandb.attributes are merged into attributes.
    expect(call.inputs).toEqual({ q: 'why', 'k.dot': 'v' });
    expect(call.attributes).toMatchObject({ team: 'x', n: 3 });
    expect(readDump(pid, '00000000000000b8').attributes).toEqual({
      wandb: { attributes: { team: 'x', n: 3 } },
      input: { q: 'why', 'k.dot': 'v' },
      bytes: 'AQID',
      big: '-9223372036854775808',
      nan: 'nan',
      arr: ['a', 1, { x: true }, null],
    });
  });

  it('takes the exception from the first exception event when the status has no message', async () => {
    const pid = project();
    await sendJsonOk(pid, [
      jsonSpan('00000000000000b9', {
        status: { code: 'STATUS_CODE_ERROR' },
        events: [{ name: 'exception', timeUnixNano: START_NS, attributes: [kv('exception.type', str('TypeError')), kv('exception.message', str('boom'))] }],
      }),
    ]);
    expect((await readCall(pid, '00000000000000b9')).exception).toBe('TypeError: boom');
    expect(readDump(pid, '00000000000000b9').events).toEqual([
      { name: 'exception', timestamp: '2026-01-02T03:04:05.123456Z', attributes: { exception: { type: 'TypeError', message: 'boom' } }, dropped_attributes_count: 0 },
    ]);
  });

  it('reads link ids sent as base64, and unflattens resource attributes in otel_dump', async () => {
    const pid = project();
    const link = { traceId: Buffer.from(TRACE, 'hex').toString('base64'), spanId: Buffer.from('00000000000000a1', 'hex').toString('base64'), attributes: [kv('l.x', str('y'))] };
    const res = await send(jsonRequest([jsonSpan('00000000000000ba', { traceState: 'k=v', links: [link] })], [kv('service.name', str('svc')), kv('a.b.c', { intValue: 1 })]), { projectId: pid });
    expect(res.status, res.text).toBe(200);
    expect(readDump(pid, '00000000000000ba')).toMatchObject({
      context: { trace_state: 'k=v' },
      links: [{ trace_id: TRACE, span_id: '00000000000000a1', trace_state: '', attributes: { l: { x: 'y' } }, dropped_attributes_count: 0 }],
      resource: { attributes: { service: { name: 'svc' }, a: { b: { c: 1 } } }, dropped_attributes_count: 0 },
    });
  });

  it('reads uppercase hex ids as lowercase, the largest fixed64 time, and times sent as numbers (to the microsecond)', async () => {
    const pid = project();
    await sendJsonOk(pid, [
      jsonSpan('00000000000000BC', { traceId: TRACE.toUpperCase(), parentSpanId: '00000000000000A1' }),
      jsonSpan('00000000000000bb', { startTimeUnixNano: '18446744073709551615', endTimeUnixNano: '18446744073709551615' }),
      jsonSpan('00000000000000bd', { startTimeUnixNano: 1767323045123456789, endTimeUnixNano: 1767323046000000000 }),
    ]);
    expect(await readCall(pid, '00000000000000bc')).toMatchObject({ trace_id: TRACE, parent_id: '00000000000000a1' });
    expect(await readCall(pid, '00000000000000bb')).toMatchObject({ started_at: '2554-07-21T23:34:33.709551Z', ended_at: '2554-07-21T23:34:33.709551Z' });
    expect(await readCall(pid, '00000000000000bd')).toMatchObject({ started_at: '2026-01-02T03:04:05.123456Z', ended_at: '2026-01-02T03:04:06.000000Z' });
  });

  it('maps run ids, usage counts sent as text, and a conversation with a turn', async () => {
    const pid = project();
    await sendJsonOk(pid, [
      jsonSpan('00000000000000be', {
        attributes: [
          kv('wandb.wb_run_id', str('run1')),
          kv('wandb.wb_run_step', { intValue: '5' }),
          kv('wandb.wb_run_step_end', { intValue: 7 }),
          kv('gen_ai.usage.input_tokens', { intValue: '10' }),
          kv('gen_ai.usage.output_tokens', { intValue: 4 }),
          kv('gen_ai.request.model', str('gpt-4o')),
          kv('gen_ai.conversation.id', str('conv')),
          kv('wandb.is_turn', { boolValue: true }),
        ],
      }),
    ]);
    expect(await readCall(pid, '00000000000000be')).toMatchObject({
      thread_id: 'conv',
      turn_id: '00000000000000be',
      wb_run_id: `${pid}:run1`,
      wb_run_step: 5,
      wb_run_step_end: 7,
      attributes: { model: 'gpt-4o' },
      summary: { usage: { 'gpt-4o': { input_tokens: 10, output_tokens: 4, total_tokens: 14 } } },
    });
  });

  it('answers a plain OTLP/JSON span with its times to the microsecond', async () => {
    const pid = project();
    await sendJsonOk(pid, [jsonSpan('00000000000000a1')]);
    expect(await readCall(pid, '00000000000000a1')).toMatchObject({ started_at: '2026-01-02T03:04:05.123456Z', ended_at: '2026-01-02T03:04:06.987654Z' });
  });
});
