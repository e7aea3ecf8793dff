/**
 * Tables on SQLite, as the hosted service keeps them (its datasets' `rows`): rows stored once per
 * digest per project, a table an ordered list of row digests. Tables are immutable: an update
 * writes a new table and answers its digest. Every write is one transaction, all or nothing.
 *
 * Digests, as the service computes them (`weave/shared/digest.py`): a row's is the service digest
 * (SHA-256, base64url, `-`->`X`, `_`->`Y`) of Python's `json.dumps(row, sort_keys=True)` text, which the caller
 * hands in (digest-bodies.ts); a table's is the lowercase hex SHA-256 of its row digests
 * concatenated.
 */
import { createHash } from 'node:crypto';
import type { SqliteDatabase } from './sqlite.js';
import { BadRequestError, HttpError, NotFoundError } from '../errors.js';
import { quote } from '../quote.js';
import { digestOfText } from '../../wire/digest.js';
import type { SortBy } from '../../wire/common.js';
import type { TableCreateFromDigestsRes, TableCreateRes, TableStatsRow, TableUpdateRes } from '../../wire/tables.js';
import { sqlCount, utf8Length } from './content-common.js';
import { createReaderPool, type ReaderPool } from './readers.js';
import { StatementCache } from './statement-cache.js';
import { cursorOf, type TextCursor } from '../paged-text.js';
import { compileDocumentSortTerms } from '../query/index.js';

/** One operation of a table update; rows come as their Python `json.dumps` text. */
export type TableUpdate =
  | { readonly kind: 'append'; readonly rowText: string }
  | { readonly kind: 'pop'; readonly index: number }
  | { readonly kind: 'insert'; readonly index: number; readonly rowText: string };

export interface TableQuery {
  readonly projectId: string;
  readonly digest: string;
  /** Only these rows (null or empty: every row). */
  readonly rowDigests: readonly string[] | null;
  /** Dotted paths into the rows; table order breaks ties. Null: table order. */
  readonly sortBy: readonly SortBy[] | null;
  readonly limit: number | null;
  readonly offset: number | null;
}

export interface TableStore {
  /**
   * Store a table of these rows (each row's `json.dumps` text), in order.
   * @throws HttpError 409 when `expectedDigest` is given and the table digests otherwise.
   */
  create(projectId: string, rowTexts: readonly string[], expectedDigest?: string | null): TableCreateRes;
  /**
   * Store the table `updates` make of `baseDigest`.
   * @throws NotFoundError when there is no such base table; BadRequestError for an index out of range.
   */
  update(projectId: string, baseDigest: string, updates: readonly TableUpdate[]): TableUpdateRes;
  /**
   * Store a table of rows stored already in this project.
   * @throws BadRequestError naming rows the project does not hold.
   */
  createFromDigests(projectId: string, rowDigests: readonly string[], expectedDigest?: string | null): TableCreateFromDigestsRes;
  /**
   * The rows a query selects, as JSON text (`{"digest","val","original_index"}`) read one at a
   * time; none when the table does not exist (as the service answers).
   */
  query(query: TableQuery): TextCursor;
  /** Row counts (and storage sizes) of the tables that exist, in the order asked, each once. */
  stats(projectId: string, digests: readonly string[], includeStorageSize: boolean): TableStatsRow[];
  /**
   * The stored text of rows of one table, by row digest (rows the table does not list are left
   * out), or null when there is no such table.
   */
  rowsOf(projectId: string, tableDigest: string, rowDigests: readonly string[]): Map<string, string> | null;
  close(): void;
}

/**
 * Most row positions one `table/update` may shift (each `pop` or `insert` shifts the rows after
 * it): a few thousand inserts into a table of a million rows would otherwise hold the server for
 * minutes. Past it the answer is a 413, so the client sends the updates in several requests.
 */
export const MAX_UPDATE_ROW_MOVES = 50_000_000;

interface TableRow {
  row_digests: string;
  size_bytes: number;
}

interface QueriedRow {
  original_index: number;
  digest: string;
  val: string;
}

