/**
 * Complete mode (SPEC §2.1): every v1 write answers CALLS_COMPLETE_MODE_REQUIRED, whatever its
 * items hold, so an exporter switches to /calls/complete instead of splitting a batch it takes for
 * malformed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ completeMode: true, users: [{ username: 'guest', password: 'pw2', entities: ['guest-team'] }] });
});
afterAll(async () => {
  await server.close();
});

const start = (id: string) => ({
  mode: 'start',
  req: { start: { project_id: 'acme/cm', id, op_name: 'op', started_at: '2026-01-01T00:00:00Z', attributes: {}, inputs: {} } },
});

describe('call/upsert_batch in complete mode', () => {
  it('answers CALLS_COMPLETE_MODE_REQUIRED even when an item is malformed', async () => {
    const batches = [
      [start('00000000000000a1'), start('NOT-AN-ID')],
      [start('00000000000000a1'), { mode: 'sideways', req: {} }],
      [{ mode: 'end', req: { end: { project_id: 'acme/cm', id: '00000000000000a1', ended_at: 'yesterday', summary: {} } } }],
    ];
    for (const batch of batches) {
      const response = await post(server.url, '/call/upsert_batch', { batch });
      expect(response.status, JSON.stringify(batch)).toBe(400);
      expect(response.body.error_code).toBe('CALLS_COMPLETE_MODE_REQUIRED');
    }
  });

  it('still answers 403 for a project the user may not write', async () => {
    const response = await post(server.url, '/call/upsert_batch', { batch: [start('00000000000000a1')] }, { username: 'guest', password: 'pw2' });
    expect(response.status).toBe(403);
  });

  it('accepts an empty batch (nothing to write)', async () => {
    expect((await post(server.url, '/call/upsert_batch', { batch: [] })).status).toBe(200);
  });
});
