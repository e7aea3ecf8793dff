/**
 * `refs/read_batch` over real sockets, as the hosted service reads refs: object values answered
 * as stored (as `obj/read` answers them), path parts decoded as its lenient `unquote`, indexes
 * from the end, members that are not there read as null, and every read held to the ref's project.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const NARROW = { username: 'narrow', password: 'pw2' };

let server: TestServer;
const call = (path: string, body: unknown, credentials?: { username: string; password: string }) => post(server.url, path, body, credentials);

beforeAll(async () => {
  server = await startTestServer({ users: [{ username: 'narrow', password: 'pw2', entities: ['acme'] }] });
});
afterAll(async () => server.close());

describe('refs/read_batch', () => {
  const project = 'acme/refs-edges';
  let digest: string;
  beforeAll(async () => {
    const res = await call(
      '/obj/create',
      `{"obj":{"project_id":"${project}","object_id":"nums","val":{"f":1.0,"big":9007199254740993,"other":"weave:///other/proj/object/x:abc","l":[1,2,3],"100%":"pct","a b":"space"}}}`,
    );
    expect(res.status).toBe(200);
    digest = res.body.digest;
  });

  it('answers object values as stored: big integers exact and 1.0 a float, as obj/read does', async () => {
    const read = await call('/obj/read', { project_id: project, object_id: 'nums', digest });
    expect(read.text).toContain('9007199254740993');
    const refs = await call('/refs/read_batch', { refs: [`weave:///${project}/object/nums:${digest}`, `weave:///${project}/object/nums:${digest}/key/big`] });
    expect(refs.status).toBe(200);
    expect(refs.text).toMatch(/"f":\s?1\.0/);
    expect(refs.text).toMatch(/,\s?9007199254740993\]\}$/);
  });

  it('reads a raw % in a path part as itself, as the service\'s lenient unquote does', async () => {
    // Python's unquote leaves a % that starts no escape as it is, and decodes bytes that are no
    // UTF-8 to U+FFFD: neither refuses the ref.
    const base = `weave:///${project}/object/nums:${digest}`;
    const res = await call('/refs/read_batch', { refs: [`${base}/key/100%`, `${base}/key/%E0%A4`] });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ vals: ['pct', null] });
  });

  it('decodes escapes, indexes from the end, and reads missing or prototype members as null', async () => {
    const base = `weave:///${project}/object/nums:${digest}`;
    const res = await call('/refs/read_batch', {
      refs: [
        `${base}/key/100%25`,
        `${base}/key/a+b`,
        `${base}/key/a%20b`,
        `${base}/key/l/index/-1`,
        `${base}/key/l/index/-4`,
        `${base}/key/l/index/99999999999999999999999`,
        `${base}/key/__proto__`,
        `${base}/key/constructor`,
        `${base}/key/l/key/length`,
        `${base}/key/other/key/x`,
        `${base}/`,
      ],
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.vals.slice(0, 10)).toEqual(['pct', 'space', 'space', 3, null, null, null, null, null, null]);
    expect(res.body.vals[10]).toMatchObject({ l: [1, 2, 3] });
  });

  it('keeps reads inside the ref\'s project: the same digest under another project is a 404, another project is a 403 for a narrow user', async () => {
    const table = await call('/table/create', { table: { project_id: project, rows: [{ q: 1 }] } });
    expect(table.status).toBe(200);
    const [row] = table.body.row_digests;
    expect((await call('/refs/read_batch', { refs: [`weave:///${project}/table/${table.body.digest}/id/${row}`] })).body).toEqual({ vals: [{ q: 1 }] });
    expect((await call('/refs/read_batch', { refs: [`weave:///acme/refs-other/table/${table.body.digest}/id/${row}`] })).status).toBe(404);
    expect((await call('/refs/read_batch', { refs: [`weave:///acme/refs-other/object/nums:${digest}`] })).status).toBe(404);
    const forbidden = await call('/refs/read_batch', { refs: [`weave:///${project}/object/nums:${digest}`, `weave:///other/proj/object/nums:${digest}`] }, NARROW);
    expect(forbidden.status).toBe(403);
    for (const ref of [`weave:///${project}/call/0123456789abcdef`, `weave:///${project}/object/nums:latest`, `weave:////x/object/nums:${digest}`, `weave:///a b/c/object/nums:${digest}`]) {
      const res = await call('/refs/read_batch', { refs: [ref] });
      expect(res.status, ref).toBeGreaterThanOrEqual(400);
      expect(res.status, ref).toBeLessThan(500);
    }
  });

  it('reads into objects stored from their parsed form (a builtin_object_class) by keys of either spelling', async () => {
    // Such a value is kept as JSON.stringify writes it (non-ASCII raw), where Python's text escapes it.
    const created = await call('/obj/create', { obj: { project_id: project, object_id: 'classy', val: { 'é': 1, 'x\u007f': [2.5] }, builtin_object_class: 'Thing' } });
    expect(created.status, created.text).toBe(200);
    const base = `weave:///${project}/object/classy:${created.body.digest}`;
    const res = await call('/refs/read_batch', { refs: [`${base}/key/%C3%A9`, `${base}/key/x%7F/index/0`, `${base}/key/_class_name`] });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ vals: [1, 2.5, 'Thing'] });
  });
});
