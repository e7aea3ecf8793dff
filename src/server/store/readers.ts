/**
 * Extra read-only connections for long reads (`calls/stream_query`, `table/query`), one pool per
 * server shared by them, so `maxConcurrentStreams` bounds every streamed answer.
 *
 * Why a second connection: a statement being iterated keeps its connection busy (better-sqlite3)
 * (no other statement may run on it until the iterator ends), and a stream can last as long as a
 * slow client makes it. On its own connection the iteration holds only a WAL read snapshot, which
 * never blocks the writer, so calls keep being written while a million rows stream out. The other
 * way, pages on the main connection, needs keyset pagination over arbitrary `sort_by` expressions
 * (NULLs, mixed directions, JSON values) or OFFSET pages, whose cost grows with the square of the
 * result; one statement on its own connection sorts once and streams.
 *
 * A connection serves one stream at a time; a few idle ones are kept for the next stream. Their
 * number is capped: each holds a WAL snapshot for as long as its client takes to read, and the
 * WAL cannot be checkpointed past the oldest snapshot, so slow or stalled clients without a cap
 * would grow the WAL file (and the open file descriptors) without bound. Past the cap a query
 * answers 503 with `Retry-After`, which every client of the service already retries.
 */
import { openSqlite, sqliteDriverOf, type SqliteDatabase } from './sqlite.js';
import { ServiceUnavailableError } from '../errors.js';
import { registerSqlFunctions } from '../query/sql-functions.js';
import { StatementCache } from './statement-cache.js';

/** A read-only connection with its own prepared statements. */
export interface Reader {
  readonly db: SqliteDatabase;
  readonly statements: StatementCache;
}

export interface ReaderPool {
  /**
   * A connection for one long read, or null when the database lives in memory (another
   * connection would see another, empty database): the caller then reads on the main connection.
   */
  acquire(): Reader | null;
  /**
   * Give a connection back once its iteration has ended (finished or returned). Releasing one
   * that is not out (released already) does nothing: an answer whose first row failed is
   * released by its cursor and again by the caller's error path, and counting it twice would let
   * two streams share one connection.
   */
  release(reader: Reader): void;
  /** Close idle connections now and busy ones when they are released. */
  close(): void;
}

/** Idle connections kept open; more are opened while more streams run at once. */
const MAX_IDLE_READERS = 2;
/** Streams served at once by default (`ServerOptions.maxConcurrentStreams`). */
export const DEFAULT_MAX_CONCURRENT_STREAMS = 16;
/** What the 503 past the cap asks a client to wait: streams usually end within seconds. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Read-only connections to the database `main` has open.
 *
 * @example
 * const readers = createReaderPool(db);
 * const reader = readers.acquire();
 * try { for (const row of reader.statements.get(sql).iterate()) send(row); } finally { readers.release(reader); }
 */
export function createReaderPool(main: SqliteDatabase, maxBusy: number = DEFAULT_MAX_CONCURRENT_STREAMS): ReaderPool {
  const idle: Reader[] = [];
  const busy = new Set<Reader>();
  let closed = false;
  return {
    acquire() {
      if (main.memory) return null;
      if (busy.size >= maxBusy) {
        throw new ServiceUnavailableError(`Too many query answers streaming at once (${maxBusy}); retry shortly`, RETRY_AFTER_SECONDS);
      }
      const reused = idle.pop();
      const reader = reused ?? openReader(main);
      busy.add(reader);
      return reader;
    },
    release(reader) {
      if (!busy.delete(reader)) return;
      if (closed || idle.length >= MAX_IDLE_READERS) reader.db.close();
      else idle.push(reader);
    },
    close() {
      closed = true;
      for (const reader of idle.splice(0)) reader.db.close();
    },
  };
}

function openReader(main: SqliteDatabase): Reader {
  // The writer may hold the lock for a moment (a checkpoint, WAL recovery on open): the default
  // timeout waits for it.
  const db = openSqlite(main.name, { readonly: true, fileMustExist: true, driver: sqliteDriverOf(main) });
  registerSqlFunctions(db);
  return { db, statements: new StatementCache(db) };
}
