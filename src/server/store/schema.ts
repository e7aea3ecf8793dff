/**
 * Database schema, versioned by `PRAGMA user_version`: migration N (1-based) moves a database at
 * version N-1 to N, inside one transaction. Never edit a released migration; append a new one.
 * Each table group keeps its DDL beside the store that owns it.
 */
import { CALLS_DDL, THREADS_DDL } from './calls-ddl.js';
import { CONTENT_DDL } from './content-ddl.js';
import { TABLES_DDL } from './tables-ddl.js';
import { TOKEN_PRICES_DDL } from './token-prices-ddl.js';

export const MIGRATIONS: readonly string[] = [
  // 1: call records.
  CALLS_DDL,
  // 2: objects, files and feedback.
  CONTENT_DDL,
  // 3: tables (datasets) and their rows.
  TABLES_DDL,
  // 4: a project's token prices (cost/create).
  TOKEN_PRICES_DDL,
  // 5: the turns of each thread (threads/stream_query).
  THREADS_DDL,
];
