import { createHash } from 'node:crypto';
import { type SqliteDatabase } from '../../src/server/store/sqlite.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NotFoundError } from '../../src/server/errors.js';
import { openDatabase } from '../../src/server/store/db.js';
import { createFileStore, type FileStore } from '../../src/server/store/files.js';

describe('file store', () => {
  let db: SqliteDatabase;
  let files: FileStore;

  beforeEach(() => {
    db = openDatabase(':memory:');
    files = createFileStore(db);
  });
  afterEach(() => db.close());

  it('keys bytes by the digest of §2.2 and keeps one copy per project', () => {
    const bytes = Buffer.from('hello, files');
    const expected = createHash('sha256').update(bytes).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y');
    expect(files.create('acme/demo', bytes, 'dev')).toBe(expected);
    expect(files.create('acme/demo', Buffer.from(bytes), 'other')).toBe(expected);
    expect(files.create('acme/other', bytes, 'dev')).toBe(expected);
    expect(db.prepare('SELECT project_id, size_bytes, wb_user_id FROM files ORDER BY rowid').all()).toEqual([
      { project_id: 'acme/demo', size_bytes: bytes.length, wb_user_id: 'dev' },
      { project_id: 'acme/other', size_bytes: bytes.length, wb_user_id: 'dev' },
    ]);
    expect(files.content('acme/demo', expected).equals(bytes)).toBe(true);
  });

  it('throws NotFoundError for absent digests and other projects', () => {
    const digest = files.create('acme/demo', Buffer.from([1, 2, 3]), 'dev');
    expect(() => files.content('acme/nope', digest)).toThrow(NotFoundError);
    expect(() => files.content('acme/demo', `${digest}x`)).toThrow(NotFoundError);
  });
});
