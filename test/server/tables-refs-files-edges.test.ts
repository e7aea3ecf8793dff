/**
 * Tables, refs and files against the hosted service's semantics (cited per test).
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/tables-refs-files-tables';
const REF = `weave:///${PROJECT}`;

function digestOf(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y');
}

describe('tables, refs and files as the service answers them', () => {
  let server: TestServer;
  const call = (path: string, body: unknown) => post(server.url, path, body);
  const obj = async (objectId: string, val: unknown) => {
    const res = await call('/obj/create', { obj: { project_id: PROJECT, object_id: objectId, val } });
    expect(res.status).toBe(200);
    return res.body.digest as string;
  };

  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => server.close());

  // sqlite_trace_server.py table_update: insert checks 0 <= index <= len, pop 0 <= index < len,
  // applied in order; digest = compute_table_digest (hex sha256 of the row digests joined).
  // Expected digest computed with CPython over the same steps.
  it('applies insert, pop and append in order, digests as the service', async () => {
    const created = await call('/table/create', { table: { project_id: PROJECT, rows: [{ i: 0 }, { i: 1 }, { i: 2 }] } });
    expect(created.status).toBe(200);
    const updated = await call(
      '/table/update',
      `{"project_id":"${PROJECT}","base_digest":"${created.body.digest}","updates":[{"insert":{"index":0,"row":{"i":9}}},{"pop":{"index":2}},{"append":{"row":{"i":1.5}}}]}`,
    );
    expect(updated.status).toBe(200);
    expect(updated.body.digest).toBe('7b59d94b4e6d00dc0b879d09439991ce5786968c38ab1736041491b3a5689f86');
    expect(updated.body.updated_row_digests).toEqual([digestOf('{"i": 9}'), digestOf('{"i": 1}'), digestOf('{"i": 1.5}')]);
    const rows = await call('/table/query', { project_id: PROJECT, digest: updated.body.digest });
    expect(rows.body.rows.map((r: { val: { i: number }; original_index: number }) => [r.val.i, r.original_index])).toEqual([
      [9, 0],
      [0, 1],
      [2, 2],
      [1.5, 3],
    ]);
    const stats = await call('/table/query_stats_batch', { project_id: PROJECT, digests: [updated.body.digest], include_storage_size: true });
    const expectedSize = ['{"i": 9}', '{"i": 0}', '{"i": 2}', '{"i": 1.5}'].reduce((n, t) => n + t.length, 0);
    expect(stats.body.tables).toEqual([{ digest: updated.body.digest, count: 4, storage_size_bytes: expectedSize }]);
  });

  it('filters by row digests, then sorts and pages the rest', async () => {
    const rows = [{ s: 3 }, { s: 1 }, { s: 2 }, { s: 5 }, { s: 4 }];
    const created = await call('/table/create', { table: { project_id: PROJECT, rows } });
    const keep = [0, 1, 3, 4].map((i) => created.body.row_digests[i]);
    const res = await call('/table/query', {
      project_id: PROJECT,
      digest: created.body.digest,
      filter: { row_digests: keep },
      sort_by: [{ field: 's', direction: 'desc' }],
      offset: 1,
      limit: 2,
    });
    expect(res.body.rows.map((r: { val: { s: number } }) => r.val.s)).toEqual([4, 3]);
    // Offset alone, in table order, past the end: nothing.
    const past = await call('/table/query', { project_id: PROJECT, digest: created.body.digest, offset: 99 });
    expect(past.body.rows).toEqual([]);
  });

  it('reads a row through a table ref, with %-escaped key names and negative indexes', async () => {
    const created = await call('/table/create', `{"table":{"project_id":"${PROJECT}","rows":[{"k/é":[1.0,2,{"x":3.50}]}]}}`);
    const row = created.body.row_digests[0];
    const ds = await obj('ds', { _type: 'Dataset', rows: `${REF}/table/${created.body.digest}` });
    const res = await call('/refs/read_batch', {
      refs: [`${REF}/object/ds:${ds}/attr/rows/id/${row}/key/k%2F%C3%A9/index/-1`, `${REF}/object/ds:${ds}/attr/rows/id/${row}/key/k%2F%C3%A9/index/0`],
    });
    expect(res.status).toBe(200);
    // Row values keep Python's spelling (json.dumps of the parsed row): 3.5 and 1.0.
    expect(res.text).toBe('{"vals":[{"x": 3.5},1.0]}');
  });

  it('answers hostile refs with a 4xx', async () => {
    const digest = await obj('hostile', { a: 1 });
    const longPath = Array.from({ length: 5000 }, () => 'key/a').join('/');
    for (const ref of [
      `${REF}/object/hostile:${digest}/${longPath}`,
      `${REF}/object/hostile:${digest}/index/1.5`,
      `${REF}/object/hostile:${digest}/nope/x`,
      `${REF}/object/hostile:a:b`,
      `${REF}/call/abc`,
      `weave:///acme`,
    ]) {
      const res = await call('/refs/read_batch', { refs: [ref] });
      expect(res.status, ref.slice(0, 120)).toBeGreaterThanOrEqual(400);
      expect(res.status, ref.slice(0, 120)).toBeLessThan(500);
    }
  });

  // sqlite_trace_server.py file_create: digest = compute_file_digest(content) = bytes_digest.
  it('stores an empty file under the digest of no bytes and serves it back', async () => {
    const form = new FormData();
    form.append('project_id', PROJECT);
    form.append('file', new Blob([new Uint8Array(0)]), 'empty.bin');
    const created = await fetch(`${server.url}/file/create`, { method: 'POST', headers: { authorization: basicAuth({ username: 'dev', password: 'pw' }) }, body: form });
    expect(created.status).toBe(200);
    const { digest } = (await created.json()) as { digest: string };
    expect(digest).toBe('47DEQpj8HBSaXYTImWX5JCeuQeRkm5NMpJWZG3hSuFU');
    const content = await fetch(`${server.url}/file/content`, {
      method: 'POST',
      headers: { authorization: basicAuth({ username: 'dev', password: 'pw' }), 'content-type': 'application/json' },
      body: JSON.stringify({ project_id: PROJECT, digest }),
    });
    expect(content.status).toBe(200);
    expect((await content.arrayBuffer()).byteLength).toBe(0);
  });
  // A ref through a table that does not hold the row is a 404, also when another ref of the same
  // batch read that row through its own table: one ref's answer never depends on the others.
  it('answers a table-row ref the same whether or not another ref of the batch read that row', async () => {
    const t1 = await call('/table/create', { table: { project_id: PROJECT, rows: [{ only: 'in-t1' }] } });
    const t2 = await call('/table/create', { table: { project_id: PROJECT, rows: [{ other: 1 }] } });
    const row = t1.body.row_digests[0];
    const viaT2 = `${REF}/table/${t2.body.digest}/id/${row}`;
    const alone = await call('/refs/read_batch', { refs: [viaT2] });
    const batched = await call('/refs/read_batch', { refs: [`${REF}/table/${t1.body.digest}/id/${row}`, viaT2] });
    expect(alone.status).toBe(404);
    expect(batched.status).toBe(404);
    expect(batched.body.reason).toBe(alone.body.reason);
  });
  it('answers odd sort fields, ids and digests without a 500', async () => {
    const created = await call('/table/create', { table: { project_id: PROJECT, rows: [{ 'a"b': 1, 'c[0]': 2, $: 3, 'x y': 4 }, {}] } });
    for (const field of ['a"b', 'c[0]', '$', 'x y', "a'b", '*', 'a.b.c.d.e.f.g.h.i.j.k.0.1.2.3.4.5.6.7.8.9.10.11', '0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0']) {
      const res = await call('/table/query', { project_id: PROJECT, digest: created.body.digest, sort_by: [{ field, direction: 'asc' }] });
      expect(res.status, field).toBe(200);
      expect(res.body.rows, field).toHaveLength(2);
    }
    const bodies: Array<[string, unknown]> = [
      ['/obj/read', { project_id: PROJECT, object_id: 'x', digest: "' OR 1=1 --" }],
      ['/obj/read', { project_id: PROJECT, object_id: 'x', digest: 'v999999999999999' }],
      ['/obj/read', { project_id: PROJECT, object_id: 'x', digest: 'v9999999999999999999999' }],
      ['/objs/query', { project_id: PROJECT, filter: { object_ids: Array.from({ length: 50000 }, (_, i) => `id${i}`) } }],
      ['/objs/query', { project_id: PROJECT, sort_by: [{ field: 'val', direction: 'asc' }] }],
      ['/obj/delete', { project_id: PROJECT, object_id: 'never', digests: ['v0'] }],
      ['/table/query_stats_batch', { project_id: PROJECT, digests: [] }],
      ['/table/create_from_digests', { project_id: PROJECT, row_digests: created.body.row_digests.concat(created.body.row_digests) }],
      ['/table/update', { project_id: PROJECT, base_digest: created.body.digest, updates: [{ pop: { index: -1 } }] }],
      ['/table/update', { project_id: PROJECT, base_digest: created.body.digest, updates: [{ insert: { index: 3, row: {} } }] }],
      ['/file/content', { project_id: PROJECT, digest: '../../etc/passwd' }],
    ];
    for (const [path, body] of bodies) {
      const res = await call(path, body);
      expect(res.status, `${path} ${JSON.stringify(body).slice(0, 100)}`).toBeLessThan(500);
    }
  });
});
