/**
 * The objects, feedback and files tables (migration 2).
 *
 * - Rowid tables: `rowid` is insertion order, the tie-breaker after `created_at` (two writes can
 *   share a microsecond) and the default order of feedback (SPEC §2.3).
 * - `created_at` is canonical UTC text of fixed width (`2026-01-02T03:04:05.123456Z`), so text
 *   order is time order (`timestamps.ts`).
 * - Object values are JSON text; `size_bytes` is the UTF-8 size of the stored `val`, computed at
 *   write time so reads never measure.
 * - `is_latest` is kept on the row (one UPDATE when a new version lands) so `latest_only`
 *   and `digest: "latest"` are index lookups, not a max() per object.
 * - `feedback_by_project` is not a copy of `feedback_by_id`'s leading column: its entries are
 *   `(project_id, rowid)`, so it reads a project in insertion order, the default order of
 *   `feedback/query`, and a LIMIT stops early. Without it the planner sorts the whole project
 *   first (query-plans.test.ts checks the plan).
 */
export const CONTENT_DDL = `
CREATE TABLE objects (
  project_id        TEXT NOT NULL,
  object_id         TEXT NOT NULL,
  digest            TEXT NOT NULL,
  version_index     INTEGER NOT NULL,
  is_latest         INTEGER NOT NULL,
  kind              TEXT NOT NULL,
  base_object_class TEXT,
  leaf_object_class TEXT,
  val               TEXT NOT NULL,
  size_bytes        INTEGER NOT NULL,
  wb_user_id        TEXT,
  created_at        TEXT NOT NULL,
  deleted_at        TEXT
);
CREATE UNIQUE INDEX objects_by_digest ON objects (project_id, object_id, digest);
CREATE UNIQUE INDEX objects_by_version ON objects (project_id, object_id, version_index);
CREATE INDEX objects_by_created ON objects (project_id, created_at);

CREATE TABLE feedback (
  id             TEXT NOT NULL,
  project_id     TEXT NOT NULL,
  weave_ref      TEXT NOT NULL,
  feedback_type  TEXT NOT NULL,
  payload        BLOB NOT NULL,
  creator        TEXT,
  created_at     TEXT NOT NULL,
  wb_user_id     TEXT NOT NULL,
  annotation_ref TEXT,
  runnable_ref   TEXT,
  call_ref       TEXT,
  trigger_ref    TEXT
);
CREATE UNIQUE INDEX feedback_by_id ON feedback (project_id, id);
CREATE INDEX feedback_by_project ON feedback (project_id);
CREATE INDEX feedback_by_ref ON feedback (project_id, weave_ref);

CREATE TABLE files (
  project_id TEXT NOT NULL,
  digest     TEXT NOT NULL,
  content    BLOB NOT NULL,
  size_bytes INTEGER NOT NULL,
  wb_user_id TEXT,
  created_at TEXT NOT NULL,
  PRIMARY KEY (project_id, digest)
);
`;
