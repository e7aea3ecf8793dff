/**
 * `/feedback/batch/create` (where the Weave SDKs send feedback) and `/feedback/replace` (where the
 * service's UI edits a record): a batch is stored whole or not at all, and a replace never loses
 * the old record without storing the new one.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { openDatabase } from '../../src/server/store/db.js';
import { createFeedbackStore, MAX_BATCH_CHECK_MS } from '../../src/server/store/feedback.js';
import { HttpError } from '../../src/server/errors.js';
import { MAX_FEEDBACK_BATCH } from '../../src/wire/feedback.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/demo';
const OTHER_PROJECT = 'acme/other';
const REF = 'weave:///acme/demo/call/0123456789abcdef';
const NARROW = { username: 'narrow', password: 'pw2' };

const note = (text: string, extra: Record<string, unknown> = {}) => ({
  project_id: PROJECT,
  weave_ref: REF,
  feedback_type: 'wandb.note.1',
  payload: { note: text },
  ...extra,
});

describe('feedback/batch/create and feedback/replace over HTTP', () => {
  let server: TestServer;
  const call = (path: string, body: unknown, credentials?: { username: string; password: string }) =>
    post(server.url, path, body, credentials);
  const stored = () => {
    const db = openSqlite(server.dbPath, { readonly: true });
    try {
      return db.prepare('SELECT id, project_id, json(payload) AS payload, wb_user_id FROM feedback ORDER BY rowid').all() as Array<{
        id: string;
        project_id: string;
        payload: string;
        wb_user_id: string;
      }>;
    } finally {
      db.close();
    }
  };

  beforeAll(async () => {
    server = await startTestServer({ users: [{ ...NARROW, entities: ['elsewhere'] }] });
  });
  afterAll(async () => server.close());

  it('stores every record of a batch in order, answering each as feedback/create does', async () => {
    const before = stored().length;
    const res = await call('/feedback/batch/create', {
      batch: [
        note('first', { id: 'batch-a', wb_user_id: 'spoofed' }),
        { project_id: PROJECT, weave_ref: REF, feedback_type: 'wandb.reaction.1', payload: { emoji: '🎉' } },
        note('third', { project_id: OTHER_PROJECT, weave_ref: 'weave:///acme/other/call/0123456789abcdef' }),
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.res).toHaveLength(3);
    expect(res.body.res[0]).toMatchObject({ id: 'batch-a', wb_user_id: 'dev', payload: { note: 'first' } });
    expect(res.body.res[1]).toMatchObject({ wb_user_id: 'dev', payload: { emoji: '🎉' } });
    for (const created of res.body.res) expect(Object.keys(created).sort()).toEqual(['created_at', 'id', 'payload', 'wb_user_id']);
    const rows = stored().slice(before);
    expect(rows.map((row) => [row.id, row.project_id, JSON.parse(row.payload), row.wb_user_id])).toEqual([
      ['batch-a', PROJECT, { note: 'first' }, 'dev'],
      [res.body.res[1].id, PROJECT, { emoji: '🎉' }, 'dev'],
      [res.body.res[2].id, OTHER_PROJECT, { note: 'third' }, 'dev'],
    ]);
    // A retried batch (records with ids, as the SDKs send them) answers the stored records again.
    const retried = await call('/feedback/batch/create', { batch: [note('first', { id: 'batch-a' })] });
    expect(retried.body.res[0]).toEqual(res.body.res[0]);
    expect(stored()).toHaveLength(before + 3);
  });

  it('answers an empty batch with no records', async () => {
    expect(await call('/feedback/batch/create', { batch: [] })).toMatchObject({ status: 200, body: { res: [] } });
  });

  it.each<[string, unknown[], RegExp]>([
    ['a note too long', [note('fine'), note('x'.repeat(1025))], /^batch\[1\]: wandb\.note\.1 note must have 1 to 1024 characters, got 1025$/],
    ['a weave_ref into another project', [note('fine'), note('x', { weave_ref: 'weave:///else/where/call/0123456789abcdef' })], /^batch\[1\]: weave_ref .* points outside project/],
    ['an id sent twice with other content', [note('one', { id: 'twice' }), note('two', { id: 'twice' })], /^batch\[1\]: Feedback id "twice" already exists with other content$/],
    ['an id stored with other content', [note('fine'), note('other', { id: 'batch-a' })], /^batch\[1\]: Feedback id "batch-a" already exists/],
  ])('refuses a batch holding %s with a 400 naming the record, storing none of it', async (_name, batch, reason) => {
    const before = stored();
    const res = await call('/feedback/batch/create', { batch });
    expect(res.status).toBe(400);
    expect(res.body.reason).toMatch(reason);
    expect(stored()).toEqual(before);
  });

  it('refuses a batch with a record for a project the user may not write (403), storing none of it', async () => {
    const before = stored();
    const res = await call(
      '/feedback/batch/create',
      { batch: [note('x', { project_id: 'elsewhere/p', weave_ref: 'weave:///elsewhere/p/call/0123456789abcdef' }), note('y')] },
      NARROW,
    );
    expect(res.status).toBe(403);
    expect(stored()).toEqual(before);
    expect((await call('/feedback/batch/create', { batch: [note('y')] }, { username: 'dev', password: 'nope' })).status).toBe(401);
  });

  it('answers 422 for malformed batches', async () => {
    const tooMany = Array.from({ length: MAX_FEEDBACK_BATCH + 1 }, (_, index) => note(`n${index}`));
    for (const body of [{}, { batch: note('x') }, { batch: [{ ...note('x'), extra: 1 }] }, { batch: [note('x')], more: 1 }, { batch: tooMany }, { batch: [null] }]) {
      const res = await call('/feedback/batch/create', body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(422);
    }
    expect((await call('/feedback/batch/create', { batch: Array.from({ length: MAX_FEEDBACK_BATCH }, (_, index) => note(`n${index}`)) })).status).toBe(200);
  });

  it('replaces a record by a new one (a new id unless one is given), in the same project only', async () => {
    const old = (await call('/feedback/create', note('draft'))).body;
    const res = await call('/feedback/replace', { ...note('final'), feedback_id: old.id });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ wb_user_id: 'dev', payload: { note: 'final' } });
    expect(res.body.id).not.toBe(old.id);
    const ids = stored().map((row) => row.id);
    expect(ids).not.toContain(old.id);
    expect(ids).toContain(res.body.id);
    // In place, keeping its id: the id is given as the new record's.
    const kept = await call('/feedback/replace', { ...note('edited', { id: res.body.id }), feedback_id: res.body.id });
    expect(kept.body).toMatchObject({ id: res.body.id, payload: { note: 'edited' } });
    expect(stored().filter((row) => row.id === res.body.id).map((row) => JSON.parse(row.payload))).toEqual([{ note: 'edited' }]);
    // A record of another project with that id is not touched.
    const elsewhere = (await call('/feedback/create', note('keep me', { project_id: OTHER_PROJECT, weave_ref: 'weave:///acme/other/call/0123456789abcdef', id: 'shared-id' }))).body;
    await call('/feedback/replace', { ...note('replacement'), feedback_id: 'shared-id' });
    expect(stored().find((row) => row.id === elsewhere.id && row.project_id === OTHER_PROJECT)).toBeDefined();
  });

  it('creates the new record when feedback_id names no record, as the service does', async () => {
    const res = await call('/feedback/replace', { ...note('new'), feedback_id: 'never-stored' });
    expect(res.status).toBe(200);
    expect(stored().map((row) => row.id)).toContain(res.body.id);
  });

  it('keeps the old record when the new one is refused', async () => {
    const old = (await call('/feedback/create', note('keep'))).body;
    const before = stored();
    for (const [body, status] of [
      [{ ...note('x'.repeat(1025)), feedback_id: old.id }, 400],
      [{ ...note('x', { weave_ref: 'weave:///else/where/call/0123456789abcdef' }), feedback_id: old.id }, 400],
      [{ ...note('x', { id: 'batch-a' }), feedback_id: old.id }, 400],
      [{ ...note('x'), feedback_id: old.id, creator: 'narrow' }, 403],
      [{ ...note('x'), feedback_id: '' }, 422],
      [{ ...note('x') }, 422],
      [{ ...note('x'), feedback_id: old.id, unknown: 1 }, 422],
      [{ ...note('x'), feedback_id: 42 }, 422],
    ] as const) {
      const res = await call('/feedback/replace', body, 'creator' in body ? NARROW : undefined);
      expect(res.status, JSON.stringify(body).slice(0, 120)).toBe(status);
    }
    expect(stored()).toEqual(before);
  });
});

describe('feedback batch checks', () => {
  afterEach(() => vi.restoreAllMocks());

  it(`stop after ${MAX_BATCH_CHECK_MS} ms in total with a 413, storing nothing`, () => {
    const db = openDatabase(':memory:');
    try {
      const feedback = createFeedbackStore(db);
      // Every reading of the clock is 150 ms later: records whose checks are slow (annotation
      // specs just under their own limit).
      let now = 0;
      vi.spyOn(performance, 'now').mockImplementation(() => (now += 150));
      const batch = Array.from({ length: 10 }, (_, index) => note(`n${index}`));
      let thrown: unknown;
      try {
        feedback.createBatch(batch, 'dev');
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(HttpError);
      expect((thrown as HttpError).status).toBe(413);
      expect((thrown as HttpError).reason).toMatch(/^Checking this feedback batch took over 1000 ms \(stopped at batch\[[1-9]\]\); send fewer records at a time$/);
      expect(db.prepare('SELECT COUNT(*) AS n FROM feedback').get()).toEqual({ n: 0 });
      vi.restoreAllMocks();
      expect(feedback.createBatch(batch, 'dev')).toHaveLength(10);
    } finally {
      db.close();
    }
  });
});