/**
 * The table digest of these row digests: hex SHA-256 of their concatenation.
 *
 * @example tableDigestOf([]) // 'e3b0c442…' (SHA-256 of nothing)
 */
export function tableDigestOf(rowDigests: readonly string[]): string {
  const hash = createHash('sha256');
  for (const rowDigest of rowDigests) hash.update(rowDigest, 'utf8');
  return hash.digest('hex');
}

/**
 * Build the table store on an open database whose migrations are applied.
 *
 * @example
 * const tables = createTableStore(db);
 * const { digest } = tables.create('acme/demo', ['{"q": "2+2?"}']);
 */
export function createTableStore(db: SqliteDatabase, options: { readonly readers?: ReaderPool } = {}): TableStore {
  const insertRow = db.prepare<[string, string, string, number]>(
    'INSERT OR IGNORE INTO table_rows (project_id, digest, val, size_bytes) VALUES (?, ?, ?, ?)',
  );
  const insertTable = db.prepare<[string, string, string, number, number]>(
    'INSERT OR IGNORE INTO tables (project_id, digest, row_digests, row_count, size_bytes) VALUES (?, ?, ?, ?, ?)',
  );
  const readTable = db.prepare<[string, string], TableRow>('SELECT row_digests, size_bytes FROM tables WHERE project_id = ? AND digest = ?');
  const rowSize = db.prepare<[string, string], { size_bytes: number }>(
    'SELECT size_bytes FROM table_rows WHERE project_id = ? AND digest = ?',
  );
  // Lists travel as one bound JSON array, so their length never meets SQLite's parameter limit.
  const rowFacts = db.prepare<[string, string], { found: number; size: number }>(
    `SELECT COUNT(r.digest) AS found, COALESCE(SUM(r.size_bytes), 0) AS size
     FROM json_each(?) j LEFT JOIN table_rows r ON r.project_id = ? AND r.digest = j.value`,
  );
  const missingRows = db.prepare<[string, string], { digest: string }>(
    `SELECT DISTINCT j.value AS digest FROM json_each(?) j
     WHERE NOT EXISTS (SELECT 1 FROM table_rows r WHERE r.project_id = ? AND r.digest = j.value) LIMIT 5`,
  );
  const tableStats = db.prepare<[string, string], { digest: string; row_count: number; size_bytes: number }>(
    'SELECT digest, row_count, size_bytes FROM tables WHERE project_id = ? AND digest IN (SELECT value FROM json_each(?))',
  );
  const tableExists = db.prepare<[string, string], { one: number }>('SELECT 1 AS one FROM tables WHERE project_id = ? AND digest = ?');
  const tableRows = db.prepare<[string, string, string], { digest: string; val: string }>(
    `SELECT DISTINCT r.digest, r.val FROM ${TABLE_ROWS_JOIN}
     WHERE t.project_id = ? AND t.digest = ? AND j.value IN (SELECT value FROM json_each(?)) AND ${ROW_OF_ITEM}`,
  );
  const queries = new StatementCache(db);
  // The server's shared pool, or one of its own (closed with the store) when used alone.
  const readers = options.readers ?? createReaderPool(db);

  const storeRow = (projectId: string, rowText: string): { digest: string; size: number } => {
    const digest = digestOfText(rowText);
    const size = utf8Length(rowText);
    insertRow.run(projectId, digest, rowText, size);
    return { digest, size };
  };

  const create = db.transaction((projectId: string, rowTexts: readonly string[], rowDigests: readonly string[], digest: string) => {
    let size = 0;
    rowTexts.forEach((rowText, index) => {
      const rowSize = utf8Length(rowText);
      insertRow.run(projectId, rowDigests[index] as string, rowText, rowSize);
      size += rowSize;
    });
    insertTable.run(projectId, digest, JSON.stringify(rowDigests), rowDigests.length, size);
  });

  const update = db.transaction((projectId: string, baseDigest: string, updates: readonly TableUpdate[]) => {
    const base = readTable.get(projectId, baseDigest);
    if (base === undefined) throw new NotFoundError(`Table ${baseDigest} not found`);
    const rowDigests = JSON.parse(base.row_digests) as string[];
    let size = base.size_bytes;
    let moves = 0;
    const updated: string[] = [];
    updates.forEach((change, index) => {
      if (change.kind === 'append') {
        const stored = storeRow(projectId, change.rowText);
        rowDigests.push(stored.digest);
        size += stored.size;
        updated.push(stored.digest);
        return;
      }
      const last = change.kind === 'pop' ? rowDigests.length - 1 : rowDigests.length;
      if (change.index < 0 || change.index > last) {
        throw new BadRequestError(`updates[${index}].${change.kind}.index ${change.index} is out of range for a table of ${rowDigests.length} rows`);
      }
      moves += rowDigests.length - change.index;
      if (moves > MAX_UPDATE_ROW_MOVES) {
        throw new HttpError(413, `These pops and inserts shift more than ${MAX_UPDATE_ROW_MOVES} row positions: send them in several requests`);
      }
      if (change.kind === 'pop') {
        const [popped] = rowDigests.splice(change.index, 1) as [string];
        size -= rowSize.get(projectId, popped)?.size_bytes ?? 0;
        updated.push(popped);
      } else {
        const stored = storeRow(projectId, change.rowText);
        rowDigests.splice(change.index, 0, stored.digest);
        size += stored.size;
        updated.push(stored.digest);
      }
    });
    const digest = tableDigestOf(rowDigests);
    insertTable.run(projectId, digest, JSON.stringify(rowDigests), rowDigests.length, size);
    return { digest, updated_row_digests: updated };
  });

  const createFromDigests = db.transaction((projectId: string, rowDigests: readonly string[], expectedDigest: string | null | undefined) => {
    const digest = tableDigestOf(rowDigests);
    checkExpectedDigest(expectedDigest, digest, rowDigests.length);
    const list = JSON.stringify(rowDigests);
    const facts = rowFacts.get(list, projectId) as { found: number; size: number };
    if (facts.found < rowDigests.length) {
      // The service stores such a table, whose missing rows then never read back; here it is
      // refused, which also keeps a table from naming another project's rows.
      const missing = missingRows.all(list, projectId).map((row) => row.digest);
      throw new BadRequestError(`Rows not found in project ${quote(projectId)}: ${quote(missing, 300)}`);
    }
    insertTable.run(projectId, digest, list, rowDigests.length, facts.size);
    return { digest };
  });

  return {
    create(projectId, rowTexts, expectedDigest) {
      const rowDigests = rowTexts.map((rowText) => digestOfText(rowText));
      const digest = tableDigestOf(rowDigests);
      checkExpectedDigest(expectedDigest, digest, rowDigests.length);
      create(projectId, rowTexts, rowDigests, digest);
      return { digest, row_digests: rowDigests };
    },

    update(projectId, baseDigest, updates) {
      // Immediate: it reads the base table before it writes.
      return update.immediate(projectId, baseDigest, updates);
    },

    createFromDigests(projectId, rowDigests, expectedDigest) {
      return createFromDigests.immediate(projectId, rowDigests, expectedDigest);
    },

    query(query) {
      const { sql, params } = buildQuery(query);
      const reader = readers.acquire();
      if (reader === null) {
        // In-memory database: no second connection sees it, and an open iterator would block
        // every write on this one, so the rows are read at once.
        return cursorOf((queries.get(sql).all(params) as QueriedRow[])[Symbol.iterator](), () => {}, rowJson);
      }
      try {
        return cursorOf(reader.statements.get(sql).iterate(params) as IterableIterator<QueriedRow>, () => readers.release(reader), rowJson);
      } catch (error) {
        readers.release(reader);
        throw error;
      }
    },

    stats(projectId, digests, includeStorageSize) {
      const found = new Map(tableStats.all(projectId, JSON.stringify(digests)).map((row) => [row.digest, row]));
      const answered: TableStatsRow[] = [];
      for (const digest of new Set(digests)) {
        const row = found.get(digest);
        if (row === undefined) continue;
        answered.push({ digest, count: row.row_count, storage_size_bytes: includeStorageSize ? row.size_bytes : null });
      }
      return answered;
    },

    rowsOf(projectId, tableDigest, rowDigests) {
      if (tableExists.get(projectId, tableDigest) === undefined) return null;
      const rows = tableRows.all(projectId, tableDigest, JSON.stringify(rowDigests));
      return new Map(rows.map((row) => [row.digest, row.val]));
    },

    close() {
      if (options.readers === undefined) readers.close();
    },
  };
}

