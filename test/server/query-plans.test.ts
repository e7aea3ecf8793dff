/**
 * The plans SQLite picks for the statements the stores run, on a database of a few thousand
 * calls whose statistics were gathered the way the server gathers them (optimize before close,
 * optimize on open). A plan that walks a whole project where an index finds a handful of rows is
 * invisible on small data and costs hundreds of milliseconds at a million calls.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqlite, type SqliteDatabase } from '../../src/server/store/sqlite.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQuery, createCallsStore, type CallPart, type QueryRequest } from '../../src/server/store/calls.js';
import { toEndRow, toStartRow } from '../../src/server/store/calls-rows.js';
import { openDatabase, optimizeDatabase } from '../../src/server/store/db.js';
import { createFeedbackStore } from '../../src/server/store/feedback.js';
import { createObjectStore } from '../../src/server/store/objects.js';
import { createThreadStore } from '../../src/server/store/threads.js';
import { registerSqlFunctions } from '../../src/server/query/sql-functions.js';

const PROJECT = 'acme/plans';
const OTHER = 'acme/other';
const TRACES = 300;
const CALLS_PER_TRACE = 10;

const hex = (n: number, width: number): string => n.toString(16).padStart(width, '0');
const traceId = (t: number): string => hex(t + 1, 32);
const callId = (t: number, i: number): string => hex((t + 1) * 100 + i, 16);

let dir: string;
let dbPath: string;
/** A connection that records the SQL (parameters expanded) of every statement it runs. */
let traced: SqliteDatabase;
const executed: string[] = [];
let objectDigest = '';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'callbridge-plans-'));
  dbPath = join(dir, 'plans.db');
  const db = openDatabase(dbPath);
  const calls = createCallsStore(db);
  const parts: CallPart[] = [];
  for (let t = 0; t < TRACES; t++) {
    for (let i = 0; i < CALLS_PER_TRACE; i++) {
      const start = {
        project_id: PROJECT,
        id: callId(t, i),
        trace_id: traceId(t),
        parent_id: i === 0 ? null : callId(t, 0),
        op_name: `op${i}`,
        started_at: new Date(Date.UTC(2026, 0, 1) + t * 1000 + i).toISOString(),
        attributes: {},
        inputs: { t, i },
      };
      parts.push({ kind: 'start', row: toStartRow(start, 'dev', ['body']) });
      const end = { project_id: PROJECT, id: callId(t, i), ended_at: '2026-01-02T00:00:00Z', summary: {} };
      parts.push({ kind: 'end', row: toEndRow(end, 'dev', ['body']) });
    }
  }
  for (let n = 0; n < 1000; n++) {
    const start = { project_id: OTHER, id: hex(n + 1, 16), trace_id: traceId(n), op_name: 'x', started_at: '2026-01-01T00:00:00Z', attributes: {}, inputs: {} };
    parts.push({ kind: 'start', row: toStartRow(start, 'dev', ['body']) });
  }
  calls.writeParts(parts);
  const objects = createObjectStore(db);
  for (let n = 0; n < 200; n++) {
    for (let version = 0; version < 2; version++) {
      const { digest } = objects.create({ projectId: PROJECT, objectId: `obj${n}`, val: { n, version }, wbUserId: 'dev' });
      if (n === 7 && version === 0) objectDigest = digest;
    }
  }
  const feedback = createFeedbackStore(db);
  for (let n = 0; n < 600; n++) {
    const ref = `weave:///${PROJECT}/call/${callId(n % TRACES, 0)}`;
    feedback.create({ project_id: PROJECT, weave_ref: ref, feedback_type: 'note', payload: { n } }, 'dev');
  }
  // What the server does: optimize before closing, and again (0x10002) when it opens.
  optimizeDatabase(db);
  db.close();
  openDatabase(dbPath).close();
  traced = openSqlite(dbPath, { verbose: (sql) => executed.push(String(sql)) });
  registerSqlFunctions(traced); // as every server connection has them
});

afterAll(() => {
  traced?.close();
  rmSync(dir, { recursive: true, force: true });
});

