/**
 * `calls/query` (the unstreamed answer), `calls/query_stats` and the ref filters
 * (`input_refs`/`output_refs`), over real HTTP against a real SQLite file, beside
 * `calls/stream_query`, whose selection they share.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ users: [{ username: 'narrow', password: 'pw2', entities: ['other'] }] });
});
afterAll(async () => {
  await server.close();
});

let counter = 0;
function spanId(): string {
  counter += 1;
  return (0x2000000000 + counter).toString(16).padStart(16, '0');
}
function project(): string {
  return `acme/q${spanId()}`;
}
const TRACE = 'abcdef0123456789abcdef0123456789';
const REF_V1 = 'weave:///acme/demo/object/prompt:v1digest';
const REF_V2 = 'weave:///acme/demo/object/prompt:v2digest';

/** A whole call (start and end items) with the given inputs and output. */
function callItems(projectId: string, id: string, fields: { parent?: string; inputs?: unknown; output?: unknown; second?: number } = {}) {
  const startedAt = `2026-01-02T03:04:${String(fields.second ?? 5).padStart(2, '0')}.000000Z`;
  return [
    {
      mode: 'start',
      req: {
        start: {
          project_id: projectId,
          id,
          trace_id: TRACE,
          parent_id: fields.parent ?? null,
          op_name: 'step',
          started_at: startedAt,
          attributes: {},
          inputs: fields.inputs ?? {},
        },
      },
    },
    { mode: 'end', req: { end: { project_id: projectId, id, ended_at: startedAt, output: fields.output ?? null, summary: {} } } },
  ];
}

async function upsert(batch: unknown[]): Promise<void> {
  const response = await post(server.url, '/call/upsert_batch', { batch });
  expect(response.status, response.text).toBe(200);
}

async function streamedIds(body: Record<string, unknown>): Promise<string[]> {
  const response = await post(server.url, '/calls/stream_query', body);
  expect(response.status, response.text).toBe(200);
  return response.text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { id: string }).id);
}

/** Three calls in one trace: a root and two children, with refs in their inputs and output. */
async function seed(): Promise<{ p: string; root: string; first: string; second: string }> {
  const p = project();
  const [root, first, second] = [spanId(), spanId(), spanId()];
  await upsert([
    ...callItems(p, root, { inputs: { prompt: REF_V1, note: 'plain' }, second: 1 }),
    ...callItems(p, first, { parent: root, inputs: { deep: [{ ref: REF_V2 }] }, output: REF_V1, second: 2 }),
    // The ref as a key, not a value, and as part of a longer text: neither holds the ref.
    ...callItems(p, second, { parent: root, inputs: { [REF_V1]: 1, text: `see ${REF_V1}` }, output: { answer: [REF_V2] }, second: 3 }),
  ]);
  return { p, root, first, second };
}

describe('calls/query', () => {
  it('answers {"calls": [...]} with the calls calls/stream_query streams, in the same order', async () => {
    const { p } = await seed();
    for (const body of [
      { project_id: p },
      { project_id: p, sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 2 },
      { project_id: p, filter: { trace_roots_only: true }, columns: ['id', 'op_name'] },
      { project_id: p, offset: 10 },
    ]) {
      const response = await post(server.url, '/calls/query', body);
      expect(response.status, response.text).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(response.body.calls.map((call: { id: string }) => call.id)).toEqual(await streamedIds(body));
    }
  });

  it('gives the same errors as calls/stream_query', async () => {
    const unknownField = { project_id: 'acme/x', query: { $expr: { $eq: [{ $getField: 'nope' }, { $literal: 1 }] } } };
    expect((await post(server.url, '/calls/query', unknownField)).status).toBe(400);
    expect((await post(server.url, '/calls/query', { project_id: 'acme/x', limt: 1 })).status).toBe(422);
    expect((await post(server.url, '/calls/query', { project_id: 'acme/x' }, { username: 'narrow', password: 'pw2' })).status).toBe(403);
  });
});

