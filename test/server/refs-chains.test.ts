/**
 * `refs/read_batch` through refs stored in values. A walk goes on with a stored ref's path before
 * the rest of its own; unbounded, the path grew at every hop and each hop copied it, so 1000 refs
 * through a chain of 40 stored refs with 498-part paths held the server for 14 s (95 hops: 101 s).
 * What a walk has left is held to MAX_REF_PATH_PARTS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type CallbridgeClient } from '../../src/client/index.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/refs-chains';
const REF = `weave:///${PROJECT}`;

describe('refs/read_batch through refs stored in values', () => {
  let server: TestServer;
  let client: CallbridgeClient;

  beforeAll(async () => {
    server = await startTestServer();
    client = createClient({ baseUrl: server.url, username: 'dev', password: 'pw' });
  });
  afterAll(async () => {
    await client.close();
    await server.close();
  });

  it('refuses a walk whose stored refs\' paths add up past 500 parts, at the first such hop', async () => {
    // O_0 = {"k": "leaf"}; O_i = {"k": "<ref to O_{i-1}>/key/k/key/k/... (249 pairs)"}.
    const pairs = '/key/k'.repeat(249);
    let previous = (await client.objCreate({ obj: { project_id: PROJECT, object_id: 'o0', val: { k: 'leaf' } } })).digest;
    for (let i = 1; i <= 40; i++) {
      const val = { k: `${REF}/object/o${i - 1}:${previous}${pairs}` };
      previous = (await client.objCreate({ obj: { project_id: PROJECT, object_id: `o${i}`, val } })).digest;
    }
    const ref = `${REF}/object/o40:${previous}/key/k/key/k`;
    const res = await post(server.url, '/refs/read_batch', { refs: Array.from({ length: 1000 }, (_, i) => `${ref}/key/x${i}`) });
    expect(res.status).toBe(400);
    expect(res.body.reason).toMatch(/add up to more than 500 parts/);
  }, 120_000);

  it('reads a stored ref naming a version by latest or v<N> as null, not as a missing digest', async () => {
    const target = await client.objCreate({ obj: { project_id: PROJECT, object_id: 'aliased', val: { x: 1 } } });
    expect(target.digest).toHaveLength(43);
    const holder = await client.objCreate({
      obj: { project_id: PROJECT, object_id: 'holder', val: { byLatest: `${REF}/object/aliased:latest`, byIndex: `${REF}/object/aliased:v0` } },
    });
    const res = await client.refsReadBatch({
      refs: [`${REF}/object/holder:${holder.digest}/key/byLatest/key/x`, `${REF}/object/holder:${holder.digest}/key/byIndex/key/x`],
    });
    expect(res.vals).toEqual([null, null]);
  });

  it('follows a chain of 60 stored refs with short paths to the value at its end', async () => {
    // C_0 = {"v": {"deep": 42}}; C_i = {"next": "<ref to C_{i-1}>/key/v"} read with /key/next.
    let previous = (await client.objCreate({ obj: { project_id: PROJECT, object_id: 'c0', val: { v: { deep: 42 } } } })).digest;
    let path = '';
    for (let i = 1; i <= 60; i++) {
      const val = { next: `${REF}/object/c${i - 1}:${previous}${i === 1 ? '/key/v' : '/key/next'}` };
      previous = (await client.objCreate({ obj: { project_id: PROJECT, object_id: `c${i}`, val } })).digest;
      path = '/key/next';
    }
    const res = await client.refsReadBatch({ refs: [`${REF}/object/c60:${previous}${path}/key/deep`, `${REF}/object/c60:${previous}${path}`] });
    // A path that ends on a stored ref answers the ref itself, as the service does.
    expect(res.vals).toEqual([42, expect.stringMatching(new RegExp(`^${REF}/object/c59:[A-Za-z0-9]{43}/key/next$`))]);
  }, 120_000);
});
