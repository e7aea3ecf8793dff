/**
 * Objects endpoints against the hosted service's semantics (cited in each test): digests over
 * Python's json.dumps of the value as spelled, version counting, paging, hostile depth.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/object-digests';

/** Service digest of a canonical text (weave/shared/digest.py str_digest). */
function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y');
}

describe('objects as the service digests and numbers them', () => {
  let server: TestServer;
  const call = (path: string, body: unknown) => post(server.url, path, body);

  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => server.close());

  // weave/shared/digest.py compute_object_digest_result: json.dumps(processed_val, sort_keys=True)
  // over the value pydantic parsed from the body, where `1.0` is a float and prints `1.0`. The
  // Python SDK computes the same digest client-side (fire-and-forget publish) and uses it in refs.
  // Expected texts computed with CPython: json.dumps(json.loads(s), sort_keys=True).
  it('digests a float with no fraction as Python prints it (1.0)', async () => {
    const res = await call('/obj/create', `{"obj":{"project_id":"${PROJECT}","object_id":"f1","val":{"a":1.0}}}`);
    expect(res.status).toBe(200);
    expect(res.body.digest).toBe(digestOf('{"a": 1.0}')); // dCYJsgfwkAqOLf866DrEeUGvXCm7brXylYTKfdY9g1Q
  });

  it('answers the value as stored: 1.0 stays a float and a big integer exact, on obj/read and objs/query', async () => {
    await call('/obj/create', `{"obj":{"project_id":"${PROJECT}","object_id":"exact","val":{"f":1.0,"n":12345678901234567890}}}`);
    const read = await call('/obj/read', { project_id: PROJECT, object_id: 'exact', digest: 'latest' });
    expect(read.status).toBe(200);
    expect(read.text).toContain('"val":{"f": 1.0, "n": 12345678901234567890}');
    expect(read.body.obj).toMatchObject({ object_id: 'exact', version_index: 0, is_latest: 1, kind: 'object' });
    const queried = await call('/objs/query', { project_id: PROJECT, filter: { object_ids: ['exact'] } });
    expect(queried.text).toContain('"val":{"f": 1.0, "n": 12345678901234567890}');
    const metadata = await call('/obj/read', { project_id: PROJECT, object_id: 'exact', digest: 'latest', metadata_only: true });
    expect(metadata.body.obj.val).toEqual({});
  });

  it('digests -0.0 as Python prints it', async () => {
    const res = await call('/obj/create', `{"obj":{"project_id":"${PROJECT}","object_id":"f2","val":{"z":-0.0}}}`);
    expect(res.status).toBe(200);
    expect(res.body.digest).toBe(digestOf('{"z": -0.0}'));
  });

  it('digests an integer past 2^53 exactly, as Python ints are exact', async () => {
    const res = await call('/obj/create', `{"obj":{"project_id":"${PROJECT}","object_id":"big","val":{"n":12345678901234567890}}}`);
    expect(res.status).toBe(200);
    expect(res.body.digest).toBe(digestOf('{"n": 12345678901234567890}'));
  });

  it('answers a value nested past the depth bound with a 4xx, not a 500', async () => {
    const depth = 5000;
    const val = '['.repeat(depth) + ']'.repeat(depth);
    const res = await call('/obj/create', `{"obj":{"project_id":"${PROJECT}","object_id":"deep","val":${val}}}`);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });

  it('version_index keeps counting after every version is deleted; latest is the new one', async () => {
    const id = 'cycle';
    const a = await call('/obj/create', { obj: { project_id: PROJECT, object_id: id, val: { v: 'a' } } });
    await call('/obj/create', { obj: { project_id: PROJECT, object_id: id, val: { v: 'b' } } });
    const del = await call('/obj/delete', { project_id: PROJECT, object_id: id });
    expect(del.body).toEqual({ num_deleted: 2 });
    const latestGone = await call('/obj/read', { project_id: PROJECT, object_id: id, digest: 'latest' });
    expect(latestGone.status).toBe(404);
    const c = await call('/obj/create', { obj: { project_id: PROJECT, object_id: id, val: { v: 'c' } } });
    const latest = await call('/obj/read', { project_id: PROJECT, object_id: id, digest: 'latest', metadata_only: true });
    expect(latest.body.obj).toMatchObject({ digest: c.body.digest, version_index: 2, is_latest: 1 });
    const q = await call('/objs/query', { project_id: PROJECT, filter: { object_ids: [id], latest_only: true } });
    expect(q.body.objs.map((o: { digest: string }) => o.digest)).toEqual([c.body.digest]);
    // The first version's digest still names a deleted version.
    const old = await call('/obj/read', { project_id: PROJECT, object_id: id, digest: a.body.digest });
    expect(old.status).toBe(404);
  });

  it('objs/query: offset/limit page over the filtered, sorted set', async () => {
    for (let i = 0; i < 5; i++) await call('/obj/create', { obj: { project_id: PROJECT, object_id: 'paged', val: { i } } });
    const page = await call('/objs/query', {
      project_id: PROJECT,
      filter: { object_ids: ['paged'] },
      sort_by: [{ field: 'version_index', direction: 'desc' }],
      limit: 2,
      offset: 1,
    });
    expect(page.body.objs.map((o: { version_index: number }) => o.version_index)).toEqual([3, 2]);
  });
});
