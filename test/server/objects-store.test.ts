import { createHash } from 'node:crypto';
import { type SqliteDatabase } from '../../src/server/store/sqlite.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BadRequestError, NotFoundError } from '../../src/server/errors.js';
import { openDatabase } from '../../src/server/store/db.js';
import { classify, createObjectStore, type ObjectStore } from '../../src/server/store/objects.js';

const PROJECT = 'acme/demo';

/** Digest of a canonical text by the rule of SPEC §2.2, computed independently of the store. */
function digestOfCanonical(text: string): string {
  return createHash('sha256').update(text).digest('base64url').replace(/-/g, 'X').replace(/_/g, 'Y');
}

describe('object store', () => {
  let db: SqliteDatabase;
  let objects: ObjectStore;

  beforeEach(() => {
    db = openDatabase(':memory:');
    objects = createObjectStore(db);
  });
  afterEach(() => db.close());

  const create = (objectId: string, val: unknown, extra: { projectId?: string; builtinObjectClass?: string } = {}) =>
    objects.create({ projectId: extra.projectId ?? PROJECT, objectId, val, builtinObjectClass: extra.builtinObjectClass, wbUserId: 'dev' });

  it('answers the digest of the canonical JSON of the value', () => {
    const res = create('cfg', { b: 1.5, a: ['é', 1e-7] });
    expect(res).toEqual({ object_id: 'cfg', digest: digestOfCanonical('{"a": ["\\u00e9", 1e-07], "b": 1.5}') });
  });

  it('numbers versions by first appearance and keeps is_latest on the highest', () => {
    const v0 = create('cfg', { n: 0 }).digest;
    const v1 = create('cfg', { n: 1 }).digest;
    expect(create('cfg', { n: 0 }).digest).toBe(v0); // re-creating an old value is a no-op
    const v2 = create('cfg', { n: 2 }).digest;
    const all = objects.query({ project_id: PROJECT });
    expect(all.map((o) => [o.digest, o.version_index, o.is_latest])).toEqual([
      [v0, 0, 0],
      [v1, 1, 0],
      [v2, 2, 1],
    ]);
    expect(db.prepare('SELECT COUNT(*) AS n FROM objects').get()).toEqual({ n: 3 });
  });

  it('reads by digest, latest and v<N>, and 404s otherwise', () => {
    const v0 = create('cfg', { n: 0 }).digest;
    const v1 = create('cfg', { n: 1 }).digest;
    expect(objects.read(PROJECT, 'cfg', v0, false).val).toEqual({ n: 0 });
    expect(objects.read(PROJECT, 'cfg', 'latest', false).digest).toBe(v1);
    expect(objects.read(PROJECT, 'cfg', 'v0', false).digest).toBe(v0);
    expect(objects.read(PROJECT, 'cfg', 'v1', false).digest).toBe(v1);
    // Leading zeros, as the service's int() reads them.
    expect(objects.read(PROJECT, 'cfg', 'v01', false).digest).toBe(v1);
    expect(objects.read(PROJECT, 'cfg', 'v000', false).digest).toBe(v0);
    for (const missing of ['v2', 'v002', 'v-1', 'v+1', 'v', 'v1.0', 'v99999999999999999999', 'nope', "' OR 1=1 --"]) {
      expect(() => objects.read(PROJECT, 'cfg', missing, false)).toThrow(NotFoundError);
    }
    expect(() => objects.read(PROJECT, 'other', 'latest', false)).toThrow(NotFoundError);
    expect(() => objects.read('acme/other', 'cfg', v0, false)).toThrow(NotFoundError);
  });

  it('returns every field, val {} with metadata_only, and size_bytes of the stored JSON', () => {
    const { digest } = create('cfg', { text: 'héllo' });
    const full = objects.read(PROJECT, 'cfg', digest, false);
    expect(full).toMatchObject({
      project_id: PROJECT,
      object_id: 'cfg',
      digest,
      deleted_at: null,
      version_index: 0,
      is_latest: 1,
      kind: 'object',
      base_object_class: null,
      leaf_object_class: null,
      val: { text: 'héllo' },
      wb_user_id: 'dev',
      size_bytes: Buffer.byteLength('{"text":"héllo"}'),
    });
    expect(full.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const meta = objects.read(PROJECT, 'cfg', digest, true);
    expect(meta).toEqual({ ...full, val: {} });
  });

  it('detects kind and classes', () => {
    expect(classify({ _type: 'Op' }).kind).toBe('op');
    expect(classify({ weave_type: { type: 'Op' }, _type: 'Other' }).kind).toBe('op');
    expect(classify({ weave_type: { type: 'Dataset' }, _type: 'Op' }).kind).toBe('object');
    expect(classify([{ _type: 'Op' }]).kind).toBe('object');
    expect(classify('Op')).toEqual({ kind: 'object', baseObjectClass: null, leafObjectClass: null });
    expect(classify({ _class_name: 'Leaf', _bases: ['Object', 'BaseModel'] })).toEqual({
      kind: 'object',
      baseObjectClass: 'Leaf',
      leafObjectClass: 'Leaf',
    });
    expect(classify({ _class_name: 'Leaf', _bases: ['Mid', 'BaseObject', 'BaseModel'] })).toMatchObject({
      baseObjectClass: 'Mid',
      leafObjectClass: 'Leaf',
    });
    expect(classify({ _class_name: 'Leaf', _bases: ['Deep', 'Mid', 'Object', 'BaseModel'] })).toMatchObject({
      baseObjectClass: 'Mid',
    });
    for (const bases of [['BaseModel'], ['Object', 'Other'], ['Thing', 'BaseModel'], 'Object,BaseModel', null]) {
      expect(classify({ _class_name: 'Leaf', _bases: bases })).toMatchObject({ baseObjectClass: null, leafObjectClass: null });
    }
    expect(classify({ _class_name: 7, _bases: ['Object', 'BaseModel'] }).leafObjectClass).toBeNull();
  });

  it('marks builtin_object_class values with the class, and refuses a conflicting one', () => {
    const { digest } = create('board', { columns: [] }, { builtinObjectClass: 'Leaderboard' });
    const obj = objects.read(PROJECT, 'board', digest, false);
    expect(obj).toMatchObject({ base_object_class: 'Leaderboard', leaf_object_class: 'Leaderboard' });
    expect(obj.val).toEqual({ columns: [], _type: 'Leaderboard', _class_name: 'Leaderboard', _bases: ['Object', 'BaseModel'] });
    expect(() => create('board', { _class_name: 'Other' }, { builtinObjectClass: 'Leaderboard' })).toThrow(BadRequestError);
    expect(() => create('board', [1], { builtinObjectClass: 'Leaderboard' })).toThrow(BadRequestError);
  });

  it('filters, sorts and pages queries', () => {
    create('a', { _type: 'Op', n: 1 });
    create('b', { _class_name: 'Scorer', _bases: ['Object', 'BaseModel'] });
    create('b', { _class_name: 'Scorer', _bases: ['Object', 'BaseModel'], v: 2 });
    create('c', { _class_name: 'Judge', _bases: ['Scorer', 'Object', 'BaseModel'] });
    create('a', { _type: 'Op', n: 2 }, { projectId: 'acme/other' });
    const ids = (objs: ReadonlyArray<{ object_id: string; version_index: number }>) =>
      objs.map((o) => `${o.object_id}${o.version_index}`);

    expect(ids(objects.query({ project_id: PROJECT }))).toEqual(['a0', 'b0', 'b1', 'c0']);
    expect(ids(objects.query({ project_id: PROJECT, filter: { object_ids: ['b', 'zz'] } }))).toEqual(['b0', 'b1']);
    // An empty list is no filter, as in the hosted service.
    for (const filter of [{ object_ids: [] }, { base_object_classes: [] }, { leaf_object_classes: [] }, { exclude_base_object_classes: [] }]) {
      expect(ids(objects.query({ project_id: PROJECT, filter }))).toEqual(['a0', 'b0', 'b1', 'c0']);
    }
    expect(ids(objects.query({ project_id: PROJECT, filter: { is_op: true } }))).toEqual(['a0']);
    expect(ids(objects.query({ project_id: PROJECT, filter: { is_op: false } }))).toEqual(['b0', 'b1', 'c0']);
    expect(ids(objects.query({ project_id: PROJECT, filter: { latest_only: true } }))).toEqual(['a0', 'b1', 'c0']);
    expect(ids(objects.query({ project_id: PROJECT, filter: { base_object_classes: ['Scorer'] } }))).toEqual(['b0', 'b1', 'c0']);
    expect(ids(objects.query({ project_id: PROJECT, filter: { leaf_object_classes: ['Judge'] } }))).toEqual(['c0']);
    // As the service's SQL has it, objects without a base class (the op) are left out as well.
    expect(ids(objects.query({ project_id: PROJECT, filter: { exclude_base_object_classes: ['Model'] } }))).toEqual(['b0', 'b1', 'c0']);
    expect(ids(objects.query({ project_id: PROJECT, filter: { exclude_base_object_classes: ['Scorer'] } }))).toEqual([]);
    expect(ids(objects.query({ project_id: PROJECT, sort_by: [{ field: 'object_id', direction: 'desc' }] }))).toEqual([
      'c0',
      'b0',
      'b1',
      'a0',
    ]);
    expect(
      ids(
        objects.query({
          project_id: PROJECT,
          sort_by: [
            { field: 'object_id', direction: 'asc' },
            { field: 'version_index', direction: 'desc' },
          ],
        }),
      ),
    ).toEqual(['a0', 'b1', 'b0', 'c0']);
    expect(ids(objects.query({ project_id: PROJECT, limit: 2, offset: 1 }))).toEqual(['b0', 'b1']);
    expect(ids(objects.query({ project_id: PROJECT, limit: 1e300, offset: 3 }))).toEqual(['c0']);
    expect(ids(objects.query({ project_id: PROJECT, offset: 1e300 }))).toEqual([]);
    expect(objects.query({ project_id: PROJECT, metadata_only: true }).every((o) => JSON.stringify(o.val) === '{}')).toBe(true);
  });

  it('refuses unknown sort fields by name', () => {
    for (const field of ['val', 'constructor', '__proto__', 'object_id; DROP TABLE objects']) {
      expect(() => objects.query({ project_id: PROJECT, sort_by: [{ field, direction: 'asc' }] })).toThrow(
        new BadRequestError(`Unknown sort field: ${JSON.stringify(field)}`),
      );
    }
  });

  it('refuses values that are nested too deeply, leaving the table unchanged', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(() => create('deep', deep)).toThrow(BadRequestError);
    expect(db.prepare('SELECT COUNT(*) AS n FROM objects').get()).toEqual({ n: 0 });
  });
});
