/**
 * A `$expr` asked of a real local server: the ids of the calls `calls/stream_query` selects, in
 * order, and the count `calls/query_stats` gives for it. Both expect a 200.
 */
import { expect } from 'vitest';
import { post, type TestServer } from './server.js';

/** The ids of the calls of `projectId` that `expr` selects, in the answer's order. */
export async function idsMatching(server: TestServer, projectId: string, expr: unknown): Promise<string[]> {
  const response = await post(server.url, '/calls/stream_query', { project_id: projectId, query: { $expr: expr } });
  expect(response.status, response.text).toBe(200);
  return response.text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { id: string }).id);
}

/** How many calls of `projectId` `expr` selects, by `calls/query_stats`. */
export async function countMatching(server: TestServer, projectId: string, expr: unknown): Promise<number> {
  const response = await post(server.url, '/calls/query_stats', { project_id: projectId, query: { $expr: expr } });
  expect(response.status, response.text).toBe(200);
  return (response.body as { count: number }).count;
}
