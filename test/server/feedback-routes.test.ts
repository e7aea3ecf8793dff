import { openSqlite } from '../../src/server/store/sqlite.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_VALIDATION_MS } from '../../src/server/store/annotation-spec.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/demo';
const REF = 'weave:///acme/demo/call/0123456789abcdef';

describe('feedback over HTTP', () => {
  let server: TestServer;
  const call = (path: string, body: unknown, credentials?: { username: string; password: string }) =>
    post(server.url, path, body, credentials);
  const feedbackRows = () => {
    const db = openSqlite(server.dbPath, { readonly: true });
    try {
      return db.prepare('SELECT id, payload FROM feedback ORDER BY rowid').all();
    } finally {
      db.close();
    }
  };
  const create = (body: Record<string, unknown>) =>
    call('/feedback/create', { project_id: PROJECT, weave_ref: REF, feedback_type: 'note', payload: { note: 'n' }, ...body });

  beforeAll(async () => {
    server = await startTestServer({ users: [{ username: 'narrow', password: 'pw2', entities: ['acme'] }] });
    for (const [id, payload] of [
      ['f1', { note: 'good', score: 0.9, tags: ['a'] }],
      ['f2', { note: 'bad', score: 0.1 }],
      ['f3', { note: 'ok', score: 0.5, extra: { deep: { n: 1 } } }],
    ] as const) {
      const res = await create({ id, payload });
      expect(res.status).toBe(200);
    }
  });
  afterAll(async () => server.close());

  it('creates feedback, answering the stored record parts', async () => {
    const res = await create({ feedback_type: 'wandb.reaction.1', payload: { emoji: '🎉' }, creator: 'alice', wb_user_id: 'spoofed' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ wb_user_id: 'dev', payload: { emoji: '🎉' } });
    expect(Object.keys(res.body).sort()).toEqual(['created_at', 'id', 'payload', 'wb_user_id']);
    const purged = await call('/feedback/purge', { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: res.body.id }] } } });
    expect(purged).toMatchObject({ status: 200, body: {} });
  });

  it('queries with fields, $expr, sort_by, limit and offset', async () => {
    const res = await call('/feedback/query', {
      project_id: PROJECT,
      fields: ['id', 'payload.score', 'payload.tags', 'payload.extra.deep'],
      query: { $expr: { $gte: [{ $getField: 'payload.score' }, { $literal: 0.5 }] } },
      sort_by: [{ field: 'payload.score', direction: 'asc' }],
      limit: null,
      offset: null,
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      result: [
        { id: 'f3', 'payload.score': 0.5, 'payload.tags': null, 'payload.extra.deep': { n: 1 } },
        { id: 'f1', 'payload.score': 0.9, 'payload.tags': ['a'], 'payload.extra.deep': null },
      ],
    });
    const paged = await call('/feedback/query', { project_id: PROJECT, fields: ['id'], limit: 1, offset: 1 });
    expect(paged.body.result).toEqual([{ id: 'f2' }]);
    const all = await call('/feedback/query', { project_id: PROJECT });
    expect(all.body.result.map((r: { id: string }) => r.id)).toEqual(['f1', 'f2', 'f3']);
    expect(all.body.result[0]).toMatchObject({ project_id: PROJECT, weave_ref: REF, feedback_type: 'note', wb_user_id: 'dev', creator: null });
  });

  it('answers 400 for semantic errors, storing nothing', async () => {
    const before = feedbackRows();
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ weave_ref: 'weave:///other/proj/call/0123456789abcdef' }, /weave_ref/],
      [{ weave_ref: 'not a ref' }, /weave_ref/],
      [{ payload: { blob: 'x'.repeat(1024 * 1024) } }, /larger than/],
      [{ feedback_type: 'wandb.reaction.1', payload: { emoji: 'thumbs up' } }, /emoji/],
      [{ feedback_type: 'wandb.reaction.1', payload: { emoji: '👍👎' } }, /emoji/],
      [{ feedback_type: 'wandb.note.1', payload: { text: 'no note member' } }, /"note"/],
      [{ feedback_type: 'wandb.note.1', payload: { note: 42 } }, /"note"/],
      [{ feedback_type: 'wandb.note.1', payload: { note: '' } }, /1 to 1024 characters, got 0/],
      [{ feedback_type: 'wandb.note.1', payload: { note: 'x'.repeat(1025) } }, /1 to 1024 characters, got 1025/],
      [{ feedback_type: 'wandb.note.1', payload: { note: '😀'.repeat(1025) } }, /got 1025/],
      [{ id: 'f1', payload: { note: 'different' } }, /already exists/],
    ];
    for (const [body, reason] of cases) {
      const res = await create(body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body.reason).toMatch(reason);
    }
    const deep = `{"project_id": "${PROJECT}", "weave_ref": "${REF}", "feedback_type": "note", "payload": {"d": ${'{"d": '.repeat(5_000)}1${'}'.repeat(5_000)}}}`;
    expect((await call('/feedback/create', deep)).status).toBe(400);
    expect(feedbackRows()).toEqual(before);
  });

  it('checks annotation feedback against the spec stored through obj/create', async () => {
    const spec = await call('/obj/create', {
      obj: { project_id: PROJECT, object_id: 'tone', val: { name: 'tone', field_schema: { type: 'string', enum: ['calm', 'curt'] } }, builtin_object_class: 'AnnotationSpec' },
    });
    expect(spec.status).toBe(200);
    const annotationRef = `weave:///${PROJECT}/object/tone:${spec.body.digest}`;
    const annotate = (value: unknown) => create({ feedback_type: 'wandb.annotation.tone', annotation_ref: annotationRef, payload: { value } });
    const stored = await annotate('calm');
    expect(stored).toMatchObject({ status: 200, body: { payload: { value: 'calm' } } });
    const before = feedbackRows();
    const refused = await annotate('rude');
    expect(refused.status).toBe(400);
    expect(refused.body.reason).toBe('Feedback payload does not match annotation spec: value must be equal to one of the allowed values');
    const missing = await create({ feedback_type: 'wandb.annotation.tone', payload: { value: 'calm' } });
    expect(missing).toMatchObject({ status: 400, body: { reason: 'annotation_ref is required for annotation feedback' } });
    expect(feedbackRows()).toEqual(before);
    const purged = await call('/feedback/purge', { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: stored.body.id }] } } });
    expect(purged.status).toBe(200);
  });

  it('answers 400 naming unknown fields in fields, query and sort_by', async () => {
    const hostile = "payload') ; DROP TABLE feedback; --";
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ fields: ['id', 'nope'] }, 'nope'],
      [{ fields: [hostile] }, hostile],
      [{ query: { $expr: { $eq: [{ $getField: 'nope' }, { $literal: 1 }] } } }, 'nope'],
      [{ sort_by: [{ field: 'nope', direction: 'asc' }] }, 'nope'],
    ];
    for (const [body, named] of cases) {
      const res = await call('/feedback/query', { project_id: PROJECT, ...body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.reason).toContain(named);
    }
    const literal = await call('/feedback/query', {
      project_id: PROJECT,
      query: { $expr: { $eq: [{ $getField: 'payload.note' }, { $literal: "good' OR '1'='1" }] } },
    });
    expect(literal).toMatchObject({ status: 200, body: { result: [] } });
    const escapedPath = await call('/feedback/query', {
      project_id: PROJECT,
      fields: ['payload.a\\.b', 'payload.$..x', 'payload."]'],
    });
    expect(escapedPath.status).toBe(200);
    expect(escapedPath.body.result[0]).toEqual({ 'payload.a\\.b': null, 'payload.$..x': null, 'payload."]': null });
    expect(feedbackRows()).toHaveLength(3);
  });

  it('keeps hostile paths and literals as data', async () => {
    const query = (expr: unknown, extra: Record<string, unknown> = {}) =>
      call('/feedback/query', { project_id: PROJECT, fields: ['id'], query: { $expr: expr }, ...extra });
    const path = "payload.x') OR 1=1 --";
    expect(await query({ $eq: [{ $getField: path }, { $literal: null }] }, { sort_by: [{ field: path, direction: 'desc' }] })).toMatchObject({
      status: 200,
      body: { result: [{ id: 'f1' }, { id: 'f2' }, { id: 'f3' }] },
    });
    expect(await query({ $eq: [{ $getField: 'payload.note' }, { $literal: { $getField: 'id' } }] })).toMatchObject({
      status: 200,
      body: { result: [] },
    });
    expect(await query({ $in: [{ $getField: 'id' }, [{ $literal: 'f2' }, { $literal: "f1' --" }]] })).toMatchObject({
      status: 200,
      body: { result: [{ id: 'f2' }] },
    });
  });

  it('bounds the number of fields and sort keys (422), and serves up to the bound', async () => {
    const manyFields = Array.from({ length: 500 }, (_, i) => `payload.k${i}.0.1`);
    const atBound = await call('/feedback/query', { project_id: PROJECT, fields: manyFields, limit: 1 });
    expect(atBound.status).toBe(200);
    expect(Object.keys(atBound.body.result[0])).toHaveLength(500);
    expect((await call('/feedback/query', { project_id: PROJECT, fields: [...manyFields, 'id'] })).status).toBe(422);
    const sortKeys = Array.from({ length: 100 }, (_, i) => ({ field: `payload.s${i}`, direction: 'asc' }));
    expect((await call('/feedback/query', { project_id: PROJECT, sort_by: sortKeys })).status).toBe(200);
    expect((await call('/feedback/query', { project_id: PROJECT, sort_by: [...sortKeys, sortKeys[0]] })).status).toBe(422);
    expect((await call('/feedback/query', { project_id: PROJECT, limit: 1e300, offset: 1e300 })).body).toEqual({ result: [] });
  });

  it('answers 422 for wrongly shaped bodies', async () => {
    const queries: unknown[] = [
      { project_id: PROJECT, sort_by: [{ field: 'id', direction: 'sideways' }] },
      { project_id: PROJECT, limit: -1 },
      { project_id: PROJECT, offset: -1 },
      { project_id: PROJECT, fields: 'id' },
      { project_id: PROJECT, query: { $expr: { $bogus: [] } } },
      { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: 'id' }] } } },
      { project_id: PROJECT, query: { notexpr: 1 } },
      { fields: ['id'] },
    ];
    for (const body of queries) {
      const res = await call('/feedback/query', body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.detail[0].loc[0]).toBe('body');
    }
    const creates: unknown[] = [
      { project_id: PROJECT, weave_ref: REF, feedback_type: 'note' },
      { project_id: PROJECT, weave_ref: REF, feedback_type: 'note', payload: [1] },
      { project_id: PROJECT, weave_ref: REF, feedback_type: 'note', payload: 'x' },
      { project_id: PROJECT, weave_ref: 7, feedback_type: 'note', payload: {} },
      { project_id: PROJECT, weave_ref: REF, feedback_type: 'note', payload: {}, creator: 5 },
    ];
    for (const body of creates) expect((await call('/feedback/create', body)).status, JSON.stringify(body)).toBe(422);
    expect((await call('/feedback/purge', { project_id: PROJECT })).status).toBe(422);
    expect(feedbackRows()).toHaveLength(3);
  });

  it('refuses purges that do not select by id, deleting nothing', async () => {
    for (const expr of [
      { $eq: [{ $getField: 'feedback_type' }, { $literal: 'note' }] },
      { $gt: [{ $getField: 'id' }, { $literal: '' }] },
    ]) {
      const res = await call('/feedback/purge', { project_id: PROJECT, query: { $expr: expr } });
      expect(res.status).toBe(400);
    }
    // An empty $or breaks the $expr grammar: a 422, as in every query (SPEC §2.4).
    expect((await call('/feedback/purge', { project_id: PROJECT, query: { $expr: { $or: [] } } })).status).toBe(422);
    expect(feedbackRows()).toHaveLength(3);
  });

  it('enforces credentials and project grants', async () => {
    const narrow = { username: 'narrow', password: 'pw2' };
    expect((await call('/feedback/query', { project_id: PROJECT }, { username: 'dev', password: 'nope' })).status).toBe(401);
    expect((await call('/feedback/query', { project_id: 'other/proj' }, narrow)).status).toBe(403);
    expect(
      (await call('/feedback/create', { project_id: 'other/proj', weave_ref: 'weave:///other/proj/call/x', feedback_type: 'n', payload: {} }, narrow)).status,
    ).toBe(403);
    expect((await call('/feedback/purge', { project_id: 'other/proj', query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: 'f1' }] } } }, narrow)).status).toBe(403);
    expect(feedbackRows()).toHaveLength(3);
  });

  // Last: it adds a record the tests above count.
  it('takes notes of up to 1024 characters, counting a character outside the BMP once', async () => {
    const longest = '😀'.repeat(1024); // 2048 UTF-16 units
    const res = await create({ feedback_type: 'wandb.note.1', payload: { note: longest, extra: true } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.payload).toEqual({ note: longest, extra: true });
  });
});

