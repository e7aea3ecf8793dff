/**
 * Call endpoints over real HTTP against a real SQLite file (SPEC §2.1, §2.6).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ users: [{ username: 'writer2', password: 'pw', entities: ['*'] }] });
});
afterAll(async () => {
  await server.close();
});

let counter = 0;
/** A fresh span id (16 hex) and project per test, so tests never see each other's calls. */
function spanId(): string {
  counter += 1;
  return (0x1000000000 + counter).toString(16).padStart(16, '0');
}
function project(): string {
  return `acme/p${spanId()}`;
}
const TRACE = '0123456789abcdef0123456789abcdef';

function start(projectId: string, id: string, extra: Record<string, unknown> = {}) {
  return {
    project_id: projectId,
    id,
    trace_id: TRACE,
    op_name: 'answer',
    started_at: '2026-01-02T03:04:05.000100Z',
    attributes: { env: 'test' },
    inputs: { question: 'why?' },
    ...extra,
  };
}
function end(projectId: string, id: string, extra: Record<string, unknown> = {}) {
  return { project_id: projectId, id, ended_at: '2026-01-02T03:04:06.250300Z', summary: {}, output: { answer: 42 }, ...extra };
}
const startItem = (s: object) => ({ mode: 'start', req: { start: s } });
const endItem = (e: object) => ({ mode: 'end', req: { end: e } });

async function read(projectId: string, id: string, flags: Record<string, boolean> = {}) {
  const response = await post(server.url, '/call/read', { project_id: projectId, id, ...flags });
  expect(response.status).toBe(200);
  return response.body.call;
}
async function query(body: Record<string, unknown>) {
  const response = await post(server.url, '/calls/stream_query', body);
  expect(response.status, response.text).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^application\/jsonl/);
  return response.text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}
async function upsert(batch: unknown[]) {
  const response = await post(server.url, '/call/upsert_batch', { batch });
  expect(response.status, response.text).toBe(200);
  return response.body.res;
}

describe('call/upsert_batch and call/read', () => {
  it('merges a start and an end into one call in the read form', async () => {
    const p = project();
    const id = spanId();
    const res = await upsert([startItem(start(p, id, { display_name: 'Answer it' })), endItem(end(p, id))]);
    expect(res).toEqual([{ id, trace_id: TRACE }, {}]);
    expect(await read(p, id)).toEqual({
      id,
      project_id: p,
      op_name: 'answer',
      display_name: 'Answer it',
      trace_id: TRACE,
      parent_id: null,
      thread_id: null,
      turn_id: null,
      started_at: '2026-01-02T03:04:05.000100Z',
      ended_at: '2026-01-02T03:04:06.250300Z',
      deleted_at: null,
      attributes: { env: 'test' },
      inputs: { question: 'why?' },
      output: { answer: 42 },
      summary: { weave: { status: 'success', latency_ms: 1250, trace_name: 'Answer it' } },
      exception: null,
      wb_user_id: 'dev',
      wb_run_id: null,
      wb_run_step: null,
      wb_run_step_end: null,
      storage_size_bytes: null,
      total_storage_size_bytes: null,
    });
  });

  it('reads null (not 404) for a call that does not exist', async () => {
    expect(await read(project(), spanId())).toBeNull();
  });

  it('generates lowercase UUIDv7 ids when the start has none', async () => {
    const p = project();
    const s = start(p, 'unused');
    delete (s as Partial<typeof s>).id;
    delete (s as Partial<typeof s>).trace_id;
    const [ids] = await upsert([startItem(s)]);
    const uuidV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    expect(ids.id).toMatch(uuidV7);
    expect(ids.trace_id).toMatch(uuidV7);
    expect(ids.id).not.toBe(ids.trace_id);
    expect((await read(p, ids.id)).trace_id).toBe(ids.trace_id);
  });

  it('accepts the end before the start, in separate batches; the call is visible once started', async () => {
    const p = project();
    const id = spanId();
    await upsert([endItem(end(p, id, { exception: 'boom' }))]);
    expect(await read(p, id)).toBeNull();
    await upsert([startItem(start(p, id))]);
    const call = await read(p, id);
    expect(call.exception).toBe('boom');
    expect(call.output).toEqual({ answer: 42 });
    expect(call.summary.weave.status).toBe('error');
  });

  it('replaces a part written again (idempotent retries) and keeps the other part', async () => {
    const p = project();
    const id = spanId();
    await upsert([startItem(start(p, id)), endItem(end(p, id))]);
    await upsert([startItem(start(p, id)), endItem(end(p, id))]);
    await upsert([startItem(start(p, id, { inputs: { question: 'again' }, op_name: 'answer2' }))]);
    const call = await read(p, id);
    expect(call.inputs).toEqual({ question: 'again' });
    expect(call.op_name).toBe('answer2');
    expect(call.output).toEqual({ answer: 42 });
    expect(await query({ project_id: p })).toHaveLength(1);
  });

  it('derives status running, error and descendant_error, and latency only when ended', async () => {
    const p = project();
    const [running, failed, childFailed] = [spanId(), spanId(), spanId()];
    await upsert([
      startItem(start(p, running)),
      startItem(start(p, failed)),
      endItem(end(p, failed, { exception: 'ValueError: no' })),
      startItem(start(p, childFailed)),
      endItem(end(p, childFailed, { summary: { status_counts: { success: 2, error: 1 } } })),
    ]);
    const r = await read(p, running);
    expect(r.summary).toEqual({ weave: { status: 'running', trace_name: 'answer' } });
    expect(r.ended_at).toBeNull();
    expect((await read(p, failed)).summary.weave).toEqual({ status: 'error', latency_ms: 1250, trace_name: 'answer' });
    const child = await read(p, childFailed);
    expect(child.summary.weave.status).toBe('descendant_error');
    expect(child.summary.status_counts).toEqual({ success: 2, error: 1 });
  });

  it('never stores a summary.weave sent by the client', async () => {
    const p = project();
    const id = spanId();
    await upsert([startItem(start(p, id)), endItem(end(p, id, { summary: { weave: { status: 'fake' }, x: 1 } }))]);
    const call = await read(p, id, { include_storage_size: true });
    expect(call.summary).toEqual({ x: 1, weave: { status: 'success', latency_ms: 1250, trace_name: 'answer' } });
  });

  it('normalizes timestamps with offsets, naive forms and extra digits to UTC microseconds', async () => {
    const p = project();
    const id = spanId();
    await upsert([
      startItem(start(p, id, { started_at: '2026-01-02T05:04:05.1234567+02:00' })),
      endItem(end(p, id, { ended_at: '2026-01-02T03:04:06' })),
    ]);
    const call = await read(p, id);
    expect(call.started_at).toBe('2026-01-02T03:04:05.123456Z');
    expect(call.ended_at).toBe('2026-01-02T03:04:06.000000Z');
    expect(call.summary.weave.latency_ms).toBe(876);
  });

  it('sets wb_user_id from the credentials, ignoring the one sent', async () => {
    const p = project();
    const id = spanId();
    const response = await post(
      server.url,
      '/call/upsert_batch',
      { batch: [startItem(start(p, id, { wb_user_id: 'someone-else' })), endItem(end(p, id))] },
      { username: 'writer2', password: 'pw' },
    );
    expect(response.status).toBe(200);
    expect((await read(p, id)).wb_user_id).toBe('writer2');
  });

  it('stores every optional start and end field', async () => {
    const p = project();
    const [parent, id] = [spanId(), spanId()];
    await upsert([
      startItem(
        start(p, id, {
          parent_id: parent,
          thread_id: 'conv-1',
          turn_id: id,
          wb_run_id: `${p}:run1`,
          wb_run_step: 3,
          otel_dump: { name: 'answer' },
          unknown_key: 'ignored',
        }),
      ),
      endItem(end(p, id, { wb_run_step_end: 4, output: 'plain text', also_unknown: true })),
    ]);
    const call = await read(p, id);
    expect(call).toMatchObject({
      parent_id: parent,
      thread_id: 'conv-1',
      turn_id: id,
      wb_run_id: `${p}:run1`,
      wb_run_step: 3,
      wb_run_step_end: 4,
      output: 'plain text',
    });
    expect(call).not.toHaveProperty('unknown_key');
  });

  it('stores op names that are refs as sent', async () => {
    const p = project();
    const id = spanId();
    const ref = `weave:///${p}/op/answer:${'A'.repeat(43)}`;
    await upsert([startItem(start(p, id, { op_name: ref }))]);
    expect((await read(p, id)).op_name).toBe(ref);
  });

  it('answers an empty batch with an empty list', async () => {
    expect(await upsert([])).toEqual([]);
  });
});

