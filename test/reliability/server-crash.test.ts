/**
 * The server under concurrent writers and a crash (SPEC §2.5: acknowledged writes survive a crash
 * of the server process). The built CLI serves a database file; four writer processes (the built
 * client) send upsert batches to it; the server is SIGKILLed mid-ingest and started again on the
 * same file. Then: every acknowledged batch is there whole, no batch is half-written (a batch is
 * one transaction), no call has a start without its end, and `PRAGMA integrity_check` says ok.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { killSpawned, listeningUrl, spawnNode, type NodeProcess } from '../helpers/node-process.js';
import { integrityCheck, openReadOnly, postScanned } from './support.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CLI = join(ROOT, 'dist/cli/main.js');
const WRITER = join(import.meta.dirname, 'fixtures/upsert-writer.mjs');
const PROJECT = 'acme/crash';
const WRITERS = 4;
const CALLS_PER_BATCH = 50;
const dev = { username: 'dev', password: 'pw' };

let dir: string;

beforeAll(async () => {
  for (const built of [CLI, join(ROOT, 'dist/index.js')]) {
    if (!existsSync(built)) throw new Error(`${built} is missing: run "npm run build" first (npm test does)`);
  }
  dir = await mkdtemp(join(tmpdir(), 'callbridge-crash-'));
});
afterEach(killSpawned);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** `callbridge serve` on `dbPath`; resolves with its URL once it prints that it listens. */
async function serve(dbPath: string): Promise<NodeProcess & { url: string }> {
  const server = spawnNode([CLI, 'serve', '--port', '0', '--db', dbPath, '--user', 'dev:pw']);
  return { ...server, url: await listeningUrl(server, /callbridge listening on (http:\/\/\S+)\n/) };
}

/** Batches a writer reported as `kind` (`send` or `ack`). */
function reported(writer: NodeProcess, kind: 'send' | 'ack'): number[] {
  return [...writer.output().matchAll(new RegExp(`^${kind} (\\d+)$`, 'gm'))].map((match) => Number(match[1]));
}

const hex = (value: number, width: number): string => value.toString(16).padStart(width, '0');
const batchKey = (writer: number, batch: number): string => hex(writer, 2) + hex(batch, 6);

describe('SIGKILL of the server mid-ingest from several writer processes', () => {
  it('keeps every acknowledged batch whole, no batch half-written, the database intact', async () => {
    const dbPath = join(dir, 'crash.db');
    const first = await serve(dbPath);
    const writers = Array.from({ length: WRITERS }, (_, index) =>
      spawnNode([WRITER, first.url, String(index), String(CALLS_PER_BATCH), '100000']),
    );

    // Let every writer get some batches acknowledged, then kill the server while they keep sending.
    await new Promise<void>((done) => {
      const check = setInterval(() => {
        if (writers.every((writer) => reported(writer, 'ack').length >= 8)) {
          clearInterval(check);
          done();
        }
      }, 10);
    });
    first.child.kill('SIGKILL');
    expect((await first.exited()).signal).toBe('SIGKILL');
    for (const writer of writers) expect(await writer.exited()).toEqual({ code: 0, signal: null });

    const acked = new Set<string>();
    const sent = new Set<string>();
    writers.forEach((writer, index) => {
      for (const batch of reported(writer, 'ack')) acked.add(batchKey(index, batch));
      for (const batch of reported(writer, 'send')) sent.add(batchKey(index, batch));
      expect(writer.output()).toMatch(/^fail \d+/m); // each was cut off mid-ingest
    });

    // Restart on the same file: it opens, serves what was acknowledged and takes new writes.
    const second = await serve(dbPath);
    const listed = await postScanned(second.url, '/calls/stream_query', { project_id: PROJECT, columns: ['id'] }, dev);
    expect(listed.status).toBe(200);
    const servedIds = new Set(listed.text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line).id as string));
    const extra = await postScanned(second.url, '/call/upsert_batch', {
      batch: [{ mode: 'start', req: { start: { project_id: PROJECT, id: 'ff00000000000001', op_name: 'after', started_at: '2026-01-01T00:00:00Z', attributes: {}, inputs: {} } } }],
    }, dev);
    expect(extra.status).toBe(200);
    second.child.kill('SIGTERM');
    expect((await second.exited()).code).toBe(0);

    expect(integrityCheck(dbPath)).toEqual(['ok']);
    const db = openReadOnly(dbPath);
    const rows = db
      .prepare('SELECT id, has_start, ended_at IS NOT NULL AS has_end FROM calls WHERE project_id = ? AND id != ?')
      .all(PROJECT, 'ff00000000000001') as Array<{ id: string; has_start: number; has_end: number }>;
    db.close();

    const callsPerBatch = new Map<string, number>();
    for (const row of rows) {
      // A batch carries each call's start and end: no call may have one without the other.
      expect({ id: row.id, start: row.has_start, end: row.has_end }).toEqual({ id: row.id, start: 1, end: 1 });
      const key = row.id.slice(0, 8);
      callsPerBatch.set(key, (callsPerBatch.get(key) ?? 0) + 1);
      expect(sent.has(key), `stored batch ${key} was never sent`).toBe(true);
    }
    for (const key of acked) expect(callsPerBatch.get(key), `acknowledged batch ${key}`).toBe(CALLS_PER_BATCH);
    for (const [key, count] of callsPerBatch) expect(count, `batch ${key} half-written`).toBe(CALLS_PER_BATCH);
    // What the restarted server listed is what the file holds.
    expect(servedIds.size).toBe(rows.length);
    // At most one batch per writer was in flight when the server died.
    expect(callsPerBatch.size - acked.size).toBeLessThanOrEqual(WRITERS);
    if (process.env.CALLBRIDGE_RELIABILITY_FIGURES) {
      console.info(`crash: sent=${sent.size} acked=${acked.size} stored=${callsPerBatch.size} batches of ${CALLS_PER_BATCH} calls`);
    }
  }, 60_000);
});
