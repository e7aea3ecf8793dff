/**
 * `/obj/delete` over real HTTP and a real SQLite file: soft deletion as on the hosted service
 * (queries leave deleted versions out, a read of one is a 404 carrying `deleted_at`, `latest`
 * moves to the highest version left, indexes are never reused), all-or-none on a missing digest,
 * and the client's `objDelete`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { NotFoundError } from '../../src/errors.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ users: [{ username: 'narrow', password: 'pw2', entities: ['other'] }] });
});
afterAll(async () => {
  await server.close();
});

let counter = 0;
function project(): string {
  counter += 1;
  return `acme/del${counter}`;
}

async function ok(path: string, body: unknown): Promise<any> {
  const response = await post(server.url, path, body);
  expect(response.status, response.text).toBe(200);
  return response.body;
}

/** Three versions of `cfg` in a fresh project; their digests in order. */
async function threeVersions(): Promise<{ p: string; digests: string[] }> {
  const p = project();
  const digests: string[] = [];
  for (const n of [0, 1, 2]) {
    digests.push((await ok('/obj/create', { obj: { project_id: p, object_id: 'cfg', val: { n } } })).digest as string);
  }
  return { p, digests };
}

async function versionsOf(p: string, latestOnly = false): Promise<Array<{ version_index: number; is_latest: number }>> {
  const answer = await ok('/objs/query', { project_id: p, filter: { object_ids: ['cfg'], latest_only: latestOnly }, metadata_only: true });
  return answer.objs.map((obj: any) => ({ version_index: obj.version_index, is_latest: obj.is_latest }));
}

