import { createHash } from 'node:crypto';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/demo';

function digestOfCanonical(text: string): string {
  return createHash('sha256').update(text).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y');
}

describe('objects over HTTP', () => {
  let server: TestServer;
  const call = (path: string, body: unknown, credentials?: { username: string; password: string }) =>
    post(server.url, path, body, credentials);
  const objectCount = () => {
    const db = openSqlite(server.dbPath, { readonly: true });
    try {
      return (db.prepare('SELECT COUNT(*) AS n FROM objects').get() as { n: number }).n;
    } finally {
      db.close();
    }
  };

  beforeAll(async () => {
    server = await startTestServer({ users: [{ username: 'narrow', password: 'pw2', entities: ['acme'] }] });
  });
  afterAll(async () => server.close());

  it('creates, versions, reads and queries objects', async () => {
    const created = await call('/obj/create', { obj: { project_id: PROJECT, object_id: 'model-v1.config_x', val: { b: 2, a: [1.5, 'ü'] } } });
    expect(created.status).toBe(200);
    const digest0 = digestOfCanonical('{"a": [1.5, "\\u00fc"], "b": 2}');
    expect(created.body).toEqual({ digest: digest0, object_id: 'model-v1.config_x' });

    const again = await call('/obj/create', { obj: { project_id: PROJECT, object_id: 'model-v1.config_x', val: { a: [1.5, 'ü'], b: 2 } } });
    expect(again.body.digest).toBe(digest0);
    const second = await call('/obj/create', { obj: { project_id: PROJECT, object_id: 'model-v1.config_x', val: { a: 1 } } });
    expect(second.body.digest).toBe(digestOfCanonical('{"a": 1}'));

    const read = await call('/obj/read', { project_id: PROJECT, object_id: 'model-v1.config_x', digest: 'v0' });
    expect(read.status).toBe(200);
    expect(read.body.obj).toMatchObject({
      project_id: PROJECT,
      object_id: 'model-v1.config_x',
      digest: digest0,
      version_index: 0,
      is_latest: 0,
      kind: 'object',
      val: { b: 2, a: [1.5, 'ü'] },
      wb_user_id: 'dev',
      deleted_at: null,
      base_object_class: null,
      leaf_object_class: null,
    });
    const latest = await call('/obj/read', { project_id: PROJECT, object_id: 'model-v1.config_x', digest: 'latest', metadata_only: true });
    // The size of the text stored, Python's json.dumps of the value as the service keeps it.
    expect(latest.body.obj).toMatchObject({ version_index: 1, is_latest: 1, val: {}, size_bytes: '{"a": 1}'.length });

    const queried = await call('/objs/query', { project_id: PROJECT, filter: { object_ids: ['model-v1.config_x'], latest_only: false } });
    expect(queried.status).toBe(200);
    expect(queried.body.objs.map((o: { version_index: number }) => o.version_index)).toEqual([0, 1]);
    const latestOnly = await call('/objs/query', { project_id: PROJECT, filter: { latest_only: true }, sort_by: [{ field: 'created_at', direction: 'desc' }], limit: 10 });
    expect(latestOnly.body.objs).toHaveLength(1);
  });

  it('stores __proto__ and constructor keys as data, as the hosted service does', async () => {
    const val = '{"__proto__":{"x":1},"constructor":{"prototype":{"y":2}}}';
    const created = await call('/obj/create', `{"obj":{"project_id":"${PROJECT}","object_id":"proto-keys","val":${val}}}`);
    expect(created.status).toBe(200);
    expect(created.body.digest).toBe(digestOfCanonical('{"__proto__": {"x": 1}, "constructor": {"prototype": {"y": 2}}}'));
    const read = await call('/obj/read', { project_id: PROJECT, object_id: 'proto-keys', digest: 'latest' });
    expect(Object.hasOwn(read.body.obj.val, '__proto__')).toBe(true);
    expect(JSON.stringify(read.body.obj.val)).toBe(val);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('records the op kind and the writer from the credentials', async () => {
    const res = await call('/obj/create', { obj: { project_id: PROJECT, object_id: 'my_op', val: { _type: 'Op', name: 'x' }, wb_user_id: 'spoofed' } });
    expect(res.status).toBe(200);
    const read = await call('/obj/read', { project_id: PROJECT, object_id: 'my_op', digest: res.body.digest });
    expect(read.body.obj).toMatchObject({ kind: 'op', wb_user_id: 'dev' });
    const ops = await call('/objs/query', { project_id: PROJECT, filter: { is_op: true } });
    expect(ops.body.objs.map((o: { object_id: string }) => o.object_id)).toEqual(['my_op']);
  });

  it('answers 404 for absent versions', async () => {
    for (const digest of ['latest', 'v7', 'A'.repeat(43), "x' OR 1=1 --"]) {
      const res = await call('/obj/read', { project_id: PROJECT, object_id: 'absent', digest });
      expect(res.status).toBe(404);
      expect(typeof res.body.reason).toBe('string');
    }
  });

  it('answers 422 for bad object ids and wrongly shaped bodies, storing nothing', async () => {
    const before = objectCount();
    const bad: unknown[] = [
      { obj: { project_id: PROJECT, object_id: 'has space', val: 1 } },
      { obj: { project_id: PROJECT, object_id: "x'; DROP TABLE objects; --", val: 1 } },
      { obj: { project_id: PROJECT, object_id: 'a/b', val: 1 } },
      { obj: { project_id: PROJECT, object_id: 'é', val: 1 } },
      { obj: { project_id: PROJECT, object_id: '', val: 1 } },
      { obj: { project_id: PROJECT, object_id: 'x'.repeat(129), val: 1 } },
      { obj: { project_id: PROJECT, object_id: 5, val: 1 } },
      { obj: { project_id: PROJECT, object_id: 'ok' } },
      { obj: { project_id: PROJECT, object_id: 'ok', val: 1 }, extra: true },
      { obj: { project_id: PROJECT, object_id: 'ok', val: 1, builtin_object_class: 3 } },
      { obj: 'nope' },
      {},
      [],
    ];
    for (const body of bad) {
      const res = await call('/obj/create', body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.detail[0].loc[0]).toBe('body');
    }
    expect((await call('/obj/create', { obj: { project_id: PROJECT, object_id: 'x'.repeat(128), val: 1 } })).status).toBe(200);
    expect(objectCount()).toBe(before + 1);

    const badReads: unknown[] = [
      { project_id: PROJECT, object_id: 'bad id', digest: 'latest' },
      { project_id: PROJECT, object_id: 'ok' },
      { project_id: PROJECT, object_id: 'ok', digest: 'latest', metadata_only: 'yes' },
    ];
    for (const body of badReads) expect((await call('/obj/read', body)).status).toBe(422);
    const badQueries: unknown[] = [
      { project_id: PROJECT, limit: -1 },
      { project_id: PROJECT, offset: -5 },
      { project_id: PROJECT, limit: 1.5 },
      { project_id: PROJECT, limit: '10' },
      { project_id: PROJECT, filter: { object_ids: 'a' } },
      { project_id: PROJECT, filter: { is_op: 'true' } },
      { project_id: PROJECT, sort_by: [{ field: 'created_at', direction: 'up' }] },
      { project_id: PROJECT, sort_by: [{ field: 'created_at' }] },
      { filter: {} },
      { project_id: PROJECT, sort_by: Array.from({ length: 101 }, () => ({ field: 'object_id', direction: 'asc' })) },
    ];
    for (const body of badQueries) expect((await call('/objs/query', body)).status, JSON.stringify(body)).toBe(422);
  });

  it('answers 400 for unknown sort fields, unusable values and builtin class conflicts', async () => {
    const sort = await call('/objs/query', { project_id: PROJECT, sort_by: [{ field: 'val; DROP TABLE objects', direction: 'asc' }] });
    expect(sort.status).toBe(400);
    expect(sort.body.reason).toContain('val; DROP TABLE objects');
    const conflict = await call('/obj/create', { obj: { project_id: PROJECT, object_id: 'b', val: { _class_name: 'A' }, builtin_object_class: 'B' } });
    expect(conflict.status).toBe(400);
    const deep = `{"obj": {"project_id": "${PROJECT}", "object_id": "deep", "val": ${'['.repeat(50_000)}${']'.repeat(50_000)}}}`;
    const deepRes = await call('/obj/create', deep);
    expect(deepRes.status).toBe(400);
    expect((await call('/obj/read', { project_id: PROJECT, object_id: 'deep', digest: 'latest' })).status).toBe(404);
  });

  it('enforces credentials and project grants', async () => {
    const body = { obj: { project_id: 'other/proj', object_id: 'x', val: 1 } };
    expect((await call('/obj/create', body, { username: 'dev', password: 'wrong' })).status).toBe(401);
    expect((await call('/obj/create', body, { username: 'narrow', password: 'pw2' })).status).toBe(403);
    expect((await call('/obj/read', { project_id: 'other/proj', object_id: 'x', digest: 'latest' }, { username: 'narrow', password: 'pw2' })).status).toBe(403);
    expect((await call('/objs/query', { project_id: 'other/proj' }, { username: 'narrow', password: 'pw2' })).status).toBe(403);
    expect((await call('/obj/create', { obj: { project_id: 'no-slash', object_id: 'x', val: 1 } })).status).toBe(400);
    const allowed = await call('/obj/create', { obj: { project_id: 'acme/narrow', object_id: 'x', val: 1 } }, { username: 'narrow', password: 'pw2' });
    expect(allowed.status).toBe(200);
  });
});
