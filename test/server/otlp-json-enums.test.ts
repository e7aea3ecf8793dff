/**
 * OTLP/JSON enums sent as decimal text. Protobuf JSON parsers take an enum as its name or
 * its number, and Python's `json_format` (what a Python service built on the official classes
 * reads OTLP/JSON with) also takes the number as text ("2"). Read as 0, a span sent with
 * `"status": {"code": "2"}` would be stored as UNSET, its error (the call's `exception`,
 * `summary.weave.status`) silently lost.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';
import { openSqlite } from '../../src/server/store/sqlite.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

it('reads enum numbers sent as decimal text (status code, span kind)', async () => {
  const projectId = 'acme/json-enums';
  const body = JSON.stringify({
    resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId: '00000000000000b1', name: 'failing', kind: '3', status: { code: '2', message: 'boom' } }] }] }],
  });
  const response = await fetch(server.url + '/otel/v1/traces', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: basicAuth({ username: 'dev', password: 'pw' }), project_id: projectId },
    body,
  });
  expect(response.status).toBe(200);
  const call = (await post(server.url, '/call/read', { project_id: projectId, id: '00000000000000b1' })).body.call;
  expect(call.exception).toBe('boom');
  expect(call.summary.weave.status).toBe('error');
  const db = openSqlite(server.dbPath, { readonly: true });
  try {
    const row = db.prepare('SELECT otel_dump FROM calls WHERE project_id = ? AND id = ?').get(projectId, '00000000000000b1') as { otel_dump: string };
    expect(JSON.parse(row.otel_dump)).toMatchObject({ kind: 'CLIENT', status: { code: 'ERROR', message: 'boom' } });
  } finally {
    db.close();
  }
});
