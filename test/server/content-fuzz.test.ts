import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/demo';
const REF = 'weave:///acme/demo/call/0123456789abcdef';

/** Valid bodies per endpoint; the fuzzer replaces one key (or the whole body) with arbitrary JSON. */
const VALID_BODIES: Readonly<Record<string, Record<string, unknown>>> = {
  '/obj/create': { obj: { project_id: PROJECT, object_id: 'fuzz', val: { a: 1 } } },
  '/obj/read': { project_id: PROJECT, object_id: 'fuzz', digest: 'latest', metadata_only: false },
  '/objs/query': {
    project_id: PROJECT,
    filter: { object_ids: ['fuzz'], latest_only: true, is_op: false },
    sort_by: [{ field: 'created_at', direction: 'desc' }],
    limit: 5,
    offset: 0,
  },
  '/feedback/create': { project_id: PROJECT, weave_ref: REF, feedback_type: 'wandb.reaction.1', payload: { emoji: '👍' } },
  '/feedback/query': {
    project_id: PROJECT,
    fields: ['id', 'payload.emoji'],
    query: { $expr: { $eq: [{ $getField: 'payload.emoji' }, { $literal: '👍' }] } },
    sort_by: [{ field: 'payload.emoji', direction: 'asc' }],
    limit: 3,
  },
  '/feedback/purge': { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: 'nope' }] } } },
  '/file/content': { project_id: PROJECT, digest: 'nope' },
};

const hostileString = fc.oneof(
  fc.string(),
  fc.constantFrom("' OR 1=1 --", 'payload.a\\.b', '$..x', '"]', 'latest', 'v0', 'payload', 'id', '__proto__', '\ud800'),
);
const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  hostileString,
  fc.integer({ min: -5, max: 5 }),
  fc.constantFrom(1e300, -1, 0.5, null, [], {}),
);

/** Replace the value at a random path of `body` (one level into nested objects) with `value`. */
function mutate(body: Record<string, unknown>, keyIndex: number, nestedIndex: number, value: unknown): unknown {
  const keys = Object.keys(body);
  const key = keys[keyIndex % keys.length] as string;
  const inner = body[key];
  if (typeof inner === 'object' && inner !== null && !Array.isArray(inner) && nestedIndex % 2 === 0) {
    const innerKeys = Object.keys(inner);
    const innerKey = innerKeys[nestedIndex % innerKeys.length] as string;
    return { ...body, [key]: { ...inner, [innerKey]: value } };
  }
  return { ...body, [key]: value };
}

describe('content endpoints under arbitrary bodies', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => server.close());

  for (const [path, valid] of Object.entries(VALID_BODIES)) {
    it(`${path} answers a client status, never 500`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            fc.tuple(fc.nat(), fc.nat(), hostileJson).map(([k, n, v]) => mutate(valid, k, n, v)),
            hostileJson,
          ),
          async (body) => {
            const res = await post(server.url, path, body);
            expect([200, 400, 404, 422]).toContain(res.status);
            if (res.status !== 200) expect(typeof res.body).toBe('object');
          },
        ),
        { numRuns: 40, seed: 20260102 },
      );
    });
  }
});
