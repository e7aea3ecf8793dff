/**
 * `threads/stream_query` on SQLite: the threads of a project, each summed up over its turns (a
 * call whose `turn_id` is its own id, in a thread), as the hosted service's query sums them:
 * how many turns, the first start and the last end, the turn that started first and the one that
 * ended last, and the median and 99th percentile of the turns' durations. One statement over a
 * partial index of turns only sums them up, sorts and pages; sorted by what a GROUP BY gives,
 * the page is chosen first and only its threads' turns are ranked for the percentiles.
 *
 * Where the service is silent or differs, we chose: percentiles are exact, interpolated linearly
 * between the two nearest durations (ClickHouse's `quantile` samples); a thread none of whose
 * turns has ended yet is left out (the service leaves it out after paging, so a page may come out
 * short there); deleted turns are not counted (the service counts them); ties in `sort_by` fall to
 * `thread_id`; an unknown sort field is a 400; `thread_ids` lists at most 1000 ids (422).
 */
import { BadRequestError } from '../errors.js';
import { quote } from '../quote.js';
import { parseTimestamp } from '../timestamps.js';
import { THREAD_SORT_FIELDS, type Thread, type ThreadsQueryReq } from '../../wire/threads.js';
import { sqlCount } from './content-common.js';
import type { SqliteDatabase } from './sqlite.js';
import { StatementCache } from './statement-cache.js';

type SortKey = { readonly field: (typeof THREAD_SORT_FIELDS)[number]; readonly direction: 'asc' | 'desc' };

/**
 * The `level` quantile of a thread's durations, from `ranked` (each ended turn's duration `d`,
 * its rank `k` from 0 and the thread's count `n`): the two nearest durations, interpolated.
 */
function percentileSql(level: number): string {
  const at = `((n - 1) * ${level})`;
  const below = `CAST(${at} AS INTEGER)`;
  const low = `max(CASE WHEN k = ${below} THEN d END)`;
  const high = `max(CASE WHEN k = min(${below} + 1, n - 1) THEN d END)`;
  return `${low} + (${high} - ${low}) * (${at} - ${below})`;
}

export interface ThreadStore {
  /** The threads `request` selects, sorted and paged. */
  query(request: ThreadsQueryReq): Thread[];
}

/**
 * @example
 * const threads = createThreadStore(db);
 * threads.query({ project_id: 'acme/demo', sort_by: [{ field: 'turn_count', direction: 'desc' }] });
 */
export function createThreadStore(db: SqliteDatabase): ThreadStore {
  const queries = new StatementCache(db);
  return {
    query(request) {
      const keys = sortKeys(request.sort_by ?? null);
      const turns = turnsOf(request);
      // Field names from THREAD_SORT_FIELDS only (checked), never the request's text.
      const order = [...keys.map((key) => `${key.field} ${key.direction.toUpperCase()}`), 'thread_id ASC'].join(', ');
      const params = { ...turns.params, limit: sqlCount(request.limit, -1), offset: sqlCount(request.offset, 0) };
      if (keys.every((key) => AGGREGATED.has(key.field))) {
        // The page's threads first, by what a GROUP BY gives: only their turns are ranked.
        const page = `
          SELECT thread_id FROM (
            SELECT thread_id, count(*) AS turn_count, min(started_at) AS start_time, max(ended_at) AS last_updated
            FROM calls WHERE ${turns.where}
            GROUP BY thread_id HAVING last_updated IS NOT NULL ORDER BY ${order} LIMIT @limit OFFSET @offset
          )`;
        return queries.get(summarySql(turns.where, `${turns.where} AND thread_id IN (${page})`, order, '')).all(params) as Thread[];
      }
      return queries.get(summarySql(turns.where, turns.where, order, 'LIMIT @limit OFFSET @offset')).all(params) as Thread[];
    },
  };
}

/** Fields a GROUP BY of the turns gives, so a sort by them pages before any turn is ranked. */
const AGGREGATED: ReadonlySet<string> = new Set(['thread_id', 'turn_count', 'start_time', 'last_updated']);