describe('call/start and call/end', () => {
  it('write the two parts separately', async () => {
    const p = project();
    const id = spanId();
    const started = await post(server.url, '/call/start', { start: start(p, id) });
    expect(started.status).toBe(200);
    expect(started.body).toEqual({ id, trace_id: TRACE });
    const ended = await post(server.url, '/call/end', { end: end(p, id) });
    expect(ended.status).toBe(200);
    expect(ended.body).toEqual({});
    expect((await read(p, id)).summary.weave.status).toBe('success');
  });
});

describe('batch validation', () => {
  const p = 'acme/validation';
  const cases: Array<[string, unknown, number]> = [
    ['an unknown mode', { mode: 'middle', req: { start: start(p, '00000000000000b1') } }, 400],
    ['mode start with an end req', { mode: 'start', req: { end: end(p, '00000000000000b1') } }, 400],
    ['mode end with a start req', { mode: 'end', req: { start: start(p, '00000000000000b1') } }, 400],
    ['both parts in one req', { mode: 'start', req: { start: start(p, '00000000000000b1'), end: end(p, '00000000000000b1') } }, 400],
    ['an empty req', { mode: 'start', req: {} }, 400],
    ['an uppercase span id', startItem(start(p, '00000000000000B1')), 400],
    ['a short span id', startItem(start(p, 'abc')), 400],
    ['a non-canonical UUID', startItem(start(p, '0190A8B4-0000-7000-8000-000000000000')), 400],
    ['a span id as trace id', startItem(start(p, '00000000000000b1', { trace_id: '00000000000000b1' })), 400],
    ['a bad parent id', startItem(start(p, '00000000000000b1', { parent_id: 'parent' })), 400],
    ['a bad end id', endItem(end(p, 'not-an-id')), 400],
    ['an op_name of 129 characters', startItem(start(p, '00000000000000b1', { op_name: 'x'.repeat(129) })), 400],
    ['a display_name of 1025 characters', startItem(start(p, '00000000000000b1', { display_name: 'x'.repeat(1025) })), 400],
    ['an unknown key on the item', { ...startItem(start(p, '00000000000000b1')), extra: 1 }, 422],
    ['an unknown key on req', { mode: 'start', req: { start: start(p, '00000000000000b1'), extra: 1 } }, 422],
    ['a missing op_name', startItem({ ...start(p, '00000000000000b1'), op_name: undefined }), 422],
    ['inputs that are a list', startItem(start(p, '00000000000000b1', { inputs: [1] })), 422],
    ['a numeric mode', { mode: 1, req: {} }, 422],
    ['a started_at that is not a time', startItem(start(p, '00000000000000b1', { started_at: 'yesterday' })), 422],
    ['a started_at on 30 February', startItem(start(p, '00000000000000b1', { started_at: '2026-02-30T00:00:00Z' })), 422],
    ['a wb_run_step that is not an integer', startItem(start(p, '00000000000000b1', { wb_run_step: 1.5 })), 422],
    ['a summary that is a string', endItem(end(p, '00000000000000b1', { summary: 'x' })), 422],
  ];
  it.each(cases)('rejects %s', async (_name, item, status) => {
    const good = startItem(start(p, '00000000000000c1'));
    const response = await post(server.url, '/call/upsert_batch', { batch: [good, item] });
    expect(response.status, response.text).toBe(status);
    if (status === 400) expect(typeof response.body.reason).toBe('string');
    else expect(response.body.detail[0].loc.slice(0, 3)).toEqual(['body', 'batch', 1]);
    // Nothing of a rejected batch is written.
    expect(await read(p, '00000000000000c1')).toBeNull();
  });

  it('accepts op_name of exactly 128 characters (counting code points) and UUID ids', async () => {
    const q = project();
    const id = '0190a8b4-1234-7abc-8def-0123456789ab';
    const opName = '😀'.repeat(128);
    await upsert([startItem(start(q, id, { op_name: opName, trace_id: '0190a8b4-1234-7abc-8def-0123456789ac' }))]);
    expect((await read(q, id)).op_name).toBe(opName);
  });

  it('answers 422 for unknown keys on the batch envelope and a missing batch', async () => {
    const extra = await post(server.url, '/call/upsert_batch', { batch: [], more: 1 });
    expect(extra.status).toBe(422);
    expect(extra.body.detail[0]).toMatchObject({ type: 'extra_forbidden', loc: ['body', 'more'] });
    expect((await post(server.url, '/call/upsert_batch', {})).status).toBe(422);
    expect((await post(server.url, '/call/start', { start: start(p, '00000000000000b1'), x: 1 })).status).toBe(422);
  });

  it('answers 403 for an item in a project the user is not granted', async () => {
    const limited = await startTestServer({ users: [{ username: 'ltd', password: 'pw', entities: ['mine'] }] });
    try {
      const batch = [startItem(start('mine/x', '00000000000000d1')), startItem(start('theirs/x', '00000000000000d2'))];
      const response = await post(limited.url, '/call/upsert_batch', { batch }, { username: 'ltd', password: 'pw' });
      expect(response.status).toBe(403);
    } finally {
      await limited.close();
    }
  });
});

