/**
 * `table/query` `sort_by` as the hosted service sorts (`tables.py` `table_query_stream` ->
 * `OrderField.as_sql`: exists desc, then double, then string; `orm.py` `quote_json_path_parts`:
 * numeric parts are list indexes), and sort fields that SQLite's JSON paths could not take.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/tables-sort';

describe('table/query sort_by', () => {
  let server: TestServer;
  const call = (path: string, body: unknown) => post(server.url, path, body);
  const create = async (rows: unknown[]): Promise<string> => {
    const res = await call('/table/create', { table: { project_id: PROJECT, rows } });
    expect(res.status).toBe(200);
    return res.body.digest as string;
  };
  const order = async (digest: string, field: string, direction: 'asc' | 'desc') => {
    const res = await call('/table/query', { project_id: PROJECT, digest, sort_by: [{ field, direction }] });
    return { status: res.status, body: res.body, indexes: res.status === 200 ? res.body.rows.map((r: { original_index: number }) => r.original_index) : null };
  };

  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it('puts rows without the field (or with null) last in both directions, as the service does', async () => {
    const digest = await create([{ other: 1 }, { n: 2 }, { n: null }, { n: 1 }]);
    // Service: exists DESC first, so rows 1 and 3 lead in either direction. The absent ones then
    // tie on the number and go by their text (a JSON null reads 'null', a missing value ''), in the
    // sort's direction, as for calls (query/README.md).
    expect((await order(digest, 'n', 'asc')).indexes).toEqual([3, 1, 0, 2]);
    expect((await order(digest, 'n', 'desc')).indexes).toEqual([1, 3, 2, 0]);
  });

  it('sorts numeric text numerically (toFloat64OrNull before the text key)', async () => {
    const digest = await create([{ n: '10' }, { n: '9' }, { n: '100' }]);
    expect((await order(digest, 'n', 'asc')).indexes).toEqual([1, 0, 2]);
  });

  it('reads a numeric sort part as a list index (`scores.0`)', async () => {
    const digest = await create([{ scores: [3] }, { scores: [1] }, { scores: [2] }]);
    expect((await order(digest, 'scores.0', 'asc')).indexes).toEqual([1, 2, 0]);
  });

  it('answers a sort field holding a NUL without a 500 (SQLite: "bad JSON path")', async () => {
    const digest = await create([{ a: 1 }, { a: 2 }]);
    expect((await order(digest, 'a\u0000b', 'asc')).status).not.toBe(500);
  });

  it('answers a sort field ending in a backslash without a 500 (the quoted label never closes)', async () => {
    const digest = await create([{ a: 1 }, { a: 2 }]);
    expect((await order(digest, 'a\\', 'asc')).status).not.toBe(500);
  });

  it('sorts on a key holding a backslash', async () => {
    const digest = await create([{ 'a\\b': 2 }, { 'a\\b': 1 }]);
    const res = await order(digest, 'a\\b', 'asc');
    expect(res.status).toBe(200);
    expect(res.indexes).toEqual([1, 0]);
  });
});
