/**
 * WAL checkpoints from the worker thread (store/wal-checkpoints.ts) and the closing checkpoint
 * (store/db.ts): pages reach the database file without the writer checkpointing, the WAL
 * restarts instead of growing, and a closed database is whole without its WAL.
 */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqlite, type SqliteDatabase } from '../../src/server/store/sqlite.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { closeDatabase, openDatabase } from '../../src/server/store/db.js';
import { startWalCheckpoints, type WalCheckpointOptions } from '../../src/server/store/wal-checkpoints.js';

let dir: string;
let path: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'callbridge-wal-'));
  path = join(dir, 'wal.db');
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Rows large enough that each fills most of a page. */
function writeRows(db: SqliteDatabase, from: number, count: number): void {
  db.exec('CREATE TABLE IF NOT EXISTS filler (n INTEGER PRIMARY KEY, text TEXT)');
  const insert = db.prepare('INSERT INTO filler (n, text) VALUES (?, ?)');
  db.transaction(() => {
    for (let n = from; n < from + count; n++) insert.run(n, 'x'.repeat(3000));
  })();
}

const walFrames = (db: SqliteDatabase): number => (db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>)[0]?.log ?? 0;

describe('startWalCheckpoints', () => {
  /**
   * Writes with checkpoints running (`options`), then waits until every page is in the database
   * file and checks that the next transaction restarts the WAL. The writer never checkpoints
   * itself (its backstop is far away), so only `startWalCheckpoints` can grow the file.
   */
  async function expectCheckpointed(options: WalCheckpointOptions): Promise<void> {
    const db = openDatabase(path);
    const stop = startWalCheckpoints(db, { intervalMs: 20, startAtWalBytes: 0, ...options });
    try {
      writeRows(db, 0, 500);
      const pages = db.pragma('page_count', { simple: true }) as number;
      const pageSize = db.pragma('page_size', { simple: true }) as number;
      await vi.waitFor(() => expect(statSync(path).size).toBe(pages * pageSize), { timeout: 10_000, interval: 20 });
      // Fully copied, so the next transaction starts the WAL over instead of appending.
      writeRows(db, 500, 1);
      expect(walFrames(db)).toBeLessThan(10);
    } finally {
      await stop();
      closeDatabase(db);
    }
  }

  it('copies committed pages into the database file from its worker, and the WAL then restarts', async () => {
    const where: string[] = [];
    await expectCheckpointed({ onCheckpoint: (place) => where.push(place) });
    // The worker did it (on this Node's driver), not the main-thread fallback.
    expect(where).toContain('worker');
    expect(where).not.toContain('main thread');
  });

  it('checkpoints on this thread when its worker cannot load the driver', async () => {
    const where: string[] = [];
    await expectCheckpointed({ driverPath: join(dir, 'no-such-driver.js'), onCheckpoint: (place) => where.push(place) });
    expect(where).toContain('main thread');
    expect(where).not.toContain('worker');
  });

  it('checkpoints on this thread each time the checkpoint fails inside its worker', async () => {
    // A driver that opens but whose every checkpoint fails, as a broken connection would.
    const failingDriver = join(dir, 'failing-driver.cjs');
    writeFileSync(
      failingDriver,
      "module.exports = class { pragma() { throw new Error('disk I/O error'); } close() {} };",
    );
    const where: string[] = [];
    await expectCheckpointed({ driverPath: failingDriver, onCheckpoint: (place) => where.push(place) });
    expect(where).toContain('main thread');
    expect(where).not.toContain('worker');
  });

  it('does not start its worker while the WAL is small', async () => {
    const db = openDatabase(path);
    const stop = startWalCheckpoints(db, { intervalMs: 10, startAtWalBytes: 64 * 1024 * 1024 });
    try {
      writeRows(db, 0, 200);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(walFrames(db)).toBeGreaterThan(200); // nothing copied it, so it never restarted
    } finally {
      await stop();
      closeDatabase(db);
    }
  });

  it('stops: the worker closes its connection before the returned promise resolves', async () => {
    const db = openDatabase(path);
    const stop = startWalCheckpoints(db, { intervalMs: 10, startAtWalBytes: 0 });
    writeRows(db, 0, 50);
    await vi.waitFor(() => expect(statSync(path).size).toBeGreaterThan(50 * 3000), { timeout: 10_000, interval: 10 });
    await stop();
    await stop(); // idempotent
    // With no other connection left, closing deletes the WAL: only possible if the worker's is gone.
    db.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
  });

  it('does nothing for an in-memory database', async () => {
    const db = openDatabase(':memory:');
    const stop = startWalCheckpoints(db, { intervalMs: 10, startAtWalBytes: 0 });
    await stop();
    db.close();
  });
});

describe('closeDatabase', () => {
  it('leaves a database file that is complete without its WAL', () => {
    const db = openDatabase(path);
    writeRows(db, 0, 100);
    const reader = openSqlite(path, { readonly: true });
    expect(reader.prepare('SELECT count(*) AS n FROM filler').get()).toEqual({ n: 100 });
    // A reader still open keeps the WAL file, but the checkpoint has emptied it.
    closeDatabase(db);
    expect(statSync(`${path}-wal`).size).toBe(0);
    reader.close();
    const reopened = openSqlite(path, { readonly: true });
    expect(reopened.prepare('SELECT count(*) AS n FROM filler').get()).toEqual({ n: 100 });
    reopened.close();
  });

  it('is a no-op on a closed database', () => {
    const db = openDatabase(path);
    db.close();
    expect(() => closeDatabase(db)).not.toThrow();
  });
});