describe('calls/query_stats', () => {
  it('counts the calls a filter and query select, at most limit of them', async () => {
    const { p, first } = await seed();
    const stats = (body: Record<string, unknown>) => post(server.url, '/calls/query_stats', { project_id: p, ...body });
    expect((await stats({})).body).toEqual({ count: 3, total_storage_size_bytes: null });
    expect((await stats({ limit: 2 })).body).toEqual({ count: 2, total_storage_size_bytes: null });
    expect((await stats({ limit: 0 })).body.count).toBe(0);
    expect((await stats({ filter: { trace_roots_only: true } })).body.count).toBe(1);
    expect((await stats({ query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: first }] } } })).body.count).toBe(1);
    expect((await stats({ filter: { op_names: ['other'] } })).body.count).toBe(0);
    expect((await post(server.url, '/calls/query_stats', { project_id: 'acme/empty' })).body).toEqual({ count: 0, total_storage_size_bytes: null });
  });

  it('sums the storage of the selected root calls\' traces with include_total_storage_size', async () => {
    const { p, root } = await seed();
    const rootRead = await post(server.url, '/call/read', { project_id: p, id: root, include_total_storage_size: true });
    const traceBytes = rootRead.body.call.total_storage_size_bytes as number;
    expect(traceBytes).toBeGreaterThan(0);
    const all = await post(server.url, '/calls/query_stats', { project_id: p, include_total_storage_size: true });
    expect(all.body).toEqual({ count: 3, total_storage_size_bytes: traceBytes });
    // Children carry no trace total: selecting only them sums to 0.
    const children = await post(server.url, '/calls/query_stats', {
      project_id: p,
      include_total_storage_size: true,
      filter: { parent_ids: [root] },
    });
    expect(children.body).toEqual({ count: 2, total_storage_size_bytes: 0 });
  });

  it('refuses malformed, unknown and unauthorized requests', async () => {
    const cases: Array<[unknown, number]> = [
      [{ project_id: 'acme/x', limit: -1 }, 422],
      [{ project_id: 'acme/x', limit: 1.5 }, 422],
      [{ project_id: 'acme/x', sort_by: [] }, 422],
      [{ project_id: 'acme/x', filter: { op_name: ['x'] } }, 422],
      [{ project_id: 'acme/x', query: { $expr: { $nope: [] } } }, 422],
      [{ project_id: 'acme/x', query: { $expr: { $eq: [{ $getField: 'nope' }, { $literal: 1 }] } } }, 400],
      [{ project_id: 'no-slash' }, 400],
      [{}, 422],
    ];
    for (const [body, status] of cases) {
      const response = await post(server.url, '/calls/query_stats', body);
      expect(response.status, JSON.stringify(body)).toBe(status);
    }
    expect((await post(server.url, '/calls/query_stats', { project_id: 'acme/x' }, { username: 'narrow', password: 'pw2' })).status).toBe(403);
  });

  it('is a typed client call', async () => {
    const { p } = await seed();
    const client = createClient({ baseUrl: server.url, username: server.username, password: server.password });
    try {
      expect(await client.callsQueryStats({ project_id: p, filter: { trace_roots_only: false } })).toEqual({ count: 3, total_storage_size_bytes: null });
    } finally {
      await client.close();
    }
  });
});

describe('filter.input_refs and filter.output_refs', () => {
  it('select calls whose inputs or output hold one of the refs as a value, at any depth', async () => {
    const { p, root, first, second } = await seed();
    const ids = (filter: Record<string, unknown>) => streamedIds({ project_id: p, filter });
    expect(await ids({ input_refs: [REF_V1] })).toEqual([root]);
    expect(await ids({ input_refs: [REF_V2] })).toEqual([first]);
    expect(await ids({ input_refs: [REF_V1, REF_V2] })).toEqual([root, first]);
    expect(await ids({ output_refs: [REF_V1] })).toEqual([first]);
    expect(await ids({ output_refs: [REF_V2] })).toEqual([second]);
    // `<ref prefix>:*`: any version.
    expect(await ids({ input_refs: ['weave:///acme/demo/object/prompt:*'] })).toEqual([root, first]);
    expect(await ids({ output_refs: ['weave:///acme/demo/object/other:*'] })).toEqual([]);
    // Empty lists and null filter nothing, as the other lists do; both filters together narrow.
    expect(await ids({ input_refs: [], output_refs: null })).toEqual([root, first, second]);
    expect(await ids({ input_refs: [REF_V2], output_refs: [REF_V1] })).toEqual([first]);
    const counted = await post(server.url, '/calls/query_stats', { project_id: p, filter: { input_refs: [REF_V1] } });
    expect(counted.body.count).toBe(1);
  });

  it('take hostile values as plain text', async () => {
    const { p } = await seed();
    for (const ref of ["' OR 1=1 --", '%', '_', '*', ':*', '\u0000', 'x'.repeat(10_000)]) {
      expect(await streamedIds({ project_id: p, filter: { input_refs: [ref] } })).toEqual([]);
    }
    expect((await post(server.url, '/calls/stream_query', { project_id: p, filter: { input_refs: [5] } })).status).toBe(422);
    expect((await post(server.url, '/calls/stream_query', { project_id: p, filter: { input_refs: 'x' } })).status).toBe(422);
  });
});
