/**
 * Error answers quote what the client sent, cut to a readable length (`src/server/quote.ts`): a
 * hostile megabyte in a project id, a field path, an operator name or a key must not come back
 * whole (30 MB in, 30 MB out, before these were cut). Real server, real SQLite file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/echo';
const CALL_REF = `weave:///${PROJECT}/call/0123456789abcdef`;
const HUGE = 'x'.repeat(1_000_000);
/** Largest answer allowed: a reason with an 80-character quote, or a 422 with its 2 KB input echo. */
const MAX_REASON_CHARS = 300;
const MAX_422_CHARS = 5_000;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => server.close());

describe('reasons quote client values cut short', () => {
  it.each<[string, string, Record<string, unknown>, RegExp]>([
    ['a malformed project_id', '/calls/stream_query', { project_id: HUGE }, /^Invalid project_id "x{79}…: expected "entity\/project"$/],
    ['an unknown sort field', '/calls/query', { project_id: PROJECT, sort_by: [{ field: HUGE, direction: 'asc' }] }, /^Unknown field: x{80}…$/],
    [
      'an unknown $getField path',
      '/calls/query',
      { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: HUGE }, { $literal: 1 }] } } },
      /^Unknown field: x{80}…$/,
    ],
    [
      'a field path with a NUL in a key',
      '/calls/query',
      { project_id: PROJECT, query: { $expr: { $eq: [{ $getField: `inputs.${HUGE}\u0000` }, { $literal: 1 }] } } },
      /^Invalid field: "inputs\.x{72}… \(a NUL character in a key\)$/,
    ],
    ['an unknown feedback field', '/feedback/query', { project_id: PROJECT, fields: [HUGE] }, /^Unknown field: x{80}…$/],
    [
      'an annotation name that differs from its ref',
      '/feedback/create',
      { project_id: PROJECT, weave_ref: CALL_REF, feedback_type: `wandb.annotation.${HUGE}`, annotation_ref: `weave:///${PROJECT}/object/x:abc`, payload: { value: 1 } },
      /^annotation_ref must point to an object with name x{80}…$/,
    ],
    [
      'a runnable name that differs from its ref',
      '/feedback/create',
      { project_id: PROJECT, weave_ref: CALL_REF, feedback_type: `wandb.runnable.${HUGE}`, runnable_ref: `weave:///${PROJECT}/op/x:abc`, payload: { output: 1 } },
      /^runnable_ref must point to an object with name x{80}…$/,
    ],
  ])('400 for %s', async (_name, path, body, reason) => {
    const response = await post(server.url, path, body);
    expect(response.status).toBe(400);
    expect(response.text.length).toBeLessThan(MAX_REASON_CHARS);
    expect(response.body.reason).toMatch(reason);
  });

  it('400 for a project_id in a multipart form', async () => {
    const form = new FormData();
    form.append('project_id', 'x'.repeat(1_000));
    form.append('file', new Blob(['hello']), 'hello.txt');
    const response = await fetch(`${server.url}/file/create`, { method: 'POST', headers: { authorization: basicAuth(server) }, body: form });
    const text = await response.text();
    expect(response.status).toBe(400);
    expect(text.length).toBeLessThan(MAX_REASON_CHARS);
  });

  it('400 for a value whose own key the annotation spec refuses', async () => {
    const spec = await post(server.url, '/obj/create', {
      obj: { project_id: PROJECT, object_id: 'counts', val: { name: 'counts', field_schema: { type: 'object', additionalProperties: { type: 'number' } } }, builtin_object_class: 'AnnotationSpec' },
    });
    expect(spec.status).toBe(200);
    const response = await post(server.url, '/feedback/create', {
      project_id: PROJECT,
      weave_ref: CALL_REF,
      feedback_type: 'wandb.annotation.counts',
      annotation_ref: `weave:///${PROJECT}/object/counts:${spec.body.digest}`,
      payload: { value: { ['k'.repeat(500_000)]: 'not a number' } },
    });
    expect(response.status).toBe(400);
    expect(response.text.length).toBeLessThan(2 * MAX_REASON_CHARS + 100);
    expect(response.body.reason).toMatch(/^Feedback payload does not match annotation spec: \/k+…$/);
  });
});

describe('422 details cut long keys and messages', () => {
  it.each<[string, string, Record<string, unknown>]>([
    ['an unknown $expr operator', '/calls/query', { project_id: PROJECT, query: { $expr: { [HUGE]: [] } } }],
    ['an extra top-level field', '/call/read', { project_id: PROJECT, id: '0123456789abcdef', [HUGE]: 1 }],
  ])('%s', async (_name, path, body) => {
    const response = await post(server.url, path, body);
    expect(response.status).toBe(422);
    expect(response.text.length).toBeLessThan(MAX_422_CHARS);
    const [issue] = response.body.detail as Array<{ loc: unknown[]; msg: string }>;
    expect(issue!.loc.every((part) => typeof part !== 'string' || part.length <= 201)).toBe(true);
  });
});