describe('feedback/query sort order (as the hosted service sorts)', () => {
  let server: TestServer;
  const call = (path: string, body: unknown) => post(server.url, path, body);
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => server.close());

  it('sorts payload paths by presence, numeric reading and text, and columns with NULLs last', async () => {
    const project = 'acme/sorting';
    const values: Array<[string, unknown]> = [
      ['n9', 9],
      ['s10', '10'],
      ['n20', 20],
      ['missing', undefined],
      ['jnull', null],
      ['sabc', 'abc'],
      ['szz', 'zz'],
    ];
    for (const [id, v] of values) {
      const res = await call('/feedback/create', {
        project_id: project,
        weave_ref: `weave:///${project}/call/0123456789abcdef`,
        feedback_type: 'custom',
        payload: v === undefined ? {} : { v },
        creator: id.startsWith('n') ? id : null,
        id,
      });
      expect(res.status, res.text).toBe(200);
    }
    const ids = async (field: string, direction: string) => {
      const res = await call('/feedback/query', { project_id: project, fields: ['id'], sort_by: [{ field, direction }] });
      expect(res.status, res.text).toBe(200);
      return res.body.result.map((row: { id: string }) => row.id);
    };
    // The hosted feedback query tests presence with JSON_EXISTS, so a JSON null is present: it
    // has no numeric reading and sorts by its text, `null`, among the other texts.
    expect(await ids('payload.v', 'asc')).toEqual(['n9', 's10', 'n20', 'sabc', 'jnull', 'szz', 'missing']);
    expect(await ids('payload.v', 'desc')).toEqual(['n20', 's10', 'n9', 'szz', 'jnull', 'sabc', 'missing']);
    expect((await ids('creator', 'asc')).slice(0, 2)).toEqual(['n20', 'n9']);
    expect((await ids('creator', 'desc')).slice(0, 2)).toEqual(['n9', 'n20']);
  });
});