/**
 * The threads whose turns `summedWhere` selects, summed up, sorted by `order` and paged by
 * `paging`; each one's first and last turn found among the turns `turnsWhere` selects. Every
 * turn of a thread is ranked by duration once (one window), for the percentiles.
 */
function summarySql(turnsWhere: string, summedWhere: string, order: string, paging: string): string {
  const summed = `
    SELECT thread_id, count(*) AS turn_count, min(started_at) AS start_time, max(ended_at) AS last_updated,
      ${percentileSql(0.5)} AS p50_turn_duration_ms, ${percentileSql(0.99)} AS p99_turn_duration_ms
    FROM (
      SELECT thread_id, started_at, ended_at, d,
        row_number() OVER (PARTITION BY thread_id ORDER BY d IS NULL, d) - 1 AS k,
        count(d) OVER (PARTITION BY thread_id) AS n
      FROM (
        SELECT thread_id, started_at, ended_at,
          -- Whole milliseconds between the two instants, as ClickHouse's dateDiff counts them.
          CASE WHEN ended_us IS NULL THEN NULL ELSE ended_us / 1000 - started_us / 1000 END AS d
        FROM calls WHERE ${summedWhere}
      )
    )
    GROUP BY thread_id HAVING last_updated IS NOT NULL
    ORDER BY ${order} ${paging}`;
  return `
    SELECT thread_id, turn_count, start_time, last_updated,
      (SELECT id FROM calls WHERE ${turnsWhere} AND thread_id = summed.thread_id ORDER BY started_us, id LIMIT 1) AS first_turn_id,
      (SELECT id FROM calls WHERE ${turnsWhere} AND thread_id = summed.thread_id AND ended_us IS NOT NULL
        ORDER BY ended_us DESC, id LIMIT 1) AS last_turn_id,
      p50_turn_duration_ms, p99_turn_duration_ms
    FROM (${summed}) AS summed
    ORDER BY ${order}`;
}

/** The WHERE of a request's turns, with named parameters, and their values. */
function turnsOf(request: ThreadsQueryReq): { where: string; params: Record<string, unknown> } {
  // The partial index's own terms first, so that the planner takes it.
  const where = ['project_id = @project', 'thread_id IS NOT NULL', 'id = turn_id', 'has_start = 1', 'deleted_at IS NULL'];
  const params: Record<string, unknown> = { project: request.project_id };
  const filter = request.filter ?? {};
  if (filter.thread_ids !== undefined && filter.thread_ids !== null && filter.thread_ids.length > 0) {
    where.push('thread_id IN (SELECT value FROM json_each(@threadIds))');
    params.threadIds = JSON.stringify(filter.thread_ids);
  } else {
    // As the service: an empty thread id is no thread, unless asked for by name.
    where.push("thread_id != ''");
  }
  for (const [key, name, comparison] of [['after_datetime', 'after', '>'], ['before_datetime', 'before', '<']] as const) {
    const value = filter[key];
    if (value === undefined || value === null) continue;
    const instant = parseTimestamp(value);
    if (instant === null) throw new BadRequestError(`filter.${key} must be an ISO 8601 date-time, got ${quote(value)}`);
    where.push(`started_at ${comparison} @${name}`);
    params[name] = instant.text;
  }
  return { where: where.join(' AND '), params };
}

/** `sort_by`, checked; by default the latest activity first. */
function sortKeys(sortBy: ReadonlyArray<{ field: string; direction: 'asc' | 'desc' }> | null): SortKey[] {
  if (sortBy === null || sortBy.length === 0) return [{ field: 'last_updated', direction: 'desc' }];
  return sortBy.map(({ field, direction }) => {
    if (!(THREAD_SORT_FIELDS as readonly string[]).includes(field)) {
      throw new BadRequestError(`Unsupported sort field ${quote(field)}: one of ${THREAD_SORT_FIELDS.join(', ')}`);
    }
    return { field: field as SortKey['field'], direction };
  });
}