describe('calls/stream_query', () => {
  const p = 'acme/query';
  const ids = ['0000000000000e01', '0000000000000e02', '0000000000000e03', '0000000000000e04'];
  const traceB = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';
  beforeAll(async () => {
    await upsert([
      startItem(start(p, ids[0]!, { op_name: 'root', started_at: '2026-01-01T00:00:03Z', inputs: { n: 3 } })),
      endItem(end(p, ids[0]!, { ended_at: '2026-01-01T00:00:10Z', summary: { usage: { 'gpt-4o': { prompt_tokens: 1000, completion_tokens: 100 } } } })),
      startItem(start(p, ids[1]!, { op_name: 'child', parent_id: ids[0], started_at: '2026-01-01T00:00:01Z', inputs: { n: 10 }, thread_id: 't1' })),
      endItem(end(p, ids[1]!, { ended_at: '2026-01-01T00:00:02Z', exception: 'bad' })),
      startItem(start(p, ids[2]!, { op_name: 'child', parent_id: ids[0], started_at: '2026-01-01T00:00:02Z', inputs: { n: 2 }, display_name: 'second' })),
      startItem(start(p, ids[3]!, { op_name: 'other', trace_id: traceB, started_at: '2026-01-01T00:00:04Z', inputs: { n: 1 } })),
    ]);
  });

  it('returns every call of the project ordered by started_at by default', async () => {
    const calls = await query({ project_id: p });
    expect(calls.map((c) => c.id)).toEqual([ids[1], ids[2], ids[0], ids[3]]);
    expect(calls[1].summary.weave.trace_name).toBe('second');
  });

  it('filters by op names, ids, traces, parents, roots and threads', async () => {
    const idsOf = async (filter: object) => (await query({ project_id: p, filter })).map((c) => c.id).sort();
    expect(await idsOf({ op_names: ['child'] })).toEqual([ids[1], ids[2]]);
    expect(await idsOf({ call_ids: [ids[3], 'ffffffffffffffff'] })).toEqual([ids[3]]);
    expect(await idsOf({ trace_ids: [traceB] })).toEqual([ids[3]]);
    expect(await idsOf({ parent_ids: [ids[0]] })).toEqual([ids[1], ids[2]]);
    expect(await idsOf({ trace_roots_only: true })).toEqual([ids[0], ids[3]]);
    expect(await idsOf({ thread_ids: ['t1'] })).toEqual([ids[1]]);
    expect(await idsOf({ op_names: [], call_ids: null })).toHaveLength(4);
    expect(await idsOf({ op_names: ['child'], parent_ids: [ids[0]], call_ids: [ids[2]] })).toEqual([ids[2]]);
  });

  it('matches op refs of any version with :*', async () => {
    const q = project();
    const [a, b] = [spanId(), spanId()];
    await upsert([
      startItem(start(q, a, { op_name: `weave:///${q}/op/f:aaa` })),
      startItem(start(q, b, { op_name: `weave:///${q}/op/fg:bbb` })),
    ]);
    const calls = await query({ project_id: q, filter: { op_names: [`weave:///${q}/op/f:*`] } });
    expect(calls.map((c) => c.id)).toEqual([a]);
  });

  it('applies $expr queries, including the derived summary.weave fields', async () => {
    const ex = (expr: object) => query({ project_id: p, query: { $expr: expr } });
    expect((await ex({ $gt: [{ $getField: 'inputs.n' }, { $literal: 2 }] })).map((c) => c.id)).toEqual([ids[1], ids[0]]);
    expect((await ex({ $eq: [{ $getField: 'summary.weave.status' }, { $literal: 'error' }] })).map((c) => c.id)).toEqual([ids[1]]);
    expect((await ex({ $eq: [{ $getField: 'summary.weave.status' }, { $literal: 'running' }] })).map((c) => c.id)).toEqual([ids[2], ids[3]]);
    expect((await ex({ $gte: [{ $getField: 'summary.weave.latency_ms' }, { $literal: 5000 }] })).map((c) => c.id)).toEqual([ids[0]]);
    expect((await ex({ $eq: [{ $getField: 'summary.weave.trace_name' }, { $literal: 'second' }] })).map((c) => c.id)).toEqual([ids[2]]);
    expect(
      (await ex({ $contains: { input: { $getField: 'op_name' }, substr: { $literal: 'CHI' }, case_insensitive: true } })).map((c) => c.id),
    ).toEqual([ids[1], ids[2]]);
  });

  it('answers 400 naming an unknown query field and 422 for a broken expression', async () => {
    const unknown = await post(server.url, '/calls/stream_query', {
      project_id: p,
      query: { $expr: { $eq: [{ $getField: 'no_such_field' }, { $literal: 1 }] } },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.reason).toContain('no_such_field');
    const broken = await post(server.url, '/calls/stream_query', { project_id: p, query: { $expr: { $nope: [] } } });
    expect(broken.status).toBe(422);
    expect(broken.body.detail[0].loc.slice(0, 3)).toEqual(['body', 'query', '$expr']);
  });

  it('sorts by any field and direction, and pages with limit and offset', async () => {
    const sorted = await query({ project_id: p, sort_by: [{ field: 'inputs.n', direction: 'desc' }] });
    expect(sorted.map((c) => c.inputs.n)).toEqual([10, 3, 2, 1]);
    const byOp = await query({ project_id: p, sort_by: [{ field: 'op_name', direction: 'asc' }, { field: 'started_at', direction: 'desc' }] });
    expect(byOp.map((c) => c.id)).toEqual([ids[2], ids[1], ids[3], ids[0]]);
    const page = await query({ project_id: p, limit: 2, offset: 1 });
    expect(page.map((c) => c.id)).toEqual([ids[2], ids[0]]);
    expect(await query({ project_id: p, limit: 0 })).toEqual([]);
    expect(await query({ project_id: p, offset: 10 })).toEqual([]);
  });

  it('rejects bad sort_by, limit and offset', async () => {
    const status = async (body: object) => (await post(server.url, '/calls/stream_query', { project_id: p, ...body })).status;
    expect(await status({ sort_by: [{ field: 'op_name', direction: 'up' }] })).toBe(422);
    expect(await status({ sort_by: [{ field: 'nope', direction: 'asc' }] })).toBe(400);
    expect(await status({ limit: -1 })).toBe(422);
    expect(await status({ offset: 1.5 })).toBe(422);
    expect(await status({ filter: { op_name: ['x'] } })).toBe(422);
    expect(await status({ columns: ['nope'] })).toBe(400);
    expect(await status({ limit: 1e300 })).toBe(422);
    const manyKeys = Array.from({ length: 5000 }, () => ({ field: 'op_name', direction: 'asc' }));
    expect(await status({ sort_by: manyKeys })).toBe(422);
  });

  it('handles huge filter lists within one statement', async () => {
    const many = Array.from({ length: 40_000 }, (_, i) => `weave:///x/op/f${i}:*`);
    const calls = await query({ project_id: p, filter: { op_names: [...many, 'root'], call_ids: [...ids, ...many] } });
    expect(calls.map((c) => c.id)).toEqual([ids[0]]);
  });

  it('answers the requested columns and the identifying ones, every other field at its default (as whole CallSchemas)', async () => {
    const [call] = await query({ project_id: p, columns: ['inputs', 'summary.weave.status'], limit: 1 });
    const [whole] = await query({ project_id: p, limit: 1 });
    expect(Object.keys(call).sort()).toEqual(Object.keys(whole).sort());
    expect(call).toMatchObject({ id: whole.id, op_name: whole.op_name, inputs: whole.inputs, summary: whole.summary });
    expect(call.summary.weave.status).toBe('error');
    // Not selected: `{}` for attributes (a dict in CallSchema), null for the rest.
    expect(call).toMatchObject({ attributes: {}, output: null, exception: null, ended_at: null, display_name: null });
    const [bare] = await query({ project_id: p, columns: ['id'], limit: 1 });
    expect(bare).toMatchObject({ attributes: {}, inputs: {}, summary: null });
  });

  it('adds costs per known model with include_costs', async () => {
    const [root] = await query({ project_id: p, include_costs: true, filter: { call_ids: [ids[0]] } });
    expect(root.summary.weave.costs['gpt-4o']).toMatchObject({
      prompt_tokens: 1000,
      completion_tokens: 100,
      total_tokens: 1100,
      requests: 0,
      prompt_token_cost_unit: 'USD',
      completion_token_cost_unit: 'USD',
      provider_id: 'openai',
    });
    expect(root.summary.weave.costs['gpt-4o'].prompt_tokens_total_cost).toBeCloseTo(0.0025, 12);
    expect(root.summary.weave.costs['gpt-4o'].completion_tokens_total_cost).toBeCloseTo(0.001, 12);
    const [plain] = await query({ project_id: p, filter: { call_ids: [ids[0]] } });
    expect(plain.summary.weave.costs).toBeUndefined();
  });

  it('answers an empty stream for a project without calls', async () => {
    const response = await post(server.url, '/calls/stream_query', { project_id: 'acme/empty' });
    expect(response.status).toBe(200);
    expect(response.text).toBe('');
  });
});

describe('calls/stream_query sort order (as the hosted service sorts)', () => {
  /** Writes one call per entry (started one second apart, so ids and start order agree); returns name -> id. */
  async function callsNamed(p: string, entries: Array<[name: string, startExtra: object, endExtra: object | null]>) {
    const idOf = new Map<string, string>();
    const items: unknown[] = [];
    entries.forEach(([name, startExtra, endExtra], i) => {
      const id = spanId();
      idOf.set(name, id);
      items.push(startItem(start(p, id, { started_at: `2026-01-01T00:00:0${i}Z`, ...startExtra })));
      if (endExtra !== null) items.push(endItem(end(p, id, { ended_at: `2026-01-01T00:01:0${i}Z`, ...endExtra })));
    });
    await upsert(items);
    const nameOf = new Map([...idOf].map(([name, id]) => [id, name]));
    return async (body: Record<string, unknown>) => (await query({ project_id: p, ...body })).map((c) => nameOf.get(c.id));
  }

  it('sorts a JSON path by presence, then its numeric reading (numeric text too), then its text', async () => {
    const p = project();
    const names = await callsNamed(p, [
      ['n9', { inputs: { v: 9 }, attributes: { k: 9 } }, { output: { x: 9 }, summary: { usage: { m: { total_tokens: 9 } } } }],
      ['s10', { inputs: { v: '10' }, attributes: { k: '10' } }, { output: { x: '10' }, summary: { usage: { m: { total_tokens: '10' } } } }],
      ['n20', { inputs: { v: 20 }, attributes: { k: 20 } }, { output: { x: 20 }, summary: { usage: { m: { total_tokens: 20 } } } }],
      ['missing', { inputs: {}, attributes: {} }, { output: {}, summary: {} }],
      ['jnull', { inputs: { v: null }, attributes: { k: null } }, { output: { x: null }, summary: { usage: { m: { total_tokens: null } } } }],
      ['sabc', { inputs: { v: 'abc' }, attributes: { k: 'abc' } }, { output: { x: 'abc' }, summary: { usage: { m: { total_tokens: 'abc' } } } }],
    ]);
    for (const field of ['inputs.v', 'attributes.k', 'output.x', 'summary.usage.m.total_tokens']) {
      const asc = await names({ sort_by: [{ field, direction: 'asc' }] });
      expect(asc.slice(0, 4), field).toEqual(['n9', 's10', 'n20', 'sabc']);
      // A JSON null counts as absent in the hosted calls query (JSONType 'Null'), like a missing path.
      expect(new Set(asc.slice(4)), field).toEqual(new Set(['missing', 'jnull']));
      const desc = await names({ sort_by: [{ field, direction: 'desc' }] });
      expect(desc.slice(0, 4), field).toEqual(['n20', 's10', 'n9', 'sabc']);
      expect(new Set(desc.slice(4)), field).toEqual(new Set(['missing', 'jnull']));
    }
  });

  it('puts NULLs last in both directions for columns and derived fields', async () => {
    const p = project();
    const parent = spanId();
    await upsert([startItem(start(p, parent, { started_at: '2025-12-31T00:00:00Z' }))]);
    const names = await callsNamed(p, [
      ['done-late', { display_name: 'b', parent_id: parent, thread_id: 't2' }, { ended_at: '2026-01-01T00:05:00Z' }],
      ['running', {}, null],
      ['done-early', { display_name: 'a', parent_id: parent, thread_id: 't1' }, { ended_at: '2026-01-01T00:00:03Z' }],
    ]);
    const sorted = async (field: string, direction: string) =>
      (await names({ sort_by: [{ field, direction }], filter: { trace_ids: [TRACE] }, query: { $expr: { $not: [{ $eq: [{ $getField: 'id' }, { $literal: parent }] }] } } }));
    expect(await sorted('ended_at', 'asc')).toEqual(['done-early', 'done-late', 'running']);
    expect(await sorted('ended_at', 'desc')).toEqual(['done-late', 'done-early', 'running']);
    expect(await sorted('summary.weave.latency_ms', 'asc')).toEqual(['done-early', 'done-late', 'running']);
    expect(await sorted('summary.weave.latency_ms', 'desc')).toEqual(['done-late', 'done-early', 'running']);
    for (const field of ['display_name', 'parent_id', 'thread_id']) {
      expect(await sorted(field, 'asc'), field).toEqual(field === 'parent_id' ? ['done-late', 'done-early', 'running'] : ['done-early', 'done-late', 'running']);
      expect((await sorted(field, 'desc')).at(-1), field).toBe('running');
    }
  });

  it('accepts deleted_at in $getField and sort_by (visible calls are never deleted: it reads as null)', async () => {
    const p = project();
    const [a, b] = [spanId(), spanId()];
    await upsert([startItem(start(p, a)), startItem(start(p, b))]);
    const isNull = await query({ project_id: p, query: { $expr: { $eq: [{ $getField: 'deleted_at' }, { $literal: null }] } } });
    expect(isNull.map((c) => c.id).sort()).toEqual([a, b].sort());
    const sorted = await query({ project_id: p, sort_by: [{ field: 'deleted_at', direction: 'desc' }] });
    expect(sorted).toHaveLength(2);
  });
});

describe('derived summary.weave values, read and queried alike', () => {
  async function statusAndQuery(p: string, id: string) {
    const status = (await read(p, id)).summary.weave.status;
    const matched = await query({ project_id: p, query: { $expr: { $eq: [{ $getField: 'summary.weave.status' }, { $literal: status }] } } });
    expect(matched.map((c) => c.id), `query on status ${status}`).toContain(id);
    return status;
  }

  it('reads summary.status_counts.error as an integer, as the hosted SQL does (toInt64OrNull)', async () => {
    const p = project();
    const cases: Array<[unknown, string]> = [
      ['0', 'success'],
      [true, 'success'],
      ['abc', 'success'],
      [0, 'success'],
      [2, 'descendant_error'],
      ['3', 'descendant_error'],
    ];
    for (const [error, expected] of cases) {
      const id = spanId();
      await upsert([startItem(start(p, id)), endItem(end(p, id, { summary: { status_counts: { error } } }))]);
      expect(await statusAndQuery(p, id), JSON.stringify(error)).toBe(expected);
    }
  });

  it('names the trace by the display name, else the op name (an op ref reads as the op name)', async () => {
    const p = project();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ op_name: `weave:///${p}/op/my_op:abc123` }, 'my_op'],
      [{ op_name: `weave:///${p}/op/my_op:abc123`, display_name: '' }, 'my_op'],
      [{ op_name: `weave:///${p}/op/my_op:abc123`, display_name: 'Shown' }, 'Shown'],
      [{ op_name: 'plain', display_name: '' }, 'plain'],
      [{ op_name: 'plain' }, 'plain'],
    ];
    for (const [extra, expected] of cases) {
      const id = spanId();
      await upsert([startItem(start(p, id, extra))]);
      expect((await read(p, id)).summary.weave.trace_name, JSON.stringify(extra)).toBe(expected);
      const matched = await query({ project_id: p, query: { $expr: { $eq: [{ $getField: 'summary.weave.trace_name' }, { $literal: expected }] } } });
      expect(matched.map((c) => c.id), JSON.stringify(extra)).toContain(id);
    }
  });
});