describe('annotation specs that would hold the event loop', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => server.close());
  const call = (path: string, body: unknown) => post(server.url, path, body);
  const create = (body: Record<string, unknown>) => call('/feedback/create', { project_id: PROJECT, weave_ref: REF, ...body });
  const feedbackCount = () => {
    const db = openSqlite(server.dbPath, { readonly: true });
    try {
      return (db.prepare('SELECT COUNT(*) AS n FROM feedback').get() as { n: number }).n;
    } finally {
      db.close();
    }
  };
  let specs = 0;
  const nextSpecName = () => `spec${++specs}`;
  /** Stores an annotation spec with `fieldSchema`; answers a function that posts one value for it. */
  const specFor = async (name: string, fieldSchema: unknown) => {
    const spec = await call('/obj/create', {
      obj: { project_id: PROJECT, object_id: name, val: { name, field_schema: fieldSchema }, builtin_object_class: 'AnnotationSpec' },
    });
    expect(spec.status).toBe(200);
    const annotationRef = `weave:///${PROJECT}/object/${name}:${spec.body.digest}`;
    return (value: unknown) => create({ feedback_type: `wandb.annotation.${name}`, annotation_ref: annotationRef, payload: { value } });
  };
  /** Posts a value and answers the response with how long it took. */
  const timed = async (annotate: (value: unknown) => Promise<{ status: number; body: any }>, value: unknown) => {
    const started = performance.now();
    const response = await annotate(value);
    return { ...response, ms: performance.now() - started };
  };

  it.each<[string, unknown, string]>([
    ['pattern', { type: 'string', pattern: '^(a+)+$' }, '^(a+)+$'],
    ['pattern of a non-capturing group', { type: 'string', pattern: '^(?:\\w+\\s?)*$' }, '^(?:\\w+\\s?)*$'],
    ['pattern nested in items', { type: 'array', items: { type: 'string', pattern: '^((a+))*$' } }, '^((a+))*$'],
    ['patternProperties key', { type: 'object', patternProperties: { '^(a{1,2})*$': { type: 'string' } } }, '^(a{1,2})*$'],
    ['propertyNames pattern', { type: 'object', propertyNames: { pattern: '^(a?b?)+$' } }, '^(a?b?)+$'],
  ])('refuses a spec whose %s can backtrack exponentially, naming it, before running it', async (_where, fieldSchema, pattern) => {
    const annotate = await specFor(nextSpecName(), fieldSchema);
    const before = feedbackCount();
    // Enough to hold the loop about a second if the pattern ran: 2^25 ways to split 25 a's.
    const attack = `${'a'.repeat(25)}!`;
    const value = { string: attack, array: [attack], object: { [attack]: 'x' } }[(fieldSchema as { type: 'string' | 'array' | 'object' }).type];
    const refused = await timed(annotate, value);
    expect(refused.status).toBe(400);
    expect(refused.body.reason).toBe(
      `The annotation spec's field_schema has the pattern ${JSON.stringify(pattern)}, which can take exponential time: ` +
        'it repeats, without bound, a part that is one piece of variable length, but for optional ones (as in "(a+)+")',
    );
    expect(feedbackCount()).toBe(before);
  });

  it.each([
    ['^\\d{4}(-\\d{2})?$', '2024-05'],
    ['^(\\d{1,3}\\.){3}\\d{1,3}$', '10.0.0.1'],
    ['^\\p{L}+$', 'Straße'],
    ['^(?<year>\\d{4})\\u{2D}[a-z]{2,}$', '2024-ab'],
    ['^[a-z]+@[a-z]+\\.[a-z]{2,}$', 'a@b.io'],
    // A required piece of fixed length delimits each repetition: linear, and common.
    ['^[a-z0-9]+(-[a-z0-9]+)*$', 'my-slug-2'],
    ['^\\d+(\\.\\d+)*$', '1.22.333'],
    ['^\\w+( \\w+)*$', 'three short words'],
    ['^([a-z]+\\.)+[a-z]+$', 'a.bc.def'],
    ['^((ab)+c)+$', 'ababcabc'],
  ])('takes a spec whose pattern %s cannot backtrack exponentially', async (pattern, value) => {
    const annotate = await specFor(nextSpecName(), { type: 'string', pattern });
    expect(await annotate(value)).toMatchObject({ status: 200, body: { payload: { value } } });
  });

  it.each<[string, unknown, unknown]>([
    // Star height 1 and quadratic: a scan from each of 200 000 starting points (seconds without the limit).
    ['a quadratic pattern on a long value', { type: 'string', pattern: '[a-z]+@' }, 'a'.repeat(200_000)],
    // Ajv compares each pair of non-scalar items: 20 000 objects are 200 million comparisons.
    ['uniqueItems over a long list of objects', { type: 'array', uniqueItems: true }, Array.from({ length: 20_000 }, (_, index) => ({ n: index }))],
  ])('stops checking %s after MAX_VALIDATION_MS and answers 400, storing nothing', async (_name, fieldSchema, value) => {
    const annotate = await specFor(nextSpecName(), fieldSchema);
    const before = feedbackCount();
    const stopped = await timed(annotate, value);
    expect(stopped.status).toBe(400);
    expect(stopped.body.reason).toMatch(new RegExp(`^The annotation spec's field_schema took more than ${MAX_VALIDATION_MS} ms to check this value`));
    expect(stopped.ms).toBeLessThan(MAX_VALIDATION_MS + 1_000);
    expect(feedbackCount()).toBe(before);
    // The spec itself is fine: a short value is checked as usual.
    expect((await annotate(Array.isArray(value) ? [{ n: 1 }] : 'ab@')).status).toBe(200);
  });
});

