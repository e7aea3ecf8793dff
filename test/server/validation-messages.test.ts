/**
 * 422 entries read as pydantic writes them: one entry per wrong value, the literals a field
 * allows listed in one message, and no entry from the `null` branch of an optional field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

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

  it('keeps the type error of an optional field and drops its None branch', async () => {
    const response = await post(server.url, '/calls/stream_query', { project_id: 'acme/v', limit: 'ten' });
    expect(response.status).toBe(422);
    expect(response.body.detail).toEqual([{ type: 'int_type', loc: ['body', 'limit'], msg: 'Input should be a valid integer', input: 'ten' }]);
  });
});