/**
 * A table's rows in its order: the table, its list of row digests, each row. CROSS JOIN fixes that
 * order of the loops; left to itself the planner scanned every row of the project and read the
 * list once per row (minutes for a table of 50 000 rows).
 */
const TABLE_ROWS_JOIN = 'tables t CROSS JOIN json_each(t.row_digests) j CROSS JOIN table_rows r';
const ROW_OF_ITEM = 'r.project_id = t.project_id AND r.digest = j.value';

/** The service's check of a client-computed digest (its `DigestMismatchError`, a 409). */
function checkExpectedDigest(expected: string | null | undefined, actual: string, rows: number): void {
  if (expected !== undefined && expected !== null && expected !== actual) {
    throw new HttpError(409, `Client table (${rows} rows) digest ${quote(expected)} != server digest ${actual}`);
  }
}

/** The row's JSON line: the stored row text is JSON already, spliced in without a parse. */
function rowJson(row: QueriedRow): string {
  return `{"digest":"${row.digest}","val":${row.val},"original_index":${row.original_index}}`;
}

/**
 * A `sort_by` field's parts: `a.b` -> `a`, `b`, split at every dot as the service splits them
 * (no `\.` escape); numeric parts read as list indexes (`scores.0`), as its paths do.
 * @throws BadRequestError for an empty part, as the service refuses `a..b` and `.a`.
 */
