/** The pool of read connections that streamed answers run on (store/readers.ts). */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceUnavailableError } from '../../src/server/errors.js';
import { openDatabase } from '../../src/server/store/db.js';
import { createReaderPool } from '../../src/server/store/readers.js';
import type { SqliteDatabase } from '../../src/server/store/sqlite.js';

let dir: string;
let db: SqliteDatabase;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'callbridge-readers-'));
  db = openDatabase(join(dir, 'readers.db'));
});
afterEach(async () => {
  db.close();
  await rm(dir, { recursive: true, force: true });
});

describe('createReaderPool', () => {
  it('counts a connection released twice once: two streams never share one, and the cap holds', () => {
    const readers = createReaderPool(db, 2);
    const first = readers.acquire()!;
    // An answer whose first row fails is released by its cursor and by the caller's error path.
    readers.release(first);
    readers.release(first);
    const a = readers.acquire()!;
    const b = readers.acquire()!;
    expect(a).not.toBe(b);
    expect(() => readers.acquire()).toThrow(ServiceUnavailableError);
    readers.release(a);
    readers.release(b);
    readers.close();
  });

  it('gives no connection for an in-memory database (the caller reads on the main one)', () => {
    const memory = openDatabase(':memory:');
    try {
      expect(createReaderPool(memory).acquire()).toBeNull();
    } finally {
      memory.close();
    }
  });
});
