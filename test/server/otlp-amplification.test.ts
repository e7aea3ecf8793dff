/**
 * Tiny gzipped OTLP bodies that the shared mapping would inflate, beyond what the decode budget
 * counts for their elements: JSON text in a string attribute (parsed by the mapping, SPEC §3) and a dotted key
 * (unflattened into one object per segment). The budget (otlp/types.ts) exists so that "a few KB
 * of gzipped protobuf" cannot become millions of objects; before the attribute charges these bodies
 * did just that (a 26 KB gzip took the server process past 1.2 GB RSS and ~7 s of event loop).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';
import { spanMessage, varintBytes } from './otlp-fixtures.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

const len = (field: number, payload: Buffer): Buffer => Buffer.concat([varintBytes((field << 3) | 2), varintBytes(payload.length), payload]);
/** One request, one span `spanId` with one attribute `key` = string `value` (Buffers: the texts are large). */
function requestWith(spanId: string, key: string, value: string): Buffer {
  const keyValue = Buffer.concat([len(1, Buffer.from(key)), len(2, len(1, Buffer.from(value)))]);
  const span = Buffer.concat([Buffer.from(spanMessage({ traceId: TRACE, spanId })), len(9, keyValue)]);
  return len(1, len(2, len(2, span)));
}

async function send(body: Buffer | string, contentType: string, projectId: string) {
  const response = await fetch(server.url + '/otel/v1/traces', {
    method: 'POST',
    headers: { 'content-type': contentType, 'content-encoding': 'gzip', authorization: basicAuth({ username: 'dev', password: 'pw' }), project_id: projectId },
    body: gzipSync(body),
  });
  return { status: response.status, text: Buffer.from(await response.arrayBuffer()).toString('utf8') };
}

async function readCall(projectId: string, id: string): Promise<unknown> {
  return (await post(server.url, '/call/read', { project_id: projectId, id })).body.call;
}

describe('OTLP ingest bounds what the mapping makes of one request', () => {
  // 3 million objects in one JSON text: past the 2 000 000 containers every JSON body may open.
  const jsonText = `[${'{},'.repeat(3_000_000)}{}]`;

  it('protobuf: a string attribute of JSON text opening millions of objects is a 413, as the same span in OTLP/JSON is', async () => {
    const projectId = 'acme/amplified-1';
    const asJson = JSON.stringify({
      resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId: '00000000000000a2', attributes: [{ key: 'input.value', value: { stringValue: jsonText } }] }] }] }],
    });
    const json = await send(asJson, 'application/json', projectId);
    expect(json.status).toBe(413);

    const protobuf = await send(requestWith('00000000000000a1', 'input.value', jsonText), 'application/x-protobuf', projectId);
    expect(protobuf.status, protobuf.text.slice(0, 200)).toBe(413);
    expect(await readCall(projectId, '00000000000000a1')).toBeNull();
  }, 60_000);

  it('OTLP/JSON: the same JSON text written with \\u escapes (no literal braces in the body) is a 413 too', async () => {
    const projectId = 'acme/amplified-2';
    const escaped = `\\u005b${'\\u007b\\u007d,'.repeat(2_300_000)}\\u007b\\u007d\\u005d`;
    const body = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"${TRACE}","spanId":"00000000000000a3","attributes":[{"key":"input.value","value":{"stringValue":"${escaped}"}}]}]}]}]}`;
    const response = await send(body, 'application/json', projectId);
    expect(response.status, response.text.slice(0, 200)).toBe(413);
    expect(await readCall(projectId, '00000000000000a3')).toBeNull();
  }, 60_000);

  it('protobuf: an attribute key of millions of dots (one object per segment once unflattened) is a 413', async () => {
    const projectId = 'acme/amplified-3';
    const key = `${'a.'.repeat(5_000_000)}z`;
    const response = await send(requestWith('00000000000000a4', key, 'v'), 'application/x-protobuf', projectId);
    expect(response.status, response.text.slice(0, 200)).toBe(413);
    expect(response.text).toMatch(/Request too large/);
  }, 60_000);

  it('a resource attribute written into every span of it: 413 past the call text one request may store', async () => {
    const projectId = 'acme/amplified-resource';
    // 4 MB of resource text, decoded once, would be stored in each of 100 spans' otel_dump.
    const resourceText = 'r'.repeat(4 * 1024 * 1024);
    const spans = Array.from({ length: 100 }, (_, i) => ({ traceId: TRACE, spanId: (0xb00 + i).toString(16).padStart(16, '0'), name: 'op' }));
    const body = JSON.stringify({
      resourceSpans: [{ resource: { attributes: [{ key: 'service.notes', value: { stringValue: resourceText } }] }, scopeSpans: [{ spans }] }],
    });
    const response = await send(body, 'application/json', projectId);
    expect(response.status, response.text.slice(0, 200)).toBe(413);
    expect(response.text).toMatch(/would store more than 268435456 bytes of call text/);
    expect(await readCall(projectId, (0xb00).toString(16).padStart(16, '0'))).toBeNull();
    // A few spans of it are taken.
    const few = JSON.stringify({
      resourceSpans: [{ resource: { attributes: [{ key: 'service.notes', value: { stringValue: resourceText } }] }, scopeSpans: [{ spans: spans.slice(0, 3) }] }],
    });
    expect((await send(few, 'application/json', projectId)).status).toBe(200);
    // Counted in bytes: 1.5 Mi characters of CJK (4.5 MiB of UTF-8) over 60 spans pass 256 MiB.
    const cjk = JSON.stringify({
      resourceSpans: [{ resource: { attributes: [{ key: 'service.notes', value: { stringValue: '中'.repeat(1.5 * 1024 * 1024) } }] }, scopeSpans: [{ spans: spans.slice(0, 60) }] }],
    });
    expect((await send(cjk, 'application/json', 'acme/amplified-cjk')).status).toBe(413);
  }, 60_000);

  it('still takes real deep keys and JSON texts (OpenInference message keys, chat JSON)', async () => {
    const projectId = 'acme/amplified-4';
    const key = 'llm.input_messages.0.message.tool_calls.0.tool_call.function.arguments';
    const chat = JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ role: 'user', content: [{ type: 'text', text: `m${i}` }] })));
    const body = JSON.stringify({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: TRACE,
                  spanId: '00000000000000a5',
                  attributes: [
                    { key, value: { stringValue: '{"city":"Paris"}' } },
                    { key: 'input.value', value: { stringValue: chat } },
                  ],
                },
              ],
            },
          ],
        },
      ],
    });
    const response = await send(body, 'application/json', projectId);
    expect(response.status, response.text).toBe(200);
    expect(response.text).toBe('{}');
    const call = (await readCall(projectId, '00000000000000a5')) as { inputs: { 'input.value': unknown[] } };
    expect(call.inputs['input.value']).toHaveLength(200);
  });
});
