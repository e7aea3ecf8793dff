/**
 * The SQLite connection (store/sqlite.ts): both drivers behave as the server expects, wherever the
 * runtime has them (better-sqlite3 on Node < 24, node:sqlite on Node >= 22.16; `npm test` runs
 * the suite on Node 20 and on Node 24, so each is tested).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startServer } from '../../src/server/index.js';
import { createFileStore } from '../../src/server/store/files.js';
import { openDatabase } from '../../src/server/store/db.js';
import {
  defaultSqliteDriver,
  openSqlite,
  sqliteDriverOf,
  SQLITE_DRIVERS,
  type SqliteDatabase,
  type SqliteDriver,
} from '../../src/server/store/sqlite.js';
import { post, startTestServer } from '../helpers/server.js';

const nodeMajor = Number(process.versions.node.split('.')[0]);
const hasNodeSqlite = process.getBuiltinModule('node:sqlite') !== undefined;
/** better-sqlite3 12 aborts Node 24 processes (the reason for node:sqlite): never open it there. */
const runnable: SqliteDriver[] = SQLITE_DRIVERS.filter((driver) => (driver === 'node:sqlite' ? hasNodeSqlite : nodeMajor < 24));

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'callbridge-sqlite-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('defaultSqliteDriver', () => {
  it('is better-sqlite3 before Node 24 and node:sqlite from Node 24 on', () => {
    expect(defaultSqliteDriver({})).toBe(nodeMajor >= 24 ? 'node:sqlite' : 'better-sqlite3');
  });

  it('takes CALLBRIDGE_SQLITE_DRIVER, and names the choices when it is not one of them', () => {
    expect(defaultSqliteDriver({ CALLBRIDGE_SQLITE_DRIVER: 'node:sqlite' })).toBe('node:sqlite');
    expect(defaultSqliteDriver({ CALLBRIDGE_SQLITE_DRIVER: 'better-sqlite3' })).toBe('better-sqlite3');
    expect(defaultSqliteDriver({ CALLBRIDGE_SQLITE_DRIVER: '' })).toBe(defaultSqliteDriver({}));
    expect(() => defaultSqliteDriver({ CALLBRIDGE_SQLITE_DRIVER: 'sqlite3' })).toThrow(
      'CALLBRIDGE_SQLITE_DRIVER must be one of better-sqlite3, node:sqlite; received "sqlite3"',
    );
  });
});

describe('startServer({ sqliteDriver })', () => {
  it('refuses a driver it does not know, naming the choices, before opening anything', async () => {
    const dbPath = join(dir, 'never.db');
    await expect(startServer({ port: 0, dbPath, users: [{ username: 'dev', password: 'pw', entities: ['*'] }], sqliteDriver: 'sqlite3' as never })).rejects.toThrow(
      "Expected `sqliteDriver` to be one of 'better-sqlite3', 'node:sqlite', got \"sqlite3\"",
    );
    expect(existsSync(dbPath)).toBe(false);
  });

  it.each(runnable)('serves on %s: what is written over HTTP reads back, and is in the file', async (driver) => {
    const server = await startTestServer({ sqliteDriver: driver });
    try {
      const created = await post(server.url, '/obj/create', { obj: { project_id: 'acme/demo', object_id: 'prompt', val: { text: 'hi' } } });
      expect(created.status).toBe(200);
      const read = await post(server.url, '/obj/read', { project_id: 'acme/demo', object_id: 'prompt', digest: 'latest' });
      expect(read.body.obj.val).toEqual({ text: 'hi' });
      const db = openSqlite(server.dbPath, { driver, readonly: true });
      try {
        expect(db.prepare('SELECT count(*) AS n FROM objects').get()).toEqual({ n: 1 });
      } finally {
        db.close();
      }
    } finally {
      await server.close();
    }
  });
});

describe.each(runnable)('the server on %s', (driver) => {
  it('reads back a call whose wb_run_step is past 2^53 (the service does not bound it), alone and in a query', async () => {
    const server = await startTestServer({ sqliteDriver: driver });
    try {
      const id = '00000000000000a1';
      const start = { project_id: 'acme/demo', id, trace_id: 'b'.repeat(32), op_name: 'op', started_at: '2026-11-24T00:00:00Z', attributes: {}, inputs: {} };
      // Written as text so the digits reach the server unrounded: 2^60 + 1.
      const body = JSON.stringify({ start: { ...start, wb_run_step: 0 } }).replace('"wb_run_step":0', '"wb_run_step":1152921504606846977');
      const written = await post(server.url, '/call/start', body);
      expect(written.status).toBe(200);
      const read = await post(server.url, '/call/read', { project_id: 'acme/demo', id });
      expect(read.status).toBe(200);
      expect(read.body.call.wb_run_step).toBe(2 ** 60);
      const queried = await post(server.url, '/calls/stream_query', { project_id: 'acme/demo' });
      expect(queried.status).toBe(200);
      expect(queried.text).toContain('"wb_run_step":1152921504606847000');
    } finally {
      await server.close();
    }
  });
});

