/**
 * A table row read through `refs/read_batch` carries the row as stored (the text its digest
 * hashes), as `table/query` answers it. The service answers `json.loads(val_dump)`, so an
 * integer past 2^53 stays exact and `1.0` stays a float (clickhouse_trace_server_batched.py
 * `_refs_read_batch_within_project` -> `_table_query_stream`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/refs-fidelity';

describe('refs/read_batch row fidelity', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it('answers a row read by ref with its integers exact and its floats floats, as table/query does', async () => {
    const created = await post(server.url, '/table/create', `{"table":{"project_id":"${PROJECT}","rows":[{"id":12345678901234567891,"score":1.0}]}}`);
    expect(created.status).toBe(200);
    const { digest, row_digests: [row] } = created.body as { digest: string; row_digests: string[] };

    const queried = await post(server.url, '/table/query', { project_id: PROJECT, digest });
    expect(queried.text).toContain('12345678901234567891');
    expect(queried.text).toContain('1.0');

    const read = await post(server.url, '/refs/read_batch', { refs: [`weave:///${PROJECT}/table/${digest}/id/${row}`] });
    expect(read.status).toBe(200);
    expect(read.text).toContain('12345678901234567891');
    expect(read.text).toMatch(/"score": ?1\.0/);
    // Values inside the row keep their spelling too.
    const inside = await post(server.url, '/refs/read_batch', {
      refs: ['score', 'id', 'missing'].map((key) => `weave:///${PROJECT}/table/${digest}/id/${row}/key/${key}`),
    });
    expect(inside.text).toBe('{"vals":[1.0,12345678901234567891,null]}');
  });

  it('answers values deep inside rows with their stored text, through objects and lists, by key and index', async () => {
    const rowText =
      '{"a": {"b": [1.0, {"c": 2.50, "d\\u00e9": [true, null, 1e+20]}, 12345678901234567891]}, "s": "x\\"y", "__proto__": {"p": 3.0}}';
    const created = await post(server.url, '/table/create', `{"table":{"project_id":"${PROJECT}","rows":[${rowText}]}}`);
    expect(created.status, created.text).toBe(200);
    const { digest, row_digests: [row] } = created.body as { digest: string; row_digests: string[] };
    const base = `weave:///${PROJECT}/table/${digest}/id/${row}`;
    const cases: Array<[string, string]> = [
      ['/key/a/key/b/index/0', '1.0'],
      ['/key/a/key/b/index/1/key/c', '2.5'],
      ['/key/a/key/b/index/1/key/d%C3%A9', '[true, null, 1e+20]'],
      ['/key/a/key/b/index/1/key/d%C3%A9/index/-1', '1e+20'],
      ['/key/a/key/b/index/-1', '12345678901234567891'],
      ['/attr/a/attr/b/index/2', '12345678901234567891'],
      ['/key/a/key/b/index/3', 'null'],
      ['/key/a/index/0', 'null'],
      ['/key/a/key/b/key/0', 'null'],
      ['/key/s', '"x\\"y"'],
      ['/key/__proto__/key/p', '3.0'],
    ];
    const read = await post(server.url, '/refs/read_batch', { refs: cases.map(([path]) => base + path) });
    expect(read.status, read.text).toBe(200);
    expect(read.text).toBe(`{"vals":[${cases.map(([, text]) => text).join(',')}]}`);
    // The same values as JSON: what a client parses.
    expect((read.body as { vals: unknown[] }).vals[1]).toBe(2.5);
  });

  it('walks a deeply nested row on its text, through strings holding brackets and quotes', async () => {
    const depth = 200;
    const tricky = '"x\\"]}[{ \\\\"';
    const rowText = `{"a": ${'['.repeat(depth)}${tricky}, 1.0${']'.repeat(depth)}, "z": [2.0]}`;
    const created = await post(server.url, '/table/create', `{"table":{"project_id":"${PROJECT}","rows":[${rowText}]}}`);
    expect(created.status, created.text).toBe(200);
    const { digest, row_digests: [row] } = created.body as { digest: string; row_digests: string[] };
    const base = `weave:///${PROJECT}/table/${digest}/id/${row}/key/a${'/index/0'.repeat(depth - 1)}`;
    const read = await post(server.url, '/refs/read_batch', { refs: [`${base}/index/0`, `${base}/index/1`, `${base}/index/2`, `weave:///${PROJECT}/table/${digest}/id/${row}/key/z/index/0`] });
    expect(read.status, read.text).toBe(200);
    expect((read.body as { vals: unknown[] }).vals).toEqual(['x"]}[{ \\', 1, null, 2]);
    expect(read.text).toContain(',1.0,null,2.0]}');
  });
});
