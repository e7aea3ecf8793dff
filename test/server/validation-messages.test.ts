/**
 * 422 entries read as pydantic writes them: one entry per wrong value, the literals a field
 * allows listed in one message, and no entry from the `null` branch of an optional field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { MAX_NODES_FOR_EVERY_ERROR } from '../../src/server/body-validation.js';
import { MAX_JSON_CONTAINERS } from '../../src/server/json-body-text.js';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

describe('422 messages', () => {
  it('lists both sort directions in one entry, without a None entry for the optional list', async () => {
    for (const path of ['/calls/stream_query', '/feedback/query', '/objs/query']) {
      const response = await post(server.url, path, { project_id: 'acme/v', sort_by: [{ field: 'started_at', direction: 'up' }] });
      expect(response.status).toBe(422);
      expect(response.body.detail, path).toEqual([
        { type: 'literal_error', loc: ['body', 'sort_by', 0, 'direction'], msg: "Input should be 'asc' or 'desc'", input: 'up' },
      ]);
    }
  });

  it('says "greater than or equal to" for a negative limit, once', async () => {
    for (const path of ['/calls/stream_query', '/feedback/query', '/objs/query']) {
      const response = await post(server.url, path, { project_id: 'acme/v', limit: -1 });
      expect(response.status).toBe(422);
      expect(response.body.detail, path).toEqual([
        { type: 'greater_than_equal', loc: ['body', 'limit'], msg: 'Input should be greater than or equal to 0', input: -1 },
      ]);
    }
  });

  it.each([
    ['/call/read', { project_id: 'acme/v', id: '0000000000000001', include_cost: true }, ['include_cost']],
    ['/calls/stream_query', { project_id: 'acme/v', limt: 1 }, ['limt']],
    ['/calls/delete', { project_id: 'acme/v', call_ids: [], call_id: 'x' }, ['call_id']],
    ['/call/update', { project_id: 'acme/v', call_id: 'x', display_name: 'n', displayName: 'n' }, ['displayName']],
    ['/obj/read', { project_id: 'acme/v', object_id: 'o', digest: 'latest', metadataOnly: true }, ['metadataOnly']],
    ['/objs/query', { project_id: 'acme/v', filter: { object_id: ['one'] } }, ['filter', 'object_id']],
    ['/objs/query', { project_id: 'acme/v', limt: 1 }, ['limt']],
    ['/feedback/create', { project_id: 'acme/v', weave_ref: 'weave:///acme/v/call/x', feedback_type: 'note', payload: {}, paylod: {} }, ['paylod']],
    ['/feedback/query', { project_id: 'acme/v', limt: 1 }, ['limt']],
    ['/feedback/purge', { project_id: 'acme/v', query: { $expr: {} }, dry_run: true }, ['dry_run']],
    ['/file/content', { project_id: 'acme/v', digest: 'd', name: 'x' }, ['name']],
  ])('%s refuses an unknown key with a 422 naming it, as the service does (a typo must not widen results)', async (path, body, loc) => {
    const response = await post(server.url, path, body);
    expect(response.status).toBe(422);
    expect(response.body.detail).toContainEqual(expect.objectContaining({ type: 'extra_forbidden', loc: ['body', ...loc] }));
  });

  it('takes the keys the service declares that the local server does not act on', async () => {
    const calls = await post(server.url, '/calls/stream_query', {
      project_id: 'acme/v',
      include_feedback: true,
      expand_columns: ['inputs.model'],
      return_expanded_column_values: false,
    });
    expect(calls.status).toBe(200);
    const objs = await post(server.url, '/objs/query', { project_id: 'acme/v', include_storage_size: true, filter: { exclude_base_object_classes: ['Model'] } });
    expect(objs.status).toBe(200);
  });

  it('keeps the type error of an optional field and drops its None branch', async () => {
    const response = await post(server.url, '/calls/stream_query', { project_id: 'acme/v', limit: 'ten' });
    expect(response.status).toBe(422);
    expect(response.body.detail).toEqual([{ type: 'int_type', loc: ['body', 'limit'], msg: 'Input should be a valid integer', input: 'ten' }]);
  });
});

// Ajv's allErrors builds an error object per failing value: a 31 MiB list of wrong items (31 KB
// gzipped) once took the server past 4 GB and aborted it. Every error is listed only for bodies of
// at most MAX_NODES_FOR_EVERY_ERROR values.
describe('422 for huge invalid bodies', () => {
  it('lists every error of an ordinary body, and only the first of a huge one, gzipped or not', async () => {
    const few = { project_id: 'acme/v', filter: { call_ids: [1, 'ok', 2] } };
    const listed = await post(server.url, '/calls/stream_query', few);
    expect(listed.status).toBe(422);
    expect(listed.body.detail.map((issue: { loc: unknown[] }) => issue.loc)).toEqual([
      ['body', 'filter', 'call_ids', 0],
      ['body', 'filter', 'call_ids', 2],
    ]);

    const items = MAX_NODES_FOR_EVERY_ERROR * 50; // a million wrong items
    const huge = `{"project_id":"acme/v","filter":{"call_ids":[${'1,'.repeat(items - 1)}1]}}`;
    const zipped = gzipSync(huge);
    expect(zipped.length).toBeLessThan(32 * 1024);
    for (const [body, headers] of [
      [huge, {}],
      [zipped, { 'content-encoding': 'gzip' }],
    ] as const) {
      const response = await fetch(`${server.url}/calls/stream_query`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: basicAuth(server), ...headers },
        body,
      });
      expect(response.status).toBe(422);
      const { detail } = (await response.json()) as { detail: Array<{ loc: unknown[] }> };
      expect(detail.map((issue) => issue.loc)).toEqual([['body', 'filter', 'call_ids', 0]]);
    }
  });
});

// 32 MiB of `{},{},...` is 31 KB gzipped, and JSON.parse made 1.2 GB of it, for 6.5 s per request.
describe('bodies that open more objects and lists than any real body', () => {
  it('answers 413 before parsing, on JSON routes and OTLP/JSON alike', async () => {
    const items = MAX_JSON_CONTAINERS + 1;
    const bomb = gzipSync(`{"project_id":"acme/v","query":{"$expr":{"$and":[${'{},'.repeat(items - 1)}{}]}}}`);
    const otlpBomb = gzipSync(`{"resourceSpans":[${'[],'.repeat(items - 1)}[]]}`);
    for (const [path, body] of [
      ['/calls/stream_query', bomb],
      ['/otel/v1/traces', otlpBomb],
    ] as const) {
      const response = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', authorization: basicAuth(server) },
        body,
      });
      expect(response.status, path).toBe(413);
      expect(((await response.json()) as { reason: string }).reason, path).toMatch(/more than 2000000 objects and lists/);
    }
  });
});
