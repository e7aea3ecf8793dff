/**
 * The HTTP layer: SQLite busy. Two servers may share one database file (db.ts sets a
 * busy_timeout for "a second server, a sqlite3 shell"); when the write lock stays taken past that
 * wait, the answer is a limit that frees by itself, not a bug: SPEC §2.5 keeps 500 for bugs, and
 * errors.ts names 503 + Retry-After for "a limit that frees by itself".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let first: TestServer;
let second: TestServer;

beforeAll(async () => {
  first = await startTestServer();
  second = await startTestServer({ dbPath: first.dbPath });
});
afterAll(async () => {
  await second.close();
  await first.close();
});

const PROJECT = 'acme/busy';
const TRACE = `${'0'.repeat(31)}7`;
const start = (id: string, opName: string) => ({
  start: { project_id: PROJECT, id, trace_id: TRACE, op_name: opName, started_at: '2026-01-02T03:04:05Z', attributes: {}, inputs: {} },
});

describe('two servers on one SQLite file', () => {
  it('each reads what the other wrote', async () => {
    expect((await post(first.url, '/call/start', start('00000000000000b1', 'from-first'))).status).toBe(200);
    expect((await post(second.url, '/call/start', start('00000000000000b2', 'from-second'))).status).toBe(200);
    expect((await post(second.url, '/call/read', { project_id: PROJECT, id: '00000000000000b1' })).body.call.op_name).toBe('from-first');
    expect((await post(first.url, '/call/read', { project_id: PROJECT, id: '00000000000000b2' })).body.call.op_name).toBe('from-second');
  });

  it('answers a write that cannot get the write lock with 503 + Retry-After and a reason, not a 500', async () => {
    const holder = openSqlite(first.dbPath, { timeout: 0 });
    holder.exec('BEGIN IMMEDIATE');
    let response;
    try {
      response = await post(second.url, '/call/start', start('00000000000000b3', 'while-locked'));
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).not.toBeNull();
    expect(typeof response.body.reason).toBe('string');
    // Once the lock is released the same write succeeds.
    expect((await post(second.url, '/call/start', start('00000000000000b3', 'while-locked'))).status).toBe(200);
  }, 30_000);
});
