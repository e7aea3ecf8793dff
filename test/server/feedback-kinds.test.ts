/**
 * Annotation and runnable feedback (store/feedback-kinds.ts, store/annotation-spec.ts) on the
 * real store: annotation specs are objects written through the object store, and every refusal
 * leaves the feedback table as it was.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BadRequestError } from '../../src/server/errors.js';
import { checkAnnotationValue } from '../../src/server/store/annotation-spec.js';
import { openDatabase } from '../../src/server/store/db.js';
import { createFeedbackStore, type FeedbackStore } from '../../src/server/store/feedback.js';
import { createObjectStore, type ObjectStore } from '../../src/server/store/objects.js';
import type { SqliteDatabase } from '../../src/server/store/sqlite.js';
import type { FeedbackCreateReq, FeedbackCreateRes } from '../../src/wire/feedback.js';

const PROJECT = 'acme/demo';
const CALL_REF = 'weave:///acme/demo/call/0123456789abcdef';

let db: SqliteDatabase;
let objects: ObjectStore;
let feedback: FeedbackStore;

beforeEach(() => {
  db = openDatabase(':memory:');
  objects = createObjectStore(db);
  feedback = createFeedbackStore(db, objects);
});
afterEach(() => db.close());

const count = () => (db.prepare('SELECT COUNT(*) AS n FROM feedback').get() as { n: number }).n;
/** The store answers JSON text (the payload as stored): read back. */
const create = (request: Partial<FeedbackCreateReq>) =>
  JSON.parse(feedback.create({ project_id: PROJECT, weave_ref: CALL_REF, feedback_type: 'note', payload: {}, ...request }, 'dev')) as FeedbackCreateRes;

/** Store an annotation spec as the Weave SDK does (builtin class `AnnotationSpec`); answers its ref. */
function annotationSpec(name: string, fieldSchema?: unknown): string {
  const val = { name, description: null, ...(fieldSchema === undefined ? {} : { field_schema: fieldSchema }) };
  const { digest } = objects.create({ projectId: PROJECT, objectId: name, val, builtinObjectClass: 'AnnotationSpec', wbUserId: 'dev' });
  return `weave:///${PROJECT}/object/${name}:${digest}`;
}

/** `create`, expecting a 400 whose reason matches `reason`, and nothing stored. */
function expectRefused(request: Partial<FeedbackCreateReq>, reason: RegExp): void {
  const before = count();
  let error: unknown;
  try {
    create(request);
  } catch (caught) {
    error = caught;
  }
  expect(error, JSON.stringify(request)).toBeInstanceOf(BadRequestError);
  expect((error as Error).message).toMatch(reason);
  expect(count()).toBe(before);
}

