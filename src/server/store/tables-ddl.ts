/**
 * Tables and their rows (migration 3), as the hosted service keeps them: a row is stored once per
 * digest per project, and a table is the ordered list of its row digests.
 *
 * - `table_rows.val` is the exact text the row digest hashes (Python's `json.dumps`, keys sorted, ASCII, `", "`
 *   separators: python-json.ts), so a stored row can be checked against its digest and is
 *   answered without a parse. `size_bytes` is its length, counted by storage sizes.
 * - `tables.row_digests` is a JSON array (rows may repeat); `row_count` and `size_bytes` are kept
 *   at write time so `table/query_stats_batch` reads no list.
 * - Rowid tables (not WITHOUT ROWID): rows and row lists can be large, which would bloat the
 *   primary-key b-tree of a WITHOUT ROWID table.
 */
export const TABLES_DDL = `
CREATE TABLE table_rows (
  project_id TEXT NOT NULL,
  digest     TEXT NOT NULL,
  val        TEXT NOT NULL,
  size_bytes INTEGER NOT NULL,
  PRIMARY KEY (project_id, digest)
);

CREATE TABLE tables (
  project_id  TEXT NOT NULL,
  digest      TEXT NOT NULL,
  row_digests TEXT NOT NULL,
  row_count   INTEGER NOT NULL,
  size_bytes  INTEGER NOT NULL,
  PRIMARY KEY (project_id, digest)
);
`;
