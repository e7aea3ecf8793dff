/**
 * Values nested deeper than the server stores (SPEC §2.5: the client's 400, never a 500 later).
 * SQLite's JSON functions fail past 1000 levels, so one such call accepted would turn every
 * read and query of its project into a 500.
 */
import { openSqlite } from '../../src/server/store/sqlite.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';

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
  return `acme/deep${counter}`;
}
const TRACE = 'aaaaaaaaaaaaaaaabbbbbbbbbbbbbbbb';
const nested = (depth: number): unknown => {
  let value: unknown = 1;
  for (let level = 0; level < depth; level++) value = { a: value };
  return value;
};
const start = (projectId: string, id: string, extra: Record<string, unknown> = {}) => ({
  project_id: projectId,
  id,
  trace_id: TRACE,
  op_name: 'op',
  started_at: '2026-01-01T00:00:00Z',
  attributes: {},
  inputs: {},
  ...extra,
});
const end = (projectId: string, id: string, extra: Record<string, unknown> = {}) => ({
  project_id: projectId,
  id,
  ended_at: '2026-01-01T00:00:01Z',
  summary: {},
  ...extra,
});

/** Reads that touch every row of the project: they must all still answer 200. */
async function expectProjectReadable(projectId: string, id: string): Promise<void> {
  const read = await post(server.url, '/call/read', { project_id: projectId, id });
  expect(read.status, read.text).toBe(200);
  expect(read.body.call.id).toBe(id);
  const all = await post(server.url, '/calls/stream_query', { project_id: projectId });
  expect(all.status, all.text).toBe(200);
  const byStatus = await post(server.url, '/calls/stream_query', {
    project_id: projectId,
    query: { $expr: { $eq: [{ $getField: 'summary.weave.status' }, { $literal: 'success' }] } },
  });
  expect(byStatus.status, byStatus.text).toBe(200);
  const byInput = await post(server.url, '/calls/stream_query', {
    project_id: projectId,
    query: { $expr: { $eq: [{ $getField: 'inputs.a.a' }, { $literal: 1 }] } },
  });
  expect(byInput.status, byInput.text).toBe(200);
}

describe('call values nested past the bound', () => {
  const cases: Array<[string, (p: string, id: string) => object]> = [
    ['start.inputs', (p, id) => ({ mode: 'start', req: { start: start(p, id, { inputs: { x: nested(1100) } }) } })],
    ['start.attributes', (p, id) => ({ mode: 'start', req: { start: start(p, id, { attributes: { x: nested(1100) } }) } })],
    ['start.otel_dump', (p, id) => ({ mode: 'start', req: { start: start(p, id, { otel_dump: { x: nested(1100) } }) } })],
    ['end.output', (p, id) => ({ mode: 'end', req: { end: end(p, id, { output: nested(1100) }) } })],
    ['end.summary', (p, id) => ({ mode: 'end', req: { end: end(p, id, { summary: { x: nested(1100) } }) } })],
  ];
  for (const [where, item] of cases) {
    it(`refuses ${where} nested 1100 deep with a 400, and the project stays readable`, async () => {
      const projectId = project();
      const good = await post(server.url, '/call/upsert_batch', {
        batch: [
          { mode: 'start', req: { start: start(projectId, '00000000000000a1', { inputs: { a: { a: 1 } } }) } },
          { mode: 'end', req: { end: end(projectId, '00000000000000a1') } },
        ],
      });
      expect(good.status, good.text).toBe(200);
      const deep = await post(server.url, '/call/upsert_batch', {
        batch: [
          { mode: 'start', req: { start: start(projectId, '00000000000000b2') } },
          item(projectId, '00000000000000b2'),
        ],
      });
      expect(deep.status, deep.text).toBe(400);
      expect(deep.body.reason).toContain('nested deeper than 500 levels');
      await expectProjectReadable(projectId, '00000000000000a1');
    });
  }

  it('accepts 500 levels of containers and refuses 501 (the bound of objects and feedback too)', async () => {
    const projectId = project();
    const at = (depth: number, id: string) =>
      post(server.url, '/call/start', { start: start(projectId, id, { inputs: { x: nested(depth - 1) } }) });
    expect((await at(500, '00000000000000c1')).status).toBe(200);
    expect((await at(501, '00000000000000c2')).status).toBe(400);
    expect((await post(server.url, '/calls/stream_query', { project_id: projectId })).status).toBe(200);
  });

  it('keeps an OTLP span whose JSON attribute text parses 1100 deep: the text stays text, with a note (SPEC §3)', async () => {
    const projectId = project();
    const [entity, name] = projectId.split('/') as [string, string];
    const deepText = `${'['.repeat(1100)}1${']'.repeat(1100)}`;
    const span = (spanId: string, attributes: object[]) => ({
      traceId: TRACE,
      spanId,
      name: 'deep',
      kind: 1,
      startTimeUnixNano: '1767225600000000000',
      endTimeUnixNano: '1767225601000000000',
      attributes,
      status: {},
    });
    const body = {
      resourceSpans: [
        {
          resource: {
            attributes: [
              { key: 'wandb.entity', value: { stringValue: entity } },
              { key: 'wandb.project', value: { stringValue: name } },
            ],
          },
          scopeSpans: [
            {
              scope: { name: 'test' },
              spans: [
                span('00000000000000d1', [{ key: 'input.value', value: { stringValue: deepText } }]),
                span('00000000000000d2', [{ key: 'input.value', value: { stringValue: '{"a":{"a":1}}' } }]),
              ],
            },
          ],
        },
      ],
    };
    const response = await fetch(`${server.url}/otel/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: basicAuth({ username: 'dev', password: 'pw' }) },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({});
    await expectProjectReadable(projectId, '00000000000000d2');
    const read = await post(server.url, '/call/read', { project_id: projectId, id: '00000000000000d1' });
    expect(read.body.call.inputs).toEqual({ 'input.value': deepText });
    expect(read.body.call.attributes._callbridge_mapping_error).toBe('input.value: JSON text nested deeper than 495 levels, kept as text');
  });
});

describe('a stored summary SQLite cannot parse', () => {
  it('reads with a status instead of failing every query of the project', async () => {
    const projectId = project();
    for (const id of ['00000000000000e1', '00000000000000e2']) {
      await post(server.url, '/call/upsert_batch', {
        batch: [
          { mode: 'start', req: { start: start(projectId, id) } },
          { mode: 'end', req: { end: end(projectId, id) } },
        ],
      });
    }
    // Written behind the server's back (an older version, a sqlite3 shell): 1100 levels.
    const db = openSqlite(server.dbPath);
    try {
      db.pragma('busy_timeout = 5000');
      const text = `{"x":${'{"a":'.repeat(1100)}1${'}'.repeat(1100)}}`;
      db.prepare('UPDATE calls SET summary = ? WHERE project_id = ? AND id = ?').run(text, projectId, '00000000000000e2');
    } finally {
      db.close();
    }
    const all = await post(server.url, '/calls/stream_query', { project_id: projectId });
    expect(all.status, all.text).toBe(200);
    const statuses = all.text.trim().split('\n').map((line) => JSON.parse(line).summary.weave.status);
    expect(statuses).toEqual(['success', 'success']);
    const read = await post(server.url, '/call/read', { project_id: projectId, id: '00000000000000e1' });
    expect(read.status).toBe(200);
  });
});