describe('numeric reading of text in queries', () => {
  it('reads a string as a number only when the whole string is one', async () => {
    const p = project();
    const values = { date: '2024-01-05', version: '1.2.3', phone: '555-1234', signs: '+-7', bare: '1e', trailing: '5-', num: '12', exp: '1.5e3' };
    const idOf = new Map<string, string>();
    const items: unknown[] = [];
    for (const [name, v] of Object.entries(values)) {
      const id = spanId();
      idOf.set(id, name);
      items.push(startItem(start(p, id, { inputs: { v } })));
    }
    await upsert(items);
    const matching = async (expr: object) =>
      (await query({ project_id: p, query: { $expr: expr } })).map((c) => idOf.get(c.id)).sort();
    const v = { $getField: 'inputs.v' };
    for (const n of [2024, 1.2, 555, 0, 1, 5, -7]) {
      expect(await matching({ $eq: [v, { $literal: n }] }), String(n)).toEqual([]);
    }
    expect(await matching({ $eq: [v, { $literal: 12 }] })).toEqual(['num']);
    expect(await matching({ $gt: [v, { $literal: 100 }] })).toEqual(['exp']);
    expect(await matching({ $eq: [{ $convert: { input: v, to: 'double' } }, { $literal: null }] })).toEqual(
      ['bare', 'date', 'phone', 'signs', 'trailing', 'version'],
    );
    expect(await matching({ $and: [{ $convert: { input: v, to: 'bool' } }] })).toEqual(['exp', 'num']);
  });
});

