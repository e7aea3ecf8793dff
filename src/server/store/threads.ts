/**
 * `threads/stream_query` on SQLite: the threads of a project, each summed up over its turns (a
 * call whose `turn_id` is its own id, in a thread), as the hosted service's query sums them:
 * how many turns, the first start and the last end, the turn that started first and the one that
 * ended last, and the median and 99th percentile of the turns' durations. Turns are read in
 * thread order through a partial index of turns only, one thread's durations held at a time.
 *
 * Where the service is silent or differs, we chose: percentiles are exact, interpolated linearly
 * between the two nearest durations (ClickHouse's `quantile` samples); a thread none of whose
 * turns has ended yet is left out, as the service leaves out a thread without `last_updated`;
 * ties in `sort_by` fall to `thread_id`; an unknown sort field is a 400.
 */
import { BadRequestError } from '../errors.js';
import { quote } from '../quote.js';
import { parseTimestamp } from '../timestamps.js';
import { THREAD_SORT_FIELDS, type Thread, type ThreadsQueryReq } from '../../wire/threads.js';
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
      const order = sortOrder(request.sort_by ?? null);
      const where = [
        'project_id = ?',
        // The partial index's own terms, so that the planner takes it.
        'thread_id IS NOT NULL',
        'id = turn_id',
        "thread_id != ''",
        'has_start = 1',
        'deleted_at IS NULL',
      ];
      const params: unknown[] = [request.project_id];
      const filter = request.filter ?? {};
      if (filter.thread_ids !== undefined && filter.thread_ids !== null) {
        where.push('thread_id IN (SELECT value FROM json_each(?))');
        params.push(JSON.stringify(filter.thread_ids));
      }
      for (const [key, comparison] of [['after_datetime', '>'], ['before_datetime', '<']] as const) {
        const value = filter[key];
        if (value === undefined || value === null) continue;
        const instant = parseTimestamp(value);
        if (instant === null) throw new BadRequestError(`filter.${key} must be an ISO 8601 date-time, got ${quote(value)}`);
        where.push(`started_at ${comparison} ?`);
        params.push(instant.text);
      }
      const sql = `SELECT thread_id, id, started_at, started_us, ended_at, ended_us FROM calls WHERE ${where.join(' AND ')} ORDER BY thread_id`;
      const threads = summarize(queries.get(sql).iterate(...params) as IterableIterator<TurnRow>);
      threads.sort(order);
      const offset = request.offset ?? 0;
      return threads.slice(offset, request.limit === undefined || request.limit === null ? undefined : offset + request.limit);
    },
  };
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

type ThreadOrder = (a: Thread, b: Thread) => number;

/** `sort_by` as a comparison: nulls last either way, then `thread_id`; by default the latest activity first. */
function sortOrder(sortBy: ReadonlyArray<{ field: string; direction: 'asc' | 'desc' }> | null): ThreadOrder {
  const keys = sortBy === null || sortBy.length === 0 ? [{ field: 'last_updated', direction: 'desc' as const }] : sortBy;
  for (const { field } of keys) {
    if (!(THREAD_SORT_FIELDS as readonly string[]).includes(field)) {
      throw new BadRequestError(`Unsupported sort field ${quote(field)}: one of ${THREAD_SORT_FIELDS.join(', ')}`);
    }
  }
  return (a, b) => {
    for (const { field, direction } of keys) {
      const x = a[field as keyof Thread];
      const y = b[field as keyof Thread];
      if (x === y) continue;
      if (x === null) return 1;
      if (y === null) return -1;
      const ascending = (x as number | string) < (y as number | string) ? -1 : 1;
      return direction === 'asc' ? ascending : -ascending;
    }
    return a.thread_id < b.thread_id ? -1 : a.thread_id > b.thread_id ? 1 : 0;
  };
}
