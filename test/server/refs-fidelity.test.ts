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
    // A value inside the row is written from its parsed form (finding its text would scan the
    // row once per ref): the documented limit.
    const inside = await post(server.url, '/refs/read_batch', { refs: [`weave:///${PROJECT}/table/${digest}/id/${row}/key/score`] });
    expect(inside.body).toEqual({ vals: [1] });
  });
});