describe('annotation feedback', () => {
  it('stores a value that matches its spec, found by digest, latest or version index', () => {
    const ref = annotationSpec('score', { type: 'integer', minimum: 0, maximum: 5 });
    const annotate = (annotation_ref: string, value: unknown) =>
      create({ feedback_type: 'wandb.annotation.score', annotation_ref, payload: { value } });
    expect(annotate(ref, 4).payload).toEqual({ value: 4 });
    expect(annotate(`weave:///${PROJECT}/object/score:latest`, 0).payload).toEqual({ value: 0 });
    expect(annotate(`weave:///${PROJECT}/object/score:v0`, 5).payload).toEqual({ value: 5 });
    expect(JSON.parse(feedback.query({ project_id: PROJECT, fields: ['annotation_ref', 'payload.value'] })[0]!)).toEqual({ annotation_ref: ref, 'payload.value': 4 });
  });

  it('refuses a value its spec does not allow, saying why', () => {
    const ref = annotationSpec('label', { type: 'string', enum: ['good', 'bad'] });
    const annotate = (value: unknown) => ({ feedback_type: 'wandb.annotation.label', annotation_ref: ref, payload: { value } });
    expect(create(annotate('good')).id).toBeTruthy();
    expectRefused(annotate('meh'), /does not match annotation spec: value must be equal to one of the allowed values/);
    expectRefused(annotate(1), /does not match annotation spec: value must be string/);
    expectRefused(annotate(null), /does not match annotation spec/);
  });

  it('takes any value when the spec has no field_schema, and object schemas with nested rules', () => {
    const anything = annotationSpec('free');
    expect(create({ feedback_type: 'wandb.annotation.free', annotation_ref: anything, payload: { value: { any: ['thing'] } } }).id).toBeTruthy();
    const rubric = annotationSpec('rubric', {
      type: 'object',
      properties: { clarity: { type: 'number', exclusiveMaximum: 1 }, notes: { type: 'string', maxLength: 10 } },
      required: ['clarity'],
      $defs: { unused: { type: 'string' } },
    });
    const annotate = (value: unknown) => ({ feedback_type: 'wandb.annotation.rubric', annotation_ref: rubric, payload: { value } });
    expect(create(annotate({ clarity: 0.5, notes: 'short' })).id).toBeTruthy();
    expectRefused(annotate({ clarity: 1 }), /\/clarity must be < 1/);
    expectRefused(annotate({ notes: 'x' }), /must have required property 'clarity'/);
    expectRefused(annotate({ clarity: 0, notes: 'far too long for it' }), /\/notes must NOT have more than 10 characters/);
  });

  it('follows the schema dialect it declares, and treats format as an annotation', () => {
    // draft-07: `exclusiveMaximum` is a number; 2020-12 would read it the same, so check `items` arrays,
    // whose tuple meaning draft-07 has and 2020-12 moved to `prefixItems`.
    const tuple = annotationSpec('pair', { $schema: 'http://json-schema.org/draft-07/schema#', type: 'array', items: [{ type: 'string' }, { type: 'number' }] });
    expect(create({ feedback_type: 'wandb.annotation.pair', annotation_ref: tuple, payload: { value: ['a', 1] } }).id).toBeTruthy();
    expectRefused({ feedback_type: 'wandb.annotation.pair', annotation_ref: tuple, payload: { value: [1, 'a'] } }, /\/0 must be string/);
    const email = annotationSpec('email', { type: 'string', format: 'email' });
    expect(create({ feedback_type: 'wandb.annotation.email', annotation_ref: email, payload: { value: 'not an email' } }).id).toBeTruthy();
    const oldDialect = annotationSpec('old', { $schema: 'http://json-schema.org/draft-04/schema#', type: 'string' });
    expectRefused({ feedback_type: 'wandb.annotation.old', annotation_ref: oldDialect, payload: { value: 'x' } }, /declares \$schema .*draft-04.*2020-12, 2019-09 and draft-07/);
  });

  it('refuses specs that are not JSON Schema, whatever the value', () => {
    const invalid = annotationSpec('broken', { type: 'no-such-type' });
    expectRefused({ feedback_type: 'wandb.annotation.broken', annotation_ref: invalid, payload: { value: 1 } }, /field_schema is not a valid JSON Schema/);
    const notObject = annotationSpec('scalar', 'string');
    expectRefused({ feedback_type: 'wandb.annotation.scalar', annotation_ref: notObject, payload: { value: 'x' } }, /must point to an annotation spec/);
    const nullSchema = annotationSpec('null-schema', null);
    expectRefused({ feedback_type: 'wandb.annotation.null-schema', annotation_ref: nullSchema, payload: { value: 'x' } }, /must point to an annotation spec/);
    let deep: Record<string, unknown> = { type: 'string' };
    for (let depth = 0; depth < 1000; depth++) deep = { type: 'object', properties: { a: deep } };
    // Past what obj/create stores (500 levels), so straight into the check.
    expect(() => checkAnnotationValue({ field_schema: deep }, 'deep', {})).toThrow(/could not be compiled: compiling it overflowed the stack/);
    // Valid (Python's jsonschema checks it), but Ajv's code for it nests too deeply for V8.
    const wide = annotationSpec('wide', { oneOf: Array.from({ length: 2500 }, (_, i) => ({ const: i })) });
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expectRefused({ feedback_type: 'wandb.annotation.wide', annotation_ref: wide, payload: { value: 5 } }, /could not be compiled.*some 2000 or more alternatives/);
      // Ajv's own log of the failed code (megabytes) stays off the server's stderr.
      expect(logged).not.toHaveBeenCalled();
    } finally {
      logged.mockRestore();
    }
    const badPattern = annotationSpec('pattern', { type: 'string', pattern: '(' });
    expectRefused({ feedback_type: 'wandb.annotation.pattern', annotation_ref: badPattern, payload: { value: 'x' } }, /not a valid JSON Schema/);
    // Schemas on which Ajv's validation overflows the stack: the spec's fault (400), not a 500.
    const recursing = {
      selfref: { allOf: [{ $ref: '#' }] },
      dynamic: { $dynamicRef: '#meta', $defs: { x: { $dynamicAnchor: 'meta', type: 'integer' } } },
    };
    for (const [name, schema] of Object.entries(recursing)) {
      const ref = annotationSpec(name, schema);
      expectRefused({ feedback_type: `wandb.annotation.${name}`, annotation_ref: ref, payload: { value: 5 } }, /could not be checked: validating a value overflowed the stack \(a schema that recurses without end, or one with some 2000/);
    }
  });

  it("refuses what the service refuses, in the service's order", () => {
    const ref = annotationSpec('score', { type: 'integer' });
    const valid = { feedback_type: 'wandb.annotation.score', annotation_ref: ref, payload: { value: 1 } };
    expectRefused({ ...valid, feedback_type: 'wandb.annotationscore' }, /Invalid annotation feedback type: "wandb.annotationscore"/);
    expectRefused({ ...valid, annotation_ref: undefined }, /annotation_ref is required for annotation feedback/);
    expectRefused({ ...valid, annotation_ref: `weave:///${PROJECT}/object/other:abc` }, /annotation_ref must point to an object with name score/);
    expectRefused({ ...valid, annotation_ref: CALL_REF }, /annotation_ref must be weave:\/\/\/<entity>\/<project>\/object\/<name>:<digest>, got a "call" ref/);
    expectRefused({ ...valid, annotation_ref: `weave:///${PROJECT}/object/score` }, /must name a version as <name>:<digest>/);
    expectRefused({ ...valid, annotation_ref: `weave:///${PROJECT}/object/score:a:b` }, /must name a version as <name>:<digest>/);
    expectRefused({ ...valid, annotation_ref: `${ref}/attr/x` }, /not a path inside one/);
    expectRefused({ ...valid, payload: { score: 1 } }, /Invalid payload for feedback_type "wandb.annotation.score": it must hold "value"/);
    expectRefused({ ...valid, annotation_ref: `weave:///${PROJECT}/object/score:0000` }, /Annotation ref ".*score:0000" not found/);
    expectRefused({ ...valid, annotation_ref: `weave:///acme/other/object/score:abc` }, /points outside project/);
    expectRefused({ feedback_type: 'note', annotation_ref: ref }, /annotation_ref is not allowed for non-annotation feedback/);
    expect(count()).toBe(0);
  });

  it("keeps each spec's schema to itself: an $id is not shared across specs or projects", () => {
    const secret = { $id: 'https://example.test/labels', type: 'string', enum: ['internal-a', 'internal-b'] };
    const ref = annotationSpec('labels', secret);
    expect(create({ feedback_type: 'wandb.annotation.labels', annotation_ref: ref, payload: { value: 'internal-a' } }).id).toBeTruthy();
    // The same $id again, in a new version and in another project's spec, compiles on its own.
    const again = annotationSpec('labels', { ...secret, enum: ['internal-a', 'internal-b', 'internal-c'] });
    expect(create({ feedback_type: 'wandb.annotation.labels', annotation_ref: again, payload: { value: 'internal-c' } }).id).toBeTruthy();
    const { digest } = objects.create({ projectId: 'acme/other', objectId: 'labels', val: { field_schema: { ...secret, enum: ['x'] } }, wbUserId: 'dev' });
    expect(feedback.create({ project_id: 'acme/other', weave_ref: 'weave:///acme/other/call/c', feedback_type: 'wandb.annotation.labels', annotation_ref: `weave:///acme/other/object/labels:${digest}`, payload: { value: 'x' } }, 'dev')).toContain('"id":');
    // A spec cannot reach another spec's schema through $ref.
    const probe = annotationSpec('probe', { $ref: 'https://example.test/labels' });
    expectRefused({ feedback_type: 'wandb.annotation.probe', annotation_ref: probe, payload: { value: 'internal-a' } }, /not a valid JSON Schema: can't resolve reference/);
  });

  it('reads the spec from its own project only', () => {
    const { digest } = objects.create({ projectId: 'acme/other', objectId: 'score', val: { field_schema: {} }, wbUserId: 'dev' });
    expectRefused({ feedback_type: 'wandb.annotation.score', annotation_ref: `weave:///${PROJECT}/object/score:${digest}`, payload: { value: 1 } }, /not found/);
  });
});

describe('runnable feedback', () => {
  const opRef = `weave:///${PROJECT}/op/judge:abc`;
  const objectRef = `weave:///${PROJECT}/object/judge:abc`;

  it('stores a scorer result on an op (with the call that ran it) or on an object', () => {
    const onOp = create({ feedback_type: 'wandb.runnable.judge', runnable_ref: opRef, call_ref: CALL_REF, payload: { output: { score: 0.8 } } });
    expect(onOp.payload).toEqual({ output: { score: 0.8 } });
    expect(create({ feedback_type: 'wandb.runnable.judge', runnable_ref: objectRef, payload: { output: null } }).id).toBeTruthy();
    expect(create({ feedback_type: 'wandb.runnable.judge', runnable_ref: objectRef, trigger_ref: `weave:///${PROJECT}/object/monitor:def`, payload: { output: 1 } }).id).toBeTruthy();
    expect(count()).toBe(3);
  });

  it("refuses what the service refuses, in the service's order", () => {
    const valid = { feedback_type: 'wandb.runnable.judge', runnable_ref: opRef, call_ref: CALL_REF, payload: { output: 1 } };
    expectRefused({ ...valid, feedback_type: 'wandb.runnablejudge' }, /Invalid runnable feedback type/);
    expectRefused({ ...valid, runnable_ref: undefined }, /runnable_ref is required for runnable feedback/);
    expectRefused({ ...valid, runnable_ref: CALL_REF }, /runnable_ref must be .*\/op\/<name>:<digest> or .*\/object\/<name>:<digest>, got a "call" ref/);
    expectRefused({ ...valid, runnable_ref: `weave:///${PROJECT}/op/other:abc` }, /runnable_ref must point to an object with name judge/);
    expectRefused({ ...valid, call_ref: undefined }, /call_ref is required for runnable feedback on ops/);
    expectRefused({ ...valid, payload: { result: 1 } }, /it must hold "output"/);
    expectRefused({ ...valid, call_ref: objectRef }, /call_ref must be a call ref/);
    expectRefused({ ...valid, trigger_ref: CALL_REF }, /trigger_ref must be an object ref/);
  });

  it('refuses runnable_ref, call_ref and trigger_ref on other feedback', () => {
    expectRefused({ runnable_ref: opRef }, /runnable_ref is not allowed for non-runnable feedback/);
    expectRefused({ call_ref: CALL_REF }, /call_ref is not allowed for non-runnable feedback/);
    expectRefused({ trigger_ref: objectRef }, /trigger_ref is not allowed for non-runnable feedback/);
    expectRefused({ feedback_type: 'wandb.reaction.1', payload: { emoji: '👍' }, call_ref: CALL_REF }, /call_ref is not allowed/);
  });
});
