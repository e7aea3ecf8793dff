import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type CallbridgeClient } from '../../src/client/index.js';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/tables';

/** The service's row digest of a row's Python `json.dumps` text, written out by hand in each test. */
function rowDigest(pythonText: string): string {
  return createHash('sha256').update(pythonText).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y');
}

/** The service's table digest: hex SHA-256 of the row digests concatenated. */
function tableDigest(rowDigests: readonly string[]): string {
  return createHash('sha256').update(rowDigests.join('')).digest('hex');
}

const EMPTY_TABLE = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

describe('tables over HTTP', () => {
  let server: TestServer;
  let client: CallbridgeClient;
  const call = (path: string, body: unknown, credentials?: { username: string; password: string }) =>
    post(server.url, path, body, credentials);
  const countRows = (table: 'tables' | 'table_rows') => {
    const db = openSqlite(server.dbPath, { readonly: true });
    try {
      return (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
    } finally {
      db.close();
    }
  };
  const createTable = async (rows: unknown[], project = PROJECT) => {
    const res = await call('/table/create', { table: { project_id: project, rows } });
    expect(res.status).toBe(200);
    return res.body as { digest: string; row_digests: string[] };
  };

  beforeAll(async () => {
    server = await startTestServer({ users: [{ username: 'narrow', password: 'pw2', entities: ['acme'] }] });
    client = createClient({ baseUrl: server.url, username: 'dev', password: 'pw' });
  });
  afterAll(async () => {
    await client.close();
    await server.close();
  });

  describe('digests, as the hosted service computes them', () => {
    // Each expected text is what Python's json.dumps(json.loads(<row text>), sort_keys=True) prints
    // (the service's compute_row_digest; checked against CPython): keys sorted by code point,
    // ", " and ": ", ASCII escapes, and numbers as Python reads them (1.0 and 1e2 are floats,
    // 12345678901234567890 an exact int).
    const vectors: Array<[body: string, python: string, digest: string]> = [
      [
        '{"b": 1.0, "a": "é", "2": [1e2, -0, 12345678901234567890]}',
        '{"2": [100.0, 0, 12345678901234567890], "a": "\\u00e9", "b": 1.0}',
        'ZH4zQerLJBgMm0pRUbsVZ0ViYeEWHk2K7UR3yz467zI',
      ],
      ['{"x":1e-5,"y":1.5e16,"z":"\\ud83d\\ude00"}', '{"x": 1e-05, "y": 1.5e+16, "z": "\\ud83d\\ude00"}', '3TmHXPxlIeuf2SPWXtYYR4t9xeg5YlXd0T5thpsfCUE'],
      ['{"a": 1, "b": 2, "a": 3}', '{"a": 3, "b": 2}', 'NGAN0oenYlFT0u43UszclwqQFmy5QISbw7XnwXM9B6Y'],
      ['{ }', '{}', 'RBNvo1WzZ4oRRq0W9XhknpT7T8If536DEMBg9hyqY4o'],
      // Code point order: an astral key after U+FFFF (UTF-16 order would put it before).
      [
        '{"\\ud83d\\ude00": 2, "\\uffff": 1, "a": 4, "B": 3}',
        '{"B": 3, "a": 4, "\\uffff": 1, "\\ud83d\\ude00": 2}',
        '4LFQr6IBgFrWTNDN1YgpECQbi5jstukbla5E6nKAe34',
      ],
    ];

    it('hashes each row as Python prints it, and the table as hex SHA-256 of the row digests', async () => {
      for (const [, python, digest] of vectors) expect(rowDigest(python)).toBe(digest);
      const rows = vectors.map(([body]) => body).join(',\n  ');
      const res = await call('/table/create', `{"table": {"project_id": "${PROJECT}", "rows": [\n  ${rows}\n]}}`);
      expect(res.status).toBe(200);
      const digests = vectors.map(([, , digest]) => digest);
      expect(res.body).toEqual({ digest: 'ee3d4efe3525e64d09c896a2ea67d900bafbc2f1e9ae3554a8ec6b7441abb327', row_digests: digests });
      expect(tableDigest(digests)).toBe(res.body.digest);

      // Stored as the hashed text, so a stored row checks against its digest.
      const db = openSqlite(server.dbPath, { readonly: true });
      try {
        const stored = db.prepare('SELECT val, size_bytes FROM table_rows WHERE project_id = ? AND digest = ?').get(PROJECT, digests[0]);
        expect(stored).toEqual({ val: vectors[0]![1], size_bytes: vectors[0]![1].length });
      } finally {
        db.close();
      }
      const read = await call('/table/query', { project_id: PROJECT, digest: res.body.digest });
      expect(read.body.rows[0]).toEqual({ digest: digests[0], val: { b: 1, a: 'é', 2: [100, 0, 12345678901234567890] }, original_index: 0 });
    });

    it('gives an empty table the digest of nothing, and the same rows the same digests', async () => {
      expect(await createTable([])).toEqual({ digest: EMPTY_TABLE, row_digests: [] });
      const first = await createTable([{ q: 'one' }, { q: 'two' }]);
      const again = await client.tableCreate({ table: { project_id: PROJECT, rows: [{ q: 'one' }, { q: 'two' }] } });
      expect(again).toEqual(first);
      expect(first.row_digests).toEqual([rowDigest('{"q": "one"}'), rowDigest('{"q": "two"}')]);
    });

    it('checks a client-computed expected_digest (409 on a mismatch, nothing stored)', async () => {
      const digest = tableDigest([rowDigest('{"e": 1}')]);
      const ok = await call('/table/create', { table: { project_id: PROJECT, rows: [{ e: 1 }], expected_digest: digest } });
      expect(ok.body.digest).toBe(digest);
      const before = countRows('table_rows');
      const bad = await call('/table/create', { table: { project_id: PROJECT, rows: [{ e: 2 }], expected_digest: digest } });
      expect(bad.status).toBe(409);
      expect(bad.body.reason).toContain('digest');
      expect(countRows('table_rows')).toBe(before);
    });
  });

  it('reads rows in table order, filtered, sorted and paged', async () => {
    const rows = [{ n: 3, s: 'c' }, { n: 1, s: 'a' }, { n: 2, s: 'b' }, { n: 1, s: 'a' }];
    const { digest, row_digests: digests } = await createTable(rows);
    const all = await client.tableQuery({ project_id: PROJECT, digest });
    expect(all.rows.map((row) => [row.val.n, row.original_index])).toEqual([[3, 0], [1, 1], [2, 2], [1, 3]]);
    expect(all.rows.map((row) => row.digest)).toEqual(digests);

    const sorted = await client.tableQuery({ project_id: PROJECT, digest, sort_by: [{ field: 'n', direction: 'desc' }] });
    expect(sorted.rows.map((row) => row.original_index)).toEqual([0, 2, 1, 3]);
    const paged = await client.tableQuery({ project_id: PROJECT, digest, limit: 2, offset: 1 });
    expect(paged.rows.map((row) => row.original_index)).toEqual([1, 2]);
    const filtered = await client.tableQuery({ project_id: PROJECT, digest, filter: { row_digests: [digests[1]!] } });
    expect(filtered.rows.map((row) => row.original_index)).toEqual([1, 3]);

    const stream = await call('/table/query_stream', { project_id: PROJECT, digest, limit: 2 });
    expect(stream.headers.get('content-type')).toContain('application/jsonl');
    expect(stream.text.trimEnd().split('\n').map((line) => JSON.parse(line).original_index)).toEqual([0, 1]);

    expect(await client.tableQueryStats({ project_id: PROJECT, digest })).toEqual({ count: 4 });
    const size = ['{"n": 3, "s": "c"}', '{"n": 1, "s": "a"}', '{"n": 2, "s": "b"}', '{"n": 1, "s": "a"}'].join('').length;
    expect(await client.tableQueryStatsBatch({ project_id: PROJECT, digests: [EMPTY_TABLE.replace('e', 'f'), digest, digest], include_storage_size: true })).toEqual({
      tables: [{ digest, count: 4, storage_size_bytes: size }],
    });
  });

  it('sorts on nested paths and refuses malformed sort fields', async () => {
    const { digest } = await createTable([{ m: { k: 'b' } }, { m: { k: 'a' } }, { other: 1 }]);
    const sorted = await client.tableQuery({ project_id: PROJECT, digest, sort_by: [{ field: 'm.k', direction: 'asc' }] });
    // Rows that have the value first, in either direction, as the service sorts.
    expect(sorted.rows.map((row) => row.original_index)).toEqual([1, 0, 2]);
    const quoted = await call('/table/query', { project_id: PROJECT, digest, sort_by: [{ field: 'a."b', direction: 'asc' }] });
    expect(quoted.status).toBe(200);
    for (const field of ['m..k', '.m', 'm.']) {
      const res = await call('/table/query', { project_id: PROJECT, digest, sort_by: [{ field, direction: 'asc' }] });
      expect(res.status, field).toBe(400);
      expect(res.body.reason).toContain('sort field');
    }
  });

  it('answers no rows and a count of 0 for a table that does not exist, as the service does', async () => {
    const missing = 'f'.repeat(64);
    expect((await call('/table/query', { project_id: PROJECT, digest: missing })).body).toEqual({ rows: [] });
    expect((await call('/table/query_stream', { project_id: PROJECT, digest: missing })).text).toBe('');
    expect((await call('/table/query_stats', { project_id: PROJECT, digest: missing })).body).toEqual({ count: 0 });
    expect((await call('/table/query_stats_batch', { project_id: PROJECT })).body).toEqual({ tables: [] });
  });

  it('updates a table into a new one: append, insert and pop, in order', async () => {
    const base = await createTable([{ i: 0 }, { i: 1 }]);
    const res = await client.tableUpdate({
      project_id: PROJECT,
      base_digest: base.digest,
      updates: [{ append: { row: { i: 2 } } }, { insert: { index: 0, row: { i: -1 } } }, { pop: { index: 2 } }],
    });
    const [d0, d1] = base.row_digests as [string, string];
    const d2 = rowDigest('{"i": 2}');
    const dMinus = rowDigest('{"i": -1}');
    expect(res).toEqual({ digest: tableDigest([dMinus, d0, d2]), updated_row_digests: [d2, dMinus, d1] });
    const read = await client.tableQuery({ project_id: PROJECT, digest: res.digest });
    expect(read.rows.map((row) => row.val.i)).toEqual([-1, 0, 2]);
    // The base table is unchanged.
    expect((await client.tableQueryStats({ project_id: PROJECT, digest: base.digest })).count).toBe(2);
    // Rows in an update keep their text too: 1.0 is a float.
    const floats = await call('/table/update', `{"project_id":"${PROJECT}","base_digest":"${EMPTY_TABLE}","updates":[{"append":{"row":{"f":1.0}}}]}`);
    expect(floats.body.updated_row_digests).toEqual([rowDigest('{"f": 1.0}')]);
  });

  it('refuses an update out of range or on a missing table, storing nothing', async () => {
    const base = await createTable([{ u: 0 }]);
    const tablesBefore = countRows('tables');
    const rowsBefore = countRows('table_rows');
    for (const updates of [[{ append: { row: { u: 'new' } } }, { pop: { index: 5 } }], [{ insert: { index: -1, row: { u: 1 } } }], [{ insert: { index: 2, row: { u: 1 } } }]]) {
      const res = await call('/table/update', { project_id: PROJECT, base_digest: base.digest, updates });
      expect(res.status).toBe(400);
      expect(res.body.reason).toMatch(/out of range/);
    }
    const missing = await call('/table/update', { project_id: PROJECT, base_digest: '0'.repeat(64), updates: [{ append: { row: { u: 2 } } }] });
    expect(missing.status).toBe(404);
    expect(countRows('tables')).toBe(tablesBefore);
    expect(countRows('table_rows')).toBe(rowsBefore);
  });

  it('creates a table from stored rows, and refuses rows the project does not hold', async () => {
    const source = await createTable([{ c: 1 }, { c: 2 }]);
    const reversed = [...source.row_digests].reverse();
    const res = await client.tableCreateFromDigests({ project_id: PROJECT, row_digests: reversed });
    expect(res).toEqual({ digest: tableDigest(reversed) });
    expect((await client.tableQuery({ project_id: PROJECT, digest: res.digest })).rows.map((row) => row.val.c)).toEqual([2, 1]);

    const unknown = rowDigest('{"never": "stored"}');
    const missing = await call('/table/create_from_digests', { project_id: PROJECT, row_digests: [reversed[0], unknown] });
    expect(missing.status).toBe(400);
    expect(missing.body.reason).toContain(unknown);
    // Another project's rows are not this project's.
    const elsewhere = await call('/table/create_from_digests', { project_id: 'acme/other', row_digests: reversed });
    expect(elsewhere.status).toBe(400);
    const mismatch = await call('/table/create_from_digests', { project_id: PROJECT, row_digests: reversed, expected_digest: EMPTY_TABLE });
    expect(mismatch.status).toBe(409);
  });

  it('refuses malformed bodies with a 422 naming the field', async () => {
    const cases: Array<[path: string, body: unknown, loc: Array<string | number>]> = [
      ['/table/create', { table: { project_id: PROJECT, rows: [{ ok: 1 }, [1, 2]] } }, ['body', 'table', 'rows', 1]],
      ['/table/create', { table: { project_id: PROJECT, rows: [{ ok: 1 }, 'text'] } }, ['body', 'table', 'rows', 1]],
      ['/table/create', { table: { project_id: PROJECT, rows: [] }, extra: 1 }, ['body']],
      ['/table/create', { table: { project_id: PROJECT } }, ['body', 'table']],
      ['/table/query', { project_id: PROJECT, digest: 'not-a-digest' }, ['body', 'digest']],
      ['/table/query', { project_id: PROJECT, digest: EMPTY_TABLE, limt: 3 }, ['body']],
      ['/table/query', { project_id: PROJECT, digest: EMPTY_TABLE, filter: { row_digest: [] } }, ['body', 'filter']],
      ['/table/query', { project_id: PROJECT, digest: EMPTY_TABLE, limit: -1 }, ['body', 'limit']],
      ['/table/update', { project_id: PROJECT, base_digest: EMPTY_TABLE, updates: [{ append: { row: { a: 1 } }, pop: { index: 0 } }] }, ['body', 'updates', 0]],
      ['/table/update', { project_id: PROJECT, base_digest: EMPTY_TABLE, updates: [{ pop: { index: 1.5 } }] }, ['body', 'updates', 0]],
      ['/table/create_from_digests', { project_id: PROJECT, row_digests: ['short'] }, ['body', 'row_digests', 0]],
      ['/table/query_stats_batch', { project_id: PROJECT, digests: ['x'] }, ['body', 'digests', 0]],
    ];
    for (const [path, body, loc] of cases) {
      const res = await call(path, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.detail.some((issue: { loc: unknown[] }) => JSON.stringify(issue.loc).startsWith(JSON.stringify(loc).slice(0, -1))), JSON.stringify(res.body.detail)).toBe(true);
    }
    const notJson = await call('/table/create', '{"table": {"project_id": "acme/tables", "rows": [');
    expect(notJson.status).toBe(400);
  });

  it('refuses rows nested too deeply or holding numbers past the float range', async () => {
    const deep = `{"table":{"project_id":"${PROJECT}","rows":[{"d":${'['.repeat(600)}${']'.repeat(600)}}]}}`;
    const res = await call('/table/create', deep);
    expect(res.status).toBe(400);
    expect(res.body.reason).toMatch(/table\.rows\[0\].*nested deeper than 500/);
    const huge = await call('/table/create', `{"table":{"project_id":"${PROJECT}","rows":[{"x":1e400}]}}`);
    expect(huge.status).toBe(400);
    expect(huge.body.reason).toContain('out of range');
  });

  it('authorizes the project of every table route', async () => {
    const narrow = { username: 'narrow', password: 'pw2' };
    const { digest } = await createTable([{ secret: 1 }], 'other/tables');
    const bodies: Array<[string, unknown]> = [
      ['/table/create', { table: { project_id: 'other/tables', rows: [] } }],
      ['/table/update', { project_id: 'other/tables', base_digest: digest, updates: [] }],
      ['/table/create_from_digests', { project_id: 'other/tables', row_digests: [] }],
      ['/table/query', { project_id: 'other/tables', digest }],
      ['/table/query_stream', { project_id: 'other/tables', digest }],
      ['/table/query_stats', { project_id: 'other/tables', digest }],
      ['/table/query_stats_batch', { project_id: 'other/tables', digests: [digest] }],
    ];
    for (const [path, body] of bodies) {
      const res = await call(path, body, narrow);
      expect(res.status, path).toBe(403);
    }
    // A table's rows are its own project's: the same digest in another project is no table.
    expect((await call('/table/query', { project_id: PROJECT, digest }, narrow)).body).toEqual({ rows: [] });
  });

  it('streams tables from an in-memory database too (read at once there)', async () => {
    const memory = await startTestServer({ dbPath: ':memory:' });
    try {
      const created = await post(memory.url, '/table/create', { table: { project_id: PROJECT, rows: [{ m: 1 }, { m: 2 }] } });
      const stream = await post(memory.url, '/table/query_stream', { project_id: PROJECT, digest: created.body.digest });
      expect(stream.text).toBe(
        created.body.row_digests.map((digest: string, index: number) => `{"digest":"${digest}","val":{"m": ${index + 1}},"original_index":${index}}\n`).join(''),
      );
      // Writes go on while nothing holds the connection.
      expect((await post(memory.url, '/table/create', { table: { project_id: PROJECT, rows: [] } })).status).toBe(200);
    } finally {
      await memory.close();
    }
  });

  it('frees a stream slot when a client stops reading, and answers 503 past the cap', async () => {
    const capped = await startTestServer({ maxConcurrentStreams: 1 });
    try {
      const rows = Array.from({ length: 20_000 }, (_, i) => ({ i, pad: 'x'.repeat(100) }));
      const { body } = await post(capped.url, '/table/create', { table: { project_id: PROJECT, rows } });
      const query = { project_id: PROJECT, digest: body.digest };
      const abort = new AbortController();
      const first = await fetch(`${capped.url}/table/query_stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Basic ${Buffer.from('dev:pw').toString('base64')}` },
        body: JSON.stringify(query),
        signal: abort.signal,
      });
      await first.body!.getReader().read();
      const busy = await post(capped.url, '/table/query', query);
      expect(busy.status).toBe(503);
      expect(busy.headers.get('retry-after')).toBe('1');
      // One cap for every streamed answer: a calls query waits for the same slot.
      const calls = await post(capped.url, '/calls/stream_query', { project_id: PROJECT });
      expect(calls.status).toBe(503);
      expect(calls.body.reason).toBe('Too many query answers streaming at once (1); retry shortly');
      abort.abort();
      let status = 0;
      for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        status = (await post(capped.url, '/table/query', { ...query, limit: 1 })).status;
      }
      expect(status).toBe(200);
    } finally {
      await capped.close();
    }
  });

  it('stores a large table in one request and streams it back whole', async () => {
    const rows = Array.from({ length: 50_000 }, (_, i) => ({ i, text: `row ${i % 1000}` }));
    const created = await client.tableCreate({ table: { project_id: PROJECT, rows } });
    expect(created.row_digests).toHaveLength(50_000);
    expect(new Set(created.row_digests).size).toBe(50_000);
    const stream = await call('/table/query_stream', { project_id: PROJECT, digest: created.digest });
    const lines = stream.text.trimEnd().split('\n');
    expect(lines).toHaveLength(50_000);
    expect(JSON.parse(lines[49_999]!)).toMatchObject({ original_index: 49_999, val: { i: 49_999 } });
    const whole = await client.tableQuery({ project_id: PROJECT, digest: created.digest, offset: 49_998 });
    expect(whole.rows.map((row) => row.val.i)).toEqual([49_998, 49_999]);
  }, 60_000);
});
