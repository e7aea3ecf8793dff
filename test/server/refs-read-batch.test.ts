import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type CallbridgeClient } from '../../src/client/index.js';
import { NotFoundError } from '../../src/errors.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/refs';
const REF = `weave:///${PROJECT}`;

describe('refs/read_batch over HTTP', () => {
  let server: TestServer;
  let client: CallbridgeClient;
  const call = (body: unknown, credentials?: { username: string; password: string }) => post(server.url, '/refs/read_batch', body, credentials);
  const createObject = async (objectId: string, val: unknown, project = PROJECT) =>
    (await client.objCreate({ obj: { project_id: project, object_id: objectId, val } })).digest;

  let tableDigest: string;
  let rowDigests: string[];
  let datasetRef: string;
  let configRef: string;

  beforeAll(async () => {
    server = await startTestServer({ users: [{ username: 'narrow', password: 'pw2', entities: ['acme'] }] });
    client = createClient({ baseUrl: server.url, username: 'dev', password: 'pw' });
    const table = await client.tableCreate({ table: { project_id: PROJECT, rows: [{ q: 'one', tags: ['a', 'b'] }, { q: 'two', tags: [] }] } });
    tableDigest = table.digest;
    rowDigests = table.row_digests;
    const dataset = await createObject('my-dataset', {
      _type: 'Dataset',
      _class_name: 'Dataset',
      _bases: ['Object', 'BaseModel'],
      name: 'my dataset',
      rows: `${REF}/table/${tableDigest}`,
    });
    datasetRef = `${REF}/object/my-dataset:${dataset}`;
    const config = await createObject('config', { model: { name: 'gpt', params: [1, 2, 3] }, 'a/b c': 'slash', data: datasetRef, elsewhere: `weave:///other/proj/object/x:${dataset}` });
    configRef = `${REF}/object/config:${config}`;
  });
  afterAll(async () => {
    await client.close();
    await server.close();
  });

  it('reads objects, ops and paths into them, one value per ref in order', async () => {
    const op = await createObject('my_op', { _type: 'Op', name: 'my_op' });
    const res = await client.refsReadBatch({
      refs: [
        configRef,
        `${configRef}/key/model/key/name`,
        `${configRef}/attr/model/attr/params/index/1`,
        `${configRef}/key/model/key/params/index/-1`,
        `${configRef}/key/a%2Fb+c`,
        `${REF}/op/my_op:${op}`,
        `${configRef}/key/model/key/missing`,
        `${configRef}/key/model/key/params/index/3`,
        `${configRef}/key/model/key/name/key/deeper`,
        `${configRef}/key/model/index/0`,
        configRef,
      ],
    });
    expect(res.vals).toEqual([
      expect.objectContaining({ model: { name: 'gpt', params: [1, 2, 3] } }),
      'gpt',
      2,
      3,
      'slash',
      { _type: 'Op', name: 'my_op' },
      null,
      null,
      null,
      null,
      expect.objectContaining({ data: datasetRef }),
    ]);
    expect((await client.refsReadBatch({ refs: [] })).vals).toEqual([]);
  });

  it("reads a Dataset's rows through its table ref, and table-row refs", async () => {
    const res = await client.refsReadBatch({
      refs: [
        `${datasetRef}/attr/rows/id/${rowDigests[1]}`,
        `${datasetRef}/attr/rows/id/${rowDigests[0]}/key/tags/index/1`,
        `${datasetRef}/attr/rows`,
        `${REF}/table/${tableDigest}/id/${rowDigests[0]}`,
        `${configRef}/key/data/attr/rows/id/${rowDigests[1]}/key/q`,
        `${configRef}/key/elsewhere/attr/name`,
      ],
    });
    expect(res.vals).toEqual([
      { q: 'two', tags: [] },
      'b',
      `${REF}/table/${tableDigest}`,
      { q: 'one', tags: ['a', 'b'] },
      // A ref met inside a value is read, and the rest of the path walked in it.
      'two',
      // Refs into another project read as null, as on the hosted service.
      null,
    ]);
  });

  it('reads a deleted version as null and answers 404 for a missing object, table or row', async () => {
    const digest = await createObject('doomed', { x: 1 });
    await client.objDelete({ project_id: PROJECT, object_id: 'doomed' });
    expect((await client.refsReadBatch({ refs: [`${REF}/object/doomed:${digest}/key/x`] })).vals).toEqual([null]);

    const missingDigest = 'A'.repeat(43);
    for (const ref of [
      `${REF}/object/nothing:${missingDigest}`,
      `${REF}/object/config:v0`,
      `${datasetRef}/attr/rows/id/${missingDigest}`,
      `${REF}/table/${'0'.repeat(64)}/id/${rowDigests[0]}`,
    ]) {
      const res = await call({ refs: [configRef, ref] });
      expect(res.status, ref).toBe(404);
      expect(res.body.reason).toMatch(/not found/);
    }
    await expect(client.refsReadBatch({ refs: [`${REF}/object/nothing:${missingDigest}`] })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('refuses malformed refs, forms it does not read, and more than 1000 refs with a 400', async () => {
    const cases: Array<[ref: string, reason: RegExp]> = [
      ['not-a-ref', /weave:\/\/\//],
      [`weave:///${PROJECT}`, /weave:\/\/\/<entity>/],
      [`weave:///acme/object/x:y`, /name a version|weave:\/\/\/<entity>/],
      [`${REF}/object/config`, /name a version/],
      [`${REF}/object/config:latest`, /latest/],
      [`${REF}/table/${'0'.repeat(64)}`, /table ref is read one row at a time/],
      [`${REF}/table/${'0'.repeat(64)}/index/0`, /table ref is read one row at a time/],
      [`${REF}/call/0190a4d2-9c2b-7d3e-b5a1-8c9d2e4f6a7b`, /"call" refs are not read/],
      [`${configRef}/key`, /pairs/],
      [`${configRef}/field/x`, /unknown path edge "field"/],
      [`${configRef}/index/one`, /not an integer/],
      [`${configRef}${'/key/x'.repeat(251)}`, /at most 500/],
      ['weave:///not-a-project/object/x:y', /./],
    ];
    for (const [ref, reason] of cases) {
      const res = await call({ refs: [configRef, ref] });
      expect(res.status, ref).toBe(400);
      expect(res.body.reason, ref).toMatch(reason);
    }
    const tooMany = await call({ refs: Array.from({ length: 1001 }, () => configRef) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.reason).toContain('Too many refs');
    expect((await call({ refs: Array.from({ length: 1000 }, () => configRef) })).status).toBe(200);
  });

  it('refuses bodies that break the schema with a 422', async () => {
    for (const body of [{}, { refs: 'x' }, { refs: [1] }, { refs: [], extra: true }]) {
      const res = await call(body);
      expect(res.status, JSON.stringify(body)).toBe(422);
    }
  });

  it("answers 403 for a ref into a project the user may not read, whatever the other refs", async () => {
    const narrow = { username: 'narrow', password: 'pw2' };
    const digest = await createObject('secret', { s: 1 }, 'other/secrets');
    expect((await call({ refs: [configRef] }, narrow)).status).toBe(200);
    const res = await call({ refs: [configRef, `weave:///other/secrets/object/secret:${digest}`] }, narrow);
    expect(res.status).toBe(403);
    expect(res.text).not.toContain('"s"');
  });
});
