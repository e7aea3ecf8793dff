/**
 * Opening the server's SQLite database: pragmas first, then the schema migrations of `schema.ts`
 * applied by `PRAGMA user_version`, each in its own transaction.
 */
import { closeSync, openSync } from 'node:fs';
import { openSqlite, type SqliteDatabase, type SqliteDriver } from './sqlite.js';
import { MIGRATIONS } from './schema.js';
import { registerSqlFunctions } from '../query/sql-functions.js';

/**
 * Open (creating when absent) the database at `path` (`:memory:` for a throwaway one) and bring
 * its schema up to date. A new file is made readable by its owner only (see createPrivately).
 *
 * @example
 * const db = openDatabase('callbridge.db');
 */
export function openDatabase(path: string, driver?: SqliteDriver): SqliteDatabase {
  createPrivately(path);
  const db = openSqlite(path, { driver });
  try {
    configure(db);
    registerSqlFunctions(db);
    migrate(db, MIGRATIONS);
    optimizeOnOpen(db);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * Create the database file, when it does not exist yet, with mode 0600: it holds prompts, outputs
 * and whatever else was traced, and SQLite would create it with the umask's mode (0644 for most
 * users), readable by every local user. SQLite gives the WAL and shared-memory files the mode of
 * the database file. An existing file keeps its mode; a path that cannot be created here is left
 * to SQLite, which reports it.
 */
function createPrivately(path: string): void {
  if (path === '' || path === ':memory:' || path.startsWith('file:')) return;
  try {
    closeSync(openSync(path, 'wx', 0o600));
  } catch {
    // EEXIST (an existing database), or a path SQLite will refuse with its own message.
  }
}

function configure(db: SqliteDatabase): void {
  // WAL: readers never wait for the writer, and a commit is one append to the log.
  db.pragma('journal_mode = WAL');
  // NORMAL in WAL mode syncs at checkpoints, not at every commit: a committed transaction is in
  // the OS's hands before we answer, so it survives a crash of the server *process* (SPEC §2.5);
  // only a power loss could drop the last commits. FULL would cost an fsync per request.
  db.pragma('synchronous = NORMAL');
  // Another process (a second server, a sqlite3 shell) may hold the write lock for a moment.
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  // The server checkpoints from a worker thread (wal-checkpoints.ts), not inside the commit that
  // crosses SQLite's default threshold (1000 pages: a checkpoint with its fsyncs every few
  // 1000-item batches, 12.5 ms against 3.5 ms per commit, measured). This backstop only fires
  // when nothing else checkpoints (tools, tests) or the WAL outgrows what the worker keeps up with.
  db.pragma(`wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
  // Once a checkpoint lets the WAL restart, a file that grew past this (a long read held the
  // checkpoints back) shrinks back. As large as the WAL grows under sustained ingest before the
  // checkpointer restarts it: cutting it to 64 MiB at every restart and growing it again cost
  // ~3 % of ingest throughput (measured). A clean close removes the file.
  db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  // The default 2 MiB cache holds little of the four call indexes, whose random keys (span and
  // trace ids) touch a different leaf for nearly every insert; misses become reads of the WAL or
  // the file. 64 MiB is a budget, not an allocation: pages are taken as they are used.
  db.pragma(`cache_size = ${-CACHE_KIB}`);
}

/**
 * Pages the WAL may hold before a commit checkpoints on its own (4 KiB pages: 512 MiB): above
 * the length at which the server's checkpointer completes its checkpoints (256 MiB).
 */
const BACKSTOP_CHECKPOINT_PAGES = 131072;
/** Size the WAL file is cut back to when it restarts (wal-checkpoints.ts restarts it at 256 MiB). */
const WAL_SIZE_LIMIT_BYTES = 256 * 1024 * 1024;
/** Page cache of the writing connection, in KiB. */
const CACHE_KIB = 64 * 1024;

/**
 * Planner statistics. Without them SQLite cannot tell `calls_by_trace` (a handful of rows per
 * trace) from `calls_by_start` (the whole project) and picked the latter for trace filters and
 * call-tree deletes: 250-780 ms with 1 M calls. `0x10002` (SQLite's advice for a long-lived
 * connection) analyzes every table whose statistics are missing or stale, and `analysis_limit`
 * bounds each ANALYZE to a sample, so opening a large database stays quick.
 */
function optimizeOnOpen(db: SqliteDatabase): void {
  db.pragma(`analysis_limit = ${ANALYSIS_LIMIT_ROWS}`);
  db.pragma('optimize = 0x10002');
}

/** Rows each index's ANALYZE samples: enough for the planner's choice between our indexes. */
const ANALYSIS_LIMIT_ROWS = 1000;

/**
 * Refresh the planner statistics of tables that grew or shrank a lot since they were analyzed
 * (cheap when nothing changed). The server runs it periodically and before closing, as SQLite
 * advises for long-lived connections: a server that started on an empty database must not keep
 * planning for empty tables once it holds a million calls.
 */
export function optimizeDatabase(db: SqliteDatabase): void {
  db.pragma('optimize');
}

/**
 * Close the database, first moving the whole WAL into the main file and truncating it, so the
 * file left behind is complete on its own (copies, backups) and the next open replays nothing.
 * When a reader still streaming holds the WAL the checkpoint stops short (no error), and the
 * last connection to close checkpoints instead.
 */
export function closeDatabase(db: SqliteDatabase): void {
  if (!db.open) return;
  if (!db.memory) {
    // TRUNCATE waits (busy_timeout) for readers to leave the WAL: wait a moment, not 5 s.
    db.pragma(`busy_timeout = ${CLOSE_CHECKPOINT_WAIT_MS}`);
    db.pragma('wal_checkpoint(TRUNCATE)');
  }
  db.close();
}

/** How long the closing checkpoint waits for a reader still in the WAL. */
const CLOSE_CHECKPOINT_WAIT_MS = 200;

/**
 * Apply every migration past the database's `user_version`, each with its version bump in one
 * transaction, so a crash mid-migration leaves the previous version intact. Each step reads the
 * version inside its own write transaction (BEGIN IMMEDIATE): two servers opening the same new
 * file at once take turns, and the second finds the steps the first applied instead of running
 * them again ("table calls already exists").
 */
export function migrate(db: SqliteDatabase, migrations: readonly string[]): void {
  const applyNextStep = db.transaction((): boolean => {
    const current = db.pragma('user_version', { simple: true }) as number;
    if (current > migrations.length) {
      throw new Error(
        `Database schema version ${current} is newer than this server knows (${migrations.length}); use a newer callbridge`,
      );
    }
    if (current === migrations.length) return false;
    db.exec(migrations[current] as string);
    // user_version cannot be bound as a parameter; the version is our own integer.
    db.pragma(`user_version = ${current + 1}`);
    return true;
  });
  while (applyNextStep.immediate());
}
