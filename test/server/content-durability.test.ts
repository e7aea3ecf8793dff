import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, post, startTestServer } from '../helpers/server.js';

const PROJECT = 'acme/demo';

describe('objects, feedback and files across a restart', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'callbridge-content-'));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it('reads back everything acknowledged before the server closed', async () => {
    const dbPath = join(dir, 'content.db');
    const first = await startTestServer({ dbPath });
    const obj = await post(first.url, '/obj/create', { obj: { project_id: PROJECT, object_id: 'cfg', val: { a: 1 } } });
    const fb = await post(first.url, '/feedback/create', {
      project_id: PROJECT,
      weave_ref: 'weave:///acme/demo/call/0123456789abcdef',
      feedback_type: 'note',
      payload: { note: 'kept' },
    });
    const form = new FormData();
    form.append('project_id', PROJECT);
    form.append('file', new Blob([new Uint8Array([7, 8, 9])]), 'f.bin');
    const file = await fetch(`${first.url}/file/create`, { method: 'POST', headers: { authorization: basicAuth(first) }, body: form });
    const { digest: fileDigest } = (await file.json()) as { digest: string };
    await first.close();

    const second = await startTestServer({ dbPath });
    try {
      const read = await post(second.url, '/obj/read', { project_id: PROJECT, object_id: 'cfg', digest: obj.body.digest });
      expect(read.body.obj).toMatchObject({ val: { a: 1 }, version_index: 0, is_latest: 1 });
      const feedback = await post(second.url, '/feedback/query', { project_id: PROJECT, fields: ['id', 'payload.note'] });
      expect(feedback.body.result).toEqual([{ id: fb.body.id, 'payload.note': 'kept' }]);
      const content = await fetch(`${second.url}/file/content`, {
        method: 'POST',
        headers: { authorization: basicAuth(second), 'content-type': 'application/json' },
        body: JSON.stringify({ project_id: PROJECT, digest: fileDigest }),
      });
      expect(new Uint8Array(await content.arrayBuffer())).toEqual(new Uint8Array([7, 8, 9]));
    } finally {
      await second.close();
    }
  });
});
