/**
 * The call records table (migration 1). One row per `(project_id, id)` holds the merge of the
 * call's start part and end part, which may arrive in either order (SPEC §2.1).
 *
 * - Timestamps are kept twice: `started_at`/`ended_at` as canonical UTC text
 *   (`2026-01-02T03:04:05.123456Z`, fixed width, so text order is time order and sorting needs no
 *   conversion) and `started_us`/`ended_us` as integer microseconds for latency. A query literal
 *   may be written in any zone or as Unix seconds, so `$expr` compares these columns as instants
 *   (`type: 'datetime'` in calls-fields.ts): the literal is turned into this canonical text first,
 *   never compared as written.
 * - JSON values are stored as JSON text; `start_bytes`/`end_bytes` are the UTF-8 sizes of the
 *   part's stored JSON, computed at write time so storage sizes cost nothing on read.
 * - `has_start` marks rows whose start part has arrived: a row holding only an end part is not a
 *   call yet (no op name, no start time) and stays invisible until its start arrives.
 * - An ordinary rowid table (not WITHOUT ROWID): rows carry large JSON values, which would bloat
 *   the primary-key b-tree of a WITHOUT ROWID table.
 */
export const CALLS_DDL = `
CREATE TABLE calls (
  project_id      TEXT NOT NULL,
  id              TEXT NOT NULL,
  has_start       INTEGER NOT NULL DEFAULT 0,
  op_name         TEXT,
  display_name    TEXT,
  trace_id        TEXT,
  parent_id       TEXT,
  thread_id       TEXT,
  turn_id         TEXT,
  started_at      TEXT,
  started_us      INTEGER,
  attributes      TEXT,
  inputs          TEXT,
  otel_dump       TEXT,
  wb_user_id      TEXT,
  wb_run_id       TEXT,
  wb_run_step     INTEGER,
  start_bytes     INTEGER NOT NULL DEFAULT 0,
  ended_at        TEXT,
  ended_us        INTEGER,
  output          TEXT,
  summary         TEXT,
  exception       TEXT,
  wb_run_step_end INTEGER,
  end_bytes       INTEGER NOT NULL DEFAULT 0,
  deleted_at      TEXT
);
CREATE UNIQUE INDEX calls_by_id ON calls (project_id, id);
CREATE INDEX calls_by_trace ON calls (project_id, trace_id);
CREATE INDEX calls_by_start ON calls (project_id, started_at);
CREATE INDEX calls_by_parent ON calls (project_id, parent_id);
`;

/**
 * Migration 5: the turns of each thread, for `threads/stream_query`. Partial: only turn calls
 * (a call whose `turn_id` is its own id, in a thread) are in it, so writing other calls costs
 * nothing more.
 */
export const THREADS_DDL = `
CREATE INDEX calls_by_thread_turn ON calls (project_id, thread_id) WHERE thread_id IS NOT NULL AND id = turn_id;
`;
