/**
 * A project's own token prices: `cost/create`, `cost/query`, `cost/purge` (what the Weave SDKs'
 * `add_cost`, `query_costs` and `purge_costs` send), and the prices `include_costs` puts into
 * `summary.weave.costs`. Real HTTP, real SQLite file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { PRICE_TABLE } from '../../src/server/costs.js';
import { MAX_COSTS_PER_CREATE } from '../../src/wire/costs.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/prices';
const NARROW = { username: 'narrow', password: 'pw2' };

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ users: [{ ...NARROW, entities: ['elsewhere'] }] });
});
afterAll(async () => server.close());

const call = (path: string, body: unknown, credentials?: { username: string; password: string }) => post(server.url, path, body, credentials);
const price = (prompt: number, completion: number, extra: Record<string, unknown> = {}) => ({
  prompt_token_cost: prompt,
  completion_token_cost: completion,
  ...extra,
});
const storedPrices = () => {
  const db = openSqlite(server.dbPath, { readonly: true });
  try {
    return db.prepare('SELECT project_id, id, llm_id FROM token_prices ORDER BY rowid').all();
  } finally {
    db.close();
  }
};

describe('cost/create, cost/query and cost/purge', () => {
  const project = 'acme/crud';

  it('stores prices by model, answering [id, llm_id] of each, and reads them back', async () => {
    const created = await call('/cost/create', {
      project_id: project,
      costs: {
        'my-model': price(0.001, 0.002, { effective_date: '2025-01-01T00:00:00+02:00', provider_id: 'acme', prompt_token_cost_unit: 'EUR' }),
        'other-model': price(0.5, 1),
      },
      wb_user_id: 'spoofed',
    });
    expect(created.status).toBe(200);
    expect(created.body.ids.map(([, llmId]: [string, string]) => llmId)).toEqual(['my-model', 'other-model']);
    const [[myId], [otherId]] = created.body.ids as [[string, string], [string, string]];

    const all = await call('/cost/query', { project_id: project });
    expect(all.status).toBe(200);
    expect(all.body.results).toEqual([
      {
        id: myId,
        llm_id: 'my-model',
        prompt_token_cost: 0.001,
        completion_token_cost: 0.002,
        prompt_token_cost_unit: 'EUR',
        completion_token_cost_unit: 'USD',
        effective_date: '2024-12-31T22:00:00.000000Z',
        provider_id: 'acme',
      },
      {
        id: otherId,
        llm_id: 'other-model',
        prompt_token_cost: 0.5,
        completion_token_cost: 1,
        prompt_token_cost_unit: 'USD',
        completion_token_cost_unit: 'USD',
        effective_date: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
        provider_id: 'default',
      },
    ]);

    const narrowed = await call('/cost/query', {
      project_id: project,
      fields: ['id', 'llm_id', 'created_by'],
      query: { $expr: { $eq: [{ $getField: 'llm_id' }, { $literal: 'other-model' }] } },
    });
    expect(narrowed.body.results).toEqual([
      { id: otherId, llm_id: 'other-model', prompt_token_cost: null, completion_token_cost: null, prompt_token_cost_unit: null, completion_token_cost_unit: null, effective_date: null, provider_id: null },
    ]);
    const byCreator = await call('/cost/query', { project_id: project, fields: ['llm_id'], query: { $expr: { $eq: [{ $getField: 'created_by' }, { $literal: 'dev' }] } } });
    expect(byCreator.body.results).toHaveLength(2);
    const sorted = await call('/cost/query', { project_id: project, fields: ['llm_id'], sort_by: [{ field: 'prompt_token_cost', direction: 'desc' }], limit: 1, offset: 0 });
    expect(sorted.body.results.map((r: { llm_id: string }) => r.llm_id)).toEqual(['other-model']);
    const byLevel = await call('/cost/query', { project_id: project, fields: ['llm_id'], query: { $expr: { $eq: [{ $getField: 'pricing_level_id' }, { $literal: project }] } } });
    expect(byLevel.body.results).toHaveLength(2);
  });

  it("reads and purges the request's project only, whatever the query says", async () => {
    const mine = (await call('/cost/create', { project_id: 'acme/a', costs: { m: price(1, 1) } })).body.ids[0][0];
    const theirs = (await call('/cost/create', { project_id: 'acme/b', costs: { m: price(2, 2) } })).body.ids[0][0];
    const everyProject = { $expr: { $eq: [{ $getField: 'llm_id' }, { $literal: 'm' }] } };
    expect((await call('/cost/query', { project_id: 'acme/a', query: everyProject })).body.results.map((r: { id: string }) => r.id)).toEqual([mine]);
    const purged = await call('/cost/purge', { project_id: 'acme/a', query: { $expr: { $in: [{ $getField: 'id' }, [{ $literal: mine }, { $literal: theirs }]] } } });
    expect(purged).toMatchObject({ status: 200, body: {} });
    expect((await call('/cost/query', { project_id: 'acme/a' })).body.results).toEqual([]);
    expect((await call('/cost/query', { project_id: 'acme/b' })).body.results.map((r: { id: string }) => r.id)).toEqual([theirs]);
    await call('/cost/purge', { project_id: 'acme/b', query: { $expr: { $eq: [{ $literal: theirs }, { $getField: 'id' }] } } });
    expect((await call('/cost/query', { project_id: 'acme/b' })).body.results).toEqual([]);
  });

  it('refuses purges that do not select by id, deleting nothing', async () => {
    await call('/cost/create', { project_id: 'acme/keep', costs: { m: price(1, 1) } });
    const before = storedPrices();
    for (const expr of [
      { $eq: [{ $getField: 'llm_id' }, { $literal: 'm' }] },
      { $gt: [{ $getField: 'id' }, { $literal: '' }] },
      { $in: [{ $getField: 'id' }, []] },
      { $in: [{ $getField: 'llm_id' }, [{ $literal: 'm' }]] },
      { $in: [{ $getField: 'id' }, [{ $literal: 1 }]] },
      { $in: [{ $getField: 'id' }, { $literal: ['a'] }] },
    ]) {
      const res = await call('/cost/purge', { project_id: 'acme/keep', query: { $expr: expr } });
      expect(res.status, JSON.stringify(expr)).toBe(400);
      expect(res.body.reason).toMatch(/^Can only purge costs by id/);
    }
    expect((await call('/cost/purge', { project_id: 'acme/keep' })).status).toBe(422);
    // A query that breaks the $expr grammar (an empty $or) is a 422 with its loc, as in every query.
    const empty = await call('/cost/purge', { project_id: 'acme/keep', query: { $expr: { $or: [] } } });
    expect(empty.status).toBe(422);
    expect(empty.body.detail[0].loc).toEqual(['body', 'query', '$expr', '$or']);
    expect(storedPrices()).toEqual(before);
  });

  it('answers 400, 403 and 422 for bad input, storing nothing', async () => {
    const before = storedPrices();
    const cases: Array<[unknown, number, RegExp?]> = [
      [{ project_id: project, costs: { m: price(-1, 1) } }, 400, /prompt_token_cost of "m" must be a finite number of at least 0, got -1/],
      [{ project_id: project, costs: { m: price(1, 1, { effective_date: 'yesterday' }) } }, 400, /effective_date of "m" must be an ISO 8601 date-time/],
      [{ project_id: project, costs: { '': price(1, 1) } }, 400, /llm_id must have 1 to 256 characters, got 0/],
      [{ project_id: project, costs: { ['x'.repeat(257)]: price(1, 1) } }, 400, /got 257/],
      [{ project_id: project, costs: { ok: price(1, 1), bad: price(1, -2) } }, 400, /completion_token_cost of "bad"/],
      [{ project_id: 'no-slash', costs: {} }, 400],
      [{ project_id: project, costs: { m: { prompt_token_cost: 1 } } }, 422],
      [{ project_id: project, costs: { m: price(1, 1, { currency: 'USD' }) } }, 422],
      [{ project_id: project, costs: { m: price(1, 1, { provider_id: '' }) } }, 422],
      [{ project_id: project, costs: [price(1, 1)] }, 422],
      [{ project_id: project, costs: { m: price('1' as never, 1) } }, 422],
      [{ project_id: project }, 422],
      [{ project_id: project, costs: {}, extra: 1 }, 422],
      [{ project_id: project, costs: Object.fromEntries(Array.from({ length: MAX_COSTS_PER_CREATE + 1 }, (_, i) => [`m${i}`, price(1, 1)])) }, 422],
    ];
    for (const [body, status, reason] of cases) {
      const res = await call('/cost/create', body);
      expect(res.status, JSON.stringify(body).slice(0, 100)).toBe(status);
      if (reason !== undefined) expect(res.body.reason).toMatch(reason);
    }
    // JSON text past the float range (Infinity once parsed) is not a number the schema takes.
    const infinite = await call('/cost/create', `{"project_id": "${project}", "costs": {"m": {"prompt_token_cost": 1e400, "completion_token_cost": 1}}}`);
    expect(infinite.status).toBe(422);
    expect(JSON.stringify(infinite.body.detail)).toContain('prompt_token_cost');
    expect((await call('/cost/create', { project_id: project, costs: { m: price(1, 1) } }, NARROW)).status).toBe(403);
    expect((await call('/cost/query', { project_id: project }, NARROW)).status).toBe(403);
    expect((await call('/cost/purge', { project_id: project, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: 'x' }] } } }, NARROW)).status).toBe(403);
    expect((await call('/cost/query', { project_id: project }, { username: 'dev', password: 'wrong' })).status).toBe(401);
    expect((await call('/cost/query', { project_id: project, fields: ['nope'] })).status).toBe(400);
    expect((await call('/cost/query', { project_id: project, query: { $expr: { $eq: [{ $getField: 'nope' }, { $literal: 1 }] } } })).status).toBe(400);
    expect((await call('/cost/query', { project_id: project, limit: -1 })).status).toBe(422);
    expect(storedPrices()).toEqual(before);
    // The maximum count is taken.
    const most = Object.fromEntries(Array.from({ length: MAX_COSTS_PER_CREATE }, (_, i) => [`bulk-${i}`, price(1, 1)]));
    expect((await call('/cost/create', { project_id: 'acme/bulk', costs: most })).body.ids).toHaveLength(MAX_COSTS_PER_CREATE);
  });
});

describe('include_costs with a project\'s own prices', () => {
  const CALL_ID = '0190c0de-0000-7000-8000-0000000000c1';
  const OTHER_CALL_ID = '0190c0de-0000-7000-8000-0000000000c2';
  const startedAt = '2026-03-01T00:00:00.000000Z';
  const usage = {
    'gpt-4o': { prompt_tokens: 1000, completion_tokens: 100 },
    'gpt-4o-mini': { prompt_tokens: 1000, completion_tokens: 100 },
    'my-model': { input_tokens: 10, output_tokens: 20 },
    'future-model': { prompt_tokens: 1, completion_tokens: 1 },
    ['__proto__']: { prompt_tokens: 4, completion_tokens: 0 },
  };
  const completeCall = (projectId: string, id: string) => ({
    batch: [
      { mode: 'start', req: { start: { project_id: projectId, id, trace_id: '0190c0de-0000-7000-8000-0000000000f0', op_name: 'llm', started_at: startedAt, attributes: {}, inputs: {} } } },
      { mode: 'end', req: { end: { project_id: projectId, id, ended_at: '2026-03-01T00:00:01Z', summary: { usage } } } },
    ],
  });
  const costsOf = async (projectId: string, id: string) => {
    const read = await call('/call/read', { project_id: projectId, id, include_costs: true });
    expect(read.status).toBe(200);
    return read.body.call.summary.weave.costs;
  };

  beforeAll(async () => {
    expect((await call('/call/upsert_batch', completeCall(PROJECT, CALL_ID))).status).toBe(200);
    expect((await call('/call/upsert_batch', completeCall('acme/untouched', OTHER_CALL_ID))).status).toBe(200);
    const created = await call('/cost/create', {
      project_id: PROJECT,
      costs: {
        // In effect at the call's start: taken before the list price.
        'gpt-4o': price(0.01, 0.02, { effective_date: '2025-06-01T00:00:00Z' }),
        // Only after the call started: the list price, in effect then, wins.
        'gpt-4o-mini': price(9, 9, { effective_date: '2027-01-01T00:00:00Z' }),
        'my-model': price(0.5, 0.25, { effective_date: '2026-01-01T00:00:00Z', provider_id: 'acme' }),
        // Nothing in effect at the start: the latest price there is.
        'future-model': price(3, 4, { effective_date: '2030-01-01T00:00:00Z' }),
        // A model name that is also Object.prototype's accessor.
        ['__proto__']: price(0.5, 0, { effective_date: '2020-01-01T00:00:00Z' }),
      },
    });
    expect(created.status).toBe(200);
    // An older price of my-model, and a newer one not yet in effect.
    await call('/cost/create', { project_id: PROJECT, costs: { 'my-model': price(7, 7, { effective_date: '2025-01-01T00:00:00Z' }) } });
    await call('/cost/create', { project_id: PROJECT, costs: { 'my-model': price(8, 8, { effective_date: '2026-06-01T00:00:00Z' }) } });
  });

  it('prices each model by the price in effect when the call started, a project\'s before the list price', async () => {
    const costs = await costsOf(PROJECT, CALL_ID);
    expect(costs['gpt-4o']).toMatchObject({
      prompt_token_cost: 0.01,
      completion_token_cost: 0.02,
      prompt_tokens_total_cost: 10,
      completion_tokens_total_cost: 2,
      pricing_level: 'project',
      pricing_level_id: PROJECT,
      created_by: 'dev',
      effective_date: '2025-06-01T00:00:00.000000Z',
      provider_id: 'default',
    });
    expect(costs['gpt-4o-mini']).toMatchObject({
      prompt_token_cost: PRICE_TABLE.get('gpt-4o-mini')!.promptTokenCost,
      pricing_level: 'default',
      pricing_level_id: 'default',
    });
    expect(costs['my-model']).toMatchObject({
      prompt_tokens: 10,
      completion_tokens: 20,
      prompt_tokens_total_cost: 5,
      completion_tokens_total_cost: 5,
      provider_id: 'acme',
      effective_date: '2026-01-01T00:00:00.000000Z',
    });
    expect(costs['future-model']).toMatchObject({ prompt_token_cost: 3, effective_date: '2030-01-01T00:00:00.000000Z' });
    expect(Object.hasOwn(costs, '__proto__')).toBe(true);
    expect(costs['__proto__']).toMatchObject({ prompt_tokens: 4, prompt_tokens_total_cost: 2 });
  });

  it('gives calls queries the same costs, and other projects only the list prices', async () => {
    const streamed = await call('/calls/query', { project_id: PROJECT, include_costs: true, filter: { call_ids: [CALL_ID] } });
    expect(streamed.body.calls[0].summary.weave.costs).toEqual(await costsOf(PROJECT, CALL_ID));
    const untouched = await costsOf('acme/untouched', OTHER_CALL_ID);
    expect(Object.keys(untouched).sort()).toEqual(['gpt-4o', 'gpt-4o-mini']);
    expect(untouched['gpt-4o']).toMatchObject({ pricing_level: 'default', prompt_token_cost: PRICE_TABLE.get('gpt-4o')!.promptTokenCost });
  });

  it('goes back to the list price once the project price is purged', async () => {
    const ids = (await call('/cost/query', { project_id: PROJECT, fields: ['id'], query: { $expr: { $eq: [{ $getField: 'llm_id' }, { $literal: 'gpt-4o' }] } } })).body.results;
    expect(ids).toHaveLength(1);
    await call('/cost/purge', { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: ids[0].id }] } } });
    expect((await costsOf(PROJECT, CALL_ID))['gpt-4o']).toMatchObject({ pricing_level: 'default' });
  });
});