describe('costs on call/read', () => {
  it('prices known models (also dated snapshots) and skips unknown ones', async () => {
    const p = project();
    const id = spanId();
    const usage = {
      'gpt-4o-mini-2024-07-18': { input_tokens: 2000, output_tokens: 500, requests: 2 },
      'claude-sonnet-4-20250514': { prompt_tokens: 10, completion_tokens: 20, total_tokens: 31 },
      'my-local-model': { prompt_tokens: 1 },
      usage: { prompt_tokens: 5 },
    };
    await upsert([startItem(start(p, id)), endItem(end(p, id, { summary: { usage } }))]);
    const costs = (await read(p, id, { include_costs: true })).summary.weave.costs;
    expect(Object.keys(costs).sort()).toEqual(['claude-sonnet-4-20250514', 'gpt-4o-mini-2024-07-18']);
    expect(costs['gpt-4o-mini-2024-07-18']).toMatchObject({ prompt_tokens: 2000, completion_tokens: 500, requests: 2, total_tokens: 2500 });
    expect(costs['gpt-4o-mini-2024-07-18'].prompt_tokens_total_cost).toBeCloseTo(2000 * 0.15e-6, 15);
    expect(costs['claude-sonnet-4-20250514']).toMatchObject({ total_tokens: 31, provider_id: 'anthropic' });
    expect(costs['claude-sonnet-4-20250514'].completion_tokens_total_cost).toBeCloseTo(20 * 15e-6, 15);
    expect(typeof costs['claude-sonnet-4-20250514'].effective_date).toBe('string');
  });

  it('gives an empty costs object to a call without usage', async () => {
    const p = project();
    const id = spanId();
    await upsert([startItem(start(p, id))]);
    expect((await read(p, id, { include_costs: true })).summary.weave.costs).toEqual({});
  });
});