function sortFieldParts(field: string): string[] {
  const parts = field.split('.');
  if (parts.some((part) => part.trim() === '')) {
    throw new BadRequestError(`Invalid sort field ${quote(field)}: field names cannot start or end with dots, contain consecutive dots or be blank`);
  }
  return parts;
}

function buildQuery(query: TableQuery): { sql: string; params: unknown[] } {
  const params: unknown[] = [query.projectId, query.digest];
  let where = 't.project_id = ? AND t.digest = ?';
  // An empty list is no filter, as the service reads it (`if req.filter.row_digests:`).
  const filtered = query.rowDigests !== null && query.rowDigests.length > 0;
  if (filtered) {
    where += ' AND j.value IN (SELECT value FROM json_each(?))';
    params.push(JSON.stringify(query.rowDigests));
  }
  // Sorted as the service sorts a JSON path (its OrderField): rows with the value first in either
  // direction (a JSON null counts as absent), then by the value read as a number, then as text.
  const order: string[] = [];
  for (const sort of query.sortBy ?? []) {
    for (const term of compileDocumentSortTerms('r.val', sortFieldParts(sort.field), sort.field, sort.direction, 'absent')) {
      order.push(term.sql);
      params.push(...term.params);
    }
  }
  // Table order needs no sort: json_each reads the list in order and the join keeps it the outer
  // loop (a sort would copy the whole table into a temporary b-tree first). Sorted rows break
  // ties by it.
  const orderBy = order.length === 0 ? '' : `ORDER BY ${[...order, 'j.key ASC'].join(', ')}`;
  let offset = sqlCount(query.offset, 0);
  if (order.length === 0 && !filtered) {
    // In table order every row is there (rows are checked when a table is made), so the offset
    // is a position: skipped items are never joined to their rows (pages deep into a table of a
    // million rows: 2 s each otherwise).
    where += ' AND j.key >= ?';
    params.push(offset);
    offset = 0;
  }
  params.push(sqlCount(query.limit, -1), offset);
  return {
    sql: `SELECT j.key AS original_index, r.digest AS digest, r.val AS val FROM ${TABLE_ROWS_JOIN}
      WHERE ${where} AND ${ROW_OF_ITEM} ${orderBy} LIMIT ? OFFSET ?`,
    params,
  };
}
