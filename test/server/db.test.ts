/** Opening the database: pragmas and `user_version` migrations. */
import { chmodSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { migrate, openDatabase } from '../../src/server/store/db.js';
import { MIGRATIONS } from '../../src/server/store/schema.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'callbridge-db-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('openDatabase', () => {
  it('sets WAL, NORMAL sync, a busy timeout and foreign keys, and migrates to the latest version', () => {
    const db = openDatabase(join(dir, 'a.db'));
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.pragma('synchronous', { simple: true })).toBe(1);
      expect(db.pragma('busy_timeout', { simple: true })).toBeGreaterThan(0);
      expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
      // Checkpoints belong to the server's worker; SQLite's own only as a distant backstop.
      expect(db.pragma('wal_autocheckpoint', { simple: true })).toBeGreaterThanOrEqual(16384);
      expect(db.pragma('journal_size_limit', { simple: true })).toBeGreaterThan(0);
      expect(db.pragma('cache_size', { simple: true })).toBeLessThanOrEqual(-65536);
      expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      expect(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'calls'").get()).toBeDefined();
    } finally {
      db.close();
    }
  });

  it('creates a new database file, and its WAL, readable by its owner only; an existing file keeps its mode', () => {
    const path = join(dir, 'private.db');
    const db = openDatabase(path);
    try {
      db.prepare("INSERT INTO files (project_id, digest, content, size_bytes, created_at) VALUES ('a/b', 'd', x'00', 1, 'now')").run();
      const mode = (file: string) => statSync(file).mode & 0o777;
      expect(mode(path)).toBe(0o600);
      expect(mode(`${path}-wal`)).toBe(0o600);
    } finally {
      db.close();
    }
    const shared = join(dir, 'shared.db');
    writeFileSync(shared, '');
    chmodSync(shared, 0o644);
    openDatabase(shared).close();
    expect(statSync(shared).mode & 0o777).toBe(0o644);
  });

  it('reopens an existing database without re-running migrations', () => {
    const path = join(dir, 'b.db');
    openDatabase(path).close();
    const db = openDatabase(path);
    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    db.close();
  });

  it('refuses a database from a newer schema', () => {
    const path = join(dir, 'c.db');
    const raw = openSqlite(path);
    raw.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    raw.close();
    expect(() => openDatabase(path)).toThrow(/newer than this server knows/);
  });
});

describe('migrate', () => {
  it('applies only the missing steps, each atomically with its version', () => {
    const db = openSqlite(':memory:');
    migrate(db, ['CREATE TABLE one (x)']);
    expect(db.pragma('user_version', { simple: true })).toBe(1);
    expect(() => migrate(db, ['CREATE TABLE one (x)', 'CREATE TABLE two (x); CREATE TABLE one (x)'])).toThrow();
    // The failed step left neither its table nor its version behind.
    expect(db.pragma('user_version', { simple: true })).toBe(1);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'two'").get()).toBeUndefined();
    migrate(db, ['CREATE TABLE one (x)', 'CREATE TABLE two (x)']);
    expect(db.pragma('user_version', { simple: true })).toBe(2);
    db.close();
  });

  it('takes turns with a second server migrating the same new file at the same moment', () => {
    const path = join(dir, 'race.db');
    const other = openSqlite(path);
    let interleaved = false;
    // The other server migrates the file just as this one starts its first transaction.
    const db = openSqlite(path, {
      verbose: (sql) => {
        if (interleaved || !/^BEGIN/.test(sql)) return;
        interleaved = true;
        migrate(other, MIGRATIONS);
      },
    });
    try {
      expect(() => migrate(db, MIGRATIONS)).not.toThrow();
      expect(interleaved).toBe(true);
      expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    } finally {
      db.close();
      other.close();
    }
  });
});
