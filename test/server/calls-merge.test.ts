/**
 * A request's start and end of the same call are written as one row (store/calls.ts,
 * `mergeByCall`). Whatever a batch holds (both parts, reversed, repeated, interleaved with other
 * calls, ends alone, calls already deleted or written by another user), the rows must be exactly
 * those that writing its parts one request at a time leaves.
 */
import { openSqlite, type SqliteDatabase } from '../../src/server/store/sqlite.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCallsStore, type CallPart, type CallsStore } from '../../src/server/store/calls.js';
import { toEndRow, toStartRow } from '../../src/server/store/calls-rows.js';
import { openDatabase } from '../../src/server/store/db.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const TRACE = '0123456789abcdef0123456789abcdef';
const callId = (n: number): string => (0x2000 + n).toString(16).padStart(16, '0');

/**
 * Every column of every row of a project in the order the rows were created, leaving out the
 * project and the time of a deletion (the two projects compared are deleted a moment apart).
 */
function rowsOf(db: SqliteDatabase, projectId: string): Array<Record<string, unknown>> {
  const rows = db.prepare('SELECT * FROM calls WHERE project_id = ? ORDER BY rowid').all(projectId) as Array<Record<string, unknown>>;
  return rows.map(({ project_id: _project, deleted_at, ...row }) => ({ ...row, deleted: deleted_at !== null }));
}

function startPart(projectId: string, n: number, variant: number, user: string): CallPart {
  const start = {
    project_id: projectId,
    id: callId(n),
    trace_id: TRACE,
    parent_id: n === 0 ? null : callId(0),
    op_name: `op${n}.v${variant}`,
    started_at: `2026-01-02T03:04:0${variant}.000100Z`,
    attributes: { variant },
    inputs: { n, variant, text: 'é'.repeat(variant) },
    otel_dump: variant % 2 === 0 ? null : { variant },
    wb_run_step: variant,
  };
  return { kind: 'start', row: toStartRow(start, user, ['body']) };
}

function endPart(projectId: string, n: number, variant: number, user: string): CallPart {
  const end = {
    project_id: projectId,
    id: callId(n),
    ended_at: `2026-01-02T03:05:0${variant}.5Z`,
    output: variant % 3 === 0 ? null : { variant },
    summary: { variant },
    exception: variant % 2 === 0 ? null : `boom ${variant}`,
    wb_run_step_end: variant,
  };
  return { kind: 'end', row: toEndRow(end, user, ['body']) };
}

/** One part of a generated request: which call, start or end, which version of it. */
interface PartSpec {
  readonly n: number;
  readonly kind: 'start' | 'end';
  readonly variant: number;
}

const partSpec = fc.record({
  n: fc.integer({ min: 0, max: 3 }),
  kind: fc.constantFrom<'start' | 'end'>('start', 'end'),
  variant: fc.integer({ min: 0, max: 9 }),
});

/** What happened to the project before the request under test. */
interface History {
  readonly earlier: readonly PartSpec[];
  readonly earlierUser: string;
  readonly deleted: readonly number[];
}

const history = fc.record({
  earlier: fc.array(partSpec, { maxLength: 6 }),
  earlierUser: fc.constantFrom('dev', 'other'),
  deleted: fc.uniqueArray(fc.integer({ min: 0, max: 3 }), { maxLength: 2 }),
});

const toPart = (projectId: string, user: string) => (spec: PartSpec): CallPart =>
  spec.kind === 'start' ? startPart(projectId, spec.n, spec.variant, user) : endPart(projectId, spec.n, spec.variant, user);

function replay(store: CallsStore, projectId: string, before: History): void {
  for (const part of before.earlier.map(toPart(projectId, before.earlierUser))) store.writeParts([part]);
  if (before.deleted.length > 0) store.deleteCalls(projectId, before.deleted.map(callId));
}

