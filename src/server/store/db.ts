/**
 * Opening the server's SQLite database: pragmas first, then the schema migrations of `schema.ts`
 * applied by `PRAGMA user_version`, each in its own transaction.
 */
import Database from 'better-sqlite3';
import { MIGRATIONS } from './schema.js';

/**
 * Open (creating when absent) the database at `path` (`:memory:` for a throwaway one) and bring
 * its schema up to date.
 *
 * @example
 * const db = openDatabase('callbridge.db');
 */
export function openDatabase(path: string): Database.Database {
  const db = new Database(path);
  try {
    configure(db);
    migrate(db, MIGRATIONS);
    optimizeOnOpen(db);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

function configure(db: Database.Database): void {
  // WAL: readers never wait for the writer, and a commit is one append to the log.
  db.pragma('journal_mode = WAL');
  // NORMAL in WAL mode syncs at checkpoints, not at every commit: a committed transaction is in
  // the OS's hands before we answer, so it survives a crash of the server *process* (SPEC §2.5);
  // only a power loss could drop the last commits. FULL would cost an fsync per request.
  db.pragma('synchronous = NORMAL');
  // Another process (a second server, a sqlite3 shell) may hold the write lock for a moment.
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
}

/**
 * Planner statistics. Without them SQLite cannot tell `calls_by_trace` (a handful of rows per
 * trace) from `calls_by_start` (the whole project) and picked the latter for trace filters and
 * call-tree deletes: 250-780 ms with 1 M calls. `0x10002` (SQLite's advice for a long-lived
 * connection) analyzes every table whose statistics are missing or stale, and `analysis_limit`
 * bounds each ANALYZE to a sample, so opening a large database stays quick.
 */
function optimizeOnOpen(db: Database.Database): void {
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
export function optimizeDatabase(db: Database.Database): void {
  db.pragma('optimize');
}

/**
 * Apply every migration past the database's `user_version`, each with its version bump in one
 * transaction, so a crash mid-migration leaves the previous version intact.
 */
export function migrate(db: Database.Database, migrations: readonly string[]): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > migrations.length) {
    throw new Error(
      `Database schema version ${current} is newer than this server knows (${migrations.length}); use a newer callbridge`,
    );
  }
  for (let version = current + 1; version <= migrations.length; version++) {
    const ddl = migrations[version - 1] as string;
    db.transaction(() => {
      db.exec(ddl);
      // user_version cannot be bound as a parameter; `version` is our own integer.
      db.pragma(`user_version = ${version}`);
    })();
  }
}