describe('obj/delete', () => {
  it('deletes the latest version: queries leave it out, latest moves back, a read of it is a 404 with deleted_at', async () => {
    const { p, digests } = await threeVersions();
    expect(await ok('/obj/delete', { project_id: p, object_id: 'cfg', digests: [digests[2]] })).toEqual({ num_deleted: 1 });

    expect(await versionsOf(p)).toEqual([
      { version_index: 0, is_latest: 0 },
      { version_index: 1, is_latest: 1 },
    ]);
    expect(await versionsOf(p, true)).toEqual([{ version_index: 1, is_latest: 1 }]);
    expect((await ok('/obj/read', { project_id: p, object_id: 'cfg', digest: 'latest' })).obj.val).toEqual({ n: 1 });

    for (const digest of [digests[2], 'v2']) {
      const read = await post(server.url, '/obj/read', { project_id: p, object_id: 'cfg', digest });
      expect(read.status).toBe(404);
      expect(read.body.reason).toMatch(/^cfg:v2 was deleted at \d{4}-\d\d-\d\dT/);
      expect(read.body.deleted_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    }
    // A new value gets a new index: v2 stays the deleted one's.
    await ok('/obj/create', { obj: { project_id: p, object_id: 'cfg', val: { n: 3 } } });
    expect((await ok('/obj/read', { project_id: p, object_id: 'cfg', digest: 'latest' })).obj).toMatchObject({ version_index: 3, val: { n: 3 } });
  });

  it('deletes every version without digests; then latest and every alias are 404s, and a second delete finds none', async () => {
    const { p } = await threeVersions();
    expect(await ok('/obj/delete', { project_id: p, object_id: 'cfg' })).toEqual({ num_deleted: 3 });
    expect(await versionsOf(p)).toEqual([]);
    const latest = await post(server.url, '/obj/read', { project_id: p, object_id: 'cfg', digest: 'latest' });
    expect(latest.status).toBe(404);
    expect(latest.body.reason).toMatch(/^cfg:v2 was deleted at/);
    for (const digests of [null, []]) {
      const again = await post(server.url, '/obj/delete', { project_id: p, object_id: 'cfg', digests });
      expect(again.status).toBe(404);
      expect(again.body.reason).toBe('Object "cfg" not found when deleting');
    }
  });

  it('takes latest and v<N> as names, and deletes nothing when one name is missing or deleted already', async () => {
    const { p, digests } = await threeVersions();
    const missing = await post(server.url, '/obj/delete', { project_id: p, object_id: 'cfg', digests: ['v0', 'nosuchdigest'] });
    expect(missing.status).toBe(404);
    // Names what is missing, not the versions that exist.
    expect(missing.body.reason).toBe('Object "cfg" has no version ["nosuchdigest"] to delete (not found, or deleted already)');
    expect(await versionsOf(p)).toHaveLength(3);

    expect(await ok('/obj/delete', { project_id: p, object_id: 'cfg', digests: ['latest', 'v0', 'v0', digests[0]] })).toEqual({ num_deleted: 2 });
    expect(await versionsOf(p)).toEqual([{ version_index: 1, is_latest: 1 }]);
    const twice = await post(server.url, '/obj/delete', { project_id: p, object_id: 'cfg', digests: [digests[0]] });
    expect(twice.status).toBe(404);
    expect(await versionsOf(p)).toHaveLength(1);
  });

  it('restores a deleted version when its value is created again, at its own index', async () => {
    const { p, digests } = await threeVersions();
    await ok('/obj/delete', { project_id: p, object_id: 'cfg', digests: [digests[0], digests[2]] });
    expect((await ok('/obj/create', { obj: { project_id: p, object_id: 'cfg', val: { n: 2 } } })).digest).toBe(digests[2]);
    expect(await versionsOf(p)).toEqual([
      { version_index: 1, is_latest: 0 },
      { version_index: 2, is_latest: 1 },
    ]);
    expect((await ok('/obj/read', { project_id: p, object_id: 'cfg', digest: digests[2] })).obj.deleted_at).toBeNull();
    await ok('/obj/create', { obj: { project_id: p, object_id: 'cfg', val: { n: 0 } } });
    expect(await versionsOf(p)).toEqual([
      { version_index: 0, is_latest: 0 },
      { version_index: 1, is_latest: 0 },
      { version_index: 2, is_latest: 1 },
    ]);
  });

  it('refuses bad requests: unknown object, more than 100 digests, bad object ids, unknown keys, other entities', async () => {
    const { p } = await threeVersions();
    expect((await post(server.url, '/obj/delete', { project_id: p, object_id: 'nothing' })).status).toBe(404);
    const many = await post(server.url, '/obj/delete', { project_id: p, object_id: 'cfg', digests: Array.from({ length: 101 }, (_, i) => `v${i}`) });
    expect(many.status).toBe(400);
    expect(many.body.reason).toMatch(/101 versions: delete 100 or fewer/);
    expect((await post(server.url, '/obj/delete', { project_id: p, object_id: 'a b' })).status).toBe(422);
    expect((await post(server.url, '/obj/delete', { project_id: p, object_id: 'cfg', digests: [''] })).status).toBe(422);
    expect((await post(server.url, '/obj/delete', { project_id: p, object_id: 'cfg', digests: 'v0' })).status).toBe(422);
    expect((await post(server.url, '/obj/delete', { project_id: p, object_id: 'cfg', digest: 'v0' })).status).toBe(422);
    const forbidden = await post(server.url, '/obj/delete', { project_id: p, object_id: 'cfg' }, { username: 'narrow', password: 'pw2' });
    expect(forbidden.status).toBe(403);
    expect(await versionsOf(p)).toHaveLength(3);
  });

  it('is the client\'s objDelete, whose 404 is a NotFoundError', async () => {
    const { p, digests } = await threeVersions();
    const client = createClient({ baseUrl: server.url, username: server.username, password: server.password });
    try {
      expect(await client.objDelete({ project_id: p, object_id: 'cfg', digests: [digests[1] as string] })).toEqual({ num_deleted: 1 });
      await expect(client.objRead({ project_id: p, object_id: 'cfg', digest: 'v1' })).rejects.toBeInstanceOf(NotFoundError);
      await expect(client.objDelete({ project_id: p, object_id: 'cfg', digests: ['v1'] })).rejects.toBeInstanceOf(NotFoundError);
    } finally {
      await client.close();
    }
  });
});