describe('writing a request\'s parts merged by call (store)', () => {
  let db: SqliteDatabase;
  let store: CallsStore;
  let runs = 0;
  beforeAll(() => {
    db = openDatabase(':memory:');
    store = createCallsStore(db);
  });
  afterAll(() => {
    store.close();
    db.close();
  });

  it('leaves the same rows as writing the parts one request at a time', () => {
    fc.assert(
      fc.property(history, fc.array(partSpec, { minLength: 1, maxLength: 12 }), fc.constantFrom('dev', 'other'), (before, request, user) => {
        runs += 1;
        const merged = `acme/merged${runs}`;
        const oneByOne = `acme/single${runs}`;
        replay(store, merged, before);
        replay(store, oneByOne, before);
        store.writeParts(request.map(toPart(merged, user)));
        for (const part of request.map(toPart(oneByOne, user))) store.writeParts([part]);
        expect(rowsOf(db, merged)).toEqual(rowsOf(db, oneByOne));
      }),
      { numRuns: 300 },
    );
  });

  it('keeps the first writer of a call that only ends arrived for, whoever wrote the later ends', () => {
    const projectId = 'acme/ends-only';
    store.writeParts([endPart(projectId, 1, 1, 'first'), endPart(projectId, 1, 2, 'second')]);
    const [row] = rowsOf(db, projectId);
    expect(row).toMatchObject({ has_start: 0, wb_user_id: 'first', ended_at: '2026-01-02T03:05:02.500000Z', exception: null });
  });
});

describe('call/upsert_batch with both parts of calls in one batch', () => {
  let server: TestServer;
  let db: SqliteDatabase;
  beforeAll(async () => {
    server = await startTestServer({ users: [{ username: 'other', password: 'pw', entities: ['*'] }] });
    db = openSqlite(server.dbPath, { readonly: true });
  });
  afterAll(async () => {
    db.close();
    await server.close();
  });

  const item = (part: { kind: 'start' | 'end'; body: object }) => ({ mode: part.kind, req: { [part.kind]: part.body } });
  const start = (projectId: string, n: number, variant: number) => ({
    kind: 'start' as const,
    body: {
      project_id: projectId,
      id: callId(n),
      trace_id: TRACE,
      op_name: `op${n}.v${variant}`,
      started_at: `2026-01-02T03:04:0${variant}+01:00`,
      attributes: { variant },
      inputs: { variant },
    },
  });
  const end = (projectId: string, n: number, variant: number) => ({
    kind: 'end' as const,
    body: { project_id: projectId, id: callId(n), ended_at: `2026-01-02T03:05:0${variant}Z`, output: [variant], summary: { variant } },
  });
  async function upsert(batch: object[], user = { username: 'dev', password: 'pw' }) {
    const response = await post(server.url, '/call/upsert_batch', { batch }, user);
    expect(response.status, response.text).toBe(200);
    return response.body.res as unknown[];
  }

  it('gives the rows and answers of sending every part in its own batch', async () => {
    const other = { username: 'other', password: 'pw' };
    const request = (p: string) => [
      start(p, 0, 1), end(p, 0, 1), // the exporter's shape: a span's parts side by side
      end(p, 1, 1), start(p, 1, 2), // reversed
      start(p, 2, 1), start(p, 2, 3), end(p, 2, 1), end(p, 2, 4), // repeated: the last of each wins
      start(p, 3, 1), start(p, 4, 1), end(p, 4, 2), end(p, 3, 2), // interleaved
      end(p, 5, 1), // an end alone: stored, not visible
      start(p, 6, 1), end(p, 6, 1), // deleted before: stays deleted
      end(p, 7, 3), // started by `other` before: keeps its writer
    ];
    const prepare = async (p: string) => {
      await upsert([item(start(p, 6, 0))]);
      expect((await post(server.url, '/calls/delete', { project_id: p, call_ids: [callId(6)] })).body).toEqual({ num_deleted: 1 });
      await upsert([item(start(p, 7, 0)), item(end(p, 7, 0))], other);
    };
    await prepare('acme/batched');
    await prepare('acme/single');
    const batchedRes = await upsert(request('acme/batched').map(item));
    const singleRes: unknown[] = [];
    for (const part of request('acme/single')) singleRes.push(...(await upsert([item(part)])));

    expect(batchedRes).toEqual(singleRes);
    const batched = rowsOf(db, 'acme/batched');
    expect(batched).toEqual(rowsOf(db, 'acme/single'));
    expect(batched).toHaveLength(8);
    const byId = new Map(batched.map((row) => [row.id, row]));
    expect(byId.get(callId(2))).toMatchObject({ op_name: 'op2.v3', ended_at: '2026-01-02T03:05:04.000000Z', output: '[4]' });
    expect(byId.get(callId(5))).toMatchObject({ has_start: 0, wb_user_id: 'dev' });
    expect(byId.get(callId(6))?.deleted).toBe(true);
    expect(byId.get(callId(7))).toMatchObject({ wb_user_id: 'other', summary: '{"variant":3}' });
  });
});