describe('storage sizes', () => {
  it('counts UTF-8 bytes of the stored JSON, per call and summed over the trace on the root', async () => {
    const p = project();
    const [root, child] = [spanId(), spanId()];
    const rootParts = { attributes: { a: 'é' }, inputs: { x: 1 } };
    await upsert([
      startItem(start(p, root, rootParts)),
      endItem(end(p, root, { output: 'ok', summary: { n: 1 } })),
      startItem(start(p, child, { parent_id: root, attributes: {}, inputs: {} })),
    ]);
    const rootBytes =
      Buffer.byteLength('{"a":"é"}') + Buffer.byteLength('{"x":1}') + Buffer.byteLength('"ok"') + Buffer.byteLength('{"n":1}');
    const childBytes = Buffer.byteLength('{}') * 2;
    const flags = { include_storage_size: true, include_total_storage_size: true };
    const rootCall = await read(p, root, flags);
    expect(rootCall.storage_size_bytes).toBe(rootBytes);
    expect(rootCall.total_storage_size_bytes).toBe(rootBytes + childBytes);
    const childCall = await read(p, child, flags);
    expect(childCall.storage_size_bytes).toBe(childBytes);
    expect(childCall.total_storage_size_bytes).toBeNull();
    const [queried] = await query({ project_id: p, ...flags, filter: { trace_roots_only: true } });
    expect(queried.total_storage_size_bytes).toBe(rootBytes + childBytes);
    const plain = await read(p, root);
    expect(plain.storage_size_bytes).toBeNull();
    expect(plain.total_storage_size_bytes).toBeNull();
  });
});

