/**
 * `threads/stream_query` on SQLite: the threads of a project, each summed up over its turns (a
 * call whose `turn_id` is its own id, in a thread), as the hosted service's query sums them:
 * how many turns, the first start and the last end, the turn that started first and the one that
 * ended last, and the median and 99th percentile of the turns' durations.
 *
 * Counts, first start and last end are aggregated, sorted and paged in SQL over a partial index
 * of turns only; the rest is worked out for the threads of the page alone, from their turns. A
 * sort by a percentile needs every thread's: those are then summed up one thread at a time, read
 * in thread order, before sorting and paging (a cost in proportion to the project's turns).
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
import { compareCodePoints } from '../../wire/digest.js';
import { THREAD_SORT_FIELDS, type Thread, type ThreadsQueryReq } from '../../wire/threads.js';
import { sqlCount } from './content-common.js';
import type { SqliteDatabase } from './sqlite.js';
import { StatementCache } from './statement-cache.js';

/** A turn as read: its thread, id and times. */
interface TurnRow {
  readonly thread_id: string;
  readonly id: string;
  readonly started_at: string;
  readonly started_us: number;
  readonly ended_at: string | null;
  readonly ended_us: number | null;
}

type SortKey = { readonly field: (typeof THREAD_SORT_FIELDS)[number]; readonly direction: 'asc' | 'desc' };

/** Fields SQL aggregates, so a sort by them pages in SQL. */
const AGGREGATED: ReadonlySet<string> = new Set(['thread_id', 'turn_count', 'start_time', 'last_updated']);

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
      if (keys.every((key) => AGGREGATED.has(key.field))) {
        // Field names from THREAD_SORT_FIELDS only (checked), never the request's text.
        const order = [...keys.map((key) => `${key.field} ${key.direction.toUpperCase()}`), 'thread_id ASC'];
        const pageSql =
          'SELECT thread_id, count(*) AS turn_count, min(started_at) AS start_time, max(ended_at) AS last_updated ' +
          `FROM calls WHERE ${turns.where} GROUP BY thread_id HAVING last_updated IS NOT NULL ` +
          `ORDER BY ${order.join(', ')} LIMIT ? OFFSET ?`;
        const page = queries
          .get(pageSql)
          .all(...turns.params, sqlCount(request.limit, -1), sqlCount(request.offset, 0)) as Array<{ thread_id: string }>;
        const ofThread = queries.get(`SELECT thread_id, id, started_at, started_us, ended_at, ended_us FROM calls WHERE ${turns.where} AND thread_id = ?`);
        return page.map(({ thread_id }) => summary(ofThread.all(...turns.params, thread_id) as TurnRow[]) as Thread);
      }
      const sql = `SELECT thread_id, id, started_at, started_us, ended_at, ended_us FROM calls WHERE ${turns.where} ORDER BY thread_id`;
      const threads = summarize(queries.get(sql).iterate(...turns.params) as IterableIterator<TurnRow>);
      threads.sort(comparison(keys));
      const offset = request.offset ?? 0;
      return threads.slice(offset, request.limit === undefined || request.limit === null ? undefined : offset + request.limit);
    },
  };
}

/** The WHERE of a request's turns and its parameters. */
function turnsOf(request: ThreadsQueryReq): { where: string; params: unknown[] } {
  // The partial index's own terms first, so that the planner takes it.
  const where = ['project_id = ?', 'thread_id IS NOT NULL', 'id = turn_id', 'has_start = 1', 'deleted_at IS NULL'];
  const params: unknown[] = [request.project_id];
  const filter = request.filter ?? {};
  if (filter.thread_ids !== undefined && filter.thread_ids !== null && filter.thread_ids.length > 0) {
    where.push('thread_id IN (SELECT value FROM json_each(?))');
    params.push(JSON.stringify(filter.thread_ids));
  } else {
    // As the service: an empty thread id is no thread, unless asked for by name.
    where.push("thread_id != ''");
  }
  for (const [key, comparison] of [['after_datetime', '>'], ['before_datetime', '<']] as const) {
    const value = filter[key];
    if (value === undefined || value === null) continue;
    const instant = parseTimestamp(value);
    if (instant === null) throw new BadRequestError(`filter.${key} must be an ISO 8601 date-time, got ${quote(value)}`);
    where.push(`started_at ${comparison} ?`);
    params.push(instant.text);
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

/** Turns in thread order -> one summary per thread that has an ended turn. */
function summarize(turns: Iterable<TurnRow>): Thread[] {
  const threads: Thread[] = [];
  let current: TurnRow[] = [];
  const finish = (): void => {
    const thread = summary(current);
    if (thread !== undefined) threads.push(thread);
    current = [];
  };
  for (const turn of turns) {
    if (current.length > 0 && (current[0] as TurnRow).thread_id !== turn.thread_id) finish();
    current.push(turn);
  }
  if (current.length > 0) finish();
  return threads;
}

function summary(turns: readonly TurnRow[]): Thread | undefined {
  let first = turns[0] as TurnRow;
  let last: TurnRow | undefined;
  const durations: number[] = [];
  for (const turn of turns) {
    if (turn.started_us < first.started_us) first = turn;
    if (turn.ended_us === null) continue;
    if (last === undefined || (last.ended_us as number) < turn.ended_us) last = turn;
    // Whole milliseconds between the two instants, as ClickHouse's dateDiff counts them.
    durations.push(Math.floor(turn.ended_us / 1000) - Math.floor(turn.started_us / 1000));
  }
  if (last === undefined) return undefined;
  durations.sort((a, b) => a - b);
  return {
    thread_id: first.thread_id,
    turn_count: turns.length,
    start_time: first.started_at,
    last_updated: last.ended_at as string,
    first_turn_id: first.id,
    last_turn_id: last.id,
    p50_turn_duration_ms: percentile(durations, 0.5),
    p99_turn_duration_ms: percentile(durations, 0.99),
  };
}

/** The `level` quantile of sorted `values`, interpolated linearly; null for none. */
function percentile(values: readonly number[], level: number): number | null {
  if (values.length === 0) return null;
  const at = (values.length - 1) * level;
  const below = Math.floor(at);
  const above = Math.min(below + 1, values.length - 1);
  return (values[below] as number) + ((values[above] as number) - (values[below] as number)) * (at - below);
}

/** `keys` as a comparison of summed-up threads: nulls last either way, then `thread_id` by code point (as SQL orders text). */
function comparison(keys: readonly SortKey[]): (a: Thread, b: Thread) => number {
  return (a, b) => {
    for (const { field, direction } of keys) {
      const x = a[field];
      const y = b[field];
      if (x === y) continue;
      if (x === null) return 1;
      if (y === null) return -1;
      const ascending = typeof x === 'string' ? compareCodePoints(x, y as string) : (x as number) - (y as number);
      return direction === 'asc' ? ascending : -ascending;
    }
    return compareCodePoints(a.thread_id, b.thread_id);
  };
}
