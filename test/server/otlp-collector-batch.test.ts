/**
 * A collector's default batch (8192 spans) in one request: a collector drops a batch refused with
 * 413, and with the attributes LLM instrumentations flatten messages into it is more protobuf than
 * the 32 MiB body limit (80 short attributes each: 39 MiB, 280 KB gzipped). A gzipped protobuf
 * body may inflate to PROTOBUF_INFLATION times the limit; the decode budget bounds its cost.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';
import { keyValue, lenField, spanMessage, stringValue, varintBytes } from './otlp-fixtures.js';
import { PROTOBUF_INFLATION } from '../../src/server/routes/otlp.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});


it("takes a collector's default batch (8192 spans, 80 short attributes each) sent gzipped", async () => {
  const attributes = Array.from({ length: 80 }, (_, i) => keyValue(`gen_ai.prompt.${i}.content`, stringValue(`message number ${i} of this chat`)));
  const spans = Array.from({ length: 8192 }, (_, index) =>
    Buffer.from(lenField(2, spanMessage({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: (index + 1).toString(16).padStart(16, '0'), name: 'openai.chat', attributes }))),
  );
  const scopeSpans = Buffer.concat(spans);
  const resourceSpans = Buffer.concat([Buffer.from([0x12]), varintBytes(scopeSpans.length), scopeSpans]);
  const body = Buffer.concat([Buffer.from([0x0a]), varintBytes(resourceSpans.length), resourceSpans]);
  expect(body.length).toBeGreaterThan(32 * 1024 * 1024); // the uncompressed size is what the cap sees
  expect(body.length).toBeLessThan(PROTOBUF_INFLATION * 32 * 1024 * 1024);
  const response = await fetch(server.url + '/otel/v1/traces', {
    method: 'POST',
    headers: {
      'content-type': 'application/x-protobuf',
      'content-encoding': 'gzip',
      authorization: basicAuth({ username: 'dev', password: 'pw' }),
      project_id: 'acme/collector',
    },
    body: gzipSync(body),
  });
  const text = Buffer.from(await response.arrayBuffer()).toString('utf8');
  expect(response.status, text.slice(0, 200)).toBe(200);
  const call = (await post(server.url, '/call/read', { project_id: 'acme/collector', id: (8192).toString(16).padStart(16, '0') })).body.call;
  expect(call.op_name).toBe('openai.chat');
}, 120_000);