it.skipIf(hasNodeSqlite)('asking for node:sqlite where Node has none says which Node it needs', () => {
  expect(() => openSqlite(':memory:', { driver: 'node:sqlite' })).toThrow(/node:sqlite is not usable in Node 20\.\d+\.\d+ \(it needs Node >= 22\.16\)/);
});

describe.each(runnable)('%s', (driver) => {
  let db: SqliteDatabase;
  beforeEach(() => {
    db = openSqlite(':memory:', { driver });
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, a, b)');
  });
  afterEach(() => {
    db.close();
  });

  it('is the driver asked for, and reports its state', () => {
    expect(sqliteDriverOf(db)).toBe(driver);
    expect(db.name).toBe(':memory:');
    expect(db.memory).toBe(true);
    expect(db.open).toBe(true);
    expect(db.inTransaction).toBe(false);
    db.close();
    expect(db.open).toBe(false);
    db = openSqlite(':memory:', { driver });
  });

  it('binds positional values given as arguments or as one list, and named values from an object', () => {
    const insert = db.prepare('INSERT INTO t (a, b) VALUES (?, ?)');
    expect(insert.run('x', 1).changes).toBe(1);
    expect(insert.run(['y', 2])).toEqual({ changes: 1, lastInsertRowid: 2 });
    db.prepare('INSERT INTO t (a, b) VALUES (@a, @b)').run({ a: 'z', b: 3 });
    expect(db.prepare('SELECT a, b FROM t ORDER BY id').all()).toEqual([
      { a: 'x', b: 1 },
      { a: 'y', b: 2 },
      { a: 'z', b: 3 },
    ]);
    expect(db.prepare('SELECT a FROM t WHERE b = ?').get(2)).toEqual({ a: 'y' });
    expect(db.prepare('SELECT a FROM t WHERE b = ?').get(99)).toBeUndefined();
  });

  it('binds undefined as NULL and ignores named values the statement does not use (callers pass whole rows)', () => {
    db.prepare('INSERT INTO t (a, b) VALUES (@a, @b)').run({ a: undefined, b: 1, unused: 'x' });
    db.prepare('INSERT INTO t (a, b) VALUES (?, ?)').run(undefined, 2);
    expect(db.prepare('SELECT a, b FROM t ORDER BY id').all()).toEqual([
      { a: null, b: 1 },
      { a: null, b: 2 },
    ]);
  });

  it('refuses what SQLite cannot store with an error, not a silent conversion', () => {
    expect(() => db.prepare('INSERT INTO t (a) VALUES (?)').run(Symbol('s') as never)).toThrow();
    expect(() => db.prepare('SELEC 1')).toThrow(/syntax error/);
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 0 });
  });

  it('iterates rows, and an iteration ended early leaves the statement usable', () => {
    const insert = db.prepare('INSERT INTO t (a) VALUES (?)');
    for (let i = 0; i < 5; i++) insert.run(i);
    const select = db.prepare('SELECT a FROM t ORDER BY id');
    const seen: unknown[] = [];
    for (const row of select.iterate()) {
      seen.push((row as { a: number }).a);
      if (seen.length === 2) break;
    }
    expect(seen).toEqual([0, 1]);
    expect([...select.iterate()].length).toBe(5);
  });

  it('an iteration that fails on a row ends its read: the connection then sees later writes', () => {
    const path = join(dir, 'iterate.db');
    const writer = openSqlite(path, { driver });
    const reader = openSqlite(path, { driver, readonly: true });
    try {
      writer.exec('PRAGMA journal_mode = WAL; CREATE TABLE n (v)');
      writer.prepare('INSERT INTO n VALUES (?)').run(1);
      // node:sqlite refuses an integer past 2^53 while reading the row; better-sqlite3 reads it as
      // a double, so there a SQL function that throws stands in for the failure.
      reader.function('fail', { deterministic: true }, (value: never) => {
        throw new Error(`row failed at ${String(value)}`);
      });
      writer.prepare(`INSERT INTO n VALUES (${2n ** 60n})`).run();
      const failing = reader.prepare(driver === 'node:sqlite' ? 'SELECT v FROM n ORDER BY rowid' : 'SELECT fail(v) FROM n');
      const rows = failing.iterate();
      expect(() => {
        for (const row of rows) void row;
      }).toThrow();
      writer.prepare('INSERT INTO n VALUES (?)').run(3);
      expect(reader.prepare('SELECT count(*) AS c FROM n').get()).toEqual({ c: 3 });
    } finally {
      reader.close();
      writer.close();
    }
  });

  it('pragma: the rows, or with simple the first value', () => {
    expect(db.pragma('user_version', { simple: true })).toBe(0);
    db.pragma('user_version = 7');
    expect(db.pragma('user_version')).toEqual([{ user_version: 7 }]);
    expect(db.pragma('table_info(t)', { simple: true })).toBe(0);
  });

  it('transaction: commits what fn wrote, rolls back and rethrows when it throws, nests as a savepoint', () => {
    const insert = db.prepare('INSERT INTO t (a) VALUES (?)');
    const count = (): unknown => (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
    const insertTwo = db.transaction((first: string, second: string) => {
      expect(db.inTransaction).toBe(true);
      insert.run(first);
      insert.run(second);
      return 'done';
    });
    expect(insertTwo('a', 'b')).toBe('done');
    expect(db.inTransaction).toBe(false);
    expect(count()).toBe(2);

    const failing = db.transaction(() => {
      insert.run('c');
      throw new Error('boom');
    });
    expect(failing).toThrow('boom');
    expect(count()).toBe(2);

    const outer = db.transaction(() => {
      insert.run('d');
      expect(() => failing()).toThrow('boom');
      insertTwo('e', 'f');
    });
    outer();
    // The inner failure undid only its own write.
    expect((db.prepare('SELECT a FROM t ORDER BY id').all() as Array<{ a: string }>).map((row) => row.a)).toEqual(['a', 'b', 'd', 'e', 'f']);
  });

  it('a transaction that SQLite itself ended (a failed COMMIT-time constraint) still rethrows the error', () => {
    db.exec('CREATE TABLE parent (id PRIMARY KEY); CREATE TABLE child (p REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)');
    db.pragma('foreign_keys = ON');
    const orphan = db.transaction(() => db.prepare('INSERT INTO child (p) VALUES (1)').run());
    expect(orphan).toThrow(/FOREIGN KEY/);
    expect(db.inTransaction).toBe(false);
    expect(db.prepare('SELECT count(*) AS n FROM child').get()).toEqual({ n: 0 });
  });

  it('function: registers a deterministic SQL function', () => {
    db.function('twice', { deterministic: true }, (value: never) => (value as number) * 2);
    expect(db.prepare('SELECT twice(21) AS v').get()).toEqual({ v: 42 });
  });

  it('a file: fileMustExist refuses a missing one, readonly refuses writes, a second connection sees the first one’s commits', () => {
    const path = join(dir, 'a.db');
    expect(() => openSqlite(path, { driver, fileMustExist: true })).toThrow();
    const writer = openSqlite(path, { driver });
    try {
      expect(writer.memory).toBe(false);
      writer.exec('CREATE TABLE t (a)');
      writer.prepare('INSERT INTO t VALUES (?)').run(1);
      const reader = openSqlite(path, { driver, readonly: true, fileMustExist: true });
      try {
        expect(reader.prepare('SELECT a FROM t').all()).toEqual([{ a: 1 }]);
        expect(() => reader.prepare('INSERT INTO t VALUES (2)').run()).toThrow(/readonly/);
      } finally {
        reader.close();
      }
    } finally {
      writer.close();
    }
  });

  it('verbose: sees each statement as it runs', () => {
    const ran: string[] = [];
    const traced = openSqlite(':memory:', { driver, verbose: (sql) => ran.push(sql) });
    try {
      traced.prepare('SELECT 1').get();
      expect(ran).toContain('SELECT 1');
    } finally {
      traced.close();
    }
  });

  it('the server on it: a file stored as bytes comes back as a Buffer', () => {
    const server = openDatabase(join(dir, 'server.db'), driver);
    try {
      const files = createFileStore(server);
      const bytes = Buffer.from([0, 1, 2, 255]);
      const digest = files.create('acme/demo', bytes, 'dev');
      const content = files.content('acme/demo', digest);
      expect(Buffer.isBuffer(content)).toBe(true);
      expect(content.equals(bytes)).toBe(true);
    } finally {
      server.close();
    }
  });
});