describe('calls/delete', () => {
  it('deletes calls with their descendants; they read as null and leave queries', async () => {
    const p = project();
    const [root, child, grandchild, other] = [spanId(), spanId(), spanId(), spanId()];
    await upsert([
      startItem(start(p, root)),
      startItem(start(p, child, { parent_id: root })),
      startItem(start(p, grandchild, { parent_id: child })),
      startItem(start(p, other)),
    ]);
    const deleted = await post(server.url, '/calls/delete', { project_id: p, call_ids: [root] });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ num_deleted: 3 });
    expect(await read(p, root)).toBeNull();
    expect(await read(p, grandchild)).toBeNull();
    expect((await query({ project_id: p })).map((c) => c.id)).toEqual([other]);
    // Deleting again deletes nothing; writing a part again does not revive the call.
    expect((await post(server.url, '/calls/delete', { project_id: p, call_ids: [root] })).body).toEqual({ num_deleted: 0 });
    await upsert([startItem(start(p, root))]);
    expect(await read(p, root)).toBeNull();
  });

  it('keeps a delete that arrives before the call: its parts, arriving later, stay deleted', async () => {
    const p = project();
    const [endFirst, unseen, live] = [spanId(), spanId(), spanId()];
    await upsert([endItem(end(p, endFirst))]);
    const deleted = await post(server.url, '/calls/delete', { project_id: p, call_ids: [endFirst, unseen] });
    expect(deleted.body).toEqual({ num_deleted: 0 });
    await upsert([startItem(start(p, endFirst)), startItem(start(p, unseen)), endItem(end(p, unseen)), startItem(start(p, live))]);
    expect(await read(p, endFirst)).toBeNull();
    expect(await read(p, unseen)).toBeNull();
    expect((await query({ project_id: p })).map((c) => c.id)).toEqual([live]);
  });

  it('rejects bad ids, too many ids and other projects', async () => {
    expect((await post(server.url, '/calls/delete', { project_id: 'acme/x', call_ids: ["1' OR '1'='1"] })).status).toBe(400);
    const many = Array.from({ length: 1001 }, (_, i) => i.toString(16).padStart(16, '0'));
    const tooMany = await post(server.url, '/calls/delete', { project_id: 'acme/x', call_ids: many });
    expect(tooMany.status).toBe(413);
    expect(tooMany.body).toEqual({ reason: 'Cannot delete more than 1000 calls at once' });
    expect((await post(server.url, '/calls/delete', { project_id: 'acme/x', call_ids: many.slice(1) })).status).toBe(200);
    expect((await post(server.url, '/calls/delete', { project_id: 'acme/x' })).status).toBe(422);
  });
});

