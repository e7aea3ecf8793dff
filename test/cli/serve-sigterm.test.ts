/**
 * `callbridge serve`: SIGTERM with a stream left open, and the data after a restart.
 * Drives the built CLI (dist/cli/main.js), as serve.test.ts does.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { killSpawned, listeningUrl, spawnNode, type NodeProcess } from '../helpers/node-process.js';

const CLI = join(resolve(import.meta.dirname, '../..'), 'dist/cli/main.js');
const LISTENING = /^callbridge listening on (http:\/\/\S+)\n$/;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'callbridge-cli-sigterm-'));
});
afterEach(killSpawned);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function serve(args: string[]): Promise<NodeProcess & { url: string }> {
  const cli = spawnNode([CLI, 'serve', '--port', '0', '--user', 'dev:pw', ...args]);
  return { ...cli, url: await listeningUrl(cli, LISTENING) };
}

const startItem = (id: string) => ({
  mode: 'start' as const,
  req: { start: { project_id: 'acme/cli', id, trace_id: 'ab'.repeat(16), op_name: 'op', started_at: '2026-01-01T00:00:00Z', attributes: {}, inputs: { pad: 'x'.repeat(2000) } } },
});

describe('callbridge serve: SIGTERM', () => {
  it('with a client holding a calls stream open and unread: exits 0, and the data is there after a restart', async () => {
    const dbPath = join(dir, 'held.db');
    const first = await serve(['--db', dbPath]);
    const client = createClient({ baseUrl: first.url, username: 'dev', password: 'pw', requestTimeoutMs: 60_000 });
    const ids = Array.from({ length: 2000 }, (_, i) => (0xd000 + i).toString(16).padStart(16, '0'));
    for (let i = 0; i < ids.length; i += 500) await client.callUpsertBatch({ batch: ids.slice(i, i + 500).map(startItem) });
    const stream = client.callsStreamQuery({ project_id: 'acme/cli' });
    expect((await stream.next()).done).toBe(false); // ~4 MB answer, one call read, the rest left waiting
    first.child.kill('SIGTERM');
    expect(await first.exited()).toEqual({ code: 0, signal: null });
    await stream.return();
    await client.close();

    const second = await serve(['--db', dbPath]);
    const again = createClient({ baseUrl: second.url, username: 'dev', password: 'pw' });
    try {
      const stats = await again.callsQueryStats({ project_id: 'acme/cli' });
      expect(stats.count).toBe(ids.length);
    } finally {
      await again.close();
    }
    second.child.kill('SIGTERM');
    expect((await second.exited()).code).toBe(0);
  });
});
