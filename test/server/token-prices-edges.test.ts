/** Hostile and edge-case input to /cost/create, /cost/query, /cost/purge and include_costs. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const NARROW = { username: 'narrow', password: 'pw2' };
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ users: [{ ...NARROW, entities: ['elsewhere'] }] });
});
afterAll(async () => server.close());
const call = (path: string, body: unknown, credentials?: { username: string; password: string }) => post(server.url, path, body, credentials);
const price = (prompt: number, completion: number, extra: Record<string, unknown> = {}) => ({ prompt_token_cost: prompt, completion_token_cost: completion, ...extra });
const rows = (project: string) => {
  const db = openSqlite(server.dbPath, { readonly: true });
  try {
    return db.prepare('SELECT * FROM token_prices WHERE project_id = ? ORDER BY rowid').all(project) as Array<Record<string, unknown>>;
  } finally {
    db.close();
  }
};
let callNo = 0;
const callWithUsage = async (project: string, usage: Record<string, unknown>, startedAt = '2026-03-01T00:00:00Z') => {
  const id = `0190c0de-0000-7000-8000-${(++callNo).toString(16).padStart(12, '0')}`;
  const res = await call('/call/upsert_batch', {
    batch: [
      { mode: 'start', req: { start: { project_id: project, id, trace_id: '0190c0de-0000-7000-8000-0000000000f0', op_name: 'llm', started_at: startedAt, attributes: {}, inputs: {} } } },
      { mode: 'end', req: { end: { project_id: project, id, ended_at: '2026-03-01T00:00:01Z', summary: { usage } } } },
    ],
  });
  expect(res.status, res.text).toBe(200);
  return id;
};

describe('token prices: edge cases', () => {
  it('a huge price times tokens never yields a 500 or invalid JSON in include_costs', async () => {
    const project = 'acme/huge';
    expect((await call('/cost/create', { project_id: project, costs: { big: price(1e308, 1.7976931348623157e308) } })).status).toBe(200);
    const id = await callWithUsage(project, { big: { prompt_tokens: 10, completion_tokens: 1e308 } });
    const read = await call('/call/read', { project_id: project, id, include_costs: true });
    expect(read.status, read.text).toBe(200);
    expect(typeof read.body).toBe('object');
    const q = await call('/calls/stream_query', { project_id: project, include_costs: true });
    expect(q.status).toBe(200);
    for (const line of q.text.split('\n').filter(Boolean)) expect(() => JSON.parse(line)).not.toThrow();
    // Overflow must not be reported as a cost of null silently (hosted: inf). Recorded, not asserted strictly:
    const cost = read.body.call.summary.weave.costs.big;
    expect(cost.prompt_tokens_total_cost === null || Number.isFinite(cost.prompt_tokens_total_cost)).toBe(true);
  });

  it('-0 and the smallest subnormal are stored as given', async () => {
    const project = 'acme/zero';
    const res = await call('/cost/create', `{"project_id":"${project}","costs":{"z":{"prompt_token_cost":-0,"completion_token_cost":5e-324}}}`);
    expect(res.status, res.text).toBe(200);
    const q = await call('/cost/query', { project_id: project });
    expect(q.body.results[0].prompt_token_cost).toBe(0);
    expect(q.body.results[0].completion_token_cost).toBe(5e-324);
  });

  it('negative prices are a 400 that stores nothing of the request', async () => {
    const project = 'acme/neg';
    const res = await call('/cost/create', { project_id: project, costs: { ok: price(1, 1), bad: price(-1, 1) } });
    expect(res.status).toBe(400);
    expect(rows(project)).toHaveLength(0);
  });

  it('effective_date at the edges: year 1, 9999, and offsets carrying past them', async () => {
    const project = 'acme/edges';
    const ok = await call('/cost/create', {
      project_id: project,
      costs: {
        a: price(1, 1, { effective_date: '0001-01-01T00:00:00Z' }),
        b: price(1, 1, { effective_date: '9999-12-31T23:59:59.5Z' }),
        c: price(1, 1, { effective_date: '0001-01-01T05:00:00+05:00' }),
        d: price(1, 1, { effective_date: '9999-12-31T20:00:00-03:59' }),
      },
    });
    expect(ok.status, ok.text).toBe(200);
    const dates = rows(project).map((row) => row.effective_date);
    expect(dates).toEqual(['0001-01-01T00:00:00.000000Z', '9999-12-31T23:59:59.500000Z', '0001-01-01T00:00:00.000000Z', '9999-12-31T23:59:00.000000Z']);
    for (const bad of ['0001-01-01T00:00:00+00:01', '9999-12-31T23:59:59-00:01', '0000-01-01T00:00:00Z', '10000-01-01T00:00:00Z', '2025-02-29T00:00:00Z', '', ' 2025-01-01', '2025-01-01T24:00:00Z']) {
      const res = await call('/cost/create', { project_id: 'acme/edges-bad', costs: { m: price(1, 1, { effective_date: bad }) } });
      expect(res.status, bad).toBe(400);
    }
    expect(rows('acme/edges-bad')).toHaveLength(0);
  });

  it('a project price at year 1 prices a call at year 1; one at 9999 only calls after', async () => {
    const project = 'acme/edge-pricing';
    await call('/cost/create', { project_id: project, costs: { m: price(2, 0, { effective_date: '0001-01-01T00:00:00Z' }) } });
    await call('/cost/create', { project_id: project, costs: { m: price(3, 0, { effective_date: '9999-12-31T23:59:59.999999Z' }) } });
    const id = await callWithUsage(project, { m: { prompt_tokens: 1, completion_tokens: 0 } });
    const read = await call('/call/read', { project_id: project, id, include_costs: true });
    expect(read.body.call.summary.weave.costs.m.prompt_token_cost).toBe(2);
  });

  it('llm_id: unicode, lone surrogates, __proto__, constructor, 256 chars, 257 chars', async () => {
    const project = 'acme/names';
    const raw = `{"project_id":"${project}","costs":{"constructor":{"prompt_token_cost":1,"completion_token_cost":1},"hasOwnProperty":{"prompt_token_cost":1,"completion_token_cost":1},"${'é'.repeat(256)}":{"prompt_token_cost":1,"completion_token_cost":1}}}`;
    const res = await call('/cost/create', raw);
    expect(res.status, res.text).toBe(200);
    const q = await call('/cost/query', { project_id: project });
    expect(q.body.results.map((r: { llm_id: string }) => r.llm_id)).toEqual(['constructor', 'hasOwnProperty', 'é'.repeat(256)]);
    const long = await call('/cost/create', { project_id: project, costs: { ['x'.repeat(257)]: price(1, 1) } });
    expect(long.status).toBe(400);
    const empty = await call('/cost/create', { project_id: project, costs: { '': price(1, 1) } });
    expect(empty.status).toBeGreaterThanOrEqual(400);
    expect(empty.status).toBeLessThan(500);
    // a call using those names gets their price
    const id = await callWithUsage(project, { constructor: { prompt_tokens: 2, completion_tokens: 0 }, hasOwnProperty: { prompt_tokens: 3 } });
    const read = await call('/call/read', { project_id: project, id, include_costs: true });
    expect(read.status, read.text).toBe(200);
    const costs = read.body.call.summary.weave.costs;
    expect(costs.constructor.prompt_tokens_total_cost).toBe(2);
    expect(costs.hasOwnProperty.prompt_tokens_total_cost).toBe(3);
  });

  it('unit and provider names: 256 astral characters is within the 256-character bound', async () => {
    const project = 'acme/units';
    const res = await call('/cost/create', { project_id: project, costs: { m: price(1, 1, { prompt_token_cost_unit: '😀'.repeat(256), provider_id: '😀'.repeat(256) }) } });
    expect(res.status, res.text).toBe(200);
  });

  it('cost/query: limits, offsets, unknown fields and sort fields are 4xx or work, never 500', async () => {
    const project = 'acme/q';
    await call('/cost/create', { project_id: project, costs: { a: price(1, 2), b: price(3, 4) } });
    const bodies: unknown[] = [
      { project_id: project, limit: 0 },
      { project_id: project, limit: 1e308 },
      { project_id: project, offset: 1e308 },
      { project_id: project, limit: 9007199254740993, offset: 9007199254740993 },
      { project_id: project, fields: ['__proto__'] },
      { project_id: project, fields: ['nope'] },
      { project_id: project, fields: [] },
      { project_id: project, sort_by: [{ field: 'nope', direction: 'asc' }] },
      { project_id: project, sort_by: [{ field: '__proto__', direction: 'asc' }] },
      { project_id: project, sort_by: [{ field: 'prompt_token_cost', direction: 'desc' }, { field: 'pricing_level', direction: 'asc' }] },
      { project_id: project, query: { $expr: { $eq: [{ $getField: 'pricing_level' }, { $literal: 'project' }] } } },
      { project_id: project, query: { $expr: { $gt: [{ $getField: 'prompt_token_cost' }, { $literal: 1e308 }] } } },
      { project_id: project, query: { $expr: { $eq: [{ $getField: 'effective_date' }, { $literal: '9999-12-31T23:59:59Z' }] } } },
      { project_id: project, query: { $expr: { $contains: { input: { $getField: 'llm_id' }, substr: { $literal: '\ud800' } } } } },
    ];
    for (const body of bodies) {
      const res = await call('/cost/query', body);
      expect(res.status, `${JSON.stringify(body)} -> ${res.text}`).toBeLessThan(500);
    }
    const none = await call('/cost/query', { project_id: project, limit: 0 });
    expect(none.body.results).toEqual([]);
    const fieldsEmpty = await call('/cost/query', { project_id: project, fields: [] });
    expect(fieldsEmpty.status).toBe(200);
  });

  it('cost/query with a query reads the request project only', async () => {
    await call('/cost/create', { project_id: 'acme/secret', costs: { s: price(9, 9) } });
    const res = await call('/cost/query', {
      project_id: 'elsewhere/mine',
      query: { $expr: { $or: [{ $eq: [{ $getField: 'llm_id' }, { $literal: 's' }] }, { $eq: [{ $literal: 1 }, { $literal: 1 }] }] } },
    }, NARROW);
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([]);
  });

  it('authorization: a user granted only another entity cannot create, query or purge', async () => {
    const project = 'acme/authz';
    const created = await call('/cost/create', { project_id: project, costs: { m: price(1, 1) } });
    const id = created.body.ids[0][0];
    expect((await call('/cost/create', { project_id: project, costs: { m: price(1, 1) } }, NARROW)).status).toBe(403);
    expect((await call('/cost/query', { project_id: project }, NARROW)).status).toBe(403);
    expect((await call('/cost/purge', { project_id: project, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: id }] } } }, NARROW)).status).toBe(403);
    // purging another project's id from one's own project does nothing
    await call('/cost/purge', { project_id: 'elsewhere/x', query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: id }] } } }, NARROW);
    expect(rows(project)).toHaveLength(1);
  });

  it('cost/purge: shapes other than ids are 400; huge $in lists work', async () => {
    const project = 'acme/purge';
    const created = await call('/cost/create', { project_id: project, costs: { m: price(1, 1), n: price(1, 1) } });
    const [[id1], [id2]] = created.body.ids;
    const bad = [
      { $expr: { $eq: [{ $getField: 'llm_id' }, { $literal: 'm' }] } },
      { $expr: { $eq: [{ $literal: 1 }, { $literal: 1 }] } },
      { $expr: { $in: [{ $getField: 'id' }, []] } },
      { $expr: { $or: [] } },
      { $expr: { $eq: [{ $getField: 'id' }, { $literal: 1 }] } },
    ];
    for (const query of bad) {
      const res = await call('/cost/purge', { project_id: project, query });
      expect(res.status, `${JSON.stringify(query)} -> ${res.text}`).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    }
    expect(rows(project)).toHaveLength(2);
    const many = Array.from({ length: 50_000 }, (_, i) => ({ $literal: `nope-${i}` }));
    many.push({ $literal: id1 });
    const res = await call('/cost/purge', { project_id: project, query: { $expr: { $in: [{ $getField: 'id' }, many] } } });
    expect(res.status, res.text).toBe(200);
    expect(rows(project).map((row) => row.id)).toEqual([id2]);
  });

  it('concurrent creates of the same model both store; the one stored last wins ties', async () => {
    const project = 'acme/race';
    const date = '2025-01-01T00:00:00Z';
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => call('/cost/create', { project_id: project, costs: { m: price(i, i, { effective_date: date }) } })));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(rows(project)).toHaveLength(10);
    const ids = new Set(results.map((r) => r.body.ids[0][0]));
    expect(ids.size).toBe(10);
  });

  it('usage with 1e308 tokens, negative, NaN-ish values never gives a 500', async () => {
    const project = 'acme/usage';
    await call('/cost/create', { project_id: project, costs: { m: price(1, 1) } });
    const id = await callWithUsage(project, { m: { prompt_tokens: 1e308, completion_tokens: -5, input_tokens: 1e308, requests: 'x', total_tokens: null } });
    const read = await call('/call/read', { project_id: project, id, include_costs: true });
    expect(read.status, read.text).toBe(200);
  });
});