describe('call/update', () => {
  it('sets the display name, which becomes the trace name', async () => {
    const p = project();
    const id = spanId();
    await upsert([startItem(start(p, id))]);
    const response = await post(server.url, '/call/update', { project_id: p, call_id: id, display_name: 'Renamed' });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({});
    const call = await read(p, id);
    expect(call.display_name).toBe('Renamed');
    expect(call.summary.weave.trace_name).toBe('Renamed');
  });

  it('keeps a rename that arrives before the start part, which does not undo it (SPEC §2.1: any order)', async () => {
    const p = project();
    const [renamed, named, plain] = [spanId(), spanId(), spanId()];
    for (const id of [renamed, named]) {
      const response = await post(server.url, '/call/update', { project_id: p, call_id: id, display_name: `early ${id}` });
      expect(response.status).toBe(200);
      expect(response.body).toEqual({});
    }
    // Not a call until its start arrives: no read, no query row.
    expect(await read(p, renamed)).toBeNull();
    expect(await query({ project_id: p })).toEqual([]);
    await upsert([startItem(start(p, renamed)), startItem(start(p, named, { display_name: 'from the start' })), startItem(start(p, plain))]);
    expect((await read(p, renamed)).display_name).toBe(`early ${renamed}`);
    expect((await read(p, named)).display_name).toBe(`early ${named}`);
    expect((await read(p, plain)).display_name).toBeNull();
    // Once the call has its start, a start written again replaces the name as before.
    await upsert([startItem(start(p, named, { display_name: 'start again' }))]);
    expect((await read(p, named)).display_name).toBe('start again');
  });

  it('answers 400 for bad ids and long names, 422 for a bad shape', async () => {
    const p = project();
    const id = spanId();
    expect((await post(server.url, '/call/update', { project_id: p, call_id: 'X', display_name: 'x' })).status).toBe(400);
    await upsert([startItem(start(p, id))]);
    const long = await post(server.url, '/call/update', { project_id: p, call_id: id, display_name: 'x'.repeat(1025) });
    expect(long.status).toBe(400);
    expect((await post(server.url, '/call/update', { project_id: p, call_id: id, display_name: 5 })).status).toBe(422);
    // As the service: the field is optional in the schema, and an update that changes nothing a 400.
    for (const body of [{ project_id: p, call_id: id }, { project_id: p, call_id: id, display_name: null }]) {
      const nothing = await post(server.url, '/call/update', body);
      expect(nothing.status).toBe(400);
      expect(nothing.body).toEqual({ reason: 'One of [display_name] is required for call update' });
    }
  });
});

describe('calls/complete (v2)', () => {
  function completed(projectId: string, id: string, extra: Record<string, unknown> = {}) {
    return { ...start(projectId, id), ...end(projectId, id), ...extra };
  }

  it('writes whole calls under /v2/{entity}/{project}/calls/complete', async () => {
    const p = project();
    const [entity, name] = p.split('/') as [string, string];
    const id = spanId();
    const response = await post(server.url, `/v2/${entity}/${name}/calls/complete`, {
      batch: [completed(p, id, { summary: { usage: { 'gpt-4o': { prompt_tokens: 1 } } } })],
    });
    expect(response.status, response.text).toBe(200);
    expect(response.body).toEqual({});
    const call = await read(p, id);
    expect(call).toMatchObject({ op_name: 'answer', output: { answer: 42 }, wb_user_id: 'dev' });
    expect(call.summary.weave).toEqual({ status: 'success', latency_ms: 1250, trace_name: 'answer' });
  });

  it('rejects items of another project than the path, and missing ids', async () => {
    const mismatch = await post(server.url, '/v2/acme/one/calls/complete', { batch: [completed('acme/two', spanId())] });
    expect(mismatch.status).toBe(400);
    const noTrace = completed('acme/one', spanId());
    delete (noTrace as Partial<typeof noTrace>).trace_id;
    expect((await post(server.url, '/v2/acme/one/calls/complete', { batch: [noTrace] })).status).toBe(422);
    expect((await post(server.url, '/v2/acme/one/calls/complete', { batch: [], x: 1 })).status).toBe(422);
  });

  it('in complete mode, answers v1 writes with CALLS_COMPLETE_MODE_REQUIRED and accepts v2', async () => {
    const complete = await startTestServer({ completeMode: true });
    try {
      const id = '0000000000000f01';
      const v1: Array<[string, unknown]> = [
        ['/call/upsert_batch', { batch: [startItem(start('acme/c', id))] }],
        ['/call/start', { start: start('acme/c', id) }],
        ['/call/end', { end: end('acme/c', id) }],
      ];
      for (const [path, body] of v1) {
        const response = await post(complete.url, path, body);
        expect(response.status).toBe(400);
        expect(response.body.error_code).toBe('CALLS_COMPLETE_MODE_REQUIRED');
        expect(typeof response.body.reason).toBe('string');
      }
      const v2 = await post(complete.url, '/v2/acme/c/calls/complete', { batch: [completed('acme/c', id)] });
      expect(v2.status).toBe(200);
      const read = await post(complete.url, '/call/read', { project_id: 'acme/c', id });
      expect(read.body.call.id).toBe(id);
    } finally {
      await complete.close();
    }
  });
});

describe('call/read validation', () => {
  it('answers 400 for a malformed id and 422 for wrong types', async () => {
    expect((await post(server.url, '/call/read', { project_id: 'acme/x', id: 'ABCDEF0123456789' })).status).toBe(400);
    expect((await post(server.url, '/call/read', { project_id: 'acme/x', id: 7 })).status).toBe(422);
    expect((await post(server.url, '/call/read', { project_id: 'acme/x', id: '0000000000000001', include_costs: 1 })).status).toBe(422);
  });
});