function plan(sql: string, params: unknown[] = []): string[] {
  return (traced.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((row) => row.detail);
}

/** The SQL of the statements `run` executes on the traced connection. */
function statementsOf(run: () => void): string[] {
  executed.length = 0;
  run();
  return [...executed];
}

function queryPlan(overrides: Partial<QueryRequest>): string[] {
  const request: QueryRequest = {
    projectId: PROJECT,
    filter: null,
    query: null,
    sortBy: null,
    limit: null,
    offset: null,
    columns: null,
    includeCosts: false,
    includeStorageSize: false,
    includeTotalStorageSize: false,
    includeFeedback: false,
    ...overrides,
  };
  const { sql, params } = buildQuery(request);
  return plan(sql, params);
}

describe('planner statistics', () => {
  it('exist after the server has closed and reopened the database', () => {
    const stats = traced.prepare("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'calls'").all() as Array<{ idx: string }>;
    expect(stats.map((row) => row.idx)).toEqual(expect.arrayContaining(['calls_by_trace', 'calls_by_start', 'calls_by_parent']));
  });
});

describe('calls/stream_query plans', () => {
  it('finds calls of given traces by calls_by_trace, not by walking the project in start order', () => {
    const details = queryPlan({ filter: { trace_ids: [traceId(5), traceId(9)] } });
    expect(details.join('\n')).toMatch(/USING INDEX calls_by_trace \(project_id=\? AND trace_id=\?\)/);
    expect(details.join('\n')).not.toMatch(/calls_by_start/);
  });

  it('finds given calls by calls_by_id', () => {
    const details = queryPlan({ filter: { call_ids: [callId(3, 0), callId(4, 1)] } });
    expect(details.join('\n')).toMatch(/USING INDEX calls_by_id \(project_id=\? AND id=\?\)/);
  });

  it('finds children of given parents by calls_by_parent', () => {
    const details = queryPlan({ filter: { parent_ids: [callId(3, 0)] } });
    expect(details.join('\n')).toMatch(/USING INDEX calls_by_parent \(project_id=\? AND parent_id=\?\)/);
  });

  it('keeps the trace index for a sort_by on started_at and for $expr $eq/$in on trace_id', () => {
    const sorted = queryPlan({ filter: { trace_ids: [traceId(5)] }, sortBy: [{ field: 'started_at', direction: 'desc' }] });
    expect(sorted.join('\n')).toMatch(/calls_by_trace \(project_id=\? AND trace_id=\?\)/);
    const eq = queryPlan({ query: { $expr: { $eq: [{ $getField: 'trace_id' }, { $literal: traceId(5) }] } } });
    expect(eq.join('\n')).toMatch(/calls_by_trace \(project_id=\? AND trace_id=\?\)/);
    const inside = queryPlan({
      query: {
        $expr: {
          $and: [
            { $in: [{ $getField: 'trace_id' }, [{ $literal: traceId(5) }, { $literal: traceId(6) }]] },
            { $eq: [{ $getField: 'op_name' }, { $literal: 'op1' }] },
          ],
        },
      },
    });
    expect(inside.join('\n')).toMatch(/calls_by_trace \(project_id=\? AND trace_id=\?\)/);
  });

  it('reads a started_at range from calls_by_start, whatever the literal\'s form', () => {
    const after = (literal: string | number) => queryPlan({ query: { $expr: { $gt: [{ $getField: 'started_at' }, { $literal: literal }] } } });
    for (const literal of ['2026-01-01T00:00:30Z', '2026-01-01T01:00:30+01:00', Date.UTC(2026, 0, 1, 0, 0, 30) / 1000]) {
      expect(after(literal).join('\n')).toMatch(/USING INDEX calls_by_start \(project_id=\? AND started_at>\?\)/);
    }
  });

  it('still reads an unfiltered project in start order from calls_by_start, so a LIMIT stops early', () => {
    const details = queryPlan({ limit: 10 });
    expect(details.join('\n')).toMatch(/USING INDEX calls_by_start \(project_id=\?\)/);
    expect(details.join('\n')).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
    // A sort_by on started_at puts NULLs last (as the hosted service does); SQLite still walks the index.
    for (const direction of ['asc', 'desc'] as const) {
      const sorted = queryPlan({ limit: 10, sortBy: [{ field: 'started_at', direction }] }).join('\n');
      expect(sorted, direction).toMatch(/USING INDEX calls_by_start \(project_id=\?\)/);
      expect(sorted, direction).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
    }
  });
});

describe('a call\'s feedback', () => {
  it('is found by feedback_by_ref for include_feedback and for a feedback field, never by a scan', () => {
    const included = queryPlan({ limit: 10, includeFeedback: true }).join('\n');
    const filtered = queryPlan({
      limit: 10,
      query: { $expr: { $eq: [{ $getField: 'feedback.[note].payload.n' }, { $literal: 3 }] } },
      sortBy: [{ field: 'feedback.[*].payload.n', direction: 'desc' }],
    }).join('\n');
    for (const details of [included, filtered]) {
      expect(details).toMatch(/CORRELATED SCALAR SUBQUERY/);
      expect(details).toMatch(/SEARCH f USING INDEX feedback_by_ref \(project_id=\? AND weave_ref=\?\)/);
      expect(details).not.toMatch(/SCAN f\b/);
    }
  });
});

describe('point reads and the delete step', () => {
  it('threads/stream_query reads the turns of a project from the partial calls_by_thread_turn index', () => {
    const threads = createThreadStore(traced);
    for (const request of [
      { project_id: PROJECT },
      { project_id: PROJECT, filter: { after_datetime: '2026-01-01T00:00:00Z' } },
      { project_id: PROJECT, sort_by: [{ field: 'p50_turn_duration_ms', direction: 'desc' as const }] },
    ]) {
      const [sql] = statementsOf(() => threads.query(request));
      const details = plan(sql as string);
      const onCalls = details.filter((detail) => / calls( |$)/.test(detail));
      expect(onCalls.length, JSON.stringify(request)).toBeGreaterThan(0);
      // The calls table is only ever searched through the index of turns, never scanned.
      for (const detail of onCalls) expect(detail, JSON.stringify(request)).toMatch(/^SEARCH calls USING INDEX calls_by_thread_turn \(project_id=\?/);
    }
    // Sorted by what a GROUP BY gives, the page comes first: only its threads' turns are read again.
    const [paged] = statementsOf(() => threads.query({ project_id: PROJECT, limit: 10 }));
    expect(plan(paged as string).join('\n')).toMatch(/SEARCH calls USING INDEX calls_by_thread_turn \(project_id=\? AND thread_id=\?\)/);
    const byThreads = statementsOf(() => threads.query({ project_id: PROJECT, filter: { thread_ids: ['t1', 't2'] } }));
    expect(plan(byThreads[0] as string).join('\n')).toMatch(/USING INDEX calls_by_thread_turn \(project_id=\? AND thread_id=\?\)/);
  });

  it('call/read looks one call up by calls_by_id', () => {
    const store = createCallsStore(traced);
    const [read] = statementsOf(() => {
      store.readJson(PROJECT, callId(1, 1), { includeCosts: false, includeStorageSize: false, includeTotalStorageSize: false });
    });
    expect(plan(read as string)).toEqual(['SEARCH c USING INDEX calls_by_id (project_id=? AND id=?)']);
  });

  it('obj/read looks a version up by an index on (project_id, object_id, ...)', () => {
    const store = createObjectStore(traced);
    for (const digest of [objectDigest, 'latest', 'v1']) {
      const statements = statementsOf(() => {
        store.read(PROJECT, 'obj7', digest, false);
      });
      expect(statements.length).toBeGreaterThan(0);
      for (const sql of statements) {
        const details = plan(sql).join('\n');
        expect(details, `${digest}: ${sql}`).toMatch(/USING INDEX objects_by_\w+ \(project_id=\? AND object_id=\?/);
        expect(details).not.toMatch(/\bSCAN\b/);
      }
    }
  });

  it('calls/delete finds each level of descendants by calls_by_parent, never scanning the project', () => {
    const store = createCallsStore(traced);
    let deleted = 0;
    const statements = statementsOf(() => {
      deleted = store.deleteCalls(PROJECT, [callId(2, 0)]);
    });
    expect(deleted).toBe(CALLS_PER_TRACE);
    const remove = statements.find((sql) => sql.includes('WITH RECURSIVE'));
    const details = plan(remove as string).join('\n');
    expect(details).toMatch(/SEARCH c USING INDEX calls_by_parent \(project_id=\? AND parent_id=\?\)/);
    expect(details).not.toMatch(/SCAN c\b/);
    // The ids whose start has not arrived are marked by key: no statement scans the calls.
    for (const sql of statements.filter((text) => /^\s*(INSERT|UPDATE|WITH)/.test(text))) {
      expect(plan(sql).join('\n'), sql).not.toMatch(/SCAN (c|calls)\b/);
    }
  });
});

describe('feedback/query plans', () => {
  it('reads a project in insertion order from feedback_by_project, without sorting it first', () => {
    const store = createFeedbackStore(traced);
    const [query] = statementsOf(() => {
      expect(store.query({ project_id: PROJECT, limit: 5 })).toHaveLength(5);
    });
    const details = plan(query as string).join('\n');
    expect(details).toMatch(/USING INDEX feedback_by_project \(project_id=\?\)/);
    expect(details).not.toMatch(/TEMP B-TREE/);
  });
});
