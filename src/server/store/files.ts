/**
 * Content-addressed files on SQLite (SPEC §2.6): bytes keyed by `(project_id, digest)`, the
 * digest of §2.2 over the bytes, so storing the same bytes twice keeps one copy.
 */
import type { SqliteDatabase } from './sqlite.js';
import { NotFoundError } from '../errors.js';
import { quote } from '../quote.js';
import { digestOfBytes } from '../../wire/digest.js';
import { nowInstant } from '../timestamps.js';

export interface FileStore {
  /** Store `content` for user `wbUserId`; answers its digest. */
  create(projectId: string, content: Buffer, wbUserId: string): string;
  /**
   * The bytes stored under `digest`.
   * @throws NotFoundError when the project holds no such file.
   */
  content(projectId: string, digest: string): Buffer;
}

/**
 * Build the file store on an open database whose migrations are applied.
 *
 * @example
 * const files = createFileStore(db);
 * const digest = files.create('acme/demo', Buffer.from('hello'), 'dev');
 * files.content('acme/demo', digest); // <Buffer 68 65 6c 6c 6f>
 */
export function createFileStore(db: SqliteDatabase): FileStore {
  // OR IGNORE: the same bytes under the same digest are already there.
  const insert = db.prepare<[string, string, Buffer, number, string, string]>(
    `INSERT OR IGNORE INTO files (project_id, digest, content, size_bytes, wb_user_id, created_at)
     VALUES (?, ?, ?, ?, ?, ?)`,
  );
  // A Buffer from better-sqlite3, a Uint8Array from node:sqlite.
  const select = db.prepare<[string, string], { content: Uint8Array }>(
    'SELECT content FROM files WHERE project_id = ? AND digest = ?',
  );
  return {
    create(projectId, content, wbUserId) {
      const digest = digestOfBytes(content);
      insert.run(projectId, digest, content, content.length, wbUserId, nowInstant().text);
      return digest;
    },
    content(projectId, digest) {
      const row = select.get(projectId, digest);
      if (row === undefined) throw new NotFoundError(`File ${quote(digest)} not found`);
      const { content } = row;
      return Buffer.isBuffer(content) ? content : Buffer.from(content.buffer, content.byteOffset, content.byteLength);
    },
  };
}
